package agent

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/tools"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// MaxRounds caps the model calls of one turn: after this many model responses since the
// turn's triggering user.message, the turn stops with tool_use_limit_reached_error.
const MaxRounds = 20

// Stop reasons of a turn (API.md §8.2).
const (
	StopEndTurn          = wire.StopEndTurn
	StopRequiresAction   = wire.StopRequiresAction
	StopRetriesExhausted = wire.StopRetriesExhausted
	StopRefusal          = wire.StopRefusal
)

// StepKind names what the current turn needs next.
type StepKind string

// Kinds of steps.
const (
	// StepModel: call the model (Core.ModelTurn).
	StepModel StepKind = "model"
	// StepExecute: run Step.Calls, allowed built-in calls without a result (Core.ExecuteTool).
	StepExecute StepKind = "execute"
	// StepReject: answer Step.Calls, denied calls, with error results (Core.RejectTools).
	StepReject StepKind = "reject"
	// StepPark: wait for clients to answer Step.EventIDs; the turn stays open.
	StepPark StepKind = "park"
	// StepCap: the round cap is reached; emit the error (Core.StopAtCap).
	StepCap StepKind = "cap"
	// StepEnd: no turn is open; Step.StopReason says how the latest one ended.
	StepEnd StepKind = "end"
)

// Waits reports whether the step needs nothing from the worker until a client event arrives:
// no turn is open (StepEnd) or the open one waits on answers (StepPark).
func (k StepKind) Waits() bool { return k == StepEnd || k == StepPark }

// Step is the next thing the current turn needs, decided from the log alone.
type Step struct {
	Kind StepKind
	// Calls are the tool calls of StepExecute or StepReject, in log order.
	Calls []ToolCall
	// EventIDs are the calls StepPark waits for, in log order.
	EventIDs []string
	// StopReason is set on StepEnd: end_turn (also after an interrupt, and when no turn was
	// ever started), retries_exhausted or refusal.
	StopReason string
	// StopDetails is set on a refusal's StepEnd: {type: "refusal", category, explanation}.
	StopDetails json.RawMessage
	// RequestStartID is set on StepModel when a span.model_request_start has no end yet (its
	// model call died with its process); the retried call reuses it instead of opening another.
	RequestStartID string
}

// NeedsSandbox reports whether running the call needs the session's sandbox: built-ins that
// touch files or run commands do; MCP tools and the web tools do not.
func (tc ToolCall) NeedsSandbox() bool {
	return tc.Event.Type == wire.EventAgentToolUse && tools.NeedsSandbox(tc.Name)
}

// ToolCall is a call that a step acts on.
type ToolCall struct {
	// Event is the agent.tool_use or agent.mcp_tool_use event; its id is the call's id.
	Event wire.Event
	Name  string
	// MCPServer is the server of an MCP tool call, "" for a built-in.
	MCPServer string
	Input     json.RawMessage
	// RejectText is the error result of a StepReject call.
	RejectText string
}

// turn is the state of the latest turn as the log tells it.
type turn struct {
	open bool
	// stop is how the latest turn ended, when it is not open; stopDetails the refusal's
	// details when it ended with one.
	stop        string
	stopDetails json.RawMessage
	// rounds counts successful model responses since the turn opened.
	rounds int
	// usage sums the model usage of the turn, failed requests included.
	usage model.Usage
	// openStartID is a span.model_request_start of the turn without an end.
	openStartID string
	// calls are the tool calls of the turn's latest complete model response.
	calls []call
}

