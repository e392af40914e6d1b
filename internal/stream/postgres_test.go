//go:build integration

package stream

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/pgtest"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newPool connects to a fresh database of the test's own; NOTIFY channels are per database,
// so parallel tests never see each other's frames.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// runHub starts a hub on pool with a listener of its own, as one process would, and stops
// both when the test ends.
func runHub(t testing.TB, pool *pgxpool.Pool) *PostgresHub {
	t.Helper()
	l := store.NewListener(pool, discardLogger())
	h := NewPostgresHub(pool, l, discardLogger())
	require.NoError(t, l.Start(context.Background()))
	require.NoError(t, h.Start(context.Background()))
	t.Cleanup(func() {
		h.Stop()
		l.Stop()
	})
	return h
}

// subscribeReady subscribes and waits until the hub listens, so frames published from now
// on reach the channel.
func subscribeReady(t testing.TB, h *PostgresHub, sessionID string) (<-chan Frame, func()) {
	t.Helper()
	ch, unsub := h.Subscribe(sessionID)
	select {
	case <-h.Ready():
	case <-time.After(waitFor):
		t.Fatal("the hub never started listening")
	}
	return ch, unsub
}

func TestPostgresHub(t *testing.T) {
	t.Parallel()
	runHubSuite(t, func(t *testing.T) hubHarness {
		h := runHub(t, newPool(t))
		return hubHarness{hub: h, subscribe: func(t *testing.T, sessionID string) (<-chan Frame, func()) {
			return subscribeReady(t, h, sessionID)
		}}
	})
}

