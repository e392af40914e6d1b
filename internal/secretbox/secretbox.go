// Package secretbox encrypts vault secrets at rest: AES-256-GCM under a keyring of named
// 32-byte keys. The first key of the keyring encrypts; every key decrypts. Each ciphertext
// records the id of its key, and its additional data binds it to one owner (a credential id),
// so a ciphertext copied onto another row does not open.
//
// It imports only the standard library.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// KeySize is the size of every key: AES-256.
const KeySize = 32

// version is the first byte of every ciphertext, so the format can change later.
const version byte = 1

// ErrNoKeys is returned by Seal and Open of an empty keyring.
var ErrNoKeys = errors.New("no vault encryption keys are configured")

// ErrOpen is returned when a ciphertext does not open: a wrong key, the wrong owner, or a
// damaged value.
var ErrOpen = errors.New("vault secret does not decrypt")

// Keyring holds the keys. The zero value and nil are empty keyrings.
type Keyring struct {
	ids   []string
	aeads map[string]cipher.AEAD
}

var keyID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Parse reads a keyring spec: comma-separated id:base64key entries, each key 32 bytes in
// standard or URL-safe base64, padded or not. The first entry encrypts. Errors never quote a key.
func Parse(spec string) (*Keyring, error) {
	kr := &Keyring{aeads: map[string]cipher.AEAD{}}
	for i, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		id, enc, ok := strings.Cut(entry, ":")
		if !ok {
			return nil, fmt.Errorf("entry %d: must be id:base64key", i+1)
		}
		if !keyID.MatchString(id) {
			return nil, fmt.Errorf("entry %d: key id must be 1 to 64 letters, digits, '.', '_' or '-'", i+1)
		}
		if _, dup := kr.aeads[id]; dup {
			return nil, fmt.Errorf("entry %d: key id %q appears twice", i+1, id)
		}
		key, err := decodeKey(enc)
		if err != nil {
			return nil, fmt.Errorf("entry %d (key %q): %w", i+1, id, err)
		}
		if err := kr.add(id, key); err != nil {
			return nil, err
		}
	}
	if len(kr.ids) == 0 {
		return nil, errors.New("holds no key")
	}
	return kr, nil
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("key must be %d bytes, got %d", KeySize, len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("key is not base64")
}

func (k *Keyring) add(id string, key []byte) error {
	block, err := aes.NewCipher(key)
	if err != nil {
		return fmt.Errorf("key %q: %w", id, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return fmt.Errorf("key %q: %w", id, err)
	}
	k.ids = append(k.ids, id)
	k.aeads[id] = aead
	return nil
}

// NewSpec returns the spec of a keyring with one new random key named id, for a first start
// (dev keeps it in its data dir).
func NewSpec(id string) string {
	key := make([]byte, KeySize)
	_, _ = rand.Read(key) // crypto/rand.Read never fails on supported platforms.
	return id + ":" + base64.StdEncoding.EncodeToString(key)
}

// Empty reports whether the keyring has no key.
func (k *Keyring) Empty() bool { return k == nil || len(k.ids) == 0 }

// Primary is the id of the key that encrypts, "" when empty.
func (k *Keyring) Primary() string {
	if k.Empty() {
		return ""
	}
	return k.ids[0]
}

// Seal encrypts plaintext with the primary key, bound to owner.
// The layout is version, len(key id), key id, nonce, GCM ciphertext and tag.
func (k *Keyring) Seal(plaintext []byte, owner string) ([]byte, error) {
	if k.Empty() {
		return nil, ErrNoKeys
	}
	id := k.ids[0]
	aead := k.aeads[id]
	out := make([]byte, 0, 2+len(id)+aead.NonceSize()+len(plaintext)+aead.Overhead())
	out = append(out, version, byte(len(id)))
	out = append(out, id...)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	out = append(out, nonce...)
	return aead.Seal(out, nonce, plaintext, additionalData(id, owner)), nil
}

// Open decrypts a ciphertext made by Seal for owner with any key of the keyring.
func (k *Keyring) Open(ciphertext []byte, owner string) ([]byte, error) {
	id, rest, err := KeyID(ciphertext)
	if err != nil {
		return nil, err
	}
	if k.Empty() {
		return nil, ErrNoKeys
	}
	aead, ok := k.aeads[id]
	if !ok {
		return nil, fmt.Errorf("%w: key %q is not in the keyring", ErrOpen, id)
	}
	if len(rest) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: too short", ErrOpen)
	}
	nonce, sealed := rest[:aead.NonceSize()], rest[aead.NonceSize():]
	plain, err := aead.Open(nil, nonce, sealed, additionalData(id, owner))
	if err != nil {
		return nil, fmt.Errorf("%w: key %q: wrong key or owner, or damaged", ErrOpen, id)
	}
	return plain, nil
}

// KeyID returns the id of the key a ciphertext was sealed with, and the rest of it.
func KeyID(ciphertext []byte) (string, []byte, error) {
	if len(ciphertext) < 2 || ciphertext[0] != version {
		return "", nil, fmt.Errorf("%w: unknown format", ErrOpen)
	}
	n := int(ciphertext[1])
	if len(ciphertext) < 2+n {
		return "", nil, fmt.Errorf("%w: too short", ErrOpen)
	}
	return string(ciphertext[2 : 2+n]), ciphertext[2+n:], nil
}

// additionalData binds a ciphertext to its key id and owner.
func additionalData(keyID, owner string) []byte {
	return []byte("managed-agents/vault/v1\x00" + keyID + "\x00" + owner)
}
