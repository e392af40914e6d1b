package turns

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// turnLog builds logs for the lifecycle tables: events get ids e1, e2, … in order.
type turnLog struct {
	t   *testing.T
	evs []wire.Event
}

var at = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newTurnLog(t *testing.T) *turnLog { return &turnLog{t: t} }

func (l *turnLog) add(typ string, processed bool, body any) *turnLog {
	raw, err := json.Marshal(body)
	require.NoError(l.t, err)
	ev := wire.Event{ID: fmt.Sprintf("e%d", len(l.evs)+1), Type: typ, Body: raw, Seq: int64(len(l.evs) + 1), CreatedAt: at}
	if processed {
		p := at
		ev.ProcessedAt = &p
	}
	l.evs = append(l.evs, ev)
	return l
}

func (l *turnLog) message() *turnLog {
	return l.add(wire.EventUserMessage, true, wire.MessageBody{Content: []wire.ContentBlock{}})
}
func (l *turnLog) queuedMessage() *turnLog {
	return l.add(wire.EventUserMessage, false, wire.MessageBody{Content: []wire.ContentBlock{}})
}
func (l *turnLog) queuedInterrupt() *turnLog {
	return l.add(wire.EventUserInterrupt, false, wire.EmptyBody)
}
func (l *turnLog) interrupt() *turnLog { return l.add(wire.EventUserInterrupt, true, wire.EmptyBody) }
func (l *turnLog) running() *turnLog {
	return l.add(wire.EventSessionStatusRunning, true, wire.EmptyBody)
}
func (l *turnLog) idle(stop string) *turnLog {
	return l.add(wire.EventSessionStatusIdle, true, wire.NewStatusIdleBody(wire.StopReason{Type: stop}))
}

// response logs one model response with the given tool calls (name:permission).
func (l *turnLog) response(calls ...string) *turnLog {
	l.add(wire.EventSpanModelRequestStart, true, wire.EmptyBody)
	start := l.evs[len(l.evs)-1].ID
	for _, c := range calls {
		name, perm, _ := strings.Cut(c, ":")
		l.add(wire.EventAgentToolUse, true, wire.ToolUseBody{Name: name, Input: json.RawMessage(`{}`), EvaluatedPermission: perm})
	}
	return l.add(wire.EventSpanModelRequestEnd, true, wire.SpanModelRequestEndBody{ModelRequestStartID: start})
}

// request logs a model request in flight: a span.model_request_start without an end.
func (l *turnLog) request() *turnLog {
	return l.add(wire.EventSpanModelRequestStart, true, wire.EmptyBody)
}

func (l *turnLog) customCall(names ...string) *turnLog {
	l.add(wire.EventSpanModelRequestStart, true, wire.EmptyBody)
	start := l.evs[len(l.evs)-1].ID
	for _, name := range names {
		l.add(wire.EventAgentCustomToolUse, true, wire.CustomToolUseBody{Name: name, Input: json.RawMessage(`{}`)})
	}
	return l.add(wire.EventSpanModelRequestEnd, true, wire.SpanModelRequestEndBody{ModelRequestStartID: start})
}

func (l *turnLog) confirm(toolUseID, result string) *turnLog {
	return l.add(wire.EventUserToolConfirmation, true, wire.ToolConfirmationBody{ToolUseID: toolUseID, Result: result})
}

func (l *turnLog) customResult(toolUseID string) *turnLog {
	return l.add(wire.EventUserCustomToolResult, true, wire.ResultBody{CustomToolUseID: toolUseID, Content: []wire.ContentBlock{}})
}

func (l *turnLog) sessionError(typ, retry string) *turnLog {
	return l.add(wire.EventSessionError, true, wire.SessionErrorBody{Error: wire.SessionError{Type: typ, RetryStatus: wire.RetryStatus{Type: retry}}})
}

func idleRow(stop string, eventIDs ...string) Row {
	return Row{Status: wire.SessionStatusIdle, Stop: &wire.StopReason{Type: stop, EventIDs: eventIDs}}
}

var (
	runningRow      = Row{Status: wire.SessionStatusRunning}
	reschedulingRow = Row{Status: wire.SessionStatusRescheduling}
	freshIdleRow    = Row{Status: wire.SessionStatusIdle}
)

