package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/catalog"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// ErrSessionGone is returned to the worker when the session was deleted, archived or
// terminated under it: there is nothing left to run.
var ErrSessionGone = errors.New("session is gone or terminated")

// maxTransitions bounds one Advance: a settled lifecycle needs at most a handful (deliver
// interrupts, finish, open a turn, finish it again), so more means a rule loops.
const maxTransitions = 16

// Turn is what the worker needs for the next step of a session's current turn.
type Turn struct {
	// Step is the next step, decided from the log (agent.Next) after the lifecycle
	// bookkeeping of Advance. StepEnd and StepPark mean: nothing to do until clients act.
	Step  agent.Step
	Agent wire.SessionAgent
	// History is the turn's log: the events since the current turn started plus queued
	// client events. LoadConversation's whole log is Conversation.
	History       []wire.Event
	EnvironmentID string
	// Conversation is History decoded for projection (LoadConversation only).
	Conversation []agent.Decoded
	// Projection is Conversation projected (LoadConversation only).
	Projection *agent.Projection
	// TurnStartSeq is where the current (or latest) turn starts in the log: the version of
	// its MCP listing.
	TurnStartSeq int64
	// MCPTools is what the agent's MCP servers listed for the current turn, and MCPListed
	// whether they were listed for it yet (LoadTurn and LoadConversation).
	MCPTools  []agent.MCPServerTools
	MCPListed bool
}

// Advance does a session's lifecycle bookkeeping in one transaction and returns the next step
// of its turn. The transitions are decided by Decide (a pure function of the row and the turn
// log); this loop only applies them. Everything is derived from the log and the session row,
// so calling it again after a crash repeats nothing.
func (s *Service) Advance(ctx context.Context, sessionID string) (Turn, error) {
	turn, _, err := s.AdvanceAppending(ctx, sessionID, nil)
	return turn, err
}

// AdvanceAppending is Advance that first appends evs (processed, with their pre-assigned ids)
// in the same transaction: a step's last events and the bookkeeping they lead to commit
// together, or not at all. It returns the turn and evs as committed: none when they close a
// model request that was closed already (lateClose), a response that came after an
// interrupt cut its request off.
func (s *Service) AdvanceAppending(ctx context.Context, sessionID string, evs []agent.NewEvent) (Turn, []wire.Event, error) {
	var out Turn
	var appended []wire.Event
	var opened int
	var finished []string
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		t, err := s.openTurnTx(ctx, q, sessionID)
		if err != nil {
			return err
		}
		late, err := lateClose(t.log, evs)
		if err != nil {
			return err
		}
		if len(evs) > 0 && !late {
			appended = t.w.Append(workerEvents(evs), t.now)
			t.log = append(t.log, appended...)
		}
		if err := t.settle(); err != nil {
			return err
		}
		if t.dirty {
			t.w.UpdateSession(t.rec)
		}
		// Every write of the transaction goes in one round trip (store.Writes), with the
		// commit.
		if err := t.w.FlushAtCommit(ctx); err != nil {
			return err
		}
		out = Turn{Step: t.step, History: t.log, EnvironmentID: t.rec.EnvironmentID, Agent: t.agent}
		opened, finished = t.opened, t.finished
		return nil
	})
	if err != nil {
		return Turn{}, nil, err
	}
	for range opened {
		s.obs.TurnStarted()
	}
	for _, stop := range finished {
		s.obs.TurnFinished(stop)
	}
	return out, appended, nil
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
	if !live(rec) {
		return store.SessionRecord{}, ErrSessionGone
	}
	return rec, nil
}

// goneIfEnded is the error of a read of a session's log (err) that the worker may act on:
// ErrSessionGone when the session was deleted, archived or terminated.
func goneIfEnded(c store.Conversation, err error) error {
	if errors.Is(err, store.ErrNotFound) || err == nil && !live(c.Session) {
		return ErrSessionGone
	}
	return err
}

func live(rec store.SessionRecord) bool {
	return rec.ArchivedAt == nil && rec.Status != wire.SessionStatusTerminated
}

