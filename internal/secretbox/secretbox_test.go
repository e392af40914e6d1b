package secretbox

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func key(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, KeySize)) }

func TestSealOpen(t *testing.T) {
	kr, err := Parse("k1:" + key(1))
	require.NoError(t, err)
	ct, err := kr.Seal([]byte("s3cret"), "vcrd_1")
	require.NoError(t, err)
	require.NotContains(t, string(ct), "s3cret")
	id, _, err := KeyID(ct)
	require.NoError(t, err)
	require.Equal(t, "k1", id)

	plain, err := kr.Open(ct, "vcrd_1")
	require.NoError(t, err)
	require.Equal(t, "s3cret", string(plain))

	// Another owner (the AAD) does not open it.
	_, err = kr.Open(ct, "vcrd_2")
	require.ErrorIs(t, err, ErrOpen)

	// Another key under the same id does not open it.
	other, err := Parse("k1:" + key(2))
	require.NoError(t, err)
	_, err = other.Open(ct, "vcrd_1")
	require.ErrorIs(t, err, ErrOpen)

	// A flipped byte does not open.
	bad := bytes.Clone(ct)
	bad[len(bad)-1] ^= 1
	_, err = kr.Open(bad, "vcrd_1")
	require.ErrorIs(t, err, ErrOpen)

	// Forging the key id in the header does not help: the AAD binds it.
	forged := append([]byte{version, 2, 'k', '2'}, ct[4:]...)
	both, err := Parse("k1:" + key(1) + ",k2:" + key(1))
	require.NoError(t, err)
	_, err = both.Open(forged, "vcrd_1")
	require.ErrorIs(t, err, ErrOpen)
}

func TestRotation(t *testing.T) {
	old, err := Parse("old:" + key(1))
	require.NoError(t, err)
	ct, err := old.Seal([]byte("v"), "o")
	require.NoError(t, err)

	// A new key first: it encrypts, the old one still decrypts.
	rotated, err := Parse("new:" + key(2) + ", old:" + key(1))
	require.NoError(t, err)
	require.Equal(t, "new", rotated.Primary())
	plain, err := rotated.Open(ct, "o")
	require.NoError(t, err)
	require.Equal(t, "v", string(plain))
	ct2, err := rotated.Seal(plain, "o")
	require.NoError(t, err)
	id, _, err := KeyID(ct2)
	require.NoError(t, err)
	require.Equal(t, "new", id)

	// Once the old key is removed, its ciphertexts no longer open, with a clear reason.
	newOnly, err := Parse("new:" + key(2))
	require.NoError(t, err)
	_, err = newOnly.Open(ct, "o")
	require.ErrorIs(t, err, ErrOpen)
	require.ErrorContains(t, err, `key "old" is not in the keyring`)
}

func TestParseErrors(t *testing.T) {
	short := base64.StdEncoding.EncodeToString([]byte("short"))
	for _, tt := range []struct{ spec, err string }{
		{"", "holds no key"},
		{" , ", "holds no key"},
		{"nokey", "must be id:base64key"},
		{"k1:" + short, "must be 32 bytes"},
		{"k1:!!!", "not base64"},
		{"bad id:" + key(1), "key id"},
		{"k1:" + key(1) + ",k1:" + key(2), "appears twice"},
	} {
		_, err := Parse(tt.spec)
		require.ErrorContains(t, err, tt.err, tt.spec)
		require.NotContains(t, err.Error(), key(1))
	}
	kr, err := Parse("k1:" + strings.TrimRight(base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, KeySize)), "="))
	require.NoError(t, err)
	require.False(t, kr.Empty())
	fresh, err := Parse(NewSpec("dev"))
	require.NoError(t, err)
	require.Equal(t, "dev", fresh.Primary())

	var empty *Keyring
	_, err = empty.Seal([]byte("x"), "o")
	require.ErrorIs(t, err, ErrNoKeys)
}
