// Package metrics defines the process's Prometheus collectors and serves them on /metrics.
//
// It is a leaf: it imports only the Prometheus client and the standard library. The packages
// that record (httpapi, turns, durable, sandbox, store, model) each declare the small
// interface they record through, with plain arguments (a route, a stop reason, a duration),
// and *Metrics implements them all; package app wires one into the others. Every label takes
// values from a fixed set the recording package bounds (a route pattern, an event type, a
// built-in tool name): never a session id, a path or a model's free-form tool name.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// namespace prefixes every metric name.
const namespace = "managed_agents"

// Label values the recording packages share.
const (
	// Unmatched is the route of a request no pattern matched (a 404 before any handler).
	Unmatched = "unmatched"
	// OutcomeOK and OutcomeError are the outcomes of a model request or sandbox acquisition.
	OutcomeOK    = "ok"
	OutcomeError = "error"
	// ModeCold: the acquisition created the sandbox; ModeWarm: it attached one that existed.
	ModeCold = "cold"
	ModeWarm = "warm"
)

// Buckets of the latency histograms, in seconds. HTTP requests are mostly milliseconds (an SSE
// stream lasts as long as its client, and lands in +Inf); model requests and tool calls run
// from a fraction of a second to minutes; a cold sandbox may take a minute to start.
var (
	httpBuckets    = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	modelBuckets   = []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}
	toolBuckets    = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	sandboxBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 180}
)

// Metrics holds the collectors. Its methods implement the recording interfaces of the other
// packages; a nil *Metrics is not valid (those packages use a no-op when given none).
type Metrics struct {
	httpRequests   *prometheus.CounterVec
	httpDuration   *prometheus.HistogramVec
	sseStreams     prometheus.Gauge
	turnsStarted   prometheus.Counter
	turnsFinished  *prometheus.CounterVec
	modelRequests  *prometheus.CounterVec
	modelDuration  *prometheus.HistogramVec
	modelErrors    *prometheus.CounterVec
	toolCalls      *prometheus.CounterVec
	toolDuration   *prometheus.HistogramVec
	sandboxAcq     *prometheus.CounterVec
	sandboxDur     *prometheus.HistogramVec
	events         *prometheus.CounterVec
	activityFails  *prometheus.CounterVec
	activityRetry  *prometheus.CounterVec
	listenerReconn *prometheus.CounterVec
}

// New makes the collectors and registers them with reg: a registry of this package
// (NewRegistry) for serve, worker and dev, controller-runtime's for the controller.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "http_requests_total",
			Help: "HTTP requests answered, by route (the matched pattern, or unmatched) and status code."}, []string{"route", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "http_request_duration_seconds",
			Help: "Time from a request's arrival to the end of its answer, by route (an SSE stream counts its whole life).", Buckets: httpBuckets}, []string{"route"}),
		sseStreams: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "http_sse_streams",
			Help: "Event streams (SSE) open now."}),
		turnsStarted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "turns_started_total",
			Help: "Turns opened (a session went running on delivered client events)."}),
		turnsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "turns_finished_total",
			Help: "Turns closed (the session went idle), by stop reason."}, []string{"stop_reason"}),
		modelRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "model_requests_total",
			Help: "Model requests made, by outcome (ok or error)."}, []string{"outcome"}),
		modelDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "model_request_duration_seconds",
			Help: "Model request latency, to the end of the streamed answer, by outcome.", Buckets: modelBuckets}, []string{"outcome"}),
		modelErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "model_request_errors_total",
			Help: "Failed model requests, by kind (overloaded, rate_limited, server, invalid, canceled, other)."}, []string{"kind"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "tool_calls_total",
			Help: "Tool calls, by tool (a built-in name, mcp, custom or other) and outcome (ok, error, failed, rejected, delegated)."}, []string{"tool", "outcome"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "tool_call_duration_seconds",
			Help: "Latency of the tool calls the worker runs (built-in and MCP), by tool.", Buckets: toolBuckets}, []string{"tool"}),
		sandboxAcq: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "sandbox_acquisitions_total",
			Help: "Sandbox acquisitions, by provider, mode (cold: created; warm: an existing one attached) and outcome."}, []string{"provider", "mode", "outcome"}),
		sandboxDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "sandbox_acquisition_duration_seconds",
			Help: "Latency of successful sandbox acquisitions, by provider and mode.", Buckets: sandboxBuckets}, []string{"provider", "mode"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "events_appended_total",
			Help: "Events committed to session logs, by event type."}, []string{"type"}),
		activityFails: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "activity_failures_total",
			Help: "Temporal activity attempts that returned an error, by activity type."}, []string{"activity"}),
		activityRetry: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "activity_retries_total",
			Help: "Temporal activity attempts after the first (retries), by activity type."}, []string{"activity"}),
		listenerReconn: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "listener_reconnects_total",
			Help: "Times a LISTEN connection was lost and is being re-established, by topic."}, []string{"topic"}),
	}
	for _, c := range []prometheus.Collector{m.httpRequests, m.httpDuration, m.sseStreams, m.turnsStarted, m.turnsFinished,
		m.modelRequests, m.modelDuration, m.modelErrors, m.toolCalls, m.toolDuration, m.sandboxAcq, m.sandboxDur, m.events,
		m.activityFails, m.activityRetry, m.listenerReconn} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// NewRegistry is a registry with the Go runtime and process collectors, which a role that