// turnTx is one Advance transaction. It reads the turn's log once: it holds the session's row
// lock, so nobody else appends, and it applies its own writes to the log as it queues them
// (store.Writes): they are sent together before the commit.
type turnTx struct {
	s     *Service
	w     *store.Writes
	rec   store.SessionRecord
	agent wire.SessionAgent
	win   store.TurnWindow
	now   time.Time
	log   []wire.Event
	step  agent.Step
	dirty bool
	// opened counts the turns this transaction opened, finished the stop reasons of those it
	// closed: reported once it commits.
	opened   int
	finished []string
}

// openTurnTx locks a live session and reads its turn: one batch, one round trip.
func (s *Service) openTurnTx(ctx context.Context, q *store.Queries, sessionID string) (*turnTx, error) {
	c, err := q.LockTurn(ctx, sessionID)
	if err = goneIfEnded(c, err); err != nil {
		return nil, err
	}
	t := &turnTx{s: s, w: q.Writes(sessionID, c.Session.LastSeq), rec: c.Session, win: c.Window, log: c.Events, now: s.now()}
	if t.agent, err = s.decodeAgent(c.Session); err != nil {
		return nil, err
	}
	return t, nil
}

// settle applies lifecycle transitions until Decide has none left. It only queues writes
// (store.Writes), which go with the commit, so none of it needs a context.
func (t *turnTx) settle() error {
	for range maxTransitions {
		row, err := t.row()
		if err != nil {
			return err
		}
		act, step, err := Decide(row, t.log)
		if err != nil {
			return err
		}
		switch act.Kind {
		case ActionNone:
			t.step = step
			return nil
		case ActionDeliver:
			t.deliver(act.EventIDs)
		case ActionCloseRequest:
			err = t.closeRequest(act.EventIDs[0])
		case ActionOpenTurn:
			err = t.openTurn(act.EventIDs)
		case ActionResume:
			err = t.markRunning()
		case ActionFinish:
			err = t.finish(act.Stop)
		default:
			err = fmt.Errorf("unknown lifecycle action %q", act.Kind)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", act.Kind, err)
		}
	}
	return fmt.Errorf("session %s: the lifecycle did not settle within %d transitions", t.rec.ID, maxTransitions)
}

func (t *turnTx) row() (Row, error) {
	r := Row{Status: t.rec.Status}
	if len(t.rec.StopReason) > 0 && string(t.rec.StopReason) != "null" {
		var stop wire.StopReason
		if err := json.Unmarshal(t.rec.StopReason, &stop); err != nil {
			return Row{}, fmt.Errorf("decode stop reason of session %s: %w", t.rec.ID, err)
		}
		r.Stop = &stop
	}
	return r, nil
}

// deliver moves queued client events to the end of the log, processed.
func (t *turnTx) deliver(eventIDs []string) {
	last := t.w.LastSeq()
	t.w.Deliver(eventIDs, t.now)
	t.log = moveDelivered(t.log, eventIDs, last, storedTime(t.now))
}

// closeRequest closes the turn's model request startID as failed (is_error, no usage) right
// before a queued interrupt is delivered (ActionCloseRequest). The log then reads span start,
// span end, user.interrupt, the turn's end: the end closes the request's previews on every
// stream (API.md §5.4), and nothing of the request follows the turn's end.
//
// The step that made the request cannot be trusted to write this end in time. The interrupt
// cancels it and it writes its own failed end (agent.Core.failRequest) on its way out, but the
// Advance that delivers the interrupt need not wait for that: when the workflow's own
// cancellation stops a step running as a local activity, the Temporal Go SDK resolves the
// activity as cancelled as soon as its context is done, without waiting for the function to
// return (localActivityTaskHandler.executeLocalActivityTask answers ErrCanceled on ctx.Done;
// a local activity has no WaitForCancellation), and the workflow goes on to this Advance. So
// the end is written here, in the transaction that delivers the interrupt, under the session's
// row lock, and the step's own end, whenever it comes, finds the request closed and is dropped
// (lateClose). A cut-off call's usage is not known; what a late close would have billed (a
// summary made before the call) is dropped with it.
func (t *turnTx) closeRequest(startID string) error {
	return t.emit(body{wire.EventSpanModelRequestEnd, wire.SpanModelRequestEndBody{ModelRequestStartID: startID, IsError: true}})
}

