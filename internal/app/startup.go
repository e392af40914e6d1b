package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.temporal.io/sdk/client"

	"github.com/managed-agents/managed-agents/internal/store"
)

// DefaultStartupTimeout is how long a role waits at start for PostgreSQL, the migrations and
// Temporal before it gives up (MANAGED_AGENT_STARTUP_TIMEOUT). On a fresh install every part
// starts at once, and the bundled PostgreSQL and Temporal take tens of seconds.
const DefaultStartupTimeout = 5 * time.Minute

// The waits' backoff: the first retry soon (a dependency starting beside us is usually up
// within seconds), then less often. One attempt is bounded too: a dial to an address nobody
// answers can hang for minutes.
const (
	startupFirstRetry = 500 * time.Millisecond
	startupMaxRetry   = 10 * time.Second
	startupAttempt    = 15 * time.Second
)

// starting is a role's wait for its dependencies at start, instead of an exit that
// Kubernetes answers with a restart and a back-off (a crash loop on every install). Each
// wait retries with backoff until the startup timeout, counted from the start of the role,
// has passed. What it waits for is what its /readyz says meanwhile.
type starting struct {
	logger   *slog.Logger
	timeout  time.Duration
	deadline time.Time
	// secrets are scrubbed from every error it logs or returns: a driver's message may one
	// day quote a connection string.
	secrets []string
	waiting atomic.Pointer[string]
}

func newStarting(cfg Config, logger *slog.Logger) *starting {
	timeout := cfg.startupTimeout()
	s := &starting{logger: logger, timeout: timeout, deadline: time.Now().Add(timeout)}
	if pc, err := pgconn.ParseConfig(cfg.DatabaseURL); err == nil && pc.Password != "" {
		s.secrets = append(s.secrets, pc.Password)
	}
	if cfg.TemporalAPIKey != "" {
		s.secrets = append(s.secrets, cfg.TemporalAPIKey)
	}
	none := ""
	s.waiting.Store(&none)
	return s
}

func (c Config) startupTimeout() time.Duration {
	if c.StartupTimeout > 0 {
		return c.StartupTimeout
	}
	return DefaultStartupTimeout
}

// Waiting says what the role waits for, "" once it waits for nothing.
func (s *starting) Waiting() string { return *s.waiting.Load() }

// done records that the role waits for nothing any more.
func (s *starting) done() {
	none := ""
	s.waiting.Store(&none)
}

// wait calls try until it succeeds, logging one line per failed attempt ("waiting for
// <what>: <error>"). Once the startup timeout has passed, or ctx ends, it returns the last
// error, naming what it waited for.
func (s *starting) wait(ctx context.Context, what string, try func(context.Context) error) error {
	s.waiting.Store(&what)
	delay := startupFirstRetry
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, max(min(startupAttempt, time.Until(s.deadline)), time.Second))
		err := try(actx)
		cancel()
		if err == nil {
			if attempt > 1 {
				s.logger.InfoContext(ctx, "done waiting for "+what, "attempts", attempt)
			}
			return nil
		}
		msg := s.scrub(err.Error())
		if ctx.Err() != nil {
			return fmt.Errorf("stopped while waiting for %s: %s", what, msg)
		}
		left := time.Until(s.deadline)
		if left <= 0 {
			return &startupError{what: what, timeout: s.timeout, msg: msg, err: err}
		}
		wait := min(delay, left)
		s.logger.WarnContext(ctx, "waiting for "+what+": "+msg, "attempt", attempt, "retry_in", wait.Round(time.Millisecond).String())
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped while waiting for %s: %s", what, msg)
		case <-time.After(wait):
		}
		delay = min(2*delay, startupMaxRetry)
	}
}

// stopped is err of a start that failed, or nil if the role was stopped meanwhile (SIGTERM
// while it waited): a stop is not a failed start.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// scrub prepares an error for the log: secrets out, and on one line (pgx lists each address
// it tried on a line of its own).
func (s *starting) scrub(msg string) string {
	for _, secret := range s.secrets {
		msg = strings.ReplaceAll(msg, secret, "xxxxx")
	}
	return strings.NewReplacer(":\n\t", ": ", "\n\t", "; ", "\n", "; ").Replace(msg)
}

