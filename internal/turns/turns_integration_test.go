//go:build integration

package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/pgtest"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// engine is a turn engine on a fresh database with one idle session.
type engine struct {
	st      *store.Store
	svc     *Service
	session string
}

func newEngine(t testing.TB) engine {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.Migrate(ctx, logger))
	ws, err := st.CreateWorkspace(ctx, "turns")
	require.NoError(t, err)
	agentID, envID, sessionID := ids.New(ids.Agent), ids.New(ids.Environment), ids.New(ids.Session)
	now := time.Now()
	require.NoError(t, st.InsertAgent(ctx, agentID, ws, json.RawMessage(`{"name":"a","model":"m"}`), now))
	require.NoError(t, st.InsertEnvironment(ctx, store.EnvironmentRecord{
		ID: envID, WorkspaceID: ws, Name: "env", Config: json.RawMessage(`{}`), Scope: "workspace", CreatedAt: now}))
	usage, err := json.Marshal(wire.ZeroUsage())
	require.NoError(t, err)
	require.NoError(t, st.InsertSession(ctx, store.SessionRecord{
		ID: sessionID, WorkspaceID: ws, AgentID: agentID, AgentVersion: 1, EnvironmentID: envID,
		Agent: json.RawMessage(`{"name":"helper"}`), Status: wire.SessionStatusIdle, Usage: usage, CreatedAt: now}))
	return engine{st: st, svc: New(st, logger), session: sessionID}
}

// send queues a user.message as a client would.
func (e engine) send(t testing.TB) {
	t.Helper()
	body, err := wire.EncodeBody(wire.EventUserMessage, wire.MessageBody{Content: []wire.ContentBlock{}})
	require.NoError(t, err)
	require.NoError(t, e.st.InTx(context.Background(), func(q *store.Queries) error {
		_, err := q.AppendEvents(context.Background(), e.session, []store.NewEvent{{Type: wire.EventUserMessage, Body: body}}, time.Now())
		return err
	}))
}

// respond appends a model response without tool calls (extra agent.messages pad the turn),
// as the agent loop would through the worker's emitter.
func (e engine) respond(t testing.TB, inputTokens int64, extraMessages int) {
	t.Helper()
	start := ids.New(ids.Event)
	evs := []agent.NewEvent{{ID: start, Type: wire.EventSpanModelRequestStart, Body: wire.EmptyBody}}
	for range extraMessages {
		raw, err := wire.EncodeBody(wire.EventAgentMessage, wire.AgentMessageBody{Content: wire.NewTextBlocks("words")})
		require.NoError(t, err)
		evs = append(evs, agent.NewEvent{ID: ids.New(ids.Event), Type: wire.EventAgentMessage, Body: raw})
	}
	end, err := wire.EncodeBody(wire.EventSpanModelRequestEnd, wire.SpanModelRequestEndBody{
		ModelRequestStartID: start, ModelUsage: wire.ModelUsage{InputTokens: inputTokens, OutputTokens: 1}})
	require.NoError(t, err)
	evs = append(evs, agent.NewEvent{ID: ids.New(ids.Event), Type: wire.EventSpanModelRequestEnd, Body: end})
	_, err = e.svc.Emitter(e.session).Emit(context.Background(), evs)
	require.NoError(t, err)
}

// open sends a message and opens its turn (Advance), whose next step is a model call.
func (e engine) open(t testing.TB) Turn {
	t.Helper()
	e.send(t)
	open, err := e.svc.Advance(context.Background(), e.session)
	require.NoError(t, err)
	require.Equal(t, agent.StepModel, open.Step.Kind)
	return open
}

// turn runs one whole turn: send, Advance (opens it), respond, Advance (closes it).
func (e engine) turn(t testing.TB, inputTokens int64, extraMessages int) Turn {
	t.Helper()
	ctx := context.Background()
	e.open(t)
	e.respond(t, inputTokens, extraMessages)
	closed, err := e.svc.Advance(ctx, e.session)
	require.NoError(t, err)
	require.Equal(t, agent.StepEnd, closed.Step.Kind)
	return closed
}

func lastOfType(t testing.TB, evs []wire.Event, typ string) wire.Event {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i]
		}
	}
	t.Fatalf("no %s in the log", typ)
	return wire.Event{}
}

