package tracing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/tracing"
)

// stubModel answers every request with resp, or fails with err.
type stubModel struct {
	resp model.Response
	err  error
}

func (s stubModel) Create(context.Context, model.Request) (model.Response, error) {
	return s.resp, s.err
}
func (s stubModel) Stream(_ context.Context, _ model.Request, _ func(model.Delta)) (model.Response, error) {
	return s.resp, s.err
}

func TestModelSpans(t *testing.T) {
	t.Parallel()
	ok := model.Response{StopReason: model.StopToolUse, Usage: model.Usage{InputTokens: 12, OutputTokens: 34, CacheReadInputTokens: 5}}
	tests := []struct {
		name   string
		stub   stubModel
		stream bool
		want   []attribute.KeyValue
		failed bool
	}{
		{"a streamed answer", stubModel{resp: ok}, true, []attribute.KeyValue{
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{"tool_use"}), attribute.Int64("gen_ai.usage.input_tokens", 12),
			attribute.Int64("gen_ai.usage.output_tokens", 34), attribute.Int64("gen_ai.usage.cache_read.input_tokens", 5),
			attribute.Bool("managed_agents.model.stream", true)}, false},
		{"a failure", stubModel{err: &model.Error{Kind: model.ErrOverloaded, Status: 529, Message: "busy"}}, false, []attribute.KeyValue{
			attribute.String("error.type", "overloaded"), attribute.Bool("managed_agents.model.stream", false)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			exp := tracetest.NewInMemoryExporter()
			m := tracing.Model(tt.stub, sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
			ctx := model.WithAttempt(tracing.WithSession(context.Background(), "sesn_1"), 2)
			req := model.Request{Model: "claude-opus-5", MaxTokens: 100}
			var err error
			if tt.stream {
				_, err = m.Stream(ctx, req, func(model.Delta) {})
			} else {
				_, err = m.Create(ctx, req)
			}
			require.Equal(t, tt.stub.err, err, "the wrapper changes no answer")
			spans := exp.GetSpans()
			require.Len(t, spans, 1)
			s := spans[0]
			require.Equal(t, "chat claude-opus-5", s.Name)
			for _, kv := range append(tt.want, tracing.SessionID.String("sesn_1"), tracing.ModelAttempt.Int(2),
				attribute.String("gen_ai.request.model", "claude-opus-5")) {
				require.Contains(t, s.Attributes, kv)
			}
			require.Equal(t, tt.failed, s.Status.Code == codes.Error)
		})
	}
}

// Without a provider, or with a no-op one, the model client is returned as it is.
func TestModelUntracedIsUnwrapped(t *testing.T) {
	t.Parallel()
	m := stubModel{}
	require.Equal(t, model.Client(m), tracing.Model(m, nil))
	require.Equal(t, model.Client(m), tracing.Model(m, noop.NewTracerProvider()))
}
