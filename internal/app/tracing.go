package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracingConfig is OpenTelemetry tracing (docs/operations.md#traces): off unless an exporter
// is named. The exporter itself reads the standard OTEL_EXPORTER_OTLP_* variables (endpoint,
// headers, timeout, TLS), and the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
type TracingConfig struct {
	// Exporter is none (the default), otlp-http or otlp-grpc (MANAGED_AGENT_OTEL_EXPORTER).
	Exporter string
	// Endpoint and TracesEndpoint are OTEL_EXPORTER_OTLP_ENDPOINT and
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, read only so Validate can check them before the
	// exporter would only log that it cannot send.
	Endpoint, TracesEndpoint string
	// Provider, when set, is the tracer provider every part of the process uses: a role's Run
	// sets the one it built from Exporter; tests give an in-memory one. Not a variable.
	Provider trace.TracerProvider
}

// Tracing exporters (MANAGED_AGENT_OTEL_EXPORTER).
const (
	exporterNone     = "none"
	exporterOTLPHTTP = "otlp-http"
	exporterOTLPGRPC = "otlp-grpc"
)

func tracingFromLookup(t TracingConfig, get func(string) string) TracingConfig {
	if v := get("MANAGED_AGENT_OTEL_EXPORTER"); v != "" {
		t.Exporter = v
	}
	t.Endpoint = orDefault(get("OTEL_EXPORTER_OTLP_ENDPOINT"), t.Endpoint)
	t.TracesEndpoint = orDefault(get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), t.TracesEndpoint)
	return t
}

func (t TracingConfig) exporter() string {
	return orDefault(strings.TrimSpace(t.Exporter), exporterNone)
}

func (t TracingConfig) validate() error {
	switch t.exporter() {
	case exporterNone:
		return nil
	case exporterOTLPHTTP, exporterOTLPGRPC:
	default:
		return fmt.Errorf("MANAGED_AGENT_OTEL_EXPORTER=%q: must be none, otlp-http or otlp-grpc", t.Exporter)
	}
	var errs []error
	for _, v := range []struct{ name, value string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", t.Endpoint}, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", t.TracesEndpoint},
	} {
		if v.value == "" {
			continue
		}
		if u, err := url.Parse(v.value); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s=%q: must be an http or https URL such as http://otel-collector:4318 (with MANAGED_AGENT_OTEL_EXPORTER=%s)",
				v.name, v.value, t.exporter()))
		}
	}
	return errors.Join(errs...)
}

// newTracerProvider builds the process's tracer provider for role and the function that
// flushes and stops it: no-op for none, else an SDK provider batching to the OTLP exporter.
func (t TracingConfig) newTracerProvider(ctx context.Context, role string) (trace.TracerProvider, func(context.Context) error, error) {
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch t.exporter() {
	case exporterOTLPHTTP:
		exp, err = otlptracehttp.New(ctx)
	case exporterOTLPGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, func(context.Context) error { return nil }, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("MANAGED_AGENT_OTEL_EXPORTER=%s: %w", t.exporter(), err)
	}
	// Ours first: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (WithFromEnv) override them.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "managed-agents"),
		attribute.String("managed_agents.role", role)), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// tracingFlushTimeout bounds the flush of buffered spans at exit.
const tracingFlushTimeout = 5 * time.Second

// startTracing builds the process's tracer provider once (unless cfg has one) and returns
// cfg with it, and stop, which flushes what is buffered and stops the exporter at exit.
// Export errors are logged, not fatal: tracing never stops the server.
func startTracing(ctx context.Context, cfg Config, role string, logger *slog.Logger) (Config, func(), error) {
	if cfg.Tracing.Provider != nil {
		return cfg, func() {}, nil
	}
	tp, shutdown, err := cfg.Tracing.newTracerProvider(ctx, role)
	if err != nil {
		return cfg, nil, err
	}
	if tp == nil {
		return cfg, func() {}, nil
	}
	// The SDK reports export failures through the process-wide handler; this process has one
	// provider, so setting it here leaks nothing between parts.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("tracing", "error", err) }))
	logger.Info("tracing on", "exporter", cfg.Tracing.exporter())
	cfg.Tracing.Provider = tp
	return cfg, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlushTimeout)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			logger.Warn("flushing traces at exit", "error", err)
		}
	}, nil
}