// startupError is a dependency that did not come up within the startup timeout. It keeps
// the cause for errors.Is (store.ErrSchemaNotCurrent, say) but prints the scrubbed message.
type startupError struct {
	what    string
	timeout time.Duration
	msg     string
	err     error
}

func (e *startupError) Error() string {
	return fmt.Sprintf("%s: not ready after %s (MANAGED_AGENT_STARTUP_TIMEOUT): %s", e.what, e.timeout, e.msg)
}

func (e *startupError) Unwrap() error { return e.err }

// postgresAt names the database server for the log: host and port, or the socket directory,
// never the user or password.
func postgresAt(url string) string {
	pc, err := pgconn.ParseConfig(url)
	if err != nil {
		return "PostgreSQL"
	}
	if strings.HasPrefix(pc.Host, "/") {
		return fmt.Sprintf("PostgreSQL at %s (socket)", pc.Host)
	}
	return "PostgreSQL at " + net.JoinHostPort(pc.Host, fmt.Sprint(pc.Port))
}

// waitPostgres waits until the database server answers and returns a store on it, opened
// with opts.
func (s *starting) waitPostgres(ctx context.Context, url string, opts ...store.Option) (*store.Store, error) {
	var st *store.Store
	err := s.wait(ctx, postgresAt(url), func(ctx context.Context) error {
		var err error
		st, err = store.Open(ctx, url, opts...)
		return err
	})
	return st, err
}

// waitMigrated waits until the database has every migration of this build: a role that does
// not migrate (worker, controller) starts beside the API, which applies them.
func (s *starting) waitMigrated(ctx context.Context, st *store.Store) error {
	err := s.wait(ctx, "the database migrations (the API applies them at start)", st.CheckMigrated)
	if errors.Is(err, store.ErrSchemaNotCurrent) {
		return fmt.Errorf("%w: run `managed-agents migrate` (or start `managed-agents serve`) first", err)
	}
	return err
}

// waitTemporal waits until the Temporal frontend answers and returns a client of it.
func (s *starting) waitTemporal(ctx context.Context, cfg Config, logger *slog.Logger) (client.Client, error) {
	var tc client.Client
	err := s.wait(ctx, "Temporal at "+cfg.TemporalAddress, func(ctx context.Context) error {
		var err error
		tc, err = DialTemporal(ctx, cfg, logger)
		return err
	})
	return tc, err
}

// handler answers HTTP while the role starts: /healthz is ok, since the process is alive and a
// liveness probe must not restart it for waiting; /readyz and everything else answer 503
// saying what it waits for. Once ready is set (serve), every request goes there instead.
type startingHandler struct {
	s     *starting
	ready atomic.Pointer[http.Handler]
}

func (h *startingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if next := h.ready.Load(); next != nil {
		(*next).ServeHTTP(w, r)
		return
	}
	if r.URL.Path == "/healthz" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	msg := "the server is starting"
	if what := h.s.Waiting(); what != "" {
		msg += ": waiting for " + what
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "5")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": "api_error", "message": msg}})
}

// serve hands every later request to h.
func (h *startingHandler) serve(next http.Handler) { h.ready.Store(&next) }

// CloseStreams ends the live streams of the handler it serves, if that has any (Serve calls
// it on shutdown).
func (h *startingHandler) CloseStreams() {
	if next := h.ready.Load(); next != nil {
		if d, ok := (*next).(interface{ CloseStreams() }); ok {
			d.CloseStreams()
		}
	}
}

// serveStartingProbes answers the probes on addr while the controller waits for its
// dependencies; stop frees the address for the controller manager's own probes.
func (s *starting) serveStartingProbes(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s for the health probes: %w", addr, err)
	}
	srv := &http.Server{Handler: &startingHandler{s: s}, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return func() {
		_ = srv.Close()
		<-done
	}, nil
}