func TestDecide(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		row  Row
		log  func(*turnLog) *turnLog
		want Action
		step agent.StepKind
	}{
		{
			name: "a new session with nothing queued has nothing to do",
			row:  freshIdleRow, log: func(l *turnLog) *turnLog { return l },
			want: Action{Kind: ActionNone}, step: agent.StepEnd,
		},
		{
			name: "a queued message opens a turn",
			row:  freshIdleRow, log: func(l *turnLog) *turnLog { return l.queuedMessage() },
			want: Action{Kind: ActionOpenTurn, EventIDs: []string{"e1"}}, step: agent.StepEnd,
		},
		{
			name: "a session created with initial events is running before any turn: it opens one, not closes one",
			row:  runningRow, log: func(l *turnLog) *turnLog { return l.queuedMessage().queuedMessage() },
			want: Action{Kind: ActionOpenTurn, EventIDs: []string{"e1", "e2"}}, step: agent.StepEnd,
		},
		{
			name: "queued interrupts and messages of an idle session are delivered in log order with the new turn",
			row:  idleRow(wire.StopEndTurn), log: func(l *turnLog) *turnLog { return l.queuedInterrupt().queuedMessage() },
			want: Action{Kind: ActionOpenTurn, EventIDs: []string{"e1", "e2"}}, step: agent.StepEnd,
		},
		{
			name: "a response without tool calls ends the turn: finish with end_turn",
			row:  runningRow, log: func(l *turnLog) *turnLog { return l.running().message().response() },
			want: Action{Kind: ActionFinish, Stop: wire.StopReason{Type: wire.StopEndTurn}}, step: agent.StepEnd,
		},
		{
			name: "a turn that ended while a message queued is finished before the next one opens",
			row:  runningRow, log: func(l *turnLog) *turnLog { return l.running().message().queuedMessage().response() },
			want: Action{Kind: ActionFinish, Stop: wire.StopReason{Type: wire.StopEndTurn}}, step: agent.StepEnd,
		},
		{
			name: "a finished turn is not finished again",
			row:  idleRow(wire.StopEndTurn), log: func(l *turnLog) *turnLog { return l.running().message().response().idle(wire.StopEndTurn) },
			want: Action{Kind: ActionNone}, step: agent.StepEnd,
		},
		{
			name: "queued interrupts of a running session jump the queue",
			row:  runningRow, log: func(l *turnLog) *turnLog { return l.running().message().queuedMessage().queuedInterrupt() },
			want: Action{Kind: ActionDeliver, EventIDs: []string{"e4"}}, step: agent.StepModel,
		},
		{
			name: "a queued interrupt closes the model request in flight before it is delivered",
			row:  runningRow, log: func(l *turnLog) *turnLog { return l.running().message().request().queuedMessage().queuedInterrupt() },
			want: Action{Kind: ActionCloseRequest, EventIDs: []string{"e3"}}, step: agent.StepModel,
		},
		{
			name: "a model request in flight with nothing queued is left to its step",
			row:  runningRow, log: func(l *turnLog) *turnLog { return l.running().message().request() },
			want: Action{Kind: ActionNone}, step: agent.StepModel,
		},
		{
			name: "an applied interrupt ends the running turn",
			row:  runningRow, log: func(l *turnLog) *turnLog { return l.running().message().interrupt() },
			want: Action{Kind: ActionFinish, Stop: wire.StopReason{Type: wire.StopEndTurn}}, step: agent.StepEnd,
		},
		{
			name: "a message sent while the turn runs joins it before the next model request",
			row:  runningRow, log: func(l *turnLog) *turnLog { return l.running().message().response("bash:allow").queuedMessage() },
			want: Action{Kind: ActionNone}, step: agent.StepExecute,
		},
		{
			name: "a queued message joins a running turn when the model is next",
			row:  runningRow, log: func(l *turnLog) *turnLog { return l.running().message().queuedMessage() },
			want: Action{Kind: ActionDeliver, EventIDs: []string{"e3"}}, step: agent.StepModel,
		},
		{
			name: "a call that asks parks the turn: requires_action on it",
			row:  runningRow, log: func(l *turnLog) *turnLog { return l.running().message().response("bash:ask") },
			want: Action{Kind: ActionFinish, Stop: wire.StopReason{Type: wire.StopRequiresAction, EventIDs: []string{"e4"}}}, step: agent.StepPark,
		},
		{
			name: "a parked turn the row already reports is left alone",
			row:  idleRow(wire.StopRequiresAction, "e4"), log: func(l *turnLog) *turnLog { return l.running().message().response("bash:ask") },
			want: Action{Kind: ActionNone}, step: agent.StepPark,
		},
		{
			name: "a deny of a parked call resumes the turn to answer it with an error first",
			row:  idleRow(wire.StopRequiresAction, "e4", "e5"),
			log: func(l *turnLog) *turnLog {
				return l.running().message().response("bash:ask", "read:ask").confirm("e4", "deny")
			},
			want: Action{Kind: ActionResume}, step: agent.StepReject,
		},
		{
			name: "a partial answer parks again on the calls still waiting",
			row:  idleRow(wire.StopRequiresAction, "e4", "e5"),
			log:  func(l *turnLog) *turnLog { return l.running().message().customCall("a", "b").customResult("e4") },
			want: Action{Kind: ActionFinish, Stop: wire.StopReason{Type: wire.StopRequiresAction, EventIDs: []string{"e5"}}}, step: agent.StepPark,
		},
		{
			name: "an allow resumes the parked turn",
			row:  idleRow(wire.StopRequiresAction, "e4"),
			log:  func(l *turnLog) *turnLog { return l.running().message().response("bash:ask").confirm("e4", "allow") },
			want: Action{Kind: ActionResume}, step: agent.StepExecute,
		},
		{
			name: "a custom tool result resumes the turn for the next model request",
			row:  idleRow(wire.StopRequiresAction, "e4"),
			log:  func(l *turnLog) *turnLog { return l.running().message().customCall("lookup").customResult("e4") },
			want: Action{Kind: ActionResume}, step: agent.StepModel,
		},
		{
			name: "an interrupt applied while parked closes the parked turn",
			row:  idleRow(wire.StopRequiresAction, "e4"),
			log:  func(l *turnLog) *turnLog { return l.running().message().response("bash:ask").interrupt() },
			want: Action{Kind: ActionFinish, Stop: wire.StopReason{Type: wire.StopEndTurn}}, step: agent.StepEnd,
		},
		{
			name: "a custom tool result re-sent after its turn ended opens a turn with nothing to deliver",
			row:  idleRow(wire.StopEndTurn),
			log: func(l *turnLog) *turnLog {
				return l.running().message().customCall("lookup").idle(wire.StopRequiresAction).customResult("e4").
					running().response().idle(wire.StopEndTurn).customResult("e4")
			},
			want: Action{Kind: ActionOpenTurn}, step: agent.StepEnd,
		},
		{
			name: "a re-sent custom tool result whose cycle ran opens nothing more",
			row:  idleRow(wire.StopEndTurn),
			log: func(l *turnLog) *turnLog {
				return l.running().message().customCall("lookup").customResult("e4").response().idle(wire.StopEndTurn).
					customResult("e4").running().idle(wire.StopEndTurn)
			},
			want: Action{Kind: ActionNone}, step: agent.StepEnd,
		},
		{
			name: "a queued message with a re-sent custom tool result opens one turn that delivers the message",
			row:  idleRow(wire.StopEndTurn),
			log: func(l *turnLog) *turnLog {
				return l.running().message().customCall("lookup").customResult("e4").response().idle(wire.StopEndTurn).
					customResult("e4").queuedMessage()
			},
			want: Action{Kind: ActionOpenTurn, EventIDs: []string{"e11"}}, step: agent.StepEnd,
		},
		{
			name: "a custom tool result answering a parked call resumes the turn, it opens none",
			row:  idleRow(wire.StopRequiresAction, "e4"),
			log: func(l *turnLog) *turnLog {
				return l.running().message().customCall("lookup").idle(wire.StopRequiresAction).customResult("e4")
			},
			want: Action{Kind: ActionResume}, step: agent.StepModel,
		},
		{
			name: "a rescheduled turn resumes when its retry is due",
			row:  reschedulingRow,
			log: func(l *turnLog) *turnLog {
				return l.running().message().sessionError(wire.SessionErrorModelOverloaded, wire.RetryStatusRetrying).
					add(wire.EventSessionStatusRescheduled, true, wire.EmptyBody)
			},
			want: Action{Kind: ActionResume}, step: agent.StepModel,
		},
		{
			name: "exhausted model retries end the turn with retries_exhausted",
			row:  runningRow,
			log: func(l *turnLog) *turnLog {
				return l.running().message().sessionError(wire.SessionErrorModelOverloaded, wire.RetryStatusExhausted)
			},
			want: Action{Kind: ActionFinish, Stop: wire.StopReason{Type: wire.StopRetriesExhausted}}, step: agent.StepEnd,
		},
		{
			name: "the round cap ends the turn with retries_exhausted",
			row:  runningRow,
			log: func(l *turnLog) *turnLog {
				return l.running().message().sessionError(wire.SessionErrorToolUseLimitReached, wire.RetryStatusExhausted)
			},
			want: Action{Kind: ActionFinish, Stop: wire.StopReason{Type: wire.StopRetriesExhausted}}, step: agent.StepEnd,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := tc.log(newTurnLog(t)).evs
			got, step, err := Decide(tc.row, log)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.step, step.Kind)
		})
	}
}