func TestTurnsReadOnlyTheirWindowAndUsageAccumulates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEngine(t)

	first := e.turn(t, 10, 0)
	u, err := wire.DecodeBody[wire.SessionUsageBody](lastOfType(t, first.History, wire.EventSessionUsage))
	require.NoError(t, err)
	require.EqualValues(t, 10, u.Usage.InputTokens)

	second := e.turn(t, 32, 3)
	u, err = wire.DecodeBody[wire.SessionUsageBody](lastOfType(t, second.History, wire.EventSessionUsage))
	require.NoError(t, err)
	require.EqualValues(t, 42, u.Usage.InputTokens, "usage is the session's, across turns")
	require.EqualValues(t, 2, u.Usage.OutputTokens)

	// The second turn's window: status_running, thread running, the message, the response
	// (start, 3 messages, end), thread idle, usage, idle. Nothing of the first turn.
	loaded, err := e.svc.LoadTurn(ctx, e.session)
	require.NoError(t, err)
	require.Len(t, loaded.History, 11)
	require.Equal(t, wire.EventSessionStatusRunning, loaded.History[0].Type)
	require.Equal(t, agent.StepEnd, loaded.Step.Kind)
	whole, err := e.svc.LoadConversation(ctx, e.session)
	require.NoError(t, err)
	require.Len(t, whole.Conversation, 8+11, "the conversation is the whole log")
	require.Equal(t, loaded.History, whole.History, "a model request plans from the same turn part")

	// A message queued during the turn is still seen: it opens the next turn.
	e.send(t)
	next, err := e.svc.Advance(ctx, e.session)
	require.NoError(t, err)
	require.Equal(t, agent.StepModel, next.Step.Kind)
	msg := lastOfType(t, next.History, wire.EventUserMessage)
	require.NotNil(t, msg.ProcessedAt)
	require.Equal(t, wire.EventSessionStatusRunning, next.History[0].Type)
	require.Len(t, next.History, 3, "a new window: status_running, thread running, the delivered message")
}

func TestAdvanceWithAnOldSessionReadsTheWholeLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEngine(t)
	e.turn(t, 5, 0)
	// As a session from before turn windows: no window, so the whole log is the turn.
	require.NoError(t, e.st.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.LockSession(ctx, e.session)
		if err != nil {
			return err
		}
		w := q.Writes(e.session, rec.LastSeq)
		w.SetTurnWindow(store.TurnWindow{})
		return w.Flush(ctx)
	}))
	second := e.turn(t, 7, 0)
	u, err := wire.DecodeBody[wire.SessionUsageBody](lastOfType(t, second.History, wire.EventSessionUsage))
	require.NoError(t, err)
	require.EqualValues(t, 12, u.Usage.InputTokens, "usage of the whole log")
}