// lateClose reports whether evs, a step's events, close a model request that is not open in
// log, the current turn's log (with the row locked): their span.model_request_end names a
// start they do not hold themselves, and log has that start with an end already
// (closeRequest), or has it not at all (its turn is over). They are the request's outcome
// arriving after the request was closed — a failed end (agent.Core.failRequest), or a
// response committed just too late — and are dropped whole: a request has one end, and
// nothing of it may follow the end of its turn.
func lateClose(log []wire.Event, evs []agent.NewEvent) (bool, error) {
	startID, err := requestClosedBy(evs)
	if startID == "" || err != nil {
		return false, err
	}
	open := false
	for _, ev := range log {
		switch {
		case ev.Type == wire.EventSpanModelRequestStart && ev.ID == startID:
			open = true
		case ev.Type == wire.EventSpanModelRequestEnd && open:
			end, err := wire.DecodeBody[wire.SpanModelRequestEndBody](ev)
			if err != nil {
				return false, err
			}
			if end.ModelRequestStartID == startID {
				return true, nil
			}
		}
	}
	return !open, nil
}

// requestClosedBy is the model request a step's events close: the start id of their
// span.model_request_end, or "" when they have none or hold its start too (a request opened
// and closed in one batch).
func requestClosedBy(evs []agent.NewEvent) (string, error) {
	i := slices.IndexFunc(evs, func(ev agent.NewEvent) bool { return ev.Type == wire.EventSpanModelRequestEnd })
	if i < 0 {
		return "", nil
	}
	end, err := wire.DecodeBody[wire.SpanModelRequestEndBody](wire.Event{ID: evs[i].ID, Type: evs[i].Type, Body: evs[i].Body})
	if err != nil {
		return "", err
	}
	if slices.ContainsFunc(evs, func(ev agent.NewEvent) bool { return ev.ID == end.ModelRequestStartID }) {
		return "", nil
	}
	return end.ModelRequestStartID, nil
}

// openTurn starts a new turn: its window starts at its session.status_running, with the
// session's usage so far as the base, and the queued events are delivered into it.
func (t *turnTx) openTurn(eventIDs []string) error {
	if err := t.markRunning(); err != nil {
		return err
	}
	t.opened++
	// The base is everything the old window counted, not the usage the last finish recorded:
	// a step that outlived its turn (a model call cut off by an interrupt) could append a span
	// after the finish before such late ends were dropped (lateClose), logs written then keep
	// them, and the whole-log sum always counted them.
	base, cost, err := t.sessionUsage()
	if err != nil {
		return err
	}
	baseRaw, err := encodeBaseUsage(base, cost)
	if err != nil {
		return err
	}
	start := t.w.LastSeq() - 1 // markRunning appended status_running, then thread running
	t.win = store.TurnWindow{StartSeq: start, BaseUsage: baseRaw}
	t.w.SetTurnWindow(t.win)
	t.log = slices.DeleteFunc(t.log, func(ev wire.Event) bool { return ev.Seq < start && ev.ProcessedAt != nil })
	t.deliver(eventIDs)
	return nil
}

// moveDelivered does to history what store.Writes.Deliver does to the log (it succeeds only if
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

// body is one event to append: its type and typed body.
type body struct {
	typ string
	v   any
}

func (t *turnTx) emit(bodies ...body) error {
	evs, err := newEvents(bodies...)
	if err != nil {
		return err
	}
	t.log = append(t.log, t.w.Append(evs, t.now)...)
	return nil
}

// newEvents encodes bodies as processed server events.
func newEvents(bodies ...body) ([]store.NewEvent, error) {
	evs := make([]store.NewEvent, len(bodies))
	for i, b := range bodies {
		raw, err := wire.EncodeBody(b.typ, b.v)
		if err != nil {
			return nil, err
		}
		evs[i] = store.NewEvent{Type: b.typ, Body: raw, Processed: true}
	}
	return evs, nil
}

