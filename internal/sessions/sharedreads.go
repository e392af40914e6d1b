package sessions

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// sharedReadTimeout bounds a read that serves several streams: it runs without the
// starting stream's context, so that stream closing does not fail the others.
const sharedReadTimeout = 30 * time.Second

// sharedReads lets the streams of one session share their reads of its log. Every stream of
// a session is woken by the same notice and reads from the same cursor; without sharing, a
// session watched by k streams is read k times per append. A stream takes the result of a
// read in flight only when it is for the same cursor and started at the stream's generation
// or later (store.Notifier.Generation), so it never takes a read older than the notice that
// woke it: such a read might miss the commit the notice announced.
type sharedReads struct {
	store *store.Store
	mu    sync.Mutex
	// inflight is the latest read of each session and cursor.
	inflight map[string]*sharedRead
}

type sharedRead struct {
	gen  uint64
	done chan struct{}
	evs  []wire.Event
	more bool
	err  error
}

func newSharedReads(st *store.Store) *sharedReads {
	return &sharedReads{store: st, inflight: map[string]*sharedRead{}}
}

// eventsAfter is store.EventsAfter(sessionID, cursor, streamBatch), shared as above. The
// events returned are shared with other streams: callers must not change them.
func (r *sharedReads) eventsAfter(ctx context.Context, sessionID string, cursor int64, gen uint64) ([]wire.Event, bool, error) {
	key := sessionID + ":" + strconv.FormatInt(cursor, 10)
	r.mu.Lock()
	if rd, ok := r.inflight[key]; ok && rd.gen >= gen {
		r.mu.Unlock()
		select {
		case <-rd.done:
			return rd.evs, rd.more, rd.err
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	rd := &sharedRead{gen: gen, done: make(chan struct{})}
	r.inflight[key] = rd
	r.mu.Unlock()

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedReadTimeout)
	rd.evs, rd.more, rd.err = r.store.EventsAfter(rctx, sessionID, cursor, streamBatch)
	cancel()
	r.mu.Lock()
	if r.inflight[key] == rd {
		delete(r.inflight, key)
	}
	r.mu.Unlock()
	close(rd.done)
	return rd.evs, rd.more, rd.err
}