// BenchmarkStepLogRead compares what one step reads on a 2,000-event session: the whole log
// and the planner over it (what every step did before turn windows), and the current turn's
// window (LoadTurn, what ToolCall, RejectTools and StopAtCap read now). Advance reads the
// window too.
func BenchmarkStepLogRead(b *testing.B) {
	ctx := context.Background()
	e := newEngine(b)
	for range 200 {
		e.turn(b, 1, 1) // 10 events a turn
	}
	var total int
	require.NoError(b, e.st.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE session_id = $1`, e.session).Scan(&total))
	b.Logf("session log: %d events", total)
	b.Run("whole-log", func(b *testing.B) {
		for b.Loop() {
			err := e.st.InTx(ctx, func(q *store.Queries) error {
				h, err := q.History(ctx, e.session)
				if err != nil {
					return err
				}
				_, err = agent.Next(h)
				return err
			})
			require.NoError(b, err)
		}
	})
	b.Run("turn-window", func(b *testing.B) {
		for b.Loop() {
			_, err := e.svc.LoadTurn(ctx, e.session)
			require.NoError(b, err)
		}
	})
	b.Run("advance", func(b *testing.B) {
		for b.Loop() {
			_, err := e.svc.Advance(ctx, e.session)
			require.NoError(b, err)
		}
	})
	// What a model request reads and projects: the whole conversation, from the cache and the
	// database (one new turn since the last read, as between two turns) or from the database
	// alone.
	b.Run("conversation-cached", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			log, err := agent.DecodeLog(mustHistory(b, e)[:total-10])
			require.NoError(b, err)
			proj, _ := (*agent.Projection)(nil).Extend(log)
			e.svc.conv.put(e.session, log, proj)
			b.StartTimer()
			turn, err := e.svc.LoadConversation(ctx, e.session)
			require.NoError(b, err)
			require.NotEmpty(b, turn.Projection.Messages())
		}
	})
	// The steady state: the kept conversation was itself extended by the request before, so
	// it has room and the new turn is appended in place (conversation-cached measures the
	// first request after a put, which copies what is kept once).
	b.Run("conversation-extended", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			log, err := agent.DecodeLog(mustHistory(b, e))
			require.NoError(b, err)
			proj, _ := (*agent.Projection)(nil).Extend(log[:total-20])
			e.svc.conv.put(e.session, log[:total-20], proj)
			kept, _, proj := e.svc.conv.get(e.session)
			proj, _ = proj.Extend(log[total-20 : total-10])
			_, ok := e.svc.conv.extend(e.session, kept, log[total-20:total-10], proj)
			require.True(b, ok)
			b.StartTimer()
			turn, err := e.svc.LoadConversation(ctx, e.session)
			require.NoError(b, err)
			require.NotEmpty(b, turn.Projection.Messages())
		}
	})
	b.Run("conversation-uncached", func(b *testing.B) {
		uncached := New(e.st, slog.New(slog.NewTextHandler(io.Discard, nil)), WithConversationCache(0))
		for b.Loop() {
			turn, err := uncached.LoadConversation(ctx, e.session)
			require.NoError(b, err)
			require.NotEmpty(b, turn.Projection.Messages())
		}
	})
}

func eventsOf(conv []agent.Decoded) []wire.Event {
	out := make([]wire.Event, len(conv))
	for i, d := range conv {
		out[i] = d.Event
	}
	return out
}

func mustHistory(t testing.TB, e engine) []wire.Event {
	h, err := e.st.History(context.Background(), e.session)
	require.NoError(t, err)
	return h
}

// A step that outlives its turn (a model call cut off by an interrupt) can append its span
// after the turn finished; the next turn's base counts it, as the whole-log sum did.
func TestUsageOfASpanAfterTheFinishIsKept(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	e.turn(t, 10, 0)
	e.respond(t, 5, 0) // late: after the first turn's idle
	second := e.turn(t, 1, 0)
	u, err := wire.DecodeBody[wire.SessionUsageBody](lastOfType(t, second.History, wire.EventSessionUsage))
	require.NoError(t, err)
	require.EqualValues(t, 16, u.Usage.InputTokens)
}

// A step that failed for good ends its turn: session.error exhausted, then the next Advance
// closes the turn idle with retries_exhausted, and the session takes the next message. A
// second FailTurn (a retry after a lost reply) records nothing more.
func TestFailTurnEndsTheTurnIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEngine(t)
	e.open(t)

	cause := errors.New("append events: unsupported Unicode escape sequence (SQLSTATE 22P05)")
	require.NoError(t, e.svc.FailTurn(ctx, e.session, cause))
	require.NoError(t, e.svc.FailTurn(ctx, e.session, cause))
	closed, err := e.svc.Advance(ctx, e.session)
	require.NoError(t, err)
	require.Equal(t, agent.StepEnd, closed.Step.Kind)

	var errs []wire.SessionErrorBody
	for _, ev := range closed.History {
		if ev.Type == wire.EventSessionError {
			b, err := wire.DecodeBody[wire.SessionErrorBody](ev)
			require.NoError(t, err)
			errs = append(errs, b)
		}
	}
	require.Len(t, errs, 1, "one session.error for the failed turn")
	require.Equal(t, wire.SessionErrorUnknown, errs[0].Error.Type)
	require.Equal(t, wire.RetryStatusExhausted, errs[0].Error.RetryStatus.Type)
	require.Contains(t, errs[0].Error.Message, "22P05")
	idle, err := wire.DecodeBody[wire.StatusIdleBody](lastOfType(t, closed.History, wire.EventSessionStatusIdle))
	require.NoError(t, err)
	require.Equal(t, wire.StopRetriesExhausted, idle.StopReason.Type)
	rec, err := e.st.GetSessionByID(ctx, e.session)
	require.NoError(t, err)
	require.Equal(t, wire.SessionStatusIdle, rec.Status)

	// Idle now: failing again changes nothing, and the next message opens a new turn.
	require.NoError(t, e.svc.FailTurn(ctx, e.session, cause))
	e.send(t)
	next, err := e.svc.Advance(ctx, e.session)
	require.NoError(t, err)
	require.Equal(t, agent.StepModel, next.Step.Kind)
}

// TestConversationCacheReadsWhatTheLogHolds: LoadConversation, which reads only what was
// appended since its cache's last read of the session, returns the whole log as the store
// has it after every kind of change: appended turns, a client event queued below the seqs it
// keeps and later delivered to the end of the log, and with no cache at all.
func TestConversationCacheReadsWhatTheLogHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEngine(t)
	uncached := New(e.st, slog.New(slog.NewTextHandler(io.Discard, nil)), WithConversationCache(0))
	check := func(what string) Turn {
		t.Helper()
		whole, err := e.svc.LoadConversation(ctx, e.session)
		require.NoError(t, err, what)
		want, err := e.st.History(ctx, e.session)
		require.NoError(t, err)
		require.Equal(t, want, eventsOf(whole.Conversation), what)
		// The turn's part, found by seq in the kept and fresh events, is the whole log's.
		require.Equal(t, append([]wire.Event{}, agent.TurnPart(want, whole.TurnStartSeq)...),
			append([]wire.Event{}, whole.History...), what)
		fresh, err := uncached.LoadConversation(ctx, e.session)
		require.NoError(t, err)
		// The projection, extended turn by turn in the cache, is the whole log's.
		require.Equal(t, agent.ProjectDecoded(whole.Conversation), whole.Projection.Messages(), what)
		require.Equal(t, fresh.Projection.Messages(), whole.Projection.Messages(), what)
		fresh.Projection, whole.Projection = nil, nil
		require.Equal(t, fresh, whole, what)
		return whole
	}

	e.turn(t, 3, 1)
	check("after a turn")
	_, upTo, _ := e.svc.conv.get(e.session)
	require.Positive(t, upTo, "the first read kept the session's processed events")

	e.turn(t, 4, 2)
	check("after a second turn")

	// A message sent while a turn runs waits queued below the events that follow it.
	e.send(t)
	open, err := e.svc.Advance(ctx, e.session)
	require.NoError(t, err)
	require.Equal(t, agent.StepModel, open.Step.Kind)
	e.send(t)
	e.respond(t, 5, 1)
	whole := check("with a queued message among kept events")
	queued := slices.IndexFunc(whole.History, func(ev wire.Event) bool { return ev.ProcessedAt == nil })
	require.GreaterOrEqual(t, queued, 0)
	_, upTo, _ = e.svc.conv.get(e.session)
	require.Greater(t, upTo, whole.History[queued].Seq, "the queued message sits below what is kept")
	queuedID := whole.History[queued].ID
	check("read again: the queued message comes from below what is kept")

	// The turn ends and the next one delivers the message: it moves to the end of the log.
	next, err := e.svc.Advance(ctx, e.session)
	require.NoError(t, err)
	require.Equal(t, agent.StepModel, next.Step.Kind)
	whole = check("after the queued message was delivered")
	delivered := lastOfType(t, whole.History, wire.EventUserMessage)
	require.Equal(t, queuedID, delivered.ID, "the delivered message is the log's last")
	require.NotNil(t, delivered.ProcessedAt)
	require.Equal(t, agent.StepModel, whole.Step.Kind, "planned from the turn's part of the log")
	w, err := e.st.GetTurnWindow(ctx, e.session)
	require.NoError(t, err)
	require.Equal(t, w.StartSeq, whole.TurnStartSeq)
	require.Greater(t, whole.TurnStartSeq, whole.Conversation[0].Event.Seq)
	require.Equal(t, w.StartSeq, whole.History[0].Seq, "History is the turn's part")

	// A session that is gone is forgotten.
	_, err = e.st.Pool().Exec(ctx, `UPDATE sessions SET archived_at = now() WHERE id = $1`, e.session)
	require.NoError(t, err)
	_, err = e.svc.LoadConversation(ctx, e.session)
	require.ErrorIs(t, err, ErrSessionGone)
	kept, _, _ := e.svc.conv.get(e.session)
	require.Nil(t, kept)
}

// response is a model response without tool calls, not yet in the log.
func response(t testing.TB, start string) []agent.NewEvent {
	t.Helper()
	msg, err := wire.EncodeBody(wire.EventAgentMessage, wire.AgentMessageBody{Content: wire.NewTextBlocks("done")})
	require.NoError(t, err)
	end, err := wire.EncodeBody(wire.EventSpanModelRequestEnd, wire.SpanModelRequestEndBody{
		ModelRequestStartID: start, ModelUsage: wire.ModelUsage{InputTokens: 5, OutputTokens: 1}})
	require.NoError(t, err)
	return []agent.NewEvent{
		{ID: ids.New(ids.Event), Type: wire.EventAgentMessage, Body: msg},
		{ID: ids.New(ids.Event), Type: wire.EventSpanModelRequestEnd, Body: end},
	}
}

func TestAdvanceAppendingCommitsTheResponseWithTheTurnsEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEngine(t)
	e.open(t)
	start := ids.New(ids.Event)
	_, err := e.svc.Emitter(e.session).Emit(ctx, []agent.NewEvent{{ID: start, Type: wire.EventSpanModelRequestStart, Body: wire.EmptyBody}})
	require.NoError(t, err)

	held := response(t, start)
	closed, committed, err := e.svc.AdvanceAppending(ctx, e.session, held)
	require.NoError(t, err)
	require.Equal(t, agent.StepEnd, closed.Step.Kind, "the appended response ends the turn in the same transaction")
	require.Len(t, committed, len(held))
	for i, ev := range committed {
		require.Equal(t, held[i].ID, ev.ID, "the pre-assigned ids are kept")
		require.NotNil(t, ev.ProcessedAt)
	}
	require.Equal(t, committed[0].Seq+1, committed[1].Seq)

	// The log holds exactly what the transaction said: the response, then the turn's end.
	log, err := e.st.History(ctx, e.session)
	require.NoError(t, err)
	types := make([]string, 0, 5)
	for _, ev := range log[len(log)-5:] {
		types = append(types, ev.Type)
	}
	require.Equal(t, []string{wire.EventAgentMessage, wire.EventSpanModelRequestEnd,
		wire.EventSessionThreadStatusIdle, wire.EventSessionUsage, wire.EventSessionStatusIdle}, types)
	for i, ev := range log[len(log)-5 : len(log)-3] {
		require.Equal(t, committed[i].ID, ev.ID)
		require.Equal(t, committed[i].Seq, ev.Seq, "the seqs returned are the ones committed")
	}
	u, err := wire.DecodeBody[wire.SessionUsageBody](lastOfType(t, log, wire.EventSessionUsage))
	require.NoError(t, err)
	require.EqualValues(t, 5, u.Usage.InputTokens, "the turn's usage counts the appended span")
	loaded, err := e.svc.LoadTurn(ctx, e.session)
	require.NoError(t, err)
	require.Equal(t, positions(loaded.History), positions(closed.History), "the returned turn is what a read finds")
}

// positions are the ids, types and seqs of evs, which a read gives back exactly (a body's JSON
// and a time's location may differ in form).
func positions(evs []wire.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = fmt.Sprintf("%d %s %s", ev.Seq, ev.Type, ev.ID)
	}
	return out
}

func TestAdvanceAppendingToAnEndedSessionAppendsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEngine(t)
	e.open(t)
	require.NoError(t, e.svc.Terminate(ctx, e.session, "ended for the test"))
	before, err := e.st.History(ctx, e.session)
	require.NoError(t, err)

	_, committed, err := e.svc.AdvanceAppending(ctx, e.session, response(t, ids.New(ids.Event)))
	require.ErrorIs(t, err, ErrSessionGone)
	require.Empty(t, committed)
	after, err := e.st.History(ctx, e.session)
	require.NoError(t, err)
	require.Equal(t, before, after, "nothing of the response was written")
}
