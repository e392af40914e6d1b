package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Event types of the session lifecycle that wire has no constant for.
const (
	eventThreadStatusRunning = "session.thread_status_running"
	eventThreadStatusIdle    = "session.thread_status_idle"
)

// ErrSessionGone is returned to the worker when the session was deleted, archived or
// terminated under it: there is nothing left to run.
var ErrSessionGone = errors.New("session is gone or terminated")

// Turn is what the worker needs for the next step of a session's current turn.
type Turn struct {
	// Step is the next step, decided from the log (agent.Next) after the lifecycle
	// bookkeeping of Advance. StepEnd and StepPark mean: nothing to do until clients act.
	Step          agent.Step
	Agent         wire.SessionAgent
	History       []wire.Event
	EnvironmentID string
}

// Advance does a session's lifecycle bookkeeping in one transaction and returns the next step
// of its turn. Everything is derived from the log and the session row, so calling it again
// after a crash repeats nothing:
//   - a queued user.interrupt is delivered first (it jumps the queue);
//   - a turn that has ended or parked is closed: thread idle, session.usage, session.status_idle
//     with its stop reason (a partial answer re-emits idle with the remaining ids);
//   - queued user.messages start the next turn (session.status_running, thread running, then
//     the messages, delivered), or join a running turn before its next model request;
//   - answers that unblock a parked turn, and a retry after rescheduling, mark it running.
func (s *Service) Advance(ctx context.Context, sessionID string) (Turn, error) {
	var out Turn
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := lockLive(ctx, q, sessionID)
		if err != nil {
			return err
		}
		t := &turnTx{s: s, q: q, rec: rec, now: s.now(), lastSeq: rec.LastSeq}
		if err := t.load(ctx); err != nil {
			return err
		}
		if err := t.advance(ctx); err != nil {
			return err
		}
		if t.dirty {
			if err := q.UpdateSession(ctx, t.rec); err != nil {
				return err
			}
		}
		out = Turn{Step: t.step, History: t.history, EnvironmentID: rec.EnvironmentID}
		return json.Unmarshal(rec.Agent, &out.Agent)
	})
	return out, err
}

// lockLive locks a session the worker may still act on: ErrSessionGone once it was deleted,
// archived or terminated.
func lockLive(ctx context.Context, q *store.Queries, sessionID string) (store.SessionRecord, error) {
	rec, err := q.LockSession(ctx, sessionID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return store.SessionRecord{}, ErrSessionGone
		}
		return store.SessionRecord{}, err
	}
	if rec.ArchivedAt != nil || rec.Status == wire.SessionStatusTerminated {
		return store.SessionRecord{}, ErrSessionGone
	}
	return rec, nil
}

// turnTx is one Advance transaction. It reads the log once: it holds the session's row lock,
// so nobody else appends, and it applies its own writes to history as the store makes them.
type turnTx struct {
	s       *Service
	q       *store.Queries
	rec     store.SessionRecord
	now     time.Time
	history []wire.Event
	// lastSeq is the session's last_seq as the transaction's writes left it.
	lastSeq int64
	step    agent.Step
	dirty   bool
}

func (t *turnTx) load(ctx context.Context) error {
	h, err := t.q.History(ctx, t.rec.ID)
	if err != nil {
		return err
	}
	t.history = h
	return t.plan()
}

func (t *turnTx) plan() (err error) {
	t.step, err = agent.Next(t.history)
	return err
}

