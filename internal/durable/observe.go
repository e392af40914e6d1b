package durable

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"

	"github.com/managed-agents/managed-agents/internal/agent"
	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Observer records the worker's tool calls and activity attempts (metrics). tool is a
// built-in tool's name, ToolMCP, ToolCustom or ToolOther (toolLabel): never a model's or an
// MCP server's own name, so its values stay a small fixed set.
type Observer interface {
	// ToolCall records a call the worker ran, with its outcome (OutcomeOK, OutcomeError for
	// an is_error result, OutcomeFailed when the step failed without a result) and latency.
	ToolCall(tool, outcome string, d time.Duration)
	// ToolCallUnrun records a call the worker did not run: OutcomeRejected (denied) or
	// OutcomeDelegated (a custom tool, which the client runs).
	ToolCallUnrun(tool, outcome string)
	// ActivityAttempt records one attempt (1 = the first) of an activity, and whether it
	// returned an error.
	ActivityAttempt(activity string, attempt int32, failed bool)
}

// Tool labels besides the built-in names, and tool call outcomes.
const (
	ToolMCP    = "mcp"
	ToolCustom = "custom"
	ToolOther  = "other"

	OutcomeOK        = "ok"
	OutcomeError     = "error"
	OutcomeFailed    = "failed"
	OutcomeRejected  = "rejected"
	OutcomeDelegated = "delegated"
)

type nopObserver struct{}

func (nopObserver) ToolCall(string, string, time.Duration) {}
func (nopObserver) ToolCallUnrun(string, string)           {}
func (nopObserver) ActivityAttempt(string, int32, bool)    {}

func (a *Activities) observer() Observer {
	if a.Observer == nil {
		return nopObserver{}
	}
	return a.Observer
}

// toolLabel is the bounded name of a tool_use event's tool: the built-in's name, or its kind.
// A name the model made up that is no built-in is ToolOther.
func toolLabel(ev wire.Event) string {
	switch ev.Type {
	case wire.EventAgentMCPToolUse:
		return ToolMCP
	case wire.EventAgentCustomToolUse:
		return ToolCustom
	}
	b, err := wire.DecodeBody[wire.ToolUseBody](ev)
	if err != nil || !toolconfig.IsBuiltIn(b.Name) {
		return ToolOther
	}
	return b.Name
}

// resultOf is a committed tool result's call id and is_error; ok is false for other events.
func resultOf(ev wire.Event) (toolUseID string, isError, ok bool) {
	switch ev.Type {
	case wire.EventAgentToolResult:
		b, err := wire.DecodeBody[wire.ToolResultBody](ev)
		return b.ToolUseID, b.IsError, err == nil
	case wire.EventAgentMCPToolResult:
		b, err := wire.DecodeBody[wire.MCPToolResultBody](ev)
		return b.MCPToolUseID, b.IsError, err == nil
	}
	return "", false, false
}

// committedEmitter hands what next committed to seen.
type committedEmitter struct {
	next agent.Emitter
	seen func([]wire.Event)
}

func (e committedEmitter) Emit(ctx context.Context, evs []agent.NewEvent) ([]wire.Event, error) {
	out, err := e.next.Emit(ctx, evs)
	if err == nil {
		e.seen(out)
	}
	return out, err
}

// activityObserver is a worker interceptor that records every activity attempt. Temporal's
// own retries are visible only here: the activity's code sees one attempt at a time.
type activityObserver struct {
	interceptor.WorkerInterceptorBase
	obs Observer
}

func (w *activityObserver) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &activityAttempts{obs: w.obs}
	i.Next = next
	return i
}

type activityAttempts struct {
	interceptor.ActivityInboundInterceptorBase
	obs Observer
}

func (a *activityAttempts) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := a.Next.ExecuteActivity(ctx, in)
	info := activity.GetInfo(ctx)
	a.obs.ActivityAttempt(info.ActivityType.Name, info.Attempt, err != nil)
	return res, err
}
