// Package tracing is the server's OpenTelemetry vocabulary: the attribute keys its spans
// carry, Start and End, the W3C carrier that takes a turn's trace context through Temporal,
// and a model client that traces each request.
//
// It uses the OTel API only. app builds the SDK provider and its exporter once per process
// (MANAGED_AGENT_OTEL_EXPORTER) and hands it to each part; a part given none traces with a
// no-op tracer, which costs a few function calls per span.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Name is the instrumentation scope of every span the server makes.
const Name = "github.com/managed-agents/managed-agents"

// Attribute keys of the server's own spans; model and tool spans also use the GenAI
// semantic conventions' keys (model.go).
const (
	SessionID = attribute.Key("managed_agents.session_id")
	RequestID = attribute.Key("managed_agents.request_id")
	// Step is the workflow step (the activity's name) a span belongs to.
	Step = attribute.Key("managed_agents.step")
	// StepAttempt is Temporal's attempt number of the step (1 = first).
	StepAttempt = attribute.Key("managed_agents.step.attempt")
	// WorkflowID and RunID name the session's workflow run.
	WorkflowID = attribute.Key("managed_agents.workflow_id")
	RunID      = attribute.Key("managed_agents.workflow_run_id")
	// TurnStartSeq is where the step's turn starts in the session's log: with the session id
	// it names the turn.
	TurnStartSeq = attribute.Key("managed_agents.turn.start_seq")
	// ModelAttempt counts the tries of one model call across reschedules (1 = first).
	ModelAttempt = attribute.Key("managed_agents.model.attempt")
	// ToolOutcome is ok, error (the tool answered is_error), failed (the step failed),
	// or skipped (the log says the call may not run, or it was answered already).
	ToolOutcome = attribute.Key("managed_agents.tool.outcome")
	// MCPServer names the MCP server of an MCP tool call.
	MCPServer = attribute.Key("managed_agents.tool.mcp_server")
)

// Tracer is tp's tracer for the server; nil means tracing is off (a no-op tracer).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(Name)
}

// Enabled reports whether tp records anything: a hot path may skip building a span's
// attributes when it does not.
func Enabled(tp trace.TracerProvider) bool {
	_, off := tp.(noop.TracerProvider)
	return tp != nil && !off
}

type sessionKey struct{}

// WithSession marks ctx as work on the session: every span Start makes under it carries
// SessionID, also where the code that starts the span does not know the session (a model
// request).
func WithSession(ctx context.Context, sessionID string) context.Context {
	if sessionID == "" {
		return ctx
	}
	return context.WithValue(ctx, sessionKey{}, sessionID)
}

// Session is the session WithSession recorded, or "".
func Session(ctx context.Context) string {
	id, _ := ctx.Value(sessionKey{}).(string)
	return id
}

// Start starts a span under ctx's, with the session id of ctx (WithSession) as an attribute.
func Start(ctx context.Context, t trace.Tracer, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if id := Session(ctx); id != "" {
		opts = append(opts, trace.WithAttributes(SessionID.String(id)))
	}
	return t.Start(ctx, name, opts...)
}

// End records err, if any, on span (an exception event and status Error) and ends it.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// w3c is the one propagation format: the W3C traceparent and tracestate.
var w3c = propagation.TraceContext{}

// Inject returns the W3C trace context of ctx's span (traceparent, tracestate) as a map
// that survives serialization (a Temporal signal or header), or nil when ctx has none.
func Inject(ctx context.Context) map[string]string {
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// Extract returns ctx with the remote span context carrier holds (Inject's map) as the
// parent of spans started under it; ctx unchanged for an empty or malformed carrier.
func Extract(ctx context.Context, carrier map[string]string) context.Context {
	if len(carrier) == 0 {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier(carrier))
}

// HTTPHeader is the W3C trace context an HTTP request carries, as a span context (invalid
// for none): a server links to it rather than adopting it as parent, so clients cannot pick
// the server's trace ids or sampling.
func HTTPHeader(h propagation.TextMapCarrier) trace.SpanContext {
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), h))
}