func (t *turnTx) advance(ctx context.Context) error {
	active := t.rec.Status == wire.SessionStatusRunning || t.rec.Status == wire.SessionStatusRescheduling
	if active {
		// Interrupts jump the queue: every queued one applies now, so what is left queued
		// afterwards is only messages.
		if ids := queuedOfType(t.history, wire.EventUserInterrupt); len(ids) > 0 {
			if err := t.deliver(ctx, ids); err != nil {
				return err
			}
		}
	}
	switch t.step.Kind {
	case agent.StepEnd:
		// A session created with initial events is running before any turn was logged:
		// there is nothing to close then. A parked turn closed by an interrupt (applied on
		// receipt while idle) is closed in the status events too.
		parkedButClosed := t.rec.Status == wire.SessionStatusIdle && stopType(t.rec.StopReason) == agent.StopRequiresAction
		if (active && runningInLog(t.history)) || parkedButClosed {
			if err := t.finish(ctx, t.step.StopReason, nil); err != nil {
				return err
			}
		}
		queued := queuedClientEvents(t.history)
		if !hasType(t.history, queued, wire.EventUserMessage) {
			return nil
		}
		if err := t.markRunning(ctx); err != nil {
			return err
		}
		if err := t.deliver(ctx, queued); err != nil {
			return err
		}
		if t.step.Kind == agent.StepEnd {
			// The delivered events opened and closed a turn at once: never leave the
			// session running with nothing to run.
			return t.finish(ctx, t.step.StopReason, nil)
		}
		return nil
	case agent.StepPark:
		if t.rec.Status != wire.SessionStatusIdle || !sameStop(t.rec.StopReason, agent.StopRequiresAction, t.step.EventIDs) {
			return t.finish(ctx, agent.StopRequiresAction, t.step.EventIDs)
		}
		return nil
	default:
		if t.rec.Status != wire.SessionStatusRunning {
			if err := t.markRunning(ctx); err != nil {
				return err
			}
		}
		if t.step.Kind == agent.StepModel {
			// A message sent while the turn runs joins it before the next model request.
			if queued := queuedClientEvents(t.history); hasType(t.history, queued, wire.EventUserMessage) {
				return t.deliver(ctx, queued)
			}
		}
		return nil
	}
}

// deliver moves queued client events to the end of the log, processed, then re-plans.
func (t *turnTx) deliver(ctx context.Context, eventIDs []string) error {
	if err := t.q.DeliverEvents(ctx, t.rec.ID, eventIDs, t.now); err != nil {
		return err
	}
	t.history = moveDelivered(t.history, eventIDs, t.lastSeq, storedTime(t.now))
	t.lastSeq += int64(len(eventIDs))
	return t.plan()
}

// moveDelivered does to history what store.DeliverEvents did to the log (it succeeds only if
// every event was queued): the events move to the end in the order given, with the next seqs
// and processed_at set.
func moveDelivered(history []wire.Event, eventIDs []string, lastSeq int64, at time.Time) []wire.Event {
	pos := make(map[string]int, len(eventIDs))
	for i, id := range eventIDs {
		pos[id] = i
	}
	out := make([]wire.Event, 0, len(history))
	moved := make([]wire.Event, len(eventIDs))
	for _, ev := range history {
		i, ok := pos[ev.ID]
		if !ok {
			out = append(out, ev)
			continue
		}
		processed := at
		ev.Seq, ev.ProcessedAt = lastSeq+int64(i)+1, &processed
		moved[i] = ev
	}
	return append(out, moved...)
}

// storedTime is t as PostgreSQL keeps it, so history matches what a read would return.
func storedTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func (t *turnTx) emit(ctx context.Context, evs ...store.NewEvent) error {
	for i := range evs {
		evs[i].Processed = true
	}
	appended, err := t.q.AppendEvents(ctx, t.rec.ID, evs, t.now)
	if err != nil {
		return err
	}
	t.history = append(t.history, appended...)
	t.lastSeq = appended[len(appended)-1].Seq
	return t.plan()
}

// markRunning emits session.status_running and the primary thread's running event.
func (t *turnTx) markRunning(ctx context.Context) error {
	t.rec.Status, t.rec.StopReason, t.rec.UpdatedAt, t.dirty = wire.SessionStatusRunning, nil, t.now, true
	return t.emit(ctx,
		store.NewEvent{Type: wire.EventSessionStatusRunning, Body: json.RawMessage(`{}`)},
		store.NewEvent{Type: eventThreadStatusRunning, Body: mustJSON(t.threadFields())},
	)
}

// finish closes the turn: thread idle, session.usage (always right before the idle), idle.
func (t *turnTx) finish(ctx context.Context, reason string, eventIDs []string) error {
	stop := stopReason{Type: reason, EventIDs: eventIDs}
	usage, err := t.sessionUsage()
	if err != nil {
		return err
	}
	thread := t.threadFields()
	thread["stop_reason"], thread["stop_details"] = stop, nil
	if t.rec.Status != wire.SessionStatusIdle {
		t.rec.ActiveSeconds += t.now.Sub(lastRunningAt(t.history, t.now)).Seconds()
	}
	usage.ActiveSeconds = t.rec.ActiveSeconds
	t.rec.Status, t.rec.StopReason, t.rec.Usage, t.rec.UpdatedAt, t.dirty = wire.SessionStatusIdle, mustJSON(stop), mustJSON(usage), t.now, true
	return t.emit(ctx,
		store.NewEvent{Type: eventThreadStatusIdle, Body: mustJSON(thread)},
		store.NewEvent{Type: wire.EventSessionUsage, Body: mustJSON(map[string]any{"usage": usage, "budget": nil})},
		store.NewEvent{Type: wire.EventSessionStatusIdle, Body: mustJSON(map[string]any{"stop_reason": stop, "stop_details": nil})},
	)
}

