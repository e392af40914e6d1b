package httpapi_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/managed-agents/managed-agents/internal/httpapi"
)

// Every request has a server span named after its route. A client's traceparent is linked,
// not adopted: the server's trace ids and sampling stay its own.
func TestRequestSpans(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	h := httpapi.New(httpapi.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Tracer: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	h.ServeHTTP(httptest.NewRecorder(), req)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/nowhere", nil))

	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	health, missing := spans[0], spans[1]
	require.Equal(t, "GET /healthz", health.Name)
	require.False(t, health.Parent.IsValid(), "the client's context is not the parent")
	require.NotEqual(t, "0af7651916cd43dd8448eb211c80319c", health.SpanContext.TraceID().String())
	require.Len(t, health.Links, 1)
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", health.Links[0].SpanContext.TraceID().String())
	require.Contains(t, health.Attributes, attribute.Int("http.response.status_code", 200))
	require.Contains(t, health.Attributes, attribute.String("http.route", "/healthz"))
	require.Equal(t, "GET", missing.Name, "an unmatched path names no route")
	require.Contains(t, missing.Attributes, attribute.Int("http.response.status_code", 404))
	require.Empty(t, missing.Links)
}