// markRunning emits session.status_running and the primary thread's running event.
func (t *turnTx) markRunning() error {
	t.rec.Status, t.rec.StopReason, t.rec.UpdatedAt, t.dirty = wire.SessionStatusRunning, nil, t.now, true
	return t.emit(
		body{wire.EventSessionStatusRunning, wire.EmptyBody},
		body{wire.EventSessionThreadStatusRunning, t.thread()},
	)
}

// finish closes the turn: thread idle, session.usage (always right before the idle), idle.
func (t *turnTx) finish(stop wire.StopReason) error {
	usage, _, err := t.sessionUsage()
	if err != nil {
		return err
	}
	thread := t.thread()
	thread.StopReason, thread.StopDetails = &stop, json.RawMessage("null")
	if len(stop.Details) > 0 {
		thread.StopDetails = stop.Details
	}
	if t.rec.Status != wire.SessionStatusIdle {
		t.rec.ActiveSeconds += t.now.Sub(lastRunningAt(t.log, t.now)).Seconds()
	}
	usage.ActiveSeconds = t.rec.ActiveSeconds
	stopRaw, err := wire.EncodeBody("stop_reason", stop)
	if err != nil {
		return err
	}
	usageRaw, err := wire.EncodeBody("usage", usage)
	if err != nil {
		return err
	}
	t.rec.Status, t.rec.StopReason, t.rec.Usage, t.rec.UpdatedAt, t.dirty = wire.SessionStatusIdle, stopRaw, usageRaw, t.now, true
	t.finished = append(t.finished, stop.Type)
	return t.emit(
		body{wire.EventSessionThreadStatusIdle, thread},
		body{wire.EventSessionUsage, wire.NewSessionUsageBody(usage)},
		body{wire.EventSessionStatusIdle, wire.NewStatusIdleBody(stop)},
	)
}

// sessionUsage is the session's cumulative usage: the usage before the current turn plus the
// turn's model spans, with its list cost at the agent's model's prices, exact (the usage's
// list_cost is that, rounded to whole cents).
func (t *turnTx) sessionUsage() (wire.Usage, catalog.Cents, error) {
	priced := t.s.sessionModel(t.agent)
	out, cost, err := decodeBaseUsage(t.win.BaseUsage, priced)
	if err != nil {
		return wire.Usage{}, catalog.Cents{}, fmt.Errorf("decode base usage of session %s: %w", t.rec.ID, err)
	}
	var spans []wire.Event
	for _, ev := range t.log {
		if ev.Seq >= t.win.StartSeq {
			spans = append(spans, ev)
		}
	}
	u, err := agent.LogUsage(spans)
	if err != nil {
		return wire.Usage{}, catalog.Cents{}, err
	}
	out.InputTokens += u.InputTokens
	out.OutputTokens += u.OutputTokens
	out.CacheReadInputTokens += u.CacheReadInputTokens
	out.CacheCreation.Ephemeral5mInputTokens += u.CacheCreationInputTokens
	fetches, searches, err := agent.WebToolUse(spans)
	if err != nil {
		return wire.Usage{}, catalog.Cents{}, err
	}
	out.ServerToolUse.WebFetchRequests += fetches
	out.ServerToolUse.WebSearchRequests += searches
	turnCost, err := requestsCost(priced, spans)
	if err != nil {
		return wire.Usage{}, catalog.Cents{}, err
	}
	cost = cost.Add(turnCost)
	out.ListCost = wireCost(cost)
	return out, cost, nil
}

func (t *turnTx) thread() wire.ThreadStatusBody {
	return threadBody(t.rec.ID, t.agent)
}

func threadBody(sessionID string, a wire.SessionAgent) wire.ThreadStatusBody {
	return wire.ThreadStatusBody{SessionThreadID: ids.PrimaryThread(sessionID), AgentName: a.Name}
}

