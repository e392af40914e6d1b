package sessions

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/managed-agents/managed-agents/internal/store"
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
	res  readResult
	err  error
}

// readResult is one read of a session's log for its streams: the delivered events, each
// encoded once for all of them, and where the read ended.
type readResult struct {
	events []Committed
	// last is the seq of the last event read, delivered or queued (0 when none was).
	last int64
	// more: the read stopped at streamBatch with more events after it.
	more bool
	// gone: the read found nothing and the session no longer exists.
	gone bool
}

func newSharedReads(st *store.Store) *sharedReads {
	return &sharedReads{store: st, inflight: map[string]*sharedRead{}}
}

// eventsAfter is store.EventsAfter(sessionID, cursor, streamBatch) with the queued events left
// out and the rest encoded, shared as above. The result is shared with other streams: callers
// must not change it.
func (r *sharedReads) eventsAfter(ctx context.Context, sessionID string, cursor int64, gen uint64) (readResult, error) {
	key := sessionID + ":" + strconv.FormatInt(cursor, 10)
	r.mu.Lock()
	if rd, ok := r.inflight[key]; ok && rd.gen >= gen {
		r.mu.Unlock()
		select {
		case <-rd.done:
			return rd.res, rd.err
		case <-ctx.Done():
			return readResult{}, ctx.Err()
		}
	}
	rd := &sharedRead{gen: gen, done: make(chan struct{})}
	r.inflight[key] = rd
	r.mu.Unlock()

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedReadTimeout)
	rd.res, rd.err = read(rctx, r.store, sessionID, cursor)
	cancel()
	r.mu.Lock()
	if r.inflight[key] == rd {
		delete(r.inflight, key)
	}
	r.mu.Unlock()
	close(rd.done)
	return rd.res, rd.err
}

// read reads the log after cursor and encodes what a stream shows of it. A queued client
// event is shown once, when it is delivered: delivery moves it to the end of the log, past
// the cursor (API.md §17).
func read(ctx context.Context, st *store.Store, sessionID string, cursor int64) (readResult, error) {
	evs, more, err := st.EventsAfter(ctx, sessionID, cursor, streamBatch)
	if err != nil {
		return readResult{}, err
	}
	if len(evs) == 0 {
		// A deleted session's log is gone with it: an empty read is when to ask, once for
		// every stream that shares the read.
		exists, err := st.SessionExists(ctx, sessionID)
		return readResult{gone: !exists}, err
	}
	res := readResult{events: make([]Committed, 0, len(evs)), last: evs[len(evs)-1].Seq, more: more}
	for _, ev := range evs {
		if ev.ProcessedAt == nil {
			continue
		}
		data, err := json.Marshal(ev)
		if err != nil {
			return readResult{}, fmt.Errorf("encode event %s: %w", ev.ID, err)
		}
		res.events = append(res.events, Committed{Event: ev, JSON: data})
	}
	return res, nil
}