// memoryTurn applies lifecycle actions to a row and a log in memory, the way Advance's
// transaction does to the store, so whole settle sequences can be checked.
type memoryTurn struct {
	row Row
	log *turnLog
}

func (m *memoryTurn) apply(t *testing.T, act Action) {
	switch act.Kind {
	case ActionDeliver:
		m.deliver(act.EventIDs)
	case ActionCloseRequest:
		m.log.add(wire.EventSpanModelRequestEnd, true, wire.SpanModelRequestEndBody{ModelRequestStartID: act.EventIDs[0], IsError: true})
	case ActionOpenTurn, ActionResume:
		m.log.running()
		m.row = Row{Status: wire.SessionStatusRunning}
		if act.Kind == ActionOpenTurn {
			m.deliver(act.EventIDs)
		}
	case ActionFinish:
		stop := act.Stop
		m.log.add(wire.EventSessionStatusIdle, true, wire.NewStatusIdleBody(stop))
		m.row = Row{Status: wire.SessionStatusIdle, Stop: &stop}
	default:
		t.Fatalf("cannot apply %q", act.Kind)
	}
}

func (m *memoryTurn) deliver(eventIDs []string) {
	last := m.log.evs[len(m.log.evs)-1].Seq
	m.log.evs = moveDelivered(m.log.evs, eventIDs, last, at)
}

