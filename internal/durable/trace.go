package durable

import (
	"context"
	"encoding/json"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/tracing"
	"github.com/managed-agents/managed-agents/internal/turns"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// How a turn's trace crosses Temporal. The API's request span is the turn's root; the wake
// signal carries its W3C context (WakeSignal), and the workflow keeps the context of the
// signal that ended its wait (sessionRun.trace) as deterministic state, rebuilt by replay
// from the signals in its history. Every activity the workflow schedules gets that context,
// and the session id, in a Temporal header (stepHeader, written by the worker's interceptor),
// and the activity's step span continues the trace under it. The header is part of the
// scheduled activity in the history: a retried step, or one run again after its worker died,
// joins the same trace. Temporal's own OTel interceptor does not fit: it parents every step
// to the span that started the session's long-lived workflow, one trace per workflow run
// rather than per turn, and signal headers never reach the workflow's main coroutine.

// WakeSignal is the payload of the wake and interrupt signals.
type WakeSignal struct {
	// Trace is the W3C trace context (traceparent, tracestate) of whoever sent the signal
	// (tracing.Inject); empty when it traces nothing.
	Trace map[string]string `json:",omitempty"`
}

// stepHeader is the Temporal header key the trace of a step travels in.
const stepHeader = "managed-agents-trace"

// stepTrace is the header's value: the session and the trace context of its current turn.
type stepTrace struct {
	SessionID string            `json:",omitempty"`
	Trace     map[string]string `json:",omitempty"`
}

type stepTraceKey struct{}

// withStepTrace makes activities scheduled under ctx carry *st as it is when each is
// scheduled: the workflow updates it in place when a signal brings a new turn's trace.
func withStepTrace(ctx workflow.Context, st *stepTrace) workflow.Context {
	return workflow.WithValue(ctx, stepTraceKey{}, st)
}

// adopt makes the signal's trace the trace of the steps that follow.
func (st *stepTrace) adopt(sig WakeSignal) { st.Trace = sig.Trace }

// traceInterceptor writes the workflow's stepTrace into each scheduled activity's header and
// runs each activity under a step span that continues it.
type traceInterceptor struct {
	interceptor.WorkerInterceptorBase
	tracer trace.Tracer
}

func (t *traceInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &traceActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, tracer: t.tracer}
}

func (t *traceInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &traceWorkflow{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type traceWorkflow struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (w *traceWorkflow) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return w.Next.Init(&traceOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}})
}

type traceOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (o *traceOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	writeStepHeader(ctx)
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

func (o *traceOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	writeStepHeader(ctx)
	return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
}

// writeStepHeader puts the workflow's stepTrace into the header of the activity being
// scheduled (the SDK gives each a fresh header map). It only reads workflow state, so it is
// as deterministic as the workflow; a value that does not encode is left out, never fatal.
func writeStepHeader(ctx workflow.Context) {
	st, ok := ctx.Value(stepTraceKey{}).(*stepTrace)
	header := interceptor.WorkflowHeader(ctx)
	if !ok || st == nil || header == nil {
		return
	}
	if p, err := converter.GetDefaultDataConverter().ToPayload(*st); err == nil {
		header[stepHeader] = p
	}
}

// readStepHeader is the stepTrace an activity was scheduled with (zero if none).
func readStepHeader(ctx context.Context) stepTrace {
	var st stepTrace
	if p, ok := interceptor.Header(ctx)[stepHeader]; ok {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &st)
	}
	return st
}

type traceActivity struct {
	interceptor.ActivityInboundInterceptorBase
	tracer trace.Tracer
}

// ExecuteActivity runs the step under a span named after it, child of the turn's trace.
func (a *traceActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	st := readStepHeader(ctx)
	ctx = tracing.WithSession(tracing.Extract(ctx, st.Trace), st.SessionID)
	info := activity.GetInfo(ctx)
	ctx, span := tracing.Start(ctx, a.tracer, "step "+info.ActivityType.Name, trace.WithAttributes(
		tracing.Step.String(info.ActivityType.Name), tracing.StepAttempt.Int(int(info.Attempt)),
		tracing.WorkflowID.String(info.WorkflowExecution.ID), tracing.RunID.String(info.WorkflowExecution.RunID)))
	out, err := a.Next.ExecuteActivity(ctx, in)
	tracing.End(span, err)
	return out, err
}

// markTurn records on the step's span where its turn starts in the log.
func markTurn(ctx context.Context, turn turns.Turn) {
	if turn.TurnStartSeq > 0 {
		trace.SpanFromContext(ctx).SetAttributes(tracing.TurnStartSeq.Int64(turn.TurnStartSeq))
	}
}

// toolSpan is the span of one tool call: it learns the outcome from the result the call
// commits (toolSpan.saw) or from the call's error. With tracing off
// it is nil, and does nothing.
type toolSpan struct {
	span    trace.Span
	callID  string // the tool use's event id: only its result sets the outcome
	outcome string
}

// startTool starts the span of the call toolUse asks for ("execute_tool <name>").
func (a *Activities) startTool(ctx context.Context, toolUse wire.Event) (context.Context, *toolSpan) {
	if !tracing.Enabled(a.Tracer) {
		return ctx, nil // the tool use is not even decoded
	}
	var body struct {
		Name          string `json:"name"`
		MCPServerName string `json:"mcp_server_name"`
	}
	_ = json.Unmarshal(toolUse.Body, &body)
	ctx, span := tracing.Start(ctx, tracing.Tracer(a.Tracer), "execute_tool "+body.Name, trace.WithAttributes(
		genAIToolName.String(body.Name), genAIToolCallID.String(toolUse.ID)))
	if body.MCPServerName != "" {
		span.SetAttributes(tracing.MCPServer.String(body.MCPServerName))
	}
	return ctx, &toolSpan{span: span, callID: toolUse.ID, outcome: "skipped"}
}

// GenAI semantic-convention keys of a tool call span.
const (
	genAIToolName   = attribute.Key("gen_ai.tool.name")
	genAIToolCallID = attribute.Key("gen_ai.tool.call.id")
)

// saw notes the is_error of the call's result among committed events.
func (t *toolSpan) saw(evs []wire.Event) {
	if t == nil {
		return
	}
	for _, ev := range evs {
		if id, isError, ok := resultOf(ev); ok && id == t.callID {
			t.outcome = "ok"
			if isError {
				t.outcome = "error"
			}
		}
	}
}

// end ends the span with the call's outcome; a call the log says may not run or that
// another attempt answered is skipped, not failed.
func (t *toolSpan) end(err error) {
	if t == nil {
		return
	}
	switch {
	case errors.Is(err, agent.ErrNotRunnable), errors.Is(err, turns.ErrCallAnswered):
		err = nil
	case err != nil:
		t.outcome = "failed"
	}
	t.span.SetAttributes(tracing.ToolOutcome.String(t.outcome))
	tracing.End(t.span, err)
}

// traceSandbox runs fn, the session's sandbox acquisition or attachment, under a span.
func (a *Activities) traceSandbox(ctx context.Context, name string, fn func(context.Context) error) error {
	if !tracing.Enabled(a.Tracer) {
		return fn(ctx)
	}
	ctx, span := tracing.Start(ctx, tracing.Tracer(a.Tracer), name)
	err := fn(ctx)
	tracing.End(span, err)
	return err
}