// readTurn walks the log and returns the state of its latest turn.
//
// A turn opens with a delivered user.message when none is open (a user.message that arrives
// while one is open joins it). It closes when a model response has no tool calls, when a
// user.interrupt is applied, or when a session.error exhausts it (the round cap, or model
// retries the caller gave up on: retry_status exhausted or terminal). The caller's status
// events (session.status_idle and the like) are not read: the turn is decided by what the
// agent and the clients did, so the order of status events cannot change it.
func readTurn(history []wire.Event) (turn, error) {
	var t turn
	var response []call // calls of the response being read, between its span start and end
	closeTurn := func(reason string) {
		if t.open {
			t.open, t.stop, t.calls, t.openStartID = false, reason, nil, ""
		}
	}
	for _, ev := range history {
		if !delivered(ev) {
			continue
		}
		switch {
		case ev.Type == wire.EventUserMessage:
			if !t.open {
				t = turn{open: true}
			}
		case ev.Type == wire.EventSpanModelRequestStart:
			response = nil
			if t.open {
				t.openStartID = ev.ID
			}
		case isToolUse(ev.Type):
			c, err := readCall(ev)
			if err != nil {
				return t, err
			}
			response = append(response, c)
		case ev.Type == wire.EventSpanModelRequestEnd:
			b, err := wire.DecodeBody[wire.SpanModelRequestEndBody](ev)
			if err != nil {
				return t, err
			}
			t.usage = addUsage(t.usage, b.ModelUsage)
			if b.ModelRequestStartID == t.openStartID {
				t.openStartID = ""
			}
			if b.IsError || !t.open {
				response = nil
				continue
			}
			t.rounds++
			if refused, details := refusal(ev); refused {
				// A refused response ends the turn with the hosted stop reason refusal
				// (API.md §8.2); none of its calls run.
				closeTurn(StopRefusal)
				t.stopDetails = details
			} else if len(response) == 0 {
				closeTurn(StopEndTurn)
			} else {
				t.calls = response
			}
			response = nil
		case ev.Type == wire.EventUserInterrupt:
			closeTurn(StopEndTurn)
		case ev.Type == wire.EventSessionError:
			b, err := wire.DecodeBody[wire.SessionErrorBody](ev)
			if err != nil {
				return t, err
			}
			if b.EndsTurn() {
				closeTurn(StopRetriesExhausted)
			}
		}
	}
	return t, nil
}

func addUsage(u model.Usage, s wire.ModelUsage) model.Usage {
	u.InputTokens += s.InputTokens
	u.OutputTokens += s.OutputTokens
	u.CacheCreationInputTokens += s.CacheCreationInputTokens
	u.CacheReadInputTokens += s.CacheReadInputTokens
	return u
}

// callState is where one call of the latest response stands.
type callState int

const (
	callAnswered callState = iota
	callRunnable
	callRejected
	callWaiting
)

// classify decides a call's state from its permission, its confirmation and its result.
// rejectText is set for callRejected.
func classify(c call, a answers) (state callState, rejectText string) {
	if _, ok := a.results[c.id()]; ok {
		return callAnswered, ""
	}
	if c.custom() {
		return callWaiting, ""
	}
	permission := c.permission
	if permission == wire.PermissionResultAsk {
		conf, ok := a.confirmations[c.id()]
		switch {
		case !ok:
			return callWaiting, ""
		case conf.Result == wire.PermissionResultAllow:
			permission = wire.PermissionResultAllow
		default:
			return callRejected, denyText(c.name, conf.DenyMessage)
		}
	}
	if permission != wire.PermissionResultAllow {
		return callRejected, unavailableText(c.name)
	}
	return callRunnable, ""
}

