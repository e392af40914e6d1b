//go:build integration

package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestAppendEventsAssignsSeqsIDsAndProcessedAt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	sid := f.newSession(t)

	start := micros(time.Now())
	appends := []struct {
		at  time.Time
		evs []NewEvent
	}{
		{start, []NewEvent{
			{Type: "user.message", Body: json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`)},
			{Type: "session.status_running", Processed: true},
			{Type: "agent.message", Body: json.RawMessage(`{"content":[]}`), Processed: true},
		}},
		{start.Add(time.Second), []NewEvent{{Type: "user.interrupt"}, {Type: "session.status_idle", Processed: true}}},
	}
	var all []wire.Event
	seen := map[string]bool{}
	for _, a := range appends {
		got, err := f.st.AppendEvents(ctx, sid, a.evs, a.at)
		require.NoError(t, err)
		require.Len(t, got, len(a.evs))
		for i, in := range a.evs {
			e := got[i]
			require.Equal(t, int64(len(all)+1), e.Seq, "seqs start at 1 and continue across appends")
			require.True(t, ids.HasPrefix(e.ID, ids.Event), "id %q", e.ID)
			require.False(t, seen[e.ID], "id %q repeats", e.ID)
			seen[e.ID] = true
			require.Equal(t, in.Type, e.Type)
			require.True(t, a.at.Equal(e.CreatedAt), "seq %d created_at", e.Seq)
			if in.Processed {
				requireSameTime(t, &a.at, e.ProcessedAt, fmt.Sprintf("seq %d processed_at", e.Seq))
			} else {
				require.Nil(t, e.ProcessedAt, "seq %d is queued", e.Seq)
			}
			all = append(all, e)
		}
	}
	require.JSONEq(t, `{}`, string(all[1].Body), "a missing body is stored as an empty object")

	stored, hasMore, err := f.st.ListEvents(ctx, sid, EventListParams{Limit: 100})
	require.NoError(t, err)
	require.False(t, hasMore)
	requireSameEvents(t, all, stored)

	sess, err := f.st.GetSession(ctx, f.ws, sid, false)
	require.NoError(t, err)
	require.Equal(t, int64(len(all)), sess.LastSeq)
}

func TestAppendEventsEdgeCases(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	sid := f.newSession(t)

	t.Run("no events writes nothing", func(t *testing.T) {
		got, err := f.st.AppendEvents(ctx, sid, nil, time.Now())
		require.NoError(t, err)
		require.Empty(t, got)
		sess, err := f.st.GetSession(ctx, f.ws, sid, false)
		require.NoError(t, err)
		require.Zero(t, sess.LastSeq)
	})
	t.Run("unknown session", func(t *testing.T) {
		_, err := f.st.AppendEvents(ctx, ids.New(ids.Session), []NewEvent{{Type: "user.message"}}, time.Now())
		require.ErrorIs(t, err, ErrNotFound)
	})
	t.Run("a rolled back append leaves no gap", func(t *testing.T) {
		errRollback := errors.New("rollback")
		err := f.st.InTx(ctx, func(q *Queries) error {
			_, err := q.AppendEvents(ctx, sid, []NewEvent{{Type: "user.message"}, {Type: "user.message"}}, time.Now())
			require.NoError(t, err)
			return errRollback
		})
		require.ErrorIs(t, err, errRollback)
		got, err := f.st.AppendEvents(ctx, sid, []NewEvent{{Type: "user.message"}}, time.Now())
		require.NoError(t, err)
		require.Equal(t, []int64{1}, seqsOf(got))
	})
}

// Bodies jsonb cannot store (a NUL escape, a lone surrogate, invalid UTF-8) are appended with
// U+FFFD in their place, and what AppendEvents returns is what a read returns; without it the
// append fails with SQLSTATE 22P05 (or 22021, 22P02) and a step retries it forever.
func TestAppendEventsStoresBodiesJSONBRejects(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	sid := f.newSession(t)
	cases := []struct {
		name, body, want string
	}{
		{name: "NUL escape", body: `{"text":"a\u0000b"}`, want: "a\uFFFDb"},
		{name: "lone surrogate escape", body: `{"text":"a\ud800b"}`, want: "a\uFFFDb"},
		{name: "invalid UTF-8", body: "{\"text\":\"a\xffb\"}", want: "a\uFFFDb"},
		{name: "escaped backslash stays text", body: `{"text":"a\\u0000b"}`, want: `a\u0000b`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.st.AppendEvents(ctx, sid, []NewEvent{{Type: "agent.tool_result", Body: json.RawMessage(tc.body), Processed: true}}, time.Now())
			require.NoError(t, err)
			read, err := f.st.GetEvent(ctx, sid, got[0].ID)
			require.NoError(t, err)
			for _, e := range []wire.Event{got[0], read} {
				var b struct{ Text string }
				require.NoError(t, json.Unmarshal(e.Body, &b))
				require.Equal(t, tc.want, b.Text)
			}
		})
	}
}

// Appends to one session from many transactions at once must serialize on the session row:
// the log ends up exactly 1..total, and each writer got back the seqs that were stored.
func TestAppendEventsConcurrentIsGapFree(t *testing.T) {
	t.Parallel()
	const writers, appendsEach = 8, 15
	st := openStore(t, withPoolSize(migratedURL(t), writers))
	f := newFixtureOn(t, st)
	ctx := t.Context()
	sid := f.newSession(t)

	var mu sync.Mutex
	returned := map[string]int64{}
	total := 0
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		batch := 1 + w%3
		total += batch * appendsEach
		wg.Go(func() {
			for range appendsEach {
				err := st.InTx(ctx, func(q *Queries) error {
					evs := make([]NewEvent, batch)
					for i := range evs {
						evs[i] = NewEvent{Type: "agent.message", Body: json.RawMessage(fmt.Sprintf(`{"writer":%d}`, w))}
					}
					got, err := q.AppendEvents(ctx, sid, evs, time.Now())
					if err != nil {
						return err
					}
					mu.Lock()
					defer mu.Unlock()
					for _, e := range got {
						returned[e.ID] = e.Seq
					}
					return nil
				})
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for w, err := range errs {
		require.NoError(t, err, "writer %d", w)
	}

	stored, more, err := st.EventsAfter(ctx, sid, 0, total+1)
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, stored, total)
	for i, e := range stored {
		require.Equal(t, int64(i+1), e.Seq, "the log is 1..%d without gaps or duplicates", total)
		require.Equal(t, returned[e.ID], e.Seq, "event %s was stored at the seq its writer got", e.ID)
	}
	require.Len(t, returned, total)
	sess, err := st.GetSession(ctx, f.ws, sid, false)
	require.NoError(t, err)
	require.Equal(t, int64(total), sess.LastSeq)
}

// eventLog is a session whose events have distinct types and processed_at times, and the
// events as AppendEvents returned them (the model the queries are checked against).
type eventLog struct {
	f      fixture
	sid    string
	events []wire.Event
	base   time.Time
}

var logTypes = []string{"user.message", "agent.message", "agent.tool_use"}

// newEventLog appends n events one per call, one second apart; every fourth stays queued.
func newEventLog(t *testing.T, n int) eventLog {
	t.Helper()
	f := newFixture(t)
	l := eventLog{f: f, sid: f.newSession(t), base: micros(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))}
	for i := range n {
		got, err := f.st.AppendEvents(t.Context(), l.sid, []NewEvent{{
			Type: logTypes[i%len(logTypes)], Body: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Processed: i%4 != 3,
		}}, l.at(i))
		require.NoError(t, err)
		l.events = append(l.events, got...)
	}
	return l
}

func (l eventLog) at(i int) time.Time { return l.base.Add(time.Duration(i) * time.Second) }

func ptr[T any](v T) *T { return &v }

// expect filters and orders the model as ListEvents should.
func (l eventLog) expect(p EventListParams) []wire.Event {
	var out []wire.Event
	for _, e := range l.events {
		if len(p.Types) > 0 && !slices.Contains(p.Types, e.Type) {
			continue
		}
		if !inWindow(e.ProcessedAt, p.ProcessedGT, p.ProcessedGTE, p.ProcessedLT, p.ProcessedLTE) {
			continue
		}
		if p.AfterSeq > 0 && (!p.Desc && e.Seq <= p.AfterSeq || p.Desc && e.Seq >= p.AfterSeq) {
			continue
		}
		out = append(out, e)
	}
	if p.Desc {
		slices.Reverse(out)
	}
	return out
}

// inWindow mirrors SQL: with any bound set, a null time matches nothing.
func inWindow(at, gt, gte, lt, lte *time.Time) bool {
	if gt == nil && gte == nil && lt == nil && lte == nil {
		return true
	}
	if at == nil {
		return false
	}
	return (gt == nil || at.After(*gt)) && (gte == nil || !at.Before(*gte)) &&
		(lt == nil || at.Before(*lt)) && (lte == nil || !at.After(*lte))
}

func TestListEvents(t *testing.T) {
	t.Parallel()
	const n = 24
	l := newEventLog(t, n)
	cases := []struct {
		name string
		p    EventListParams
	}{
		{"asc", EventListParams{}},
		{"desc", EventListParams{Desc: true}},
		{"asc after seq", EventListParams{AfterSeq: 10}},
		{"desc after seq", EventListParams{Desc: true, AfterSeq: 10}},
		{"after the last seq", EventListParams{AfterSeq: n}},
		{"one type", EventListParams{Types: []string{"agent.message"}}},
		{"two types desc", EventListParams{Desc: true, Types: []string{"user.message", "agent.tool_use"}}},
		{"unknown type", EventListParams{Types: []string{"session.deleted"}}},
		{"processed gt", EventListParams{ProcessedGT: ptr(l.at(5))}},
		{"processed gte", EventListParams{ProcessedGTE: ptr(l.at(5))}},
		{"processed lt", EventListParams{ProcessedLT: ptr(l.at(10))}},
		{"processed lte", EventListParams{ProcessedLTE: ptr(l.at(10))}},
		{"processed window with types desc after seq", EventListParams{
			Desc: true, AfterSeq: 20, Types: []string{"agent.message", "user.message"},
			ProcessedGTE: ptr(l.at(2)), ProcessedLT: ptr(l.at(17)),
		}},
	}
	for _, tc := range cases {
		for _, limit := range []int{1, 5, 100} {
			t.Run(fmt.Sprintf("%s/limit=%d", tc.name, limit), func(t *testing.T) {
				t.Parallel()
				p := tc.p
				p.Limit = limit
				requireSameEvents(t, l.expect(p), walkEvents(t, l, p))
			})
		}
	}
}

// walkEvents follows AfterSeq page by page, checking each page's size and more flag.
func walkEvents(t *testing.T, l eventLog, p EventListParams) []wire.Event {
	t.Helper()
	var all []wire.Event
	for {
		page, more, err := l.f.st.ListEvents(t.Context(), l.sid, p)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), p.Limit)
		all = append(all, page...)
		require.Equal(t, len(l.expect(p)) > len(page), more, "more says whether rows remain after the page")
		if !more {
			return all
		}
		require.Len(t, page, p.Limit, "only the last page is short")
		p.AfterSeq = page[len(page)-1].Seq
	}
}

func TestEventsAfter(t *testing.T) {
	t.Parallel()
	const n = 12
	l := newEventLog(t, n)
	cases := []struct {
		after     int64
		limit     int
		wantFirst int64
		wantLen   int
		wantMore  bool
	}{
		{after: 0, limit: 5, wantFirst: 1, wantLen: 5, wantMore: true},
		{after: 5, limit: 5, wantFirst: 6, wantLen: 5, wantMore: true},
		{after: n - 5, limit: 5, wantFirst: n - 4, wantLen: 5, wantMore: false},
		{after: n - 2, limit: 5, wantFirst: n - 1, wantLen: 2, wantMore: false},
		{after: n, limit: 5, wantLen: 0, wantMore: false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("after=%d/limit=%d", tc.after, tc.limit), func(t *testing.T) {
			t.Parallel()
			got, more, err := l.f.st.EventsAfter(t.Context(), l.sid, tc.after, tc.limit)
			require.NoError(t, err)
			require.Equal(t, tc.wantMore, more)
			requireSameEvents(t, l.events[tc.after:tc.after+int64(tc.wantLen)], got)
			if tc.wantLen > 0 {
				require.Equal(t, tc.wantFirst, got[0].Seq)
			}
		})
	}
}

func TestGetEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	mine, other := f.newSession(t), f.newSession(t)
	evs, err := f.st.AppendEvents(ctx, mine, []NewEvent{{Type: "user.message", Body: json.RawMessage(`{"k":"v"}`)}}, micros(time.Now()))
	require.NoError(t, err)
	otherEvs, err := f.st.AppendEvents(ctx, other, []NewEvent{{Type: "user.message"}}, time.Now())
	require.NoError(t, err)

	got, err := f.st.GetEvent(ctx, mine, evs[0].ID)
	require.NoError(t, err)
	requireSameEvents(t, evs, []wire.Event{got})

	for name, id := range map[string]string{"another session's event": otherEvs[0].ID, "unknown id": ids.New(ids.Event)} {
		t.Run(name, func(t *testing.T) {
			_, err := f.st.GetEvent(ctx, mine, id)
			require.ErrorIs(t, err, ErrNotFound)
		})
	}
}

func TestEventReferencing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	sid, other := f.newSession(t), f.newSession(t)
	confirm := func(sessionID, toolUseID, result string) wire.Event {
		got, err := f.st.AppendEvents(ctx, sessionID, []NewEvent{{
			Type: "user.tool_confirmation", Body: json.RawMessage(fmt.Sprintf(`{"tool_use_id":%q,"result":%q}`, toolUseID, result)),
		}}, micros(time.Now()))
		require.NoError(t, err)
		return got[0]
	}
	_, err := f.st.AppendEvents(ctx, sid, []NewEvent{
		{Type: "agent.tool_use", Body: json.RawMessage(`{"id":"tu_1"}`)},
		{Type: "agent.tool_use", Body: json.RawMessage(`{"id":"tu_2"}`)},
	}, time.Now())
	require.NoError(t, err)
	confirm(other, "tu_2", "deny")
	first := confirm(sid, "tu_1", "allow")
	confirm(sid, "tu_1", "deny")

	got, err := f.st.EventReferencing(ctx, sid, []string{"user.tool_confirmation", "user.custom_tool_result"}, "tool_use_id", "tu_1")
	require.NoError(t, err)
	requireSameEvents(t, []wire.Event{first}, []wire.Event{got})

	cases := []struct {
		name  string
		types []string
		field string
		id    string
	}{
		{"only in another session", []string{"user.tool_confirmation"}, "tool_use_id", "tu_2"},
		{"type not asked for", []string{"user.custom_tool_result"}, "tool_use_id", "tu_1"},
		{"other field", []string{"user.tool_confirmation"}, "custom_tool_use_id", "tu_1"},
		{"unknown id", []string{"user.tool_confirmation"}, "tool_use_id", "tu_9"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.st.EventReferencing(ctx, sid, tc.types, tc.field, tc.id)
			require.ErrorIs(t, err, ErrNotFound)
		})
	}
}

func countEvents(t testing.TB, st *Store, sessionID string) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool().QueryRow(t.Context(), `SELECT count(*) FROM events WHERE session_id = $1`, sessionID).Scan(&n))
	return n
}

func TestDeleteSessionCascadesItsEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	doomed, kept := f.newSession(t), f.newSession(t)
	for _, sid := range []string{doomed, kept} {
		_, err := f.st.AppendEvents(ctx, sid, []NewEvent{{Type: "user.message"}, {Type: "agent.message"}}, time.Now())
		require.NoError(t, err)
	}

	require.NoError(t, f.st.DeleteSession(ctx, doomed))
	_, err := f.st.GetSession(ctx, f.ws, doomed, false)
	require.ErrorIs(t, err, ErrNotFound)
	require.Zero(t, countEvents(t, f.st, doomed))
	require.Equal(t, 2, countEvents(t, f.st, kept))
}

func TestDeleteSessionWithSandboxBindingIsReferenced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	sid := f.newSession(t)
	_, err := f.st.AppendEvents(ctx, sid, []NewEvent{{Type: "user.message"}}, time.Now())
	require.NoError(t, err)
	_, err = f.st.Pool().Exec(ctx, `INSERT INTO sandbox_bindings (session_id, provider, external_id, spec_hash) VALUES ($1, 'fake', 'sbx-1', 'h')`, sid)
	require.NoError(t, err)

	err = f.st.DeleteSession(ctx, sid)
	require.ErrorIs(t, err, ErrReferenced)
	_, err = f.st.GetSession(ctx, f.ws, sid, false)
	require.NoError(t, err, "the refused delete removed nothing")
	require.Equal(t, 1, countEvents(t, f.st, sid))

	_, err = f.st.Pool().Exec(ctx, `DELETE FROM sandbox_bindings WHERE session_id = $1`, sid)
	require.NoError(t, err)
	require.NoError(t, f.st.DeleteSession(ctx, sid))
	require.Zero(t, countEvents(t, f.st, sid))
}

// A sink that ends pages early (the API's byte bound) still walks the whole log: every
// event once, in order, more true exactly while events remain, whatever the batch sizes
// StreamEvents picks from MaxBytes.
func TestStreamEventsSinkStops(t *testing.T) {
	t.Parallel()
	const n = 24
	l := newEventLog(t, n)
	cases := []struct {
		name      string
		p         EventListParams
		stopAfter int // the sink stops after this many events of a page
	}{
		{"asc stop after 1", EventListParams{Limit: 10, MaxBytes: 1}, 1},
		{"asc stop after 3 batched", EventListParams{Limit: 10, MaxBytes: 64}, 3},
		{"asc stop after 7 no byte hint", EventListParams{Limit: 10}, 7},
		{"desc stop after 2", EventListParams{Limit: 10, MaxBytes: 40, Desc: true}, 2},
		{"types stop after 2", EventListParams{Limit: 10, MaxBytes: 40, Types: []string{"agent.message", "user.message"}}, 2},
		{"limit before stop", EventListParams{Limit: 4, MaxBytes: 1 << 20}, 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			want := l.expect(p)
			var all []wire.Event
			for {
				var page []wire.Event
				more, err := l.f.st.StreamEvents(t.Context(), l.sid, p, func(e wire.Event) (bool, error) {
					page = append(page, e)
					return len(page) >= tc.stopAfter, nil
				})
				require.NoError(t, err)
				require.LessOrEqual(t, len(page), min(p.Limit, tc.stopAfter))
				all = append(all, page...)
				require.Equal(t, len(want) > len(all), more, "more says whether events remain after the page")
				if !more {
					break
				}
				p.AfterSeq = page[len(page)-1].Seq
			}
			requireSameEvents(t, want, all)
		})
	}
}

// TestAppendToLive: the append and the liveness check are one statement; an archived or
// terminated session gets nothing appended and no seq used, an unknown one is not found.
func TestAppendToLive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	evs := []NewEvent{{Type: "agent.message", Body: json.RawMessage(`{"content":[]}`), Processed: true}}
	tests := []struct {
		name  string
		end   string // SQL that ends the session, if any
		want  error
		count int
	}{
		{name: "live", count: 1},
		{name: "archived", end: `UPDATE sessions SET archived_at = now() WHERE id = $1`, want: ErrSessionEnded},
		{name: "terminated", end: `UPDATE sessions SET status = 'terminated' WHERE id = $1`, want: ErrSessionEnded},
		{name: "deleted", end: `DELETE FROM sessions WHERE id = $1`, want: ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sid := f.newSession(t)
			if tt.end != "" {
				_, err := f.st.Pool().Exec(ctx, tt.end, sid)
				require.NoError(t, err)
			}
			got, err := f.st.AppendToLive(ctx, sid, evs, time.Now())
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
				require.Empty(t, got)
			} else {
				require.NoError(t, err)
				require.Len(t, got, 1)
				require.EqualValues(t, 1, got[0].Seq)
			}
			var n int
			require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE session_id = $1`, sid).Scan(&n))
			require.Equal(t, tt.count, n)
			if tt.end != "" && tt.want == ErrSessionEnded {
				var last int64
				require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT last_seq FROM sessions WHERE id = $1`, sid).Scan(&last))
				require.Zero(t, last, "no seq was used")
			}
		})
	}
}