// sessionUsage is the session's cumulative usage, summed from the log's model spans.
func (t *turnTx) sessionUsage() (wire.Usage, error) {
	u, err := agent.LogUsage(t.history)
	if err != nil {
		return wire.Usage{}, err
	}
	out := wire.ZeroUsage()
	out.InputTokens, out.OutputTokens, out.CacheReadInputTokens = u.InputTokens, u.OutputTokens, u.CacheReadInputTokens
	out.CacheCreation.Ephemeral5mInputTokens = u.CacheCreationInputTokens
	return out, nil
}

func (t *turnTx) threadFields() map[string]any {
	var agent struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(t.rec.Agent, &agent) // the snapshot was validated when stored
	return map[string]any{"session_thread_id": ids.PrimaryThread(t.rec.ID), "agent_name": agent.Name}
}

type stopReason struct {
	Type     string   `json:"type"`
	EventIDs []string `json:"event_ids,omitempty"`
}

func sameStop(raw json.RawMessage, reason string, eventIDs []string) bool {
	var s stopReason
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil || s.Type != reason || len(s.EventIDs) != len(eventIDs) {
		return false
	}
	for i := range eventIDs {
		if s.EventIDs[i] != eventIDs[i] {
			return false
		}
	}
	return true
}

// queuedClientEvents lists undelivered client events in log order.
func queuedClientEvents(history []wire.Event) []string {
	var out []string
	for _, ev := range history {
		if ev.ProcessedAt == nil && (ev.Type == wire.EventUserMessage || ev.Type == wire.EventUserInterrupt) {
			out = append(out, ev.ID)
		}
	}
	return out
}

// queuedOfType lists undelivered events of one type in log order.
func queuedOfType(history []wire.Event, typ string) []string {
	var out []string
	for _, ev := range history {
		if ev.ProcessedAt == nil && ev.Type == typ {
			out = append(out, ev.ID)
		}
	}
	return out
}

func stopType(raw json.RawMessage) string {
	var s stopReason
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s.Type
}

func hasType(history []wire.Event, eventIDs []string, typ string) bool {
	want := map[string]bool{}
	for _, id := range eventIDs {
		want[id] = true
	}
	for _, ev := range history {
		if want[ev.ID] && ev.Type == typ {
			return true
		}
	}
	return false
}

// runningInLog reports whether the log's latest status event says running.
func runningInLog(history []wire.Event) bool {
	for i := len(history) - 1; i >= 0; i-- {
		switch history[i].Type {
		case wire.EventSessionStatusRunning, wire.EventSessionStatusRescheduled:
			return true
		case wire.EventSessionStatusIdle:
			return false
		}
	}
	return false
}

func lastRunningAt(history []wire.Event, def time.Time) time.Time {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Type == wire.EventSessionStatusRunning && history[i].ProcessedAt != nil {
			return *history[i].ProcessedAt
		}
	}
	return def
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err)) // only called with plain maps and structs
	}
	return b
}

// WorkerEmitter appends a step's events for the worker; it is the runtime's Emitter. It
// refuses once the session is gone or terminated, so a late step cannot write into a deleted
// or archived session.
type WorkerEmitter struct {
	s         *Service
	sessionID string
}

// Emitter returns the worker's emitter for a session.
func (s *Service) Emitter(sessionID string) *WorkerEmitter {
	return &WorkerEmitter{s: s, sessionID: sessionID}
}

// Emit appends evs, processed, with their pre-assigned ids.
func (e *WorkerEmitter) Emit(ctx context.Context, evs []agent.NewEvent) ([]wire.Event, error) {
	var out []wire.Event
	err := e.s.store.InTx(ctx, func(q *store.Queries) error {
		if _, err := lockLive(ctx, q, e.sessionID); err != nil {
			return err
		}
		news := make([]store.NewEvent, len(evs))
		for i, ev := range evs {
			news[i] = store.NewEvent{ID: ev.ID, Type: ev.Type, Body: ev.Body, Processed: true}
		}
		var err error
		out, err = q.AppendEvents(ctx, e.sessionID, news, e.s.now())
		return err
	})
	return out, err
}