// A worker and an API process: separate hubs and pools on one database.
func TestPostgresHubBetweenProcesses(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	connect := func() *pgxpool.Pool {
		pool, err := pgxpool.New(context.Background(), url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		return pool
	}
	worker, api := runHub(t, connect()), runHub(t, connect())
	sid, eid := newSessionID(), newEventID()
	ch, unsub := subscribeReady(t, api, sid)
	defer unsub()

	big := deltaFrame(sid, eid, 2, longText(100_000))
	parts, _, err := encodeParts(big, "x.1")
	require.NoError(t, err)
	require.Greater(t, len(parts), 10, "a 100 KB delta needs many NOTIFY payloads")

	frames := []Frame{startFrame(sid, wire.EventAgentMessage, eid), deltaFrame(sid, eid, 1, "Hi"), big, deltaFrame(sid, eid, 3, "bye")}
	publishAll(t, worker, frames)
	require.Equal(t, frames, recvN(t, ch, len(frames)))
}

func TestPostgresHubReassemblesInterleavedParts(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	h := runHub(t, pool)
	sid := newSessionID()
	ch, unsub := subscribeReady(t, h, sid)
	defer unsub()

	// Parts of two frames, interleaved in one transaction by hand.
	a := deltaFrame(sid, newEventID(), 1, longText(30_000))
	b := deltaFrame(sid, newEventID(), 1, longText(20_000)+"b")
	aParts, _, err := encodeParts(a, "manual.a")
	require.NoError(t, err)
	bParts, _, err := encodeParts(b, "manual.b")
	require.NoError(t, err)
	var mixed []string
	for i := range max(len(aParts), len(bParts)) {
		if i < len(bParts) {
			mixed = append(mixed, bParts[i])
		}
		if i < len(aParts) {
			mixed = append(mixed, aParts[i])
		}
	}
	_, err = pool.Exec(t.Context(), notifyBatch, PreviewsChannel, mixed)
	require.NoError(t, err)
	require.Equal(t, []Frame{b, a}, recvN(t, ch, 2), "each frame is delivered when its last part arrives")
}

// Several publishers (workers) send large frames at once; their parts interleave on the
// channel whenever PostgreSQL lets their transactions through in any order.
func TestPostgresHubConcurrentLargeFrames(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	api := runHub(t, pool)
	sid := newSessionID()
	ch, unsub := subscribeReady(t, api, sid)
	defer unsub()

	const publishers, perPublisher = 4, 6
	want := map[string][]Frame{}
	for p := range publishers {
		eid := newEventID()
		for i := range perPublisher {
			want[eid] = append(want[eid], deltaFrame(sid, eid, i+1, fmt.Sprintf("%d/%d ", p, i)+longText(15_000+i*7_000)))
		}
	}
	var wg sync.WaitGroup
	for _, frames := range want {
		worker := runHub(t, pool)
		wg.Go(func() {
			for _, f := range frames {
				if err := worker.Publish(context.Background(), f); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()

	got := map[string][]Frame{}
	for _, f := range recvN(t, ch, publishers*perPublisher) {
		got[f.EventID] = append(got[f.EventID], f)
	}
	require.Equal(t, want, got, "every frame intact, each publisher's in order")
}

func TestPostgresHubReconnects(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	h := runHub(t, pool)
	sid := newSessionID()
	ch, unsub := subscribeReady(t, h, sid)
	defer unsub()
	publishAll(t, h, []Frame{startFrame(sid, wire.EventAgentMessage, newEventID())})
	recv(t, ch)

	var killed int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query = $1`,
		"LISTEN "+PreviewsChannel).Scan(&killed))
	require.Equal(t, 1, killed, "the hub holds one LISTEN connection")

	// Frames published while it reconnects are lost, so publish until one comes through; one
	// published a moment earlier may arrive after a later one was sent, so any of them counts.
	deadline := time.After(waitFor)
	var sent []Frame
	for {
		f := startFrame(sid, wire.EventAgentMessage, newEventID())
		publishAll(t, h, []Frame{f})
		sent = append(sent, f)
		select {
		case got := <-ch:
			require.Contains(t, sent, got, "only frames published after the connection was terminated arrive, and whole")
			return
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("the hub never received again after its connection was terminated")
		}
	}
}

// A process that only publishes (a worker) holds no LISTEN connection, and what it sends is
// the documented part encoding on PreviewsChannel.
func TestPostgresHubPublisherDoesNotListen(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	worker := runHub(t, pool)

	conn, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	listener := conn.Hijack()
	defer listener.Close(context.Background())
	_, err = listener.Exec(t.Context(), "LISTEN "+PreviewsChannel)
	require.NoError(t, err)

	f := startFrame(newSessionID(), wire.EventAgentThinking, newEventID())
	publishAll(t, worker, []Frame{f})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	msg, err := listener.WaitForNotification(ctx)
	require.NoError(t, err)
	p, err := parsePart(msg.Payload)
	require.NoError(t, err)
	require.Equal(t, 1, p.count)
	got, err := decodeFrame([]byte(p.data))
	require.NoError(t, err)
	require.Equal(t, f, got)

	rows, err := pool.Query(t.Context(), `SELECT query FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'`)
	require.NoError(t, err)
	listeners, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"LISTEN " + PreviewsChannel}, listeners, "only the test's own listener")
}

func TestPostgresHubIgnoresForeignPayloads(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	h := runHub(t, pool)
	sid := newSessionID()
	ch, unsub := subscribeReady(t, h, sid)
	defer unsub()

	foreign := []string{
		"hello",
		sid + ":12",           // the committed-events channel's shape
		"1:x.1:0:1:{not json", // a part, but not a frame
		// A valid part holding an invalid frame.
		`1:x.2:0:1:{"s":"` + sid + `","t":"event_start","i":"sevt_1","e":"agent.tool_use"}`,
		// A frame whose second part never comes.
		"1:x.3:0:2:" + `{"s":"` + sid + `",`,
	}
	_, err := pool.Exec(t.Context(), notifyBatch, PreviewsChannel, foreign)
	require.NoError(t, err)
	f := startFrame(sid, wire.EventAgentMessage, newEventID())
	publishAll(t, h, []Frame{f})
	require.Equal(t, f, recv(t, ch), "the hub skipped what it could not use and kept listening")
}

func TestPostgresHubShedsWhenItCannotSend(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	h := NewPostgresHub(pool, store.NewListener(pool, discardLogger()), discardLogger()) // not started: nothing drains the queue
	f := deltaFrame(newSessionID(), newEventID(), 1, strings.Repeat("a", 100_000))
	_, size, err := encodeParts(f, h.newFrameID())
	require.NoError(t, err)

	fit := maxQueuedBytes / size
	for i := range fit {
		require.NoError(t, h.Publish(context.Background(), f), "frame %d fits", i)
	}
	require.ErrorIs(t, h.Publish(context.Background(), f), ErrShed)
	require.NoError(t, h.Publish(context.Background(), startFrame(f.SessionID, wire.EventAgentMessage, newEventID())), "a small frame still fits")
}

// BenchmarkPostgresHubLatency measures Publish on one hub (a worker) to receipt on another
// (an API process) over a real PostgreSQL.
func BenchmarkPostgresHubLatency(b *testing.B) {
	for _, size := range []int{16, 100_000} {
		b.Run(fmt.Sprintf("text=%dB", size), func(b *testing.B) {
			pool := newPool(b)
			worker, api := runHub(b, pool), runHub(b, pool)
			sid, eid := newSessionID(), newEventID()
			ch, unsub := subscribeReady(b, api, sid)
			defer unsub()
			text := strings.Repeat("x", size)

			var lat []time.Duration
			seq := 0
			for b.Loop() {
				seq++
				start := time.Now()
				if err := worker.Publish(context.Background(), deltaFrame(sid, eid, seq, text)); err != nil {
					b.Fatal(err)
				}
				recv(b, ch)
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkPostgresHubBurst measures a model stream's burst of small deltas: the hub sends
// whatever queued up in one statement, so a frame costs far less than a round trip.
func BenchmarkPostgresHubBurst(b *testing.B) {
	const burst = 100
	pool := newPool(b)
	worker, api := runHub(b, pool), runHub(b, pool)
	sid, eid := newSessionID(), newEventID()
	ch, unsub := subscribeReady(b, api, sid)
	defer unsub()

	seq := 0
	for b.Loop() {
		for range burst {
			seq++
			if err := worker.Publish(context.Background(), deltaFrame(sid, eid, seq, "word ")); err != nil {
				b.Fatal(err)
			}
		}
		recvN(b, ch, burst)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*burst), "µs/frame")
}

// The hub is a start/stop service: Stop before Start, a second Start and a second Stop are
// harmless, and a stopped hub can start again and send.
func TestPostgresHubStartStop(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	l := store.NewListener(pool, discardLogger())
	require.NoError(t, l.Start(t.Context()))
	t.Cleanup(l.Stop)
	h := NewPostgresHub(pool, l, discardLogger())
	h.Stop()
	require.NoError(t, h.Start(t.Context()))
	require.NoError(t, h.Start(t.Context()))
	h.Stop()
	h.Stop()
	require.NoError(t, h.Start(t.Context()))
	t.Cleanup(h.Stop)

	sid := newSessionID()
	ch, unsub := subscribeReady(t, h, sid)
	defer unsub()
	f := startFrame(sid, wire.EventAgentMessage, newEventID())
	publishAll(t, h, []Frame{f})
	require.Equal(t, f, recv(t, ch), "the restarted hub sends")
}
