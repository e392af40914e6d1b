package sessions

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// maxIdempotencyKeyLen bounds a key; a Kubernetes UID is 36 characters, the IETF draft's
// examples are UUIDs.
const maxIdempotencyKeyLen = 255

// checkIdempotencyKey accepts 1–255 printable ASCII characters, so a key is safe in logs,
// headers and indexes.
func checkIdempotencyKey(key string) error {
	if key == "" || len(key) > maxIdempotencyKeyLen {
		return invalidf("Idempotency-Key: must be 1 to %d characters long (got %d)", maxIdempotencyKeyLen, len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return invalidf("Idempotency-Key: must be printable ASCII; byte %d is 0x%02x", i, c)
		}
	}
	return nil
}

// requestHash is the digest of v's canonical JSON: decoding into generic values and encoding
// again sorts object keys and drops insignificant whitespace, including inside raw fields, so
// a retry that re-serialises the same request hashes the same.
func requestHash(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode request for its hash: %w", err)
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // large integers keep every digit
	if err := dec.Decode(&generic); err != nil {
		return "", fmt.Errorf("decode request for its hash: %w", err)
	}
	if b, err = json.Marshal(generic); err != nil {
		return "", fmt.Errorf("encode canonical request: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func errKeyReused(what, key string) *Error {
	return &Error{Kind: KindKeyReused, Message: fmt.Sprintf(
		"Idempotency-Key %q was already used for a different %s; a retry must repeat the original request exactly, a new request needs a new key", key, what)}
}
