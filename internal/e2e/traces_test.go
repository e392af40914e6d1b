//go:build integration

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/managed-agents/managed-agents/internal/app"
)

// TestTracesFollowATurn drives real turns (API, Temporal, worker, fake model, local sandbox)
// with an in-memory exporter given to this env only, and checks that the request that sent
// the message, the steps, the model requests, the sandbox acquisition and the tool call of
// one turn are one trace carrying the session id, and that the next turn is another trace.
func TestTracesFollowATurn(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	f := newTurnFixtureIn(t, newRunningEnv(t, func(c *app.Config) { c.Tracing.Provider = tp }), builtinTools("always_allow"))

	f.send(userMessage("make a file\n/tool bash {\"command\":\"echo made > f.txt\"}"))
	f.untilIdle()
	// A step's span ends after its activity returns, which may be after the stream saw the
	// idle it committed: wait for the turn's steps (their children ended before them).
	first := waitForSpans(t, exp, func(spans tracetest.SpanStubs) bool {
		return countNamed(spans, "step ModelTurn") == 2 && countNamed(spans, "step ToolCall") == 1 && countNamed(spans, "POST /v1/sessions/{id}/events") == 1
	})
	send := named(t, first, "POST /v1/sessions/{id}/events")[0]
	turn := send.SpanContext.TraceID()
	require.Equal(t, trace.SpanKindServer, send.SpanKind)
	require.Equal(t, f.sessionID, attr(send, "managed_agents.session_id").AsString())
	require.EqualValues(t, 200, attr(send, "http.response.status_code").AsInt64())

	models := named(t, first, "chat claude-opus-5")
	require.Equal(t, []string{"tool_use"}, attr(models[0], "gen_ai.response.finish_reasons").AsStringSlice())
	require.Equal(t, []string{"end_turn"}, attr(models[1], "gen_ai.response.finish_reasons").AsStringSlice())
	tool := named(t, first, "execute_tool bash")[0]
	require.Equal(t, "ok", attr(tool, "managed_agents.tool.outcome").AsString())
	require.Equal(t, "bash", attr(tool, "gen_ai.tool.name").AsString())
	acquire := named(t, first, "sandbox.acquire")[0]
	steps := append(named(t, first, "step ModelTurn"), named(t, first, "step ToolCall")...)
	require.Len(t, steps, 3)
	// The signal's span (in the API) is the parent of the steps (in the worker).
	wake := named(t, first, "wake session")[0]
	require.Equal(t, send.SpanContext.SpanID(), wake.Parent.SpanID())
	advance := named(t, first, "step Advance")[0]
	require.Equal(t, wake.SpanContext.SpanID(), advance.Parent.SpanID(), "the first step continues the wake-up")
	require.Equal(t, wake.SpanContext.SpanID(), steps[0].Parent.SpanID())
	steps = append(steps, wake, advance, named(t, first, "step AcquireSandbox")[0])
	for _, s := range append(append([]tracetest.SpanStub{tool, acquire}, models...), steps...) {
		require.Equal(t, turn, s.SpanContext.TraceID(), "%s is in the turn's trace", s.Name)
		require.Equal(t, f.sessionID, attr(s, "managed_agents.session_id").AsString(), "%s carries the session", s.Name)
	}
	require.Positive(t, attr(models[0], "gen_ai.usage.output_tokens").AsInt64())
	// The tool call is a child of its step, the model request of its own.
	require.Equal(t, "step ToolCall", parentOf(t, first, tool).Name)
	require.Equal(t, "step ModelTurn", parentOf(t, first, models[0]).Name)

	// The next message is a turn of its own: a new trace.
	exp.Reset()
	f.send(userMessage("again"))
	f.untilIdle()
	second := waitForSpans(t, exp, func(spans tracetest.SpanStubs) bool {
		return countNamed(spans, "step ModelTurn") == 1 && countNamed(spans, "POST /v1/sessions/{id}/events") == 1
	})
	next := named(t, second, "POST /v1/sessions/{id}/events")[0].SpanContext.TraceID()
	require.NotEqual(t, turn, next)
	require.Equal(t, next, named(t, second, "chat claude-opus-5")[0].SpanContext.TraceID())
}

func waitForSpans(t *testing.T, exp *tracetest.InMemoryExporter, done func(tracetest.SpanStubs) bool) tracetest.SpanStubs {
	t.Helper()
	require.Eventually(t, func() bool { return done(exp.GetSpans()) }, 10*time.Second, 20*time.Millisecond,
		"spans never complete: %v", spanNames(exp.GetSpans()))
	return exp.GetSpans()
}

func spanNames(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func countNamed(spans tracetest.SpanStubs, name string) int {
	return len(slices.DeleteFunc(slices.Clone(spans), func(s tracetest.SpanStub) bool { return s.Name != name }))
}

// named returns the spans called name, in the order they started; at least one.
func named(t *testing.T, spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	t.Helper()
	out := slices.DeleteFunc(slices.Clone(spans), func(s tracetest.SpanStub) bool { return s.Name != name })
	require.NotEmpty(t, out, "no span %q among %v", name, spanNames(spans))
	slices.SortFunc(out, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	return out
}

func parentOf(t *testing.T, spans tracetest.SpanStubs, s tracetest.SpanStub) tracetest.SpanStub {
	t.Helper()
	i := slices.IndexFunc(spans, func(p tracetest.SpanStub) bool { return p.SpanContext.SpanID() == s.Parent.SpanID() })
	require.GreaterOrEqual(t, i, 0, "the parent of %s was not exported", s.Name)
	return spans[i]
}

func attr(s tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value
		}
	}
	return attribute.Value{}
}
