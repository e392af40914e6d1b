package sandboxtoken

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDerive(t *testing.T) {
	for _, tc := range []struct {
		name, key, subject, want string
	}{
		// RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
		{"RFC 4231 case 2", "Jefe", "what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Derive(tc.key, tc.subject))
		})
	}
	a, b := Derive("k", "uid-a"), Derive("k", "uid-b")
	require.NotEqual(t, a, b, "each pod's token is its own")
	require.Len(t, a, 64)
	require.NotEqual(t, a, Derive("other", "uid-a"), "and each key's")
}
