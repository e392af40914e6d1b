package sessions

import (
	"context"
	"errors"

	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// streamBatch bounds one read of a live stream so a long backlog is sent in pieces.
const streamBatch = 500

// Stream follows a session's log: the committed events after a cursor, in log order.
type Stream struct {
	reads     *sharedReads
	notifier  *store.Notifier
	sessionID string
	cursor    int64
	live      int64 // the log's end when the stream opened
	wake      <-chan struct{}
	cancel    func()
	// more: the last read stopped at streamBatch with more events after it.
	more bool
}

// OpenStream starts following a session. Without resumeAfter it starts at the end of the
// log (the contract has no replay); with an event id it replays everything after that event
// (our resume extension). It subscribes before reading the cursor, so no event committed in
// between is missed.
func (s *Service) OpenStream(ctx context.Context, workspaceID, sessionID, resumeAfter string) (*Stream, error) {
	wake, cancel := s.notifier.Subscribe(sessionID)
	st := &Stream{reads: s.reads, notifier: s.notifier, sessionID: sessionID, wake: wake, cancel: cancel}
	sess, err := s.store.GetSession(ctx, workspaceID, sessionID, false)
	if err != nil {
		cancel()
		return nil, notFoundAs(err, "session %s not found", sessionID)
	}
	st.cursor, st.live = sess.LastSeq, sess.LastSeq
	if resumeAfter != "" {
		ev, err := s.store.GetEvent(ctx, sessionID, resumeAfter)
		if err != nil {
			cancel()
			if errors.Is(err, store.ErrNotFound) {
				return nil, invalidf("after_id: no event %s in this session", resumeAfter)
			}
			return nil, err
		}
		st.cursor = ev.Seq
	}
	return st, nil
}

// Cursor is the seq of the last event the stream has read past.
func (st *Stream) Cursor() int64 { return st.cursor }

// Live is the log's end when the stream opened: what Next returns up to it is a replay (of a
// resumed stream), committed before the caller subscribed to anything else.
func (st *Stream) Live() int64 { return st.live }

// Wake receives a value when the log may have grown.
func (st *Stream) Wake() <-chan struct{} { return st.wake }

// Committed is a delivered event as a stream shows it, with its wire form (json.Marshal of
// the event) encoded once for every stream of the session that shared the read.
type Committed struct {
	wire.Event
	JSON []byte
}

// Next returns the events committed after the cursor (possibly none) and advances it.
// deleted reports that the session no longer exists. The events are shared with other
// streams of the session: callers must not change them.
func (st *Stream) Next(ctx context.Context) (events []Committed, deleted bool, err error) {
	// The generation before the read: a read another stream of the session started since
	// then serves this one too (sharedReads).
	res, err := st.reads.eventsAfter(ctx, st.sessionID, st.cursor, st.notifier.Generation(st.sessionID))
	if err != nil {
		return nil, false, err
	}
	st.more = res.more
	if res.last > 0 {
		st.cursor = res.last
	}
	return res.events, res.gone, nil
}

// Pending reports whether the last Next left committed events behind (it read a full
// batch), so the caller reads again without waiting for a wake-up. It is not the count Next
// returned: queued events it skipped still fill the batch.
func (st *Stream) Pending() bool { return st.more }

// Close stops following.
func (st *Stream) Close() { st.cancel() }
