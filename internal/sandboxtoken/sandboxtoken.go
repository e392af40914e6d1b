// Package sandboxtoken derives a sandbox's sandboxd token from a key shared by several
// sandboxes and something only that sandbox is: its pod's UID. A warm pool of
// kubernetes-sigs/agent-sandbox renders every pod from one template, so its pods can only
// be given one Secret; derived per pod, their tokens still differ, and a token the worker
// holds for one pod is refused by any other (a stale endpoint whose address a new pod of
// the pool took, say).
package sandboxtoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// Derive is the token of subject under key: hex(HMAC-SHA256(key, subject)), 64 characters.
func Derive(key, subject string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(subject))
	return hex.EncodeToString(m.Sum(nil))
}