func lastRunningAt(history []wire.Event, def time.Time) time.Time {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Type == wire.EventSessionStatusRunning && history[i].ProcessedAt != nil {
			return *history[i].ProcessedAt
		}
	}
	return def
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

// Emit appends evs, processed, with their pre-assigned ids, if the session is still live
// (ErrSessionGone otherwise): one statement checks and appends. Events that close a model
// request opened earlier (a failed request's end, agent.Core.failRequest) are appended only
// if the request is still open: an interrupt may have closed it while the step ran
// (turnTx.closeRequest), and then they are dropped (lateClose) and Emit returns nothing.
func (e *WorkerEmitter) Emit(ctx context.Context, evs []agent.NewEvent) ([]wire.Event, error) {
	startID, err := requestClosedBy(evs)
	if err != nil {
		return nil, err
	}
	if startID != "" {
		return e.closeRequest(ctx, evs)
	}
	out, err := e.s.store.AppendToLive(ctx, e.sessionID, workerEvents(evs), e.s.now())
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrSessionEnded) {
		return nil, ErrSessionGone
	}
	return out, err
}

// closeRequest is Emit of events that close a model request opened earlier: under the
// session's row lock, which the Advance that closes a request on an interrupt holds too, it
// reads the turn and appends them unless the request is closed already. The turn is read as
// each Advance reads it; only a failed request's end takes this way, a response is committed
// by AdvanceAppending.
func (e *WorkerEmitter) closeRequest(ctx context.Context, evs []agent.NewEvent) ([]wire.Event, error) {
	var out []wire.Event
	err := e.s.store.InTx(ctx, func(q *store.Queries) error {
		c, err := q.LockTurn(ctx, e.sessionID)
		if err = goneIfEnded(c, err); err != nil {
			return err
		}
		late, err := lateClose(c.Events, evs)
		if err != nil || late {
			return err
		}
		out, err = q.AppendEvents(ctx, e.sessionID, workerEvents(evs), e.s.now())
		return err
	})
	return out, err
}

// workerEvents are a step's events as the store appends them: processed, with their ids.
func workerEvents(evs []agent.NewEvent) []store.NewEvent {
	news := make([]store.NewEvent, len(evs))
	for i, ev := range evs {
		news[i] = store.NewEvent{ID: ev.ID, Type: ev.Type, Body: ev.Body, Private: ev.Private, Processed: true}
	}
	return news
}

// Reschedule records a transient model failure that will be retried: session.error with
// retry_status retrying, then session.status_rescheduled (API.md §8.1).
func (s *Service) Reschedule(ctx context.Context, sessionID string, cause error) error {
	return s.closeWithError(ctx, sessionID, cause, wire.RetryStatusRetrying, wire.SessionStatusRescheduling, wire.EventSessionStatusRescheduled)
}

// Exhaust records that a turn's model failures are final: session.error with retry_status
// exhausted, which closes the turn; the next Advance goes idle with retries_exhausted.
func (s *Service) Exhaust(ctx context.Context, sessionID string, cause error) error {
	return s.closeWithError(ctx, sessionID, cause, wire.RetryStatusExhausted, "", "")
}

// FailTurn ends the current turn after one of its steps failed for good (bad data, a
// constraint, a decode error, or retries that ran out): session.error with retry_status
// exhausted, which closes the turn, so the next Advance goes idle with retries_exhausted
// (API.md §5.5: "this turn is dead … session returns to idle"). The session itself is sound —
// what failed was one step's data — so it stays usable and can be deleted or archived; only a
// failure of this bookkeeping too terminates it. A turn already closed this way is left
// alone, so a retry after a lost reply records one error.
func (s *Service) FailTurn(ctx context.Context, sessionID string, cause error) error {
	return s.store.InTx(ctx, func(q *store.Queries) error {
		c, err := q.LockTurn(ctx, sessionID)
		if err = goneIfEnded(c, err); err != nil {
			return err
		}
		if c.Session.Status == wire.SessionStatusIdle || closedByError(c.Events) {
			return nil
		}
		evs, err := newEvents(body{wire.EventSessionError, wire.SessionErrorBody{Error: sessionError(cause, wire.RetryStatusExhausted)}})
		if err != nil {
			return err
		}
		_, err = q.AppendEvents(ctx, sessionID, evs, s.now())
		return err
	})
}