// serves its own /metrics registers its collectors with.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves g in the Prometheus exposition format.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// Request records one answered HTTP request (httpapi.Observer); route "" is Unmatched.
func (m *Metrics) Request(route string, status int, d time.Duration) {
	if route == "" {
		route = Unmatched
	}
	m.httpRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(route).Observe(d.Seconds())
}

// StreamOpened and StreamClosed track the open SSE streams (httpapi.Observer).
func (m *Metrics) StreamOpened() { m.sseStreams.Inc() }

// StreamClosed: see StreamOpened.
func (m *Metrics) StreamClosed() { m.sseStreams.Dec() }

// TurnStarted records an opened turn (turns.Observer).
func (m *Metrics) TurnStarted() { m.turnsStarted.Inc() }

// TurnFinished records a closed turn and its stop reason (turns.Observer).
func (m *Metrics) TurnFinished(stopReason string) { m.turnsFinished.WithLabelValues(stopReason).Inc() }

// ModelRequest records one model request (model.Observer); errKind is "" for a success.
func (m *Metrics) ModelRequest(d time.Duration, errKind string) {
	outcome := OutcomeOK
	if errKind != "" {
		outcome = OutcomeError
		m.modelErrors.WithLabelValues(errKind).Inc()
	}
	m.modelRequests.WithLabelValues(outcome).Inc()
	m.modelDuration.WithLabelValues(outcome).Observe(d.Seconds())
}

// ToolCall records a tool call the worker ran, with its latency (durable.Observer).
func (m *Metrics) ToolCall(tool, outcome string, d time.Duration) {
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
	m.toolDuration.WithLabelValues(tool).Observe(d.Seconds())
}

// ToolCallUnrun records a tool call the worker did not run (rejected, or delegated to the
// client as a custom tool), so it has no latency (durable.Observer).
func (m *Metrics) ToolCallUnrun(tool, outcome string) {
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
}

// ActivityAttempt records one attempt of a Temporal activity (durable.Observer): attempts
// after the first count as retries, failed ones as failures.
func (m *Metrics) ActivityAttempt(activity string, attempt int32, failed bool) {
	if attempt > 1 {
		m.activityRetry.WithLabelValues(activity).Inc()
	}
	if failed {
		m.activityFails.WithLabelValues(activity).Inc()
	}
}

// SandboxAcquired records one sandbox acquisition (sandbox.Observer); latency is kept for
// successes only, since a failure's time says little about the provider.
func (m *Metrics) SandboxAcquired(provider, mode string, d time.Duration, err error) {
	outcome := OutcomeOK
	if err != nil {
		outcome = OutcomeError
	}
	m.sandboxAcq.WithLabelValues(provider, mode, outcome).Inc()
	if err == nil {
		m.sandboxDur.WithLabelValues(provider, mode).Observe(d.Seconds())
	}
}

// EventsAppended records committed events by type (store.Observer).
func (m *Metrics) EventsAppended(types []string) {
	for _, t := range types {
		m.events.WithLabelValues(t).Inc()
	}
}

// ListenerReconnecting records a lost LISTEN connection about to be re-established
// (store.Observer).
func (m *Metrics) ListenerReconnecting(topic string) { m.listenerReconn.WithLabelValues(topic).Inc() }
