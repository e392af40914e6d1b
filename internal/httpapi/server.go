// Package httpapi serves the Managed Agents REST API and its SSE streams: routing, auth,
// request decoding, pagination and the error envelope.
//
// Handlers call package sessions for every rule and never touch the store directly; this
// package must never import store, workflow, Temporal or Kubernetes packages.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/stream"
	"github.com/managed-agents/managed-agents/internal/tracing"
	"github.com/managed-agents/managed-agents/internal/wire"
	"github.com/managed-agents/managed-agents/internal/workqueue"
)

// maxBodyBytes is the request body limit of the hosted API (API.md §4.1: >32 MB → 413).
const maxBodyBytes = 32 << 20

// betaManagedAgents is the beta every Managed Agents route requires.
const betaManagedAgents = "managed-agents-2026-04-01"

// Authenticator maps an API key to who it is (sessions.ErrUnknownKey for none) and tells
// when a key may have changed, so that streams end when their key is revoked.
type Authenticator interface {
	Authenticate(ctx context.Context, key string) (sessions.Principal, error)
	// WatchKey returns a channel closed when the key may have changed, and a cancel func.
	// "May have changed" includes a revocation whose notice was lost: the channel closes
	// when the answer Authenticate gives goes stale, so a stream checks its key again within
	// the bound a new request has (sessions.KeyCache.Watch), whatever that bound is set to.
	WatchKey(keyID string) (<-chan struct{}, func())
}

// Config configures the HTTP API.
type Config struct {
	Service *sessions.Service
	Auth    Authenticator
	Logger  *slog.Logger
	// Ready reports whether the server can serve sessions end to end (for /readyz).
	Ready func(ctx context.Context) error
	// Heartbeat is the SSE keep-alive interval; 15 s when zero.
	Heartbeat time.Duration
	// Previews delivers token previews to streams that ask for them; nil sends none.
	Previews stream.Hub
	// AdminKey, if set, authorises the admin API (MANAGED_AGENT_ADMIN_KEY); admin-flagged
	// keys do too.
	AdminKey string
	// Tracer traces every request (trace.go); nil traces nothing.
	Tracer trace.TracerProvider
	// Observer records requests and open streams (metrics); nil records nothing.
	Observer Observer
	// Work serves the work queues of self-hosted environments; nil answers their routes 400.
	Work *workqueue.Service
}

// Observer records what the API serves. route is the matched pattern ("" for none), so its
// values are the routes of this package, never a request's own path.
type Observer interface {
	Request(route string, status int, d time.Duration)
	StreamOpened()
	StreamClosed()
}

type nopObserver struct{}

func (nopObserver) Request(string, int, time.Duration) {}
func (nopObserver) StreamOpened()                      {}
func (nopObserver) StreamClosed()                      {}

// Server is the HTTP API.
type Server struct {
	svc       *sessions.Service
	auth      Authenticator
	logger    *slog.Logger
	ready     func(ctx context.Context) error
	heartbeat time.Duration
	previews  stream.Hub
	obs       Observer
	work      *workqueue.Service
	// adminKeyDigest is the SHA-256 of the configured admin key (nil: none), compared in
	// constant time.
	adminKeyDigest []byte
	tracer         trace.Tracer // nil when tracing is off: a request then builds no span at all
	mux            *http.ServeMux
	// draining is closed by CloseStreams: live streams end so a graceful shutdown can finish.
	draining  chan struct{}
	drainOnce sync.Once
}

// CloseStreams ends every live SSE stream; clients reconnect (with after_id) elsewhere.
func (s *Server) CloseStreams() { s.drainOnce.Do(func() { close(s.draining) }) }

// New builds the API handler.
func New(cfg Config) *Server {
	s := &Server{svc: cfg.Service, auth: cfg.Auth, logger: cfg.Logger, ready: cfg.Ready, heartbeat: cfg.Heartbeat, previews: cfg.Previews,
		obs: cfg.Observer, work: cfg.Work, mux: http.NewServeMux(), draining: make(chan struct{})}
	if s.heartbeat == 0 {
		s.heartbeat = 15 * time.Second
	}
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	if cfg.AdminKey != "" {
		s.adminKeyDigest = digest(cfg.AdminKey)
	}
	if tracing.Enabled(cfg.Tracer) {
		s.tracer = tracing.Tracer(cfg.Tracer)
	}
	s.routes()
	return s
}