func TestDecideSettles(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		row  Row
		log  func(*turnLog) *turnLog
		want []ActionKind
		step agent.StepKind
		stop *wire.StopReason
	}{
		{
			name: "an ended turn with a queued message: finish, open the next turn, call the model",
			row:  runningRow, log: func(l *turnLog) *turnLog { return l.running().message().queuedMessage().response() },
			want: []ActionKind{ActionFinish, ActionOpenTurn}, step: agent.StepModel,
		},
		{
			name: "a message and an interrupt queued together open a turn that closes at once",
			row:  freshIdleRow, log: func(l *turnLog) *turnLog { return l.queuedMessage().queuedInterrupt() },
			want: []ActionKind{ActionOpenTurn, ActionFinish}, step: agent.StepEnd,
			stop: &wire.StopReason{Type: wire.StopEndTurn},
		},
		{
			name: "an interrupt queued while the model is called: close the request, deliver, finish",
			row:  runningRow, log: func(l *turnLog) *turnLog { return l.running().message().request().queuedInterrupt() },
			want: []ActionKind{ActionCloseRequest, ActionDeliver, ActionFinish}, step: agent.StepEnd,
			stop: &wire.StopReason{Type: wire.StopEndTurn},
		},
		{
			name: "an interrupt queued behind a running turn's message: deliver it, finish the turn",
			row:  runningRow, log: func(l *turnLog) *turnLog { return l.running().message().queuedInterrupt() },
			want: []ActionKind{ActionDeliver, ActionFinish}, step: agent.StepEnd,
			stop: &wire.StopReason{Type: wire.StopEndTurn},
		},
		{
			name: "a custom tool result re-sent after its turn ended: one running → idle cycle with end_turn, no model call",
			row:  idleRow(wire.StopEndTurn),
			log: func(l *turnLog) *turnLog {
				return l.running().message().customCall("lookup").customResult("e4").response().idle(wire.StopEndTurn).customResult("e4")
			},
			want: []ActionKind{ActionOpenTurn, ActionFinish}, step: agent.StepEnd,
			stop: &wire.StopReason{Type: wire.StopEndTurn},
		},
		{
			name: "a parked turn answered with an allow resumes and executes",
			row:  idleRow(wire.StopRequiresAction, "e4"),
			log:  func(l *turnLog) *turnLog { return l.running().message().response("bash:ask").confirm("e4", "allow") },
			want: []ActionKind{ActionResume}, step: agent.StepExecute,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := &memoryTurn{row: tc.row, log: tc.log(newTurnLog(t))}
			var got []ActionKind
			for range maxTransitions {
				act, step, err := Decide(m.row, m.log.evs)
				require.NoError(t, err)
				if act.Kind == ActionNone {
					require.Equal(t, tc.want, got)
					require.Equal(t, tc.step, step.Kind)
					if tc.stop != nil {
						require.Equal(t, tc.stop, m.row.Stop)
					}
					return
				}
				got = append(got, act.Kind)
				m.apply(t, act)
			}
			t.Fatalf("did not settle: %v", got)
		})
	}
}
