package turns

import (
	"cmp"
	"slices"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// DefaultConversationCacheBytes bounds the conversations a worker keeps (WithConversationCache).
const DefaultConversationCacheBytes = 64 << 20

// eventOverhead approximates what a cached event holds besides its body, id and type: the
// decoded event and its share of the projection (a model.Block alone is 168 bytes).
const eventOverhead = 352

// conversations keeps, per session, the processed events of its log up to a seq, decoded for
// projection (agent.Decoded), so that a model request reads and decodes only what was
// appended since its session's last one: a conversation of n turns otherwise costs O(n) rows
// read, sent and decoded for every model request. A processed event
// never changes, and an event appended or delivered later always takes a seq above every seq
// in use (store.ConversationSince), so what is kept stays true; queued client events are never
// kept. Least recently used sessions go first when the bytes kept exceed the bound.
type conversations struct {
	mu    sync.Mutex
	lru   *simplelru.LRU[string, conversation]
	bytes int
	max   int
}

// conversation is a session's processed events with seq ≤ upTo, in log order, and their
// projection into model messages (so a request projects only what is new too).
type conversation struct {
	events []agent.Decoded
	proj   *agent.Projection
	upTo   int64
	bytes  int
}

// newConversations returns a cache of at most maxBytes; nil (no cache) for maxBytes ≤ 0.
func newConversations(maxBytes int) *conversations {
	if maxBytes <= 0 {
		return nil
	}
	c := &conversations{max: maxBytes}
	// The bound is in bytes, enforced in put; the count only has to be out of the way.
	c.lru, _ = simplelru.NewLRU(1<<30, func(_ string, v conversation) { c.bytes -= v.bytes })
	return c
}

// get returns what is kept of a session: its processed events up to upTo and their
// projection (0 and nils when nothing is). The slice is shared: callers must not change its
// elements.
func (c *conversations) get(sessionID string) ([]agent.Decoded, int64, *agent.Projection) {
	if c == nil {
		return nil, 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.lru.Get(sessionID)
	if !ok {
		return nil, 0, nil
	}
	return v.events, v.upTo, v.proj
}

// put keeps the processed events of log, a session's whole log as just read and decoded,
// and proj, their projection. When every event of log is processed (no client event waits),
// log itself is kept, not a copy: the caller must not change it afterwards, as it must not
// change what get returns.
func (c *conversations) put(sessionID string, log []agent.Decoded, proj *agent.Projection) {
	if c == nil {
		return
	}
	v := conversation{proj: proj}
	queued := false
	for _, d := range log {
		ev := d.Event
		if ev.ProcessedAt == nil {
			queued = true
			continue
		}
		v.upTo = max(v.upTo, ev.Seq)
		v.bytes += eventBytes(ev)
	}
	v.events = log
	if queued {
		v.events = make([]agent.Decoded, 0, len(log))
		for _, d := range log {
			if d.Event.ProcessedAt != nil {
				v.events = append(v.events, d)
			}
		}
	}
	// Clipped: only extend may write past a kept slice's length (see there).
	v.events = v.events[:len(v.events):len(v.events)]
	c.mu.Lock()
	defer c.mu.Unlock()
	if v.bytes > c.max {
		c.lru.Remove(sessionID) // one conversation larger than the bound is read whole each time
		return
	}
	c.lru.Remove(sessionID)
	c.lru.Add(sessionID, v)
	c.bytes += v.bytes
	for c.bytes > c.max {
		c.lru.RemoveOldest()
	}
}

// extend is withKept followed by put without copying what is kept, for the common case
// (proj is the projection of kept and fresh):
// fresh holds only processed events above what is kept. It appends fresh to the kept slice
// in place when that slice is still the session's entry, and returns the whole conversation;
// ok is false when it did nothing (the caller merges and puts). Appending in place is safe
// because nobody views a kept slice past its length: put keeps slices with no spare capacity,
// so only extend's own appends make room past a length, and the entry they make is the only
// slice of that array it writes past, after every view handed out of it.
func (c *conversations) extend(sessionID string, kept, fresh []agent.Decoded, proj *agent.Projection) (conv []agent.Decoded, ok bool) {
	if c == nil || len(kept) == 0 || len(fresh) == 0 {
		return nil, false
	}
	upTo, added := kept[len(kept)-1].Event.Seq, 0
	for _, d := range fresh {
		ev := d.Event
		if ev.ProcessedAt == nil || ev.Seq <= upTo {
			return nil, false
		}
		upTo = ev.Seq
		added += eventBytes(ev)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, found := c.lru.Peek(sessionID)
	if !found || len(v.events) != len(kept) || &v.events[0] != &kept[0] {
		return nil, false // the entry changed since kept was read from it
	}
	v.events, v.proj, v.upTo, v.bytes = append(v.events, fresh...), proj, upTo, v.bytes+added
	c.lru.Remove(sessionID)
	if v.bytes > c.max {
		return v.events, true // larger than the bound: not kept, as in put
	}
	c.lru.Add(sessionID, v)
	c.bytes += v.bytes
	for c.bytes > c.max {
		c.lru.RemoveOldest()
	}
	return v.events, true
}

// eventBytes estimates what a kept event holds: the decoded content is about as large as
// the body it came from.
func eventBytes(ev wire.Event) int { return 2*len(ev.Body) + len(ev.ID) + len(ev.Type) + eventOverhead }

// drop forgets a session.
func (c *conversations) drop(sessionID string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(sessionID)
}

// withKept returns the whole log from kept (processed events up to some seq) and fresh (the
// events above it and every queued one, in log order). A queued event may sit below the kept
// seqs, so the result is put in log order when it is not.
func withKept(kept, fresh []agent.Decoded) []agent.Decoded {
	if len(kept) == 0 {
		return fresh
	}
	if len(fresh) == 0 {
		return kept
	}
	out := make([]agent.Decoded, 0, len(kept)+len(fresh))
	out = append(append(out, kept...), fresh...)
	if !slices.IsSortedFunc(out, bySeq) {
		slices.SortStableFunc(out, bySeq)
	}
	return out
}

func bySeq(a, b agent.Decoded) int { return cmp.Compare(a.Event.Seq, b.Event.Seq) }
