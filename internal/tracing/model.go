package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/managed-agents/managed-agents/internal/model"
)

// GenAI semantic-convention keys of a model request span.
const (
	genAIOperation     = attribute.Key("gen_ai.operation.name")
	genAIRequestModel  = attribute.Key("gen_ai.request.model")
	genAIMaxTokens     = attribute.Key("gen_ai.request.max_tokens")
	genAIFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	genAIInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	genAIOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	genAICacheRead     = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	genAICacheCreation = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	errorType          = attribute.Key("error.type")
	// ModelStream says whether the request streamed its response.
	ModelStream = attribute.Key("managed_agents.model.stream")
)

// Model returns m with one span per request ("chat <model>"): the model name, the attempt,
// the stop reason and the token usage as attributes, a failure recorded with its kind.
// With a nil or no-op provider it returns m itself.
func Model(m model.Client, tp trace.TracerProvider) model.Client {
	if !Enabled(tp) {
		return m
	}
	return tracedModel{next: m, tracer: Tracer(tp)}
}

type tracedModel struct {
	next   model.Client
	tracer trace.Tracer
}

func (t tracedModel) Create(ctx context.Context, req model.Request) (model.Response, error) {
	ctx, span := t.start(ctx, req, false)
	resp, err := t.next.Create(ctx, req)
	endModel(span, resp, err)
	return resp, err
}

func (t tracedModel) Stream(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	ctx, span := t.start(ctx, req, true)
	resp, err := t.next.Stream(ctx, req, onDelta)
	endModel(span, resp, err)
	return resp, err
}

func (t tracedModel) start(ctx context.Context, req model.Request, stream bool) (context.Context, trace.Span) {
	return Start(ctx, t.tracer, "chat "+req.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		genAIOperation.String("chat"), genAIRequestModel.String(req.Model), genAIMaxTokens.Int(req.MaxTokens),
		ModelAttempt.Int(model.Attempt(ctx)), ModelStream.Bool(stream)))
}

func endModel(span trace.Span, resp model.Response, err error) {
	if err == nil {
		span.SetAttributes(genAIFinishReasons.StringSlice([]string{resp.StopReason}),
			genAIInputTokens.Int64(resp.Usage.InputTokens), genAIOutputTokens.Int64(resp.Usage.OutputTokens),
			genAICacheRead.Int64(resp.Usage.CacheReadInputTokens), genAICacheCreation.Int64(resp.Usage.CacheCreationInputTokens))
	}
	var me *model.Error
	if errors.As(err, &me) {
		span.SetAttributes(errorType.String(string(me.Kind)))
	}
	End(span, err)
}