// Reschedule records a transient model failure that will be retried: session.error with
// retry_status retrying, then session.status_rescheduled (API.md §8.1).
func (s *Service) Reschedule(ctx context.Context, sessionID string, cause error) error {
	return s.closeWithError(ctx, sessionID, cause, "retrying", wire.SessionStatusRescheduling, wire.EventSessionStatusRescheduled)
}

// Exhaust records that a turn's model failures are final: session.error with retry_status
// exhausted, which closes the turn; the next Advance goes idle with retries_exhausted.
func (s *Service) Exhaust(ctx context.Context, sessionID string, cause error) error {
	return s.closeWithError(ctx, sessionID, cause, "exhausted", "", "")
}

func (s *Service) closeWithError(ctx context.Context, sessionID string, cause error, retry, status, statusEvent string) error {
	return s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := lockLive(ctx, q, sessionID)
		if err != nil {
			return err
		}
		evs := []store.NewEvent{{Type: wire.EventSessionError, Processed: true, Body: mustJSON(map[string]any{"error": sessionError(cause, retry)})}}
		if statusEvent != "" {
			evs = append(evs, store.NewEvent{Type: statusEvent, Processed: true, Body: json.RawMessage(`{}`)})
		}
		now := s.now()
		if _, err := q.AppendEvents(ctx, sessionID, evs, now); err != nil {
			return err
		}
		if status != "" && rec.Status != status {
			rec.Status, rec.UpdatedAt = status, now
			return q.UpdateSession(ctx, rec)
		}
		return nil
	})
}

// sessionError maps a model failure to the session.error payload of API.md §5.5.
func sessionError(cause error, retry string) map[string]any {
	typ := "unknown_error"
	var me *model.Error
	if errors.As(cause, &me) {
		switch me.Kind {
		case model.ErrOverloaded:
			typ = "model_overloaded_error"
		case model.ErrRateLimited:
			typ = "model_rate_limited_error"
		default:
			typ = "model_request_failed_error"
		}
	}
	return map[string]any{"type": typ, "message": cause.Error(), "retry_status": map[string]string{"type": retry}}
}

// LoadTurn reads what a step works from, without changing anything.
func (s *Service) LoadTurn(ctx context.Context, sessionID string) (Turn, error) {
	rec, err := s.store.GetSessionByID(ctx, sessionID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Turn{}, ErrSessionGone
		}
		return Turn{}, err
	}
	if rec.ArchivedAt != nil || rec.Status == wire.SessionStatusTerminated {
		return Turn{}, ErrSessionGone
	}
	h, err := s.store.History(ctx, sessionID)
	if err != nil {
		return Turn{}, err
	}
	t := Turn{History: h, EnvironmentID: rec.EnvironmentID}
	if err := json.Unmarshal(rec.Agent, &t.Agent); err != nil {
		return Turn{}, fmt.Errorf("decode session agent: %w", err)
	}
	if t.Step, err = agent.Next(h); err != nil {
		return Turn{}, err
	}
	return t, nil
}

// Terminate ends a session on a fatal error (API.md §8.1): session.error with retry_status
// terminal, then the primary thread's and the session's terminated events; the session
// accepts no more events. Terminating twice does nothing.
func (s *Service) Terminate(ctx context.Context, sessionID string, cause string) error {
	return s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.LockSession(ctx, sessionID)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		}
		if rec.Status == wire.SessionStatusTerminated {
			return nil
		}
		now := s.now()
		t := &turnTx{s: s, q: q, rec: rec, now: now}
		thread := t.threadFields()
		evs := []store.NewEvent{
			{Type: wire.EventSessionError, Processed: true, Body: mustJSON(map[string]any{"error": map[string]any{
				"type": "unknown_error", "message": cause, "retry_status": map[string]string{"type": "terminal"}}})},
			{Type: "session.thread_status_terminated", Processed: true, Body: mustJSON(thread)},
			{Type: wire.EventSessionStatusTerminated, Processed: true, Body: json.RawMessage(`{}`)},
		}
		if _, err := q.AppendEvents(ctx, sessionID, evs, now); err != nil {
			return err
		}
		rec.Status, rec.UpdatedAt, rec.TerminatedAt = wire.SessionStatusTerminated, now, &now
		return q.UpdateSession(ctx, rec)
	})
}
