//go:build integration

package store

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// recordingHandler records what the listener hands it. If gate is set, Notify waits on it,
// as a handler that cannot keep up would.
type recordingHandler struct {
	connected chan struct{}
	payloads  chan string
	gate      chan struct{}
}

func newRecordingHandler() *recordingHandler {
	return &recordingHandler{connected: make(chan struct{}, 16), payloads: make(chan string, 1024)}
}

func (h *recordingHandler) Connected(context.Context) { h.connected <- struct{}{} }

func (h *recordingHandler) Notify(ctx context.Context, payload string) {
	if h.gate != nil {
		select {
		case <-h.gate:
		case <-ctx.Done():
		}
	}
	h.payloads <- payload
}

func (h *recordingHandler) requireConnected(t *testing.T, msg string) {
	t.Helper()
	select {
	case <-h.connected:
	case <-time.After(waitFor):
		t.Fatal(msg)
	}
}

func (h *recordingHandler) requirePayload(t *testing.T, want, msg string) {
	t.Helper()
	select {
	case got := <-h.payloads:
		require.Equal(t, want, got, msg)
	case <-time.After(waitFor):
		t.Fatal(msg)
	}
}

// requireQuiet waits a little and asserts nothing more arrived.
func (h *recordingHandler) requireQuiet(t *testing.T, msg string) {
	t.Helper()
	select {
	case p := <-h.payloads:
		t.Fatalf("%s: got %q", msg, p)
	case <-time.After(100 * time.Millisecond):
	}
}

func notify(t *testing.T, st *Store, topic Topic, payload string) {
	t.Helper()
	_, err := st.Pool().Exec(t.Context(), `SELECT pg_notify($1, $2)`, string(topic), payload)
	require.NoError(t, err)
}

// listenConnections counts this database's LISTEN connections.
func listenConnections(t *testing.T, st *Store) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool().QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'`).Scan(&n))
	return n
}

// startListener starts a listener with a recording handler on each of topics and waits until
// every topic listens.
func startListener(t *testing.T, st *Store, topics ...Topic) (*Listener, map[Topic]*recordingHandler) {
	t.Helper()
	return startListenerWith(t, st, nil, topics...)
}

// startListenerWith is startListener with options.
func startListenerWith(t *testing.T, st *Store, opts []ListenerOption, topics ...Topic) (*Listener, map[Topic]*recordingHandler) {
	t.Helper()
	l := NewListener(st.Pool(), discardLogger(), opts...)
	handlers := map[Topic]*recordingHandler{}
	for _, topic := range topics {
		handlers[topic] = newRecordingHandler()
		require.NoError(t, l.Listen(topic, handlers[topic]))
	}
	require.NoError(t, l.Start(t.Context()))
	t.Cleanup(l.Stop)
	for topic, h := range handlers {
		h.requireConnected(t, string(topic)+" never listened")
	}
	return l, handlers
}

func TestListenerKeepsTopicsApart(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	_, hs := startListener(t, st, TopicEvents, TopicPreviews)

	tests := []struct {
		topic, other Topic
		payload      string
	}{
		{TopicEvents, TopicPreviews, "sesn_1:7"},
		{TopicPreviews, TopicEvents, "1:x.1:0:1:{}"},
	}
	for _, tt := range tests {
		notify(t, st, tt.topic, tt.payload)
		hs[tt.topic].requirePayload(t, tt.payload, string(tt.topic)+" gets its own notification")
		hs[tt.other].requireQuiet(t, string(tt.other)+" does not get "+string(tt.topic)+"'s")
	}
}