// closedByError reports whether the turn's latest status event is followed by a session.error
// that ended it (exhausted or terminal).
func closedByError(log []wire.Event) bool {
	for i := len(log) - 1; i >= 0; i-- {
		switch ev := log[i]; ev.Type {
		case wire.EventSessionStatusRunning, wire.EventSessionStatusIdle:
			return false
		case wire.EventSessionError:
			if b, err := wire.DecodeBody[wire.SessionErrorBody](ev); err == nil && b.Error.RetryStatus.Type != wire.RetryStatusRetrying {
				return true
			}
		}
	}
	return false
}

func (s *Service) closeWithError(ctx context.Context, sessionID string, cause error, retry, status, statusEvent string) error {
	return s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := lockLive(ctx, q, sessionID)
		if err != nil {
			return err
		}
		bodies := []body{{wire.EventSessionError, wire.SessionErrorBody{Error: sessionError(cause, retry)}}}
		if statusEvent != "" {
			bodies = append(bodies, body{statusEvent, wire.EmptyBody})
		}
		evs, err := newEvents(bodies...)
		if err != nil {
			return err
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
func sessionError(cause error, retry string) wire.SessionError {
	typ := wire.SessionErrorUnknown
	var me *model.Error
	if errors.As(cause, &me) {
		switch me.Kind {
		case model.ErrOverloaded:
			typ = wire.SessionErrorModelOverloaded
		case model.ErrRateLimited:
			typ = wire.SessionErrorModelRateLimited
		default:
			typ = wire.SessionErrorModelRequestFailed
		}
	}
	return wire.SessionError{Type: typ, Message: cause.Error(), RetryStatus: wire.RetryStatus{Type: retry}}
}

// LoadTurn reads what a step of the current turn works from, without changing anything: the
// turn's log (events since the turn started plus queued client events) and the next step.
// The row, the window and the log are read in one batch, one round trip.
func (s *Service) LoadTurn(ctx context.Context, sessionID string) (Turn, error) {
	c, err := s.store.CurrentTurn(ctx, sessionID)
	if err = goneIfEnded(c, err); err != nil {
		return Turn{}, err
	}
	out := Turn{EnvironmentID: c.Session.EnvironmentID, TurnStartSeq: c.Window.StartSeq, History: c.Events}
	if out.Agent, err = s.decodeAgent(c.Session); err != nil {
		return Turn{}, err
	}
	if len(out.Agent.MCPServers) > 0 {
		if out.MCPTools, out.MCPListed, err = turnListing(ctx, s.store.Queries, sessionID, out.TurnStartSeq); err != nil {
			return Turn{}, err
		}
	}
	if out.Step, err = agent.Next(out.History); err != nil {
		return Turn{}, fmt.Errorf("plan turn: %w", err)
	}
	return out, nil
}

// LoadConversation is LoadTurn with the whole log: what a model request projects into the
// conversation it sends. The step is planned from the turn's part of the log, as LoadTurn
// and Advance plan it. The row, the window and the log above what the conversation cache
// keeps of the session are read in one batch.
func (s *Service) LoadConversation(ctx context.Context, sessionID string) (Turn, error) {
	kept, upTo, keptProj := s.conv.get(sessionID)
	c, err := s.store.ConversationSince(ctx, sessionID, upTo)
	if err = goneIfEnded(c, err); err != nil {
		if errors.Is(err, ErrSessionGone) {
			s.conv.drop(sessionID)
		}
		return Turn{}, err
	}
	fresh, err := agent.DecodeLog(c.Events)
	if err != nil {
		return Turn{}, fmt.Errorf("decode log of %s: %w", sessionID, err)
	}
	out := Turn{EnvironmentID: c.Session.EnvironmentID, TurnStartSeq: c.Window.StartSeq}
	// The events above what is kept are processed and come after it, and projection skips
	// queued ones, so the kept projection extended by fresh is the whole log's.
	proj, projected := keptProj.Extend(fresh)
	extended := false
	if projected {
		out.Conversation, extended = s.conv.extend(sessionID, kept, fresh, proj)
	}
	if !extended {
		out.Conversation = withKept(kept, fresh)
		if !projected {
			proj, _ = (*agent.Projection)(nil).Extend(out.Conversation)
		}
		s.conv.put(sessionID, out.Conversation, proj)
	}
	out.Projection = proj
	// The step plans from the turn's part; only the projection needs the whole log.
	out.History = agent.DecodedTurnPart(out.Conversation, out.TurnStartSeq, fresh)
	if out.Agent, err = s.decodeAgent(c.Session); err != nil {
		return Turn{}, err
	}
	if len(out.Agent.MCPServers) > 0 {
		if out.MCPTools, out.MCPListed, err = turnListing(ctx, s.store.Queries, sessionID, out.TurnStartSeq); err != nil {
			return Turn{}, err
		}
	}
	if out.Step, err = agent.Next(out.History); err != nil {
		return Turn{}, fmt.Errorf("plan turn: %w", err)
	}
	return out, nil
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
		// A self-hosted worker holding the session's work stops with it.
		if err := q.StopSessionWork(ctx, sessionID, true, s.now()); err != nil {
			return err
		}
		a, err := s.decodeAgent(rec)
		if err != nil {
			return err
		}
		evs, err := newEvents(
			body{wire.EventSessionError, wire.SessionErrorBody{Error: wire.SessionError{
				Type: wire.SessionErrorUnknown, Message: cause, RetryStatus: wire.RetryStatus{Type: wire.RetryStatusTerminal}}}},
			body{wire.EventSessionThreadStatusTerminated, threadBody(sessionID, a)},
			body{wire.EventSessionStatusTerminated, wire.EmptyBody},
		)
		if err != nil {
			return err
		}
		now := s.now()
		if _, err := q.AppendEvents(ctx, sessionID, evs, now); err != nil {
			return err
		}
		rec.Status, rec.UpdatedAt, rec.TerminatedAt = wire.SessionStatusTerminated, now, &now
		return q.UpdateSession(ctx, rec)
	})
}