func (s *Server) routes() {
	api := func(pattern string, h apiHandler) { s.mux.Handle(pattern, s.authenticated(textChecked(pattern, h))) }

	api("POST /v1/agents", s.createAgent)
	api("GET /v1/agents", s.listAgents)
	api("GET /v1/agents/{id}", s.getAgent)
	api("POST /v1/agents/{id}", s.updateAgent)
	api("POST /v1/agents/{id}/archive", s.archiveAgent)
	api("GET /v1/agents/{id}/versions", s.listAgentVersions)

	api("POST /v1/environments", s.createEnvironment)
	api("GET /v1/environments", s.listEnvironments)
	api("GET /v1/environments/{id}", s.getEnvironment)
	api("POST /v1/environments/{id}", s.updateEnvironment)
	api("DELETE /v1/environments/{id}", s.deleteEnvironment)
	api("POST /v1/environments/{id}/archive", s.archiveEnvironment)

	work := func(pattern string, h apiHandler) {
		if s.work == nil {
			h = workUnavailable
		}
		api(pattern, h)
	}
	work("GET /v1/environments/{id}/work/poll", s.pollWork)
	work("GET /v1/environments/{id}/work/stats", s.workStats)
	work("GET /v1/environments/{id}/work", s.listWork)
	work("GET /v1/environments/{id}/work/{work_id}", s.getWork)
	work("POST /v1/environments/{id}/work/{work_id}", s.updateWork)
	work("POST /v1/environments/{id}/work/{work_id}/ack", s.ackWork)
	work("POST /v1/environments/{id}/work/{work_id}/heartbeat", s.heartbeatWork)
	work("POST /v1/environments/{id}/work/{work_id}/stop", s.stopWork)

	api("POST /v1/vaults", s.createVault)
	api("GET /v1/vaults", s.listVaults)
	api("GET /v1/vaults/{id}", s.getVault)
	api("POST /v1/vaults/{id}", s.updateVault)
	api("DELETE /v1/vaults/{id}", s.deleteVault)
	api("POST /v1/vaults/{id}/archive", s.archiveVault)
	api("POST /v1/vaults/{id}/credentials", s.createCredential)
	api("GET /v1/vaults/{id}/credentials", s.listCredentials)
	api("GET /v1/vaults/{id}/credentials/{credential_id}", s.getCredential)
	api("POST /v1/vaults/{id}/credentials/{credential_id}", s.updateCredential)
	api("DELETE /v1/vaults/{id}/credentials/{credential_id}", s.deleteCredential)
	api("POST /v1/vaults/{id}/credentials/{credential_id}/archive", s.archiveCredential)

	api("POST /v1/sessions", s.createSession)
	api("GET /v1/sessions", s.listSessions)
	api("GET /v1/sessions/{id}", s.getSession)
	api("POST /v1/sessions/{id}", s.updateSession)
	api("DELETE /v1/sessions/{id}", s.deleteSession)
	api("POST /v1/sessions/{id}/archive", s.archiveSession)
	api("GET /v1/sessions/{id}/events", s.listEvents)
	api("POST /v1/sessions/{id}/events", s.sendEvents)
	api("GET /v1/sessions/{id}/events/stream", s.streamEvents)

	admin := func(pattern string, h apiHandler) {
		s.mux.Handle(pattern, s.adminAuthenticated(textChecked(pattern, h)))
	}
	admin("POST /v1/admin/workspaces", s.adminCreateWorkspace)
	admin("GET /v1/admin/workspaces", s.adminListWorkspaces)
	admin("POST /v1/admin/keys", s.adminCreateKey)
	admin("GET /v1/admin/keys", s.adminListKeys)
	admin("POST /v1/admin/keys/{id}/revoke", s.adminRevokeKey)
	admin("POST /v1/admin/keys/{id}/rotate", s.adminRotateKey)

	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	// Unknown routes are 404 before any auth check, as on the hosted service.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		notFound(w, r)
	})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.ready != nil {
		if err := s.ready(r.Context()); err != nil {
			s.logger.WarnContext(r.Context(), "not ready", "error", err)
			writeError(w, r, http.StatusServiceUnavailable, "api_error", "not ready", "")
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// ServeHTTP adds the request id and recovers from panics so a bug answers 500 in the API's
// error shape instead of dropping the connection.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rid := newRequestID()
	w.Header().Set("request-id", rid)
	info := &requestInfo{}
	r = r.WithContext(context.WithValue(withRequestID(r.Context(), rid), requestInfoKey, info))
	r, span := s.startSpan(r, rid)
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.logger.ErrorContext(r.Context(), "handler panic", "request_id", rid, "panic", p)
			if !rec.wrote {
				writeError(rec, r, http.StatusInternalServerError, "api_error", "Internal server error", "")
			}
		}
		// The access log: one line per request, never a body. route is the matched pattern
		// (bounded), path the request's own (capped), key the key's hint.
		route, took := routeOf(r), time.Since(start)
		s.logger.LogAttrs(r.Context(), slog.LevelInfo, "request", slog.String("request_id", rid),
			slog.String("method", r.Method), slog.String("route", route), slog.String("path", wire.Excerpt(r.URL.Path, 256)),
			slog.String("key", info.keyHint), slog.Int("status", rec.status), slog.Duration("duration", took))
		s.obs.Request(route, rec.status, took)
		endSpan(span, r, rec.status)
	}()
	if uncleanPath(r.URL.Path) {
		// Before the mux, which would redirect (307, HTML body) to the cleaned path.
		notFound(rec, r)
		return
	}
	s.mux.ServeHTTP(rec, r)
}

// routeOf is the pattern the mux matched (set on r by ServeMux), "" for none.
func routeOf(r *http.Request) string {
	if r.Pattern == "/" {
		return "" // the catch-all 404
	}
	return r.Pattern
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, r, http.StatusNotFound, "not_found_error", "Not found: "+r.Method+" "+wire.Excerpt(r.URL.Path, 256), "")
}

// statusRecorder remembers the status for the access log and keeps Flush working for SSE.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush on the real writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