func TestListenerReconnectTellsEveryTopic(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	reconnects := &reconnectRecorder{}
	_, hs := startListenerWith(t, st, []ListenerOption{ListenerObserver(reconnects)}, TopicEvents, TopicPreviews)

	var killed int
	// Only this test's database: other tests' listeners share the server.
	require.NoError(t, st.Pool().QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'`).Scan(&killed))
	require.Equal(t, 2, killed, "one LISTEN connection per topic")

	for topic, h := range hs {
		h.requireConnected(t, string(topic)+" is told about the reconnect")
	}
	require.ElementsMatch(t, []string{string(TopicEvents), string(TopicPreviews)}, reconnects.list(), "the observer counts each lost connection")
	for topic, h := range hs {
		notify(t, st, topic, "after")
		h.requirePayload(t, "after", string(topic)+" receives again after the reconnect")
	}
}

// A handler that falls behind (previews during a model's burst) holds up its own topic only.
func TestListenerSlowTopicDoesNotDelayAnother(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	l := NewListener(st.Pool(), discardLogger())
	events, previews := newRecordingHandler(), newRecordingHandler()
	previews.gate = make(chan struct{})
	require.NoError(t, l.Listen(TopicEvents, events))
	require.NoError(t, l.Listen(TopicPreviews, previews))
	require.NoError(t, l.Start(t.Context()))
	t.Cleanup(l.Stop)
	events.requireConnected(t, "events never listened")
	previews.requireConnected(t, "previews never listened")

	for range 100 {
		notify(t, st, TopicPreviews, "burst")
	}
	notify(t, st, TopicEvents, "sesn_1:1")
	events.requirePayload(t, "sesn_1:1", "the wake-up arrives while the previews are stuck")
	close(previews.gate)
	for range 100 {
		previews.requirePayload(t, "burst", "the previews arrive once their handler goes on")
	}
}

func TestListenerHoldsConnectionsOnlyForListenedTopics(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	l, _ := startListener(t, st)
	require.Zero(t, listenConnections(t, st), "no topic, no connection")

	h := newRecordingHandler()
	require.NoError(t, l.Listen(TopicPreviews, h), "a topic can be added to a running listener")
	h.requireConnected(t, "the added topic listens")
	require.Equal(t, 1, listenConnections(t, st))
	require.ErrorContains(t, l.Listen(TopicPreviews, newRecordingHandler()), "already has a handler")

	l.Stop()
	l.Stop()
	require.Eventually(t, func() bool { return listenConnections(t, st) == 0 }, waitFor, 10*time.Millisecond,
		"Stop closes the connections, and a second Stop is harmless")
}

type reconnectRecorder struct {
	mu     sync.Mutex
	topics []string
}

func (r *reconnectRecorder) EventsAppended([]string) {}

func (r *reconnectRecorder) ListenerReconnecting(topic string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.topics = append(r.topics, topic)
}

func (r *reconnectRecorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.topics)
}

// An append notifies its session's subscribers (TopicEvents: the session id) and, when it
// holds a user.interrupt, the workers (TopicInterrupts: the session id), in the appending
// statement itself; an append without an interrupt sends no interrupt notice. A transaction
// that appends and delivers several times sends one wake-up.
func TestAppendNotifiesEventsAndInterrupts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l := NewListener(f.st.Pool(), discardLogger())
	events, interrupts := newRecordingHandler(), newRecordingHandler()
	require.NoError(t, l.Listen(TopicEvents, events))
	require.NoError(t, l.Listen(TopicInterrupts, interrupts))
	require.NoError(t, l.Start(t.Context()))
	t.Cleanup(l.Stop)
	events.requireConnected(t, "events never listened")
	interrupts.requireConnected(t, "interrupts never listened")
	sid := f.newSession(t)

	_, err := f.st.AppendEvents(t.Context(), sid, []NewEvent{{Type: "user.message"}, {Type: "user.message"}}, time.Now())
	require.NoError(t, err)
	events.requirePayload(t, sid, "the append's wake-up names its session")
	interrupts.requireQuiet(t, "no interrupt in the append")

	_, err = f.st.AppendEvents(t.Context(), sid, []NewEvent{{Type: "user.message"}, {Type: "user.interrupt"}}, time.Now())
	require.NoError(t, err)
	events.requirePayload(t, sid, "the append's wake-up names its session")
	interrupts.requirePayload(t, sid, "the interrupt reaches the workers")

	// A turn's transaction: an append, a delivery and another append, sent with the commit.
	queued, err := f.st.AppendEvents(t.Context(), sid, []NewEvent{{Type: "user.message"}}, time.Now())
	require.NoError(t, err)
	events.requirePayload(t, sid, "the queued message's wake-up")
	require.NoError(t, f.st.InTx(t.Context(), func(q *Queries) error {
		rec, err := q.LockSession(t.Context(), sid)
		if err != nil {
			return err
		}
		w := q.Writes(sid, rec.LastSeq)
		w.Append([]NewEvent{{Type: wire.EventSessionStatusRunning, Processed: true}}, time.Now())
		w.Deliver([]string{queued[0].ID}, time.Now())
		w.Append([]NewEvent{{Type: wire.EventSessionStatusIdle, Processed: true}}, time.Now())
		return w.FlushAtCommit(t.Context())
	}))
	other := f.newSession(t)
	_, err = f.st.AppendEvents(t.Context(), other, []NewEvent{{Type: "user.message"}}, time.Now())
	require.NoError(t, err)
	events.requirePayload(t, sid, "the transaction's wake-up")
	events.requirePayload(t, other, "the transaction sent one wake-up: the next is the other session's")

	// A failed append (no such session) notifies no one.
	_, err = f.st.AppendEvents(t.Context(), "sesn_missing", []NewEvent{{Type: "user.interrupt"}}, time.Now())
	require.Error(t, err)
	interrupts.requireQuiet(t, "a failed append sends nothing")
	events.requireQuiet(t, "a failed append sends nothing")
}
