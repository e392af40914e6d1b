package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/tracing"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// traceparent is the W3C context of a sampled span in trace n.
func traceparent(n byte) map[string]string {
	return map[string]string{"traceparent": fmt.Sprintf("00-%032x-%016x-01", n, n)}
}

func traceID(n byte) trace.TraceID { return trace.TraceID{15: n} }

// The steps after a wake-up continue the trace the wake signal carried, each turn its own,
// with the session id; a signal without a trace (an API that traces nothing) leaves the
// steps on a trace of their own rather than the previous turn's.
func TestSessionWorkflowStepsContinueTheTraceOfTheirWakeUp(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	f := newFixture(t, Plan{Kind: agent.StepEnd}, Plan{Kind: agent.StepModel}, Plan{Kind: agent.StepEnd}, Plan{Kind: agent.StepModel},
		Plan{Kind: agent.StepEnd}, Plan{Kind: agent.StepModel})
	f.env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&traceInterceptor{tracer: tracing.Tracer(tp)}}})
	var mu sync.Mutex
	var seen []trace.TraceID
	f.modelTurn = func(ctx context.Context, _ ModelTurnInput) error {
		require.Equal(t, testSession, tracing.Session(ctx))
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, trace.SpanFromContext(ctx).SpanContext().TraceID())
		return nil
	}
	f.env.RegisterDelayedCallback(func() { f.env.SignalWorkflow(SignalWake, WakeSignal{Trace: traceparent(1)}) }, time.Second)
	f.env.RegisterDelayedCallback(func() { f.env.SignalWorkflow(SignalWake, WakeSignal{Trace: traceparent(2)}) }, 2*time.Second)
	f.env.RegisterDelayedCallback(func() { f.env.SignalWorkflow(SignalWake, nil) }, 3*time.Second)
	require.NoError(t, f.run(testRetry))

	require.Len(t, seen, 3)
	require.Equal(t, traceID(1), seen[0])
	require.Equal(t, traceID(2), seen[1])
	require.True(t, seen[2].IsValid())
	require.NotContains(t, []trace.TraceID{traceID(1), traceID(2)}, seen[2], "a wake-up without a trace starts a new one")
	// The test environment runs a mocked local activity's interceptors twice (its own
	// wrapper, then the mock), nesting one step span in another; a worker runs them once.
	// Count the outer ones.
	var steps int
	stepSpans := map[trace.SpanID]bool{}
	for _, s := range exp.GetSpans() {
		if s.Name == "step ModelTurn" {
			stepSpans[s.SpanContext.SpanID()] = true
		}
	}
	for _, s := range exp.GetSpans() {
		if s.Name != "step ModelTurn" || stepSpans[s.Parent.SpanID()] {
			continue
		}
		steps++
		require.Contains(t, s.Attributes, tracing.SessionID.String(testSession))
		require.Contains(t, s.Attributes, tracing.Step.String("ModelTurn"))
	}
	require.Equal(t, 3, steps)
}

// echoEmitter commits events as they are given.
type echoEmitter struct{}

func (echoEmitter) Emit(_ context.Context, evs []agent.NewEvent) ([]wire.Event, error) {
	out := make([]wire.Event, len(evs))
	for i, ev := range evs {
		out[i] = wire.Event{ID: ev.ID, Type: ev.Type, Body: ev.Body}
	}
	return out, nil
}

// A tool call's span says how the call ended: from the result it committed, or its error.
func TestToolSpanOutcome(t *testing.T) {
	t.Parallel()
	result := func(isError bool) agent.NewEvent {
		return agent.NewEvent{ID: "sevt_r", Type: wire.EventAgentToolResult, Body: json.RawMessage(fmt.Sprintf(`{"tool_use_id":"sevt_u","is_error":%t}`, isError))}
	}
	tests := []struct {
		name   string
		emit   []agent.NewEvent
		err    error
		want   string
		failed bool
	}{
		{"a result", []agent.NewEvent{result(false)}, nil, "ok", false},
		{"an error result", []agent.NewEvent{result(true)}, nil, "error", false},
		{"the step failed", nil, errors.New("sandbox unreachable"), "failed", true},
		{"not runnable", nil, fmt.Errorf("execute: %w", agent.ErrNotRunnable), "skipped", false},
		{"answered already", nil, nil, "skipped", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			exp := tracetest.NewInMemoryExporter()
			a := &Activities{Tracer: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))}
			use := wire.Event{ID: "sevt_u", Type: wire.EventAgentToolUse, Body: json.RawMessage(`{"name":"bash","input":{}}`)}
			ctx, tool := a.startTool(tracing.WithSession(context.Background(), testSession), use)
			if tt.emit != nil {
				committed, err := echoEmitter{}.Emit(ctx, tt.emit)
				require.NoError(t, err)
				tool.saw(committed)
			}
			tool.end(tt.err)
			spans := exp.GetSpans()
			require.Len(t, spans, 1)
			s := spans[0]
			require.Equal(t, "execute_tool bash", s.Name)
			require.Contains(t, s.Attributes, tracing.ToolOutcome.String(tt.want))
			require.Contains(t, s.Attributes, tracing.SessionID.String(testSession))
			require.Contains(t, s.Attributes, genAIToolCallID.String("sevt_u"))
			require.Equal(t, tt.failed, s.Status.Code == codes.Error)
		})
	}
}

// With tracing off a tool call costs nothing: no span, the context as it was.
func TestToolSpanOff(t *testing.T) {
	t.Parallel()
	a := &Activities{}
	ctx := context.Background()
	tctx, tool := a.startTool(ctx, wire.Event{ID: "sevt_u", Type: wire.EventAgentToolUse, Body: json.RawMessage(`{"name":"bash"}`)})
	require.Equal(t, ctx, tctx)
	require.Nil(t, tool)
	tool.saw([]wire.Event{{ID: "sevt_r", Type: wire.EventAgentToolResult, Body: json.RawMessage(`{"tool_use_id":"sevt_u"}`)}})
	tool.end(errors.New("ignored"))
}
