package sessions

import (
	"context"
	"crypto/sha256"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/managed-agents/managed-agents/internal/store"
)

// keyCacheTTL bounds how long an accepted key is trusted without asking the database (the
// default of WithKeyCacheTTL). The cache is dropped on every revocation notice and on every
// reconnect of the LISTEN connection, so the TTL only matters if a notice is lost some other
// way (a direct UPDATE of api_keys sends none). It bounds new requests and open streams alike:
// a watched key's streams are told to check it again when its confirmation is this old
// (Watch).
const keyCacheTTL = time.Minute

// keyReadTimeout bounds one database read of a key shared by several callers (fetch): it
// runs without any one caller's context, so a caller that leaves cannot fail the others.
const keyReadTimeout = 10 * time.Second

// keyCacheMax bounds the cache: past it, the cache is emptied rather than grown (a scan of
// many keys must not grow memory).
const keyCacheMax = 10_000

// KeyCache caches accepted API keys by digest and ends them on notice: it is TopicKeys'
// handler (give it to the process's Listener). Streams watch their key through it, so a
// revoked key's open streams end too, and a key whose notice was lost ends them within ttl,
// as it does new requests.
//
// The cost of that bound does not grow with the streams: a watched key has one timer, not
// one per stream, and it fires when the key's newest confirmation by the database is ttl
// old, which is when the next request would have read the database anyway. The key's
// streams then check it together, and fetch joins their reads into one: one read per key per
// ttl, however many streams hold the key.
type KeyCache struct {
	mu sync.Mutex
	// ttl is how long an accepted key is trusted without asking the database again.
	ttl     time.Duration
	entries map[[sha256.Size]byte]keyEntry
	// confirmed is, by key id, when the database last accepted the key: its cached entry's
	// age, which a watched key's timer follows. A key without one is read again.
	confirmed map[string]time.Time
	// gen counts invalidations: a lookup that started before one must not store what it read.
	gen      uint64
	watchers map[string]map[chan struct{}]struct{}
	// stale is, by watched key id, the timer that tells its watchers that the key's
	// confirmation went stale; a key has one while it has watchers.
	stale map[string]*staleTimer
	// reads joins the concurrent database reads of one key (fetch).
	reads singleflight.Group
}

// staleTimer is one key's stale timer; its callback compares it with the key's current one
// (both under KeyCache.mu), so a timer stopped or replaced after it fired does nothing.
type staleTimer struct{ t *time.Timer }

type keyEntry struct {
	p       Principal
	fetched time.Time
}

var _ store.Handler = (*KeyCache)(nil)

func newKeyCache() *KeyCache {
	return &KeyCache{ttl: keyCacheTTL, entries: map[[sha256.Size]byte]keyEntry{}, confirmed: map[string]time.Time{},
		watchers: map[string]map[chan struct{}]struct{}{}, stale: map[string]*staleTimer{}}
}

func (c *KeyCache) lookup(key string, now time.Time) (Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[sha256.Sum256([]byte(key))]
	if !ok || now.Sub(e.fetched) >= c.ttl || (e.p.ExpiresAt != nil && !e.p.ExpiresAt.After(now)) {
		return Principal{}, false
	}
	// A key whose stale timer fired is read again even if the clocks of now and fetched
	// disagree by a hair: its watchers are checking it because it is stale.
	if _, ok := c.confirmed[e.p.KeyID]; !ok {
		return Principal{}, false
	}
	return e.p, true
}

// fetch returns what read finds for key, read under generation gen: concurrent callers for
// the same key and generation share one read. That is what keeps streams cheap: when a key's
// confirmation goes stale, all its streams check it at once (Watch), and one database read
// answers them. A caller that arrives after an invalidation has another generation and never
// joins a read that started before it. A caller whose ctx ends stops waiting; the read goes on
// for the others.
func (c *KeyCache) fetch(ctx context.Context, key string, gen uint64, read func(context.Context) (Principal, error)) (Principal, error) {
	d := sha256.Sum256([]byte(key))
	ch := c.reads.DoChan(string(d[:])+"/"+strconv.FormatUint(gen, 10), func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyReadTimeout)
		defer cancel()
		return read(rctx)
	})
	select {
	case res := <-ch:
		p, _ := res.Val.(Principal)
		return p, res.Err
	case <-ctx.Done():
		return Principal{}, ctx.Err()
	}
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
		clear(c.confirmed)
	}
	now := time.Now()
	c.entries[sha256.Sum256([]byte(key))] = keyEntry{p: p, fetched: now}
	c.confirmed[p.KeyID] = now
}

// Watch returns a channel closed when the key may have changed (revoked, rotated, or a
// notice may have been missed), and a function to stop watching. The watcher then asks
// Authenticate again, which reads the key's current state from the database.
//
// A notice can be lost without a reconnect (a direct UPDATE of api_keys sends none), so the
// channel is also closed when the key's confirmation goes stale: at most ttl after the
// database last accepted the key, the bound a new request has too. Watch before
// Authenticate: the confirmation Authenticate answers from is then never older than the one
// the timer follows.
func (c *KeyCache) Watch(keyID string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	c.mu.Lock()
	if c.watchers[keyID] == nil {
		c.watchers[keyID] = map[chan struct{}]struct{}{}
	}
	c.watchers[keyID][ch] = struct{}{}
	if c.stale[keyID] == nil {
		// Without a confirmation, the watcher's Authenticate reads the database after now.
		at, ok := c.confirmed[keyID]
		if !ok {
			at = time.Now()
		}
		c.armStale(keyID, time.Until(at.Add(c.ttl)))
	}
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.watchers[keyID][ch]; ok {
			delete(c.watchers[keyID], ch)
			if len(c.watchers[keyID]) == 0 {
				delete(c.watchers, keyID)
				c.stopStale(keyID)
			}
		}
	}
}

// armStale starts keyID's stale timer; c.mu is held.
func (c *KeyCache) armStale(keyID string, d time.Duration) {
	st := &staleTimer{}
	st.t = time.AfterFunc(d, func() { c.staled(keyID, st) })
	c.stale[keyID] = st
}

// stopStale stops keyID's stale timer, if any; c.mu is held.
func (c *KeyCache) stopStale(keyID string) {
	if st := c.stale[keyID]; st != nil {
		st.t.Stop()
		delete(c.stale, keyID)
	}
}

// staled runs when keyID's stale timer fires. If the key was confirmed again meanwhile (a
// request read it), the timer follows the new confirmation and the watchers are left alone;
// else the key is stale: its next lookup reads the database, and its watchers are told.
func (c *KeyCache) staled(keyID string, st *staleTimer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale[keyID] != st {
		return // stopped, or replaced, after it fired
	}
	delete(c.stale, keyID)
	if at, ok := c.confirmed[keyID]; ok {
		if d := time.Until(at.Add(c.ttl)); d > 0 {
			c.armStale(keyID, d)
			return
		}
	}
	delete(c.confirmed, keyID)
	c.signal(keyID)
}

// Connected drops the whole cache and tells every watcher: notices sent while the
// connection was down are lost.
func (c *KeyCache) Connected(context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
	clear(c.confirmed)
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
	delete(c.confirmed, keyID)
	c.gen++
	c.signal(keyID)
}

// signal closes a key's watchers (they watch again as they check it, which arms a new stale
// timer); c.mu is held.
func (c *KeyCache) signal(keyID string) {
	for ch := range c.watchers[keyID] {
		close(ch)
	}
	delete(c.watchers, keyID)
	c.stopStale(keyID)
}
