package httpapi

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/managed-agents/managed-agents/internal/tracing"
)

// startSpan starts the request's server span and returns r under it. The span is a new
// root: a traceparent the client sent becomes a link, so a client can find its request in
// the server's trace but cannot choose the server's trace ids or sampling.
func (s *Server) startSpan(r *http.Request, requestID string) (*http.Request, trace.Span) {
	if s.tracer == nil {
		return r, noSpan
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), tracing.RequestID.String(requestID))}
	if remote := tracing.HTTPHeader(propagation.HeaderCarrier(r.Header)); remote.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: remote}))
	}
	ctx, span := s.tracer.Start(r.Context(), r.Method, opts...)
	return r.WithContext(ctx), span
}

// noSpan is the span of every request while tracing is off.
var noSpan = trace.SpanFromContext(context.Background())

// endSpan names the span after the matched route (bounded, unlike the path), records the
// status and, on a session's routes, the session id, then ends it. A 5xx is an error.
func endSpan(span trace.Span, r *http.Request, status int) {
	if !span.IsRecording() {
		return
	}
	route := routeOf(r)
	if route != "" {
		span.SetName(route)
		_, path, _ := strings.Cut(route, " ")
		span.SetAttributes(attribute.String("http.route", path))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if strings.Contains(route, "/v1/sessions/{id}") {
		span.SetAttributes(tracing.SessionID.String(r.PathValue("id")))
	}
	var err error
	if status >= 500 {
		err = errStatus{status}
	}
	tracing.End(span, err)
}

type errStatus struct{ status int }

func (e errStatus) Error() string { return http.StatusText(e.status) }