// AbandonDelegated ends a turn whose self-hosted calls no worker answered in time: each call
// still without a result gets an is_error agent.tool_result saying so, then session.error
// (exhausted) closes the turn, and the session's work item stops, all in one transaction. A
// worker that comes later finds the calls answered and runs nothing the model and the user
// were told did not run.
func (s *Service) AbandonDelegated(ctx context.Context, sessionID string, callIDs []string, message string) error {
	return s.store.InTx(ctx, func(q *store.Queries) error {
		c, err := q.LockTurn(ctx, sessionID)
		if err = goneIfEnded(c, err); err != nil {
			return err
		}
		if c.Session.Status == wire.SessionStatusIdle || closedByError(c.Events) {
			return nil
		}
		answered := map[string]bool{}
		for _, ev := range c.Events {
			if ev.Type == wire.EventAgentToolResult || ev.Type == wire.EventUserToolResult {
				if b, err := wire.DecodeBody[wire.ToolResultBody](ev); err == nil {
					answered[b.ToolUseID] = true
				}
			}
		}
		var bodies []body
		for _, id := range callIDs {
			if answered[id] {
				continue
			}
			text := message
			bodies = append(bodies, body{wire.EventAgentToolResult, wire.ToolResultBody{ToolUseID: id, IsError: true,
				Content: []wire.ContentBlock{{Type: "text", Text: &text}}}})
		}
		bodies = append(bodies, body{wire.EventSessionError, wire.SessionErrorBody{Error: sessionError(errors.New(message), wire.RetryStatusExhausted)}})
		evs, err := newEvents(bodies...)
		if err != nil {
			return err
		}
		now := s.now()
		if _, err := q.AppendEvents(ctx, sessionID, evs, now); err != nil {
			return err
		}
		return q.StopSessionWork(ctx, sessionID, true, now)
	})
}
