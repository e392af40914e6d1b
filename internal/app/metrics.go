package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/httpapi"
	"github.com/managed-agents/managed-agents/internal/metrics"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/turns"
)

// DefaultMetricsAddr is where serve, worker and controller serve /metrics unless
// MANAGED_AGENT_METRICS_ADDR says otherwise.
const DefaultMetricsAddr = ":9090"

// *metrics.Metrics records for every package that declares what it records.
var (
	_ httpapi.Observer = (*metrics.Metrics)(nil)
	_ store.Observer   = (*metrics.Metrics)(nil)
	_ turns.Observer   = (*metrics.Metrics)(nil)
	_ model.Observer   = (*metrics.Metrics)(nil)
	_ sandbox.Observer = (*metrics.Metrics)(nil)
	_ durable.Observer = (*metrics.Metrics)(nil)
)

// metricsOff reports whether v turns the metrics listener off.
func metricsOff(v string) bool {
	v = strings.ToLower(strings.TrimSpace(v))
	return v == "0" || v == "off"
}

// validateMetricsAddr accepts empty (DefaultMetricsAddr), 0 or off (none) and host:port.
func validateMetricsAddr(v string) error {
	if v == "" || metricsOff(v) {
		return nil
	}
	if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
		return fmt.Errorf("MANAGED_AGENT_METRICS_ADDR=%q: must be host:port, such as :9090, or off (0) for none", v)
	}
	return nil
}

// metricsAddr is where serve and worker serve /metrics, "" for nowhere.
func (c Config) metricsAddr() string {
	if metricsOff(c.MetricsAddr) {
		return ""
	}
	return orDefault(c.MetricsAddr, DefaultMetricsAddr)
}

// controllerMetricsAddr is controller-runtime's metrics bind address: the older
// MANAGED_AGENT_CONTROLLER_METRICS_ADDR (--metrics-bind-address) when set, else
// MANAGED_AGENT_METRICS_ADDR; "0" is controller-runtime's none.
func (c Config) controllerMetricsAddr() string {
	if c.ControllerMetricsAddr != "" {
		return c.ControllerMetricsAddr
	}
	return orDefault(c.metricsAddr(), "0")
}

// newMetrics makes the process's collectors in a registry of their own and sets them on cfg.
func newMetrics(cfg Config) (Config, *prometheus.Registry, error) {
	reg := metrics.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		return cfg, nil, fmt.Errorf("register metrics: %w", err)
	}
	cfg.Metrics, cfg.MetricsRegistry = m, reg
	return cfg, reg, nil
}

// withMetrics is newMetrics for a role that serves its own /metrics (serve, worker), unless
// cfg already has collectors (a test's) or the listener is off: then the registry is nil.
func withMetrics(cfg Config) (Config, *prometheus.Registry, error) {
	if cfg.Metrics != nil || cfg.metricsAddr() == "" {
		return cfg, nil, nil
	}
	return newMetrics(cfg)
}

// serveMetrics serves reg's /metrics on cfg's metrics address until ctx ends or stop is
// called; a bind error fails at once, so a role does not start half observable. A nil reg
// serves nothing.
func serveMetrics(ctx context.Context, cfg Config, reg *prometheus.Registry, logger *slog.Logger) (stop func(), err error) {
	addr := cfg.metricsAddr()
	if addr == "" || reg == nil {
		return func() {}, nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(reg))
	return serveSide(ctx, "metrics", addr, "MANAGED_AGENT_METRICS_ADDR", mux, logger)
}

// serveSide serves h on addr (named by variable in errors) until ctx ends or stop is
// called: a side listener of a role, beside its main work (metrics, profiles). A bind error
// fails at once.
func serveSide(ctx context.Context, what, addr, variable string, h http.Handler, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (%s): %w", addr, variable, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := Serve(ctx, ln, h, logger, DefaultServerLimits); err != nil {
			logger.Error(what+" server stopped", "error", err)
		}
	}()
	logger.Info("serving "+what, "addr", ln.Addr().String())
	return func() {
		cancel()
		<-done
	}, nil
}

// storeOptions record committed events with cfg's metrics.
func (c Config) storeOptions() []store.Option {
	if c.Metrics == nil {
		return nil
	}
	return []store.Option{store.WithObserver(c.Metrics)}
}

// listenerOptions record LISTEN reconnects with cfg's metrics.
func (c Config) listenerOptions() []store.ListenerOption {
	if c.Metrics == nil {
		return nil
	}
	return []store.ListenerOption{store.ListenerObserver(c.Metrics)}
}

// observedModel records m's requests with cfg's metrics.
func (c Config) observedModel(m model.Client) model.Client {
	if c.Metrics == nil {
		return m
	}
	return model.Observed(m, c.Metrics)
}

// turnsOptions, sandboxOptions and durableObserver record with cfg's metrics (a nil
// interface, never a nil *metrics.Metrics in one, when there are none).
func (c Config) turnsOptions() []turns.Option {
	if c.Metrics == nil {
		return nil
	}
	return []turns.Option{turns.WithObserver(c.Metrics)}
}

func (c Config) sandboxOptions() []sandbox.ManagerOption {
	if c.Metrics == nil {
		return nil
	}
	return []sandbox.ManagerOption{sandbox.WithObserver(c.Metrics)}
}

func (c Config) durableObserver() durable.Observer {
	if c.Metrics == nil {
		return nil
	}
	return c.Metrics
}

// httpObserver is the API's observer, nil without metrics.
func (c Config) httpObserver() httpapi.Observer {
	if c.Metrics == nil {
		return nil
	}
	return c.Metrics
}

// registerPool adds a collector of pool's stats to cfg's registry until the returned
// function removes it (a role's pool closes with the role; in tests, roles come and go in
// one process).
func (c Config) registerPool(pool *pgxpool.Pool) (unregister func(), err error) {
	if c.MetricsRegistry == nil {
		return func() {}, nil
	}
	col := metrics.NewPoolCollector(func() metrics.PoolStats {
		s := pool.Stat()
		return metrics.PoolStats{Acquired: s.AcquiredConns(), Idle: s.IdleConns(), Constructing: s.ConstructingConns(), Max: s.MaxConns(),
			Acquires: s.AcquireCount(), EmptyAcquires: s.EmptyAcquireCount(), CanceledAcquires: s.CanceledAcquireCount(),
			AcquireWait: s.AcquireDuration()}
	})
	if err := c.MetricsRegistry.Register(col); err != nil {
		return nil, fmt.Errorf("register database pool metrics: %w", err)
	}
	return func() { c.MetricsRegistry.Unregister(col) }, nil
}

// withPoolLabel is c with its database pool's metrics labelled pool=name: dev has two pools
// (the API's and the worker's) in one registry, which tells them apart by the label.
func (c Config) withPoolLabel(name string) Config {
	if c.MetricsRegistry != nil {
		c.MetricsRegistry = prometheus.WrapRegistererWith(prometheus.Labels{"pool": name}, c.MetricsRegistry)
	}
	return c
}

// withMetricsEndpoint answers GET /metrics from g before handing every other request to the
// API (dev only: unauthenticated, on the API's own listener). It keeps CloseStreams, which
// Serve relies on to end live streams at shutdown.
type withMetricsEndpoint struct {
	api     http.Handler
	metrics http.Handler
}

func (h withMetricsEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/metrics" && r.Method == http.MethodGet {
		h.metrics.ServeHTTP(w, r)
		return
	}
	h.api.ServeHTTP(w, r)
}

func (h withMetricsEndpoint) CloseStreams() {
	if d, ok := h.api.(interface{ CloseStreams() }); ok {
		d.CloseStreams()
	}
}
