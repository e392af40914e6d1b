//go:build integration

package store

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
)

func TestTakeRequest(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := context.Background()

	t.Run("a burst passes, the next request waits one interval", func(t *testing.T) {
		key := ids.New(ids.APIKey)
		for i := range 3 {
			d, err := st.TakeRequest(ctx, key, time.Hour, 3)
			require.NoError(t, err)
			require.True(t, d.Allowed, "request %d of the burst", i)
		}
		d, err := st.TakeRequest(ctx, key, time.Hour, 3)
		require.NoError(t, err)
		require.False(t, d.Allowed)
		require.Greater(t, d.RetryAfter, 59*time.Minute)
		require.LessOrEqual(t, d.RetryAfter, time.Hour)

		other, err := st.TakeRequest(ctx, ids.New(ids.APIKey), time.Hour, 3)
		require.NoError(t, err)
		require.True(t, other.Allowed, "another key has a bucket of its own")
	})

	t.Run("after retry-after the key may go on; refusals do not push it back", func(t *testing.T) {
		key := ids.New(ids.APIKey)
		const interval = 200 * time.Millisecond
		d, err := st.TakeRequest(ctx, key, interval, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		var last RateDecision
		for range 5 {
			last, err = st.TakeRequest(ctx, key, interval, 1)
			require.NoError(t, err)
			require.False(t, last.Allowed)
			require.LessOrEqual(t, last.RetryAfter, interval)
		}
		time.Sleep(last.RetryAfter + 5*time.Millisecond)
		d, err = st.TakeRequest(ctx, key, interval, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed, "the refused requests did not use up the bucket")
	})
}

// TestTakeRequestAcrossReplicas: two pools (two API replicas) share one bucket per key, and
// concurrent requests never let more than the burst through.
func TestTakeRequestAcrossReplicas(t *testing.T) {
	t.Parallel()
	url := migratedURL(t)
	replicas := []*Store{openStore(t, withPoolSize(url, 8)), openStore(t, withPoolSize(url, 8))}
	key := ids.New(ids.APIKey)
	const burst, attempts = 7, 40
	var allowed atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, attempts)
	for i := range attempts {
		wg.Go(func() {
			d, err := replicas[i%2].TakeRequest(context.Background(), key, time.Hour, burst)
			if err != nil {
				errs <- err
				return
			}
			if d.Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, burst, allowed.Load())
}

func TestStreamLeases(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := context.Background()

	t.Run("the cap holds; a release frees a slot", func(t *testing.T) {
		key := ids.New(ids.APIKey)
		a, b, c := ids.New("lease_"), ids.New("lease_"), ids.New("lease_")
		for _, id := range []string{a, b} {
			ok, err := st.AcquireStreamLease(ctx, key, id, 2, time.Hour)
			require.NoError(t, err)
			require.True(t, ok)
		}
		ok, err := st.AcquireStreamLease(ctx, key, c, 2, time.Hour)
		require.NoError(t, err)
		require.False(t, ok)
		ok, err = st.AcquireStreamLease(ctx, ids.New(ids.APIKey), c, 2, time.Hour)
		require.NoError(t, err)
		require.True(t, ok, "another key has slots of its own")

		require.NoError(t, st.ReleaseStreamLease(ctx, a))
		require.NoError(t, st.ReleaseStreamLease(ctx, a), "a second release is no error")
		ok, err = st.AcquireStreamLease(ctx, key, ids.New("lease_"), 2, time.Hour)
		require.NoError(t, err)
		require.True(t, ok)
	})

	t.Run("an unrenewed lease lapses; a renewed one holds", func(t *testing.T) {
		key := ids.New(ids.APIKey)
		kept, lapsed := ids.New("lease_"), ids.New("lease_")
		const ttl = 300 * time.Millisecond
		for _, id := range []string{kept, lapsed} {
			ok, err := st.AcquireStreamLease(ctx, key, id, 2, ttl)
			require.NoError(t, err)
			require.True(t, ok)
		}
		time.Sleep(ttl / 2)
		require.NoError(t, st.RenewStreamLease(ctx, key, kept, ttl))
		time.Sleep(ttl/2 + 50*time.Millisecond)
		ok, err := st.AcquireStreamLease(ctx, key, ids.New("lease_"), 2, time.Hour)
		require.NoError(t, err)
		require.True(t, ok, "the lapsed lease's slot is free")
		ok, err = st.AcquireStreamLease(ctx, key, ids.New("lease_"), 2, time.Hour)
		require.NoError(t, err)
		require.False(t, ok, "the renewed lease still holds its slot")

		// A renewal after the lease was swept records it again: the stream is still open.
		require.NoError(t, st.RenewStreamLease(ctx, key, lapsed, time.Hour))
		var n int
		require.NoError(t, st.db.QueryRow(ctx, `SELECT count(*) FROM stream_leases WHERE key_id = $1`, key).Scan(&n))
		require.Equal(t, 3, n)
	})

	t.Run("concurrent acquisitions on two replicas take exactly the cap", func(t *testing.T) {
		url := migratedURL(t)
		replicas := []*Store{openStore(t, withPoolSize(url, 8)), openStore(t, withPoolSize(url, 8))}
		key := ids.New(ids.APIKey)
		const limit, attempts = 3, 20
		var acquired atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, attempts)
		for i := range attempts {
			wg.Go(func() {
				ok, err := replicas[i%2].AcquireStreamLease(context.Background(), key, ids.New("lease_"), limit, time.Hour)
				if err != nil {
					errs <- err
					return
				}
				if ok {
					acquired.Add(1)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.EqualValues(t, limit, acquired.Load())
	})
}

func TestActiveSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	running, queued, idle := f.newSession(t), f.newSession(t), f.newSession(t)
	_, err := f.st.db.Exec(ctx, `UPDATE sessions SET status = 'running' WHERE id = $1`, running)
	require.NoError(t, err)
	_, err = f.st.AppendEvents(ctx, queued, []NewEvent{{Type: "user.message", Body: benchBody}}, time.Now())
	require.NoError(t, err)
	// A processed message (a turn that ran and ended) makes nobody active.
	_, err = f.st.AppendEvents(ctx, idle, []NewEvent{{Type: "user.message", Body: benchBody, Processed: true}}, time.Now())
	require.NoError(t, err)
	other := newFixtureOn(t, f.st)
	_, err = f.st.db.Exec(ctx, `UPDATE sessions SET status = 'rescheduling' WHERE id = $1`, other.newSession(t))
	require.NoError(t, err)

	for _, tc := range []struct {
		session string
		others  int
		self    bool
	}{
		{idle, 2, false},
		{queued, 1, true},
		{running, 1, true},
		{ids.New(ids.Session), 2, false}, // a session being created
	} {
		require.NoError(t, f.st.InTx(ctx, func(q *Queries) error {
			others, self, err := q.ActiveSessions(ctx, f.ws, tc.session)
			require.NoError(t, err)
			require.Equal(t, tc.others, others, tc.session)
			require.Equal(t, tc.self, self, tc.session)
			return nil
		}))
	}
}

// TestActiveSessionsCountsResumingAnswers: a parked session whose answer was admitted
// (MarkResuming) counts from the send's commit until a worker moves it on from the stop reason
// it was parked with; an archived one is never run again and does not count.
func TestActiveSessionsCountsResumingAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	parked := json.RawMessage(`{"type":"requires_action","event_ids":["sevt_call"]}`)
	setRow := func(id, status string, stop json.RawMessage) {
		t.Helper()
		_, err := f.st.db.Exec(ctx, `UPDATE sessions SET status = $2, stop_reason = $3 WHERE id = $1`, id, status, stop)
		require.NoError(t, err)
	}
	markResuming := func(id string) {
		t.Helper()
		require.NoError(t, f.st.InTx(ctx, func(q *Queries) error {
			w := q.Writes(id, 0)
			w.MarkResuming()
			return w.Flush(ctx)
		}))
	}
	resuming, reparked, ended, resumedRunning, archived, unmarked :=
		f.newSession(t), f.newSession(t), f.newSession(t), f.newSession(t), f.newSession(t), f.newSession(t)
	for _, id := range []string{resuming, reparked, ended, resumedRunning, archived, unmarked} {
		setRow(id, "idle", parked)
	}
	for _, id := range []string{resuming, reparked, ended, resumedRunning, archived} {
		markResuming(id)
	}
	// What a worker does next: park again on the calls that still wait, end the turn, run it.
	setRow(reparked, "idle", json.RawMessage(`{"type":"requires_action","event_ids":["sevt_other"]}`))
	setRow(ended, "idle", json.RawMessage(`{"type":"end_turn"}`))
	setRow(resumedRunning, "running", parked)
	_, err := f.st.db.Exec(ctx, `UPDATE sessions SET archived_at = now() WHERE id = $1`, archived)
	require.NoError(t, err)

	for _, tc := range []struct {
		name    string
		session string
		others  int
		self    bool
	}{
		{"an admitted answer not yet picked up", resuming, 1, true},
		{"re-parked by the worker", reparked, 2, false},
		{"its turn ended", ended, 2, false},
		{"running (counted once)", resumedRunning, 1, true},
		{"archived", archived, 2, false},
		{"parked, no answer admitted", unmarked, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, f.st.InTx(ctx, func(q *Queries) error {
				others, self, err := q.ActiveSessions(ctx, f.ws, tc.session)
				require.NoError(t, err)
				require.Equal(t, tc.others, others)
				require.Equal(t, tc.self, self)
				return nil
			}))
		})
	}
}

// TestAnsweredCalls: the calls of the current turn that clients answered, by any kind of
// answer; answers from before the turn's start are not read.
func TestAnsweredCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := f.newSession(t)
	_, err := f.st.AppendEvents(ctx, id, []NewEvent{
		{Type: "user.custom_tool_result", Body: json.RawMessage(`{"custom_tool_use_id":"sevt_old","content":[]}`), Processed: true},
		{Type: "user.message", Body: benchBody, Processed: true},
		{Type: "user.custom_tool_result", Body: json.RawMessage(`{"custom_tool_use_id":"sevt_custom","content":[]}`), Processed: true},
		{Type: "user.tool_confirmation", Body: json.RawMessage(`{"tool_use_id":"sevt_confirmed","result":"deny"}`), Processed: true},
		{Type: "user.tool_result", Body: json.RawMessage(`{"tool_use_id":"sevt_result","content":[]}`), Processed: true},
		{Type: "agent.tool_result", Body: json.RawMessage(`{"tool_use_id":"sevt_agent","content":[]}`), Processed: true},
	}, time.Now())
	require.NoError(t, err)
	_, err = f.st.db.Exec(ctx, `UPDATE sessions SET turn_start_seq = 2 WHERE id = $1`, id)
	require.NoError(t, err)

	for _, tc := range []struct {
		name  string
		calls []string
		want  map[string]bool
	}{
		{"every kind of client answer", []string{"sevt_custom", "sevt_confirmed", "sevt_result"},
			map[string]bool{"sevt_custom": true, "sevt_confirmed": true, "sevt_result": true}},
		{"unanswered", []string{"sevt_none", "sevt_custom"}, map[string]bool{"sevt_custom": true}},
		{"not a client's answer", []string{"sevt_agent"}, map[string]bool{}},
		{"before the turn", []string{"sevt_old"}, map[string]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.st.AnsweredCalls(ctx, id, tc.calls)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestInsertBindingWithin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	binding := func(sessionID string) Binding {
		return Binding{SessionID: sessionID, Provider: "local", Name: "sb-" + sessionID, SpecHash: "h", State: BindingPending}
	}
	a, b := f.newSession(t), f.newSession(t)
	require.NoError(t, f.st.InsertBindingWithin(ctx, binding(a), 1))
	err := f.st.InsertBindingWithin(ctx, binding(b), 1)
	var quota *QuotaError
	require.ErrorAs(t, err, &quota)
	require.Equal(t, QuotaError{WorkspaceID: f.ws, What: "sandboxes", Count: 1, Max: 1}, *quota)
	_, err = f.st.GetBinding(ctx, b)
	require.ErrorIs(t, err, ErrNotFound, "nothing was written")

	require.ErrorIs(t, f.st.InsertBindingWithin(ctx, binding(a), 1), ErrDuplicate, "the session's own binding is not counted against it")
	require.NoError(t, f.st.InsertBindingWithin(ctx, binding(b), 0), "0 is no quota")
	require.ErrorIs(t, f.st.InsertBindingWithin(ctx, binding(ids.New(ids.Session)), 5), ErrReferenced)

	// Expired sandboxes count no more; other workspaces never did.
	for _, sid := range []string{a, b} {
		require.NoError(t, f.st.MarkBindingReady(ctx, sid, "ext-"+sid))
		require.NoError(t, f.st.MarkBindingExpired(ctx, sid))
	}
	require.NoError(t, f.st.InsertBindingWithin(ctx, binding(f.newSession(t)), 1))
	g := newFixtureOn(t, f.st)
	require.NoError(t, f.st.InsertBindingWithin(ctx, binding(g.newSession(t)), 1))
}

// TestInsertBindingWithinConcurrent: workers acquiring sandboxes for many sessions of one
// workspace at once make exactly the quota.
func TestInsertBindingWithinConcurrent(t *testing.T) {
	t.Parallel()
	f := newFixtureOn(t, openStore(t, withPoolSize(migratedURL(t), 12)))
	const quota, sessions = 3, 12
	sids := make([]string, sessions)
	for i := range sids {
		sids[i] = f.newSession(t)
	}
	var made atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for _, sid := range sids {
		wg.Go(func() {
			err := f.st.InsertBindingWithin(context.Background(), Binding{SessionID: sid, Provider: "local", Name: sid, SpecHash: "h", State: BindingPending}, quota)
			var q *QuotaError
			switch {
			case err == nil:
				made.Add(1)
			case !errors.As(err, &q):
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, quota, made.Load())
}

// BenchmarkTakeRequest is the cost the request limiter adds to every request: one statement.
// "same key" is the worst case, every request contending for one row; "own keys" is many
// clients.
func BenchmarkTakeRequest(b *testing.B) {
	st := openStore(b, withPoolSize(migratedURL(b), 16))
	ctx := context.Background()
	b.Run("baseline SELECT 1", func(b *testing.B) {
		// The round trip alone, for comparison.
		for b.Loop() {
			if _, err := st.db.Exec(ctx, `SELECT 1`); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("serial", func(b *testing.B) {
		key := ids.New(ids.APIKey)
		for b.Loop() {
			if _, err := st.TakeRequest(ctx, key, time.Microsecond, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel same key", func(b *testing.B) {
		key := ids.New(ids.APIKey)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := st.TakeRequest(ctx, key, time.Microsecond, 1<<20); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("parallel own keys", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			key := ids.New(ids.APIKey)
			for pb.Next() {
				if _, err := st.TakeRequest(ctx, key, time.Microsecond, 1<<20); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkAcquireStreamLease is the cost of opening a stream under a cap (acquire and
// release).
func BenchmarkAcquireStreamLease(b *testing.B) {
	st := newStore(b)
	ctx := context.Background()
	key := ids.New(ids.APIKey)
	for b.Loop() {
		id := ids.New("lease_")
		ok, err := st.AcquireStreamLease(ctx, key, id, 100, time.Minute)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		if err := st.ReleaseStreamLease(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
