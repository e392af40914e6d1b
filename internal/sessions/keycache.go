package sessions

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"
	"time"

	"github.com/managed-agents/managed-agents/internal/store"
)

// keyCacheTTL bounds how long an accepted key is trusted without asking the database. The
// cache is dropped on every revocation notice and on every reconnect of the LISTEN
// connection, so the TTL only matters if a notice is lost some other way.
const keyCacheTTL = time.Minute

// keyCacheMax bounds the cache: past it, the cache is emptied rather than grown (a scan of
// many keys must not grow memory).
const keyCacheMax = 10_000

// KeyCache caches accepted API keys by digest and ends them on notice: it is TopicKeys'
// handler (give it to the process's Listener). Streams watch their key through it, so a
// revoked key's open streams end too.
type KeyCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]keyEntry
	// gen counts invalidations: a lookup that started before one must not store what it read.
	gen      uint64
	watchers map[string]map[chan struct{}]struct{}
}

type keyEntry struct {
	p       Principal
	fetched time.Time
}

var _ store.Handler = (*KeyCache)(nil)

func newKeyCache() *KeyCache {
	return &KeyCache{entries: map[[sha256.Size]byte]keyEntry{}, watchers: map[string]map[chan struct{}]struct{}{}}
}

func (c *KeyCache) lookup(key string, now time.Time) (Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[sha256.Sum256([]byte(key))]
	if !ok || now.Sub(e.fetched) > keyCacheTTL || (e.p.ExpiresAt != nil && !e.p.ExpiresAt.After(now)) {
		return Principal{}, false
	}
	return e.p, true
}

func (c *KeyCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *KeyCache) store(key string, p Principal, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(c.entries) >= keyCacheMax {
		clear(c.entries)
	}
	c.entries[sha256.Sum256([]byte(key))] = keyEntry{p: p, fetched: time.Now()}
}

// Watch returns a channel closed when the key may have changed (revoked, rotated, or a
// notice may have been missed), and a function to stop watching. The watcher then asks
// Authenticate again, which reads the key's current state from the database.
func (c *KeyCache) Watch(keyID string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	c.mu.Lock()
	if c.watchers[keyID] == nil {
		c.watchers[keyID] = map[chan struct{}]struct{}{}
	}
	c.watchers[keyID][ch] = struct{}{}
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.watchers[keyID][ch]; ok {
			delete(c.watchers[keyID], ch)
			if len(c.watchers[keyID]) == 0 {
				delete(c.watchers, keyID)
			}
		}
	}
}

// Connected drops the whole cache and tells every watcher: notices sent while the
// connection was down are lost.
func (c *KeyCache) Connected(context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
	c.gen++
	for id := range c.watchers {
		c.signal(id)
	}
}

// Notify handles one notice: the payload is the id of a key that changed. The cache is
// keyed by digest, not id, so that key's entry is found by scanning (notices are rare).
func (c *KeyCache) Notify(_ context.Context, payload string) {
	keyID := strings.TrimSpace(payload)
	c.mu.Lock()
	defer c.mu.Unlock()
	for d, e := range c.entries {
		if e.p.KeyID == keyID {
			delete(c.entries, d)
		}
	}
	c.gen++
	c.signal(keyID)
}

// signal closes a key's watchers; c.mu is held.
func (c *KeyCache) signal(keyID string) {
	for ch := range c.watchers[keyID] {
		close(ch)
	}
	delete(c.watchers, keyID)
}
