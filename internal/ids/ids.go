// Package ids makes the opaque, prefixed identifiers of the API (agent_…, sesn_…, sevt_…).
//
// It imports nothing of the project: every layer may use it.
package ids

import (
	"crypto/rand"
	"strings"
)

// Prefixes of the identifiers the server issues (API.md §12).
const (
	Agent       = "agent_"
	Environment = "env_"
	Session     = "sesn_"
	Event       = "sevt_"
	Thread      = "sthr_"
	Request     = "req_"
	Workspace   = "wrkspc_"
	APIKey      = "apikey_"
	Vault       = "vlt_"
	Credential  = "vcrd_"
	Work        = "work_"
)

// base58 avoids look-alike characters, like the hosted service's ids.
const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// idLen random characters give ~140 bits: collisions are not a practical concern.
const idLen = 24

// New returns prefix + "011C" + random base58 characters, the observed shape of hosted ids.
func New(prefix string) string {
	var raw [idLen]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails on supported platforms.
	var b strings.Builder
	b.Grow(len(prefix) + 4 + idLen)
	b.WriteString(prefix)
	b.WriteString("011C")
	for _, c := range raw {
		// 58*4 = 232 < 256: the small modulo bias is irrelevant for opaque ids.
		b.WriteByte(alphabet[int(c)%len(alphabet)])
	}
	return b.String()
}

// HasPrefix reports whether id looks like an id of the given kind.
func HasPrefix(id, prefix string) bool {
	return strings.HasPrefix(id, prefix) && len(id) > len(prefix)
}

// PrimaryThread is the id of a session's primary thread, derived from the session id so it
// needs no storage and is stable.
func PrimaryThread(sessionID string) string {
	return Thread + strings.TrimPrefix(sessionID, Session)
}
