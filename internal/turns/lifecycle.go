package turns

import (
	"fmt"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// The lifecycle of a session's turns is decided here, purely from the session row's status
// and the turn's log, one action at a time (like agent.Next decides the agent's steps): the
// transaction loop in Advance applies an action, updates the row and the log in memory the way
// the store did, and asks again until the answer is ActionNone. Everything the operator
// mirrors (status, stop reason) follows from these transitions, so they are table-tested
// alone (lifecycle_test.go).

// ActionKind is a lifecycle transition.
type ActionKind string

// Transitions.
const (
	// ActionNone: the lifecycle is settled; Step says what the turn needs next.
	ActionNone ActionKind = "none"
	// ActionDeliver: deliver the queued client events EventIDs (in that order): queued
	// interrupts of a running session, or messages that join a running turn before its next
	// model request.
	ActionDeliver ActionKind = "deliver"
	// ActionCloseRequest: close the turn's model request EventIDs[0] (a
	// span.model_request_start without an end) as failed, before a queued interrupt is
	// delivered: the interrupt cuts the request off, so its end belongs before the
	// user.interrupt, and the step that made the request may not be the one to write it (see
	// turnTx.closeRequest).
	ActionCloseRequest ActionKind = "close_request"
	// ActionOpenTurn: open a new turn (session.status_running, thread running; the turn's
	// window starts here) and deliver EventIDs, the queued client events, in log order. With
	// no EventIDs it is the cycle of a re-sent custom tool result: the turn opens with
	// nothing to do and the next Decide finishes it.
	ActionOpenTurn ActionKind = "open_turn"
	// ActionResume: mark a parked or rescheduled turn running again (status events only).
	ActionResume ActionKind = "resume"
	// ActionFinish: close the turn with Stop (thread idle, session.usage, session.status_idle).
	// A partial answer to a parked turn finishes it again with the calls still waiting.
	ActionFinish ActionKind = "finish"
)

// Action is one lifecycle transition.
type Action struct {
	Kind     ActionKind
	EventIDs []string
	Stop     wire.StopReason
}

// Row is what the lifecycle reads of the session row.
type Row struct {
	Status string
	// Stop is the stop reason of an idle session (nil when running or never run).
	Stop *wire.StopReason
}

// Decide returns the next lifecycle transition of a session whose row is row and whose turn
// log (the events since the current turn's start, plus queued client events) is log, and the
// agent's next step as of that log. It is pure: Advance applies the action and asks again.
//
// The rules, in order:
//   - a running session delivers every queued user.interrupt first (they jump the queue),
//     after closing the turn's model request still in flight (a span.model_request_start
//     without an end: agent.Step.RequestStartID) as failed;
//   - no turn open (agent.StepEnd): a turn the log shows running, or a parked turn closed by
//     an interrupt applied while idle, is finished with the stop reason of the log; then, if a
//     user.message is queued, a new turn opens with every queued client event; otherwise a
//     user.custom_tool_result applied after the turn ended (a re-sent result, API.md §17: no
//     dedupe, one more running → idle cycle) opens a turn that has nothing to do, so it
//     closes at once with end_turn and the model is not called;
//   - the turn is parked on answers (agent.StepPark): it is finished with requires_action on
//     the waiting calls unless the row already says exactly that;
//   - the turn has work (model, execute, reject, cap): a session that is not running resumes;
//     before a model request, queued messages join the turn.
func Decide(row Row, log []wire.Event) (Action, agent.Step, error) {
	step, err := agent.Next(log)
	if err != nil {
		return Action{}, agent.Step{}, fmt.Errorf("plan turn: %w", err)
	}
	active := row.Status == wire.SessionStatusRunning || row.Status == wire.SessionStatusRescheduling
	if active {
		if ids := queued(log, wire.EventUserInterrupt); len(ids) > 0 {
			if step.RequestStartID != "" {
				return Action{Kind: ActionCloseRequest, EventIDs: []string{step.RequestStartID}}, step, nil
			}
			return Action{Kind: ActionDeliver, EventIDs: ids}, step, nil
		}
	}
	switch step.Kind {
	case agent.StepEnd:
		parkedButClosed := row.Status == wire.SessionStatusIdle && row.Stop != nil && row.Stop.Type == wire.StopRequiresAction
		if (active && runningInLog(log)) || parkedButClosed {
			return Action{Kind: ActionFinish, Stop: wire.StopReason{Type: step.StopReason, Details: step.StopDetails}}, step, nil
		}
		if ids := queued(log, wire.EventUserMessage, wire.EventSystemMessage, wire.EventUserInterrupt); hasQueued(log, wire.EventUserMessage) {
			return Action{Kind: ActionOpenTurn, EventIDs: ids}, step, nil
		}
		if !active && resultAfterIdle(log) {
			// Nothing to deliver: the result is processed on receipt. The model is not called
			// because the conversation has nothing new for it: a result the turn already had
			// is not projected again (agent.Project takes a call's first result).
			return Action{Kind: ActionOpenTurn}, step, nil
		}
	case agent.StepPark:
		if row.Status != wire.SessionStatusIdle || row.Stop == nil || !row.Stop.Same(wire.StopRequiresAction, step.EventIDs) {
			return Action{Kind: ActionFinish, Stop: wire.StopReason{Type: wire.StopRequiresAction, EventIDs: step.EventIDs}}, step, nil
		}
	default:
		if row.Status != wire.SessionStatusRunning {
			return Action{Kind: ActionResume}, step, nil
		}
		if step.Kind == agent.StepModel && hasQueued(log, wire.EventUserMessage) {
			return Action{Kind: ActionDeliver, EventIDs: queued(log, wire.EventUserMessage, wire.EventSystemMessage, wire.EventUserInterrupt)}, step, nil
		}
	}
	return Action{Kind: ActionNone}, step, nil
}

// queued lists the undelivered events of the given types in log order.
func queued(log []wire.Event, types ...string) []string {
	var out []string
	for _, ev := range log {
		if ev.ProcessedAt != nil {
			continue
		}
		for _, t := range types {
			if ev.Type == t {
				out = append(out, ev.ID)
				break
			}
		}
	}
	return out
}

func hasQueued(log []wire.Event, typ string) bool { return len(queued(log, typ)) > 0 }

// resultAfterIdle reports whether a user.custom_tool_result was applied after the log's latest
// session.status_idle: an answer to a call whose turn had already ended, which has had no
// running → idle cycle of its own yet.
func resultAfterIdle(log []wire.Event) bool {
	for i := len(log) - 1; i >= 0; i-- {
		switch {
		case log[i].Type == wire.EventSessionStatusIdle:
			return false
		case log[i].Type == wire.EventUserCustomToolResult && log[i].ProcessedAt != nil:
			return true
		}
	}
	return false
}

// runningInLog reports whether the log's latest status event says running.
func runningInLog(log []wire.Event) bool {
	for i := len(log) - 1; i >= 0; i-- {
		switch log[i].Type {
		case wire.EventSessionStatusRunning, wire.EventSessionStatusRescheduled:
			return true
		case wire.EventSessionStatusIdle:
			return false
		}
	}
	return false
}