// TurnPart is the part of history that plans the current turn when the turn starts at seq
// start: the events from there on and every queued event, in log order. It is history itself
// when history holds nothing else (start 0: the whole log is the turn's). Next gives the same
// step from either, but reads every span and call of the log when given it all: a model
// request's step works from the whole conversation and plans from this part.
func TurnPart(history []wire.Event, start int64) []wire.Event {
	i := slices.IndexFunc(history, func(ev wire.Event) bool { return ev.Seq < start && delivered(ev) })
	if i < 0 {
		return history
	}
	out := slices.Clone(history[:i])
	for _, ev := range history[i:] {
		if ev.Seq >= start || !delivered(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// DecodedTurnPart is TurnPart of a decoded log (DecodeLog) in seq order, read without the
// log before the turn, which a long session's step would otherwise scan on every call: the
// turn's events are found by seq, and the queued events from before it are taken from
// unsettled, which must hold every event of log not delivered yet (it may hold more, and
// must be in seq order too). LoadConversation passes the events it just read: the events it
// keeps from earlier reads are all delivered.
func DecodedTurnPart(log []Decoded, start int64, unsettled []Decoded) []wire.Event {
	i, _ := slices.BinarySearchFunc(log, start, func(d Decoded, seq int64) int { return cmp.Compare(d.Event.Seq, seq) })
	var out []wire.Event
	for _, d := range unsettled {
		if d.Event.Seq >= start {
			break
		}
		if !delivered(d.Event) {
			out = append(out, d.Event)
		}
	}
	out = slices.Grow(out, len(log)-i)
	for _, d := range log[i:] {
		out = append(out, d.Event)
	}
	return out
}

// Next decides the next step of the current turn from the log alone. It is pure: the same
// history always gives the same step, which is what makes every step safe to retry (see the
// package doc). Steps are ordered: rejections, then executions, then parking on what still
// waits (so a partial answer runs what it can and parks on the rest), then the next model call
// or the round cap.
func Next(history []wire.Event) (Step, error) {
	d, err := readDue(history)
	if err != nil {
		return Step{}, err
	}
	switch {
	case !d.turn.open:
		stop := d.turn.stop
		if stop == "" {
			stop = StopEndTurn
		}
		return Step{Kind: StepEnd, StopReason: stop, StopDetails: d.turn.stopDetails}, nil
	case len(d.reject) > 0:
		return Step{Kind: StepReject, Calls: d.reject}, nil
	case len(d.run) > 0:
		return Step{Kind: StepExecute, Calls: d.run}, nil
	case len(d.waiting) > 0:
		return Step{Kind: StepPark, EventIDs: d.waiting}, nil
	case d.turn.rounds >= MaxRounds:
		return Step{Kind: StepCap}, nil
	}
	return Step{Kind: StepModel, RequestStartID: d.turn.openStartID}, nil
}

// due is the latest turn with the calls of its latest response sorted by what they need.
type due struct {
	turn    turn
	run     []ToolCall
	reject  []ToolCall
	waiting []string
}

func readDue(history []wire.Event) (due, error) {
	t, err := readTurn(history)
	if err != nil || !t.open {
		return due{turn: t}, err
	}
	a, err := indexAnswers(history)
	if err != nil {
		return due{}, err
	}
	d := due{turn: t}
	for _, c := range t.calls {
		state, text := classify(c, a)
		tc := ToolCall{Event: c.event, Name: c.name, MCPServer: c.server, Input: c.input, RejectText: text}
		switch state {
		case callRunnable:
			d.run = append(d.run, tc)
		case callRejected:
			d.reject = append(d.reject, tc)
		case callWaiting:
			d.waiting = append(d.waiting, c.id())
		case callAnswered:
		}
	}
	return d, nil
}

// TurnUsage sums the model usage of the log's latest turn (every span.model_request_end since
// its triggering user.message, across parks and resumes).
func TurnUsage(history []wire.Event) (model.Usage, error) {
	t, err := readTurn(history)
	return t.usage, err
}

// LogUsage sums the model usage of every span.model_request_end in history.
func LogUsage(history []wire.Event) (model.Usage, error) {
	var u model.Usage
	for _, ev := range history {
		if ev.Type != wire.EventSpanModelRequestEnd {
			continue
		}
		b, err := wire.DecodeBody[wire.SpanModelRequestEndBody](ev)
		if err != nil {
			return u, err
		}
		u = addUsage(u, b.ModelUsage)
	}
	return u, nil
}

// WebToolUse counts the web_fetch and web_search calls in history that ran (allowed, or
// confirmed, and answered by a result), for session.usage.server_tool_use. Rejected and
// abandoned calls did not reach the web and do not count.
func WebToolUse(history []wire.Event) (fetches, searches int64, err error) {
	a, err := indexAnswers(history)
	if err != nil {
		return 0, 0, err
	}
	for _, ev := range history {
		if ev.Type != wire.EventAgentToolUse || !delivered(ev) {
			continue
		}
		c, err := readCall(ev)
		if err != nil {
			return 0, 0, err
		}
		if !tools.IsWebTool(c.name) {
			continue
		}
		if _, answered := a.results[c.id()]; !answered {
			continue
		}
		ran := c.permission == wire.PermissionResultAllow ||
			(c.permission == wire.PermissionResultAsk && a.confirmations[c.id()].Result == wire.PermissionResultAllow)
		switch {
		case !ran:
		case c.name == wire.ToolNameWebFetch:
			fetches++
		default:
			searches++
		}
	}
	return fetches, searches, nil
}
