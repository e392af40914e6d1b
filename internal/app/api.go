package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/net/netutil"

	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/httpapi"
	"github.com/managed-agents/managed-agents/internal/pgserver"
	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/startstop"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/stream"
	"github.com/managed-agents/managed-agents/internal/workqueue"
)

// API is the API server role, running: the store (migrated), the process's LISTEN component
// feeding live streams (committed-event wake-ups and previews, on separate topics), the
// preview hub, the sessions service and the HTTP handler.
type API struct {
	Store   *store.Store
	Service *sessions.Service
	Handler http.Handler
	// Previews carries token previews between processes (PostgreSQL NOTIFY); a worker in the
	// same process (dev) publishes to it.
	Previews *stream.PostgresHub

	notifier *store.Notifier
	services startstop.Group
	temporal client.Client
	// unregisterPool removes the pool's collector from the metrics registry.
	unregisterPool func()
}

// NewAPI connects to cfg.DatabaseURL, applies migrations, starts listening and builds the
// handler; the API is ready to serve when it returns, and Close releases it all. With tc,
// sessions run: committed client events start or signal the session's workflow on
// cfg.TaskQueue, and /readyz checks Temporal too. Without tc, events stay queued until a
// worker's sweep finds them.
func NewAPI(ctx context.Context, cfg Config, tc client.Client, logger *slog.Logger) (*API, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New(missingDatabaseURL())
	}
	st, err := store.Open(ctx, cfg.DatabaseURL, cfg.storeOptions()...)
	if err != nil {
		return nil, err
	}
	if err := st.Migrate(ctx, logger); err != nil {
		st.Close()
		return nil, err
	}
	listener := store.NewListener(st.Pool(), logger, cfg.listenerOptions()...)
	notifier := store.NewNotifier()
	if err := listener.Listen(store.TopicEvents, notifier); err != nil {
		st.Close()
		return nil, err
	}
	previews := stream.NewPostgresHub(st.Pool(), listener, logger)
	var opts []sessions.Option
	if tc != nil {
		opts = append(opts, sessions.WithRunner(&durable.Runner{Client: tc, TaskQueue: cfg.TaskQueue, Retry: cfg.modelRetry(), Logger: logger, Tracer: cfg.Tracing.Provider}))
	}
	vaultKeys, err := cfg.vaultKeys()
	if err != nil {
		st.Close()
		return nil, err
	}
	if vaultKeys.Empty() {
		logger.Warn("MANAGED_AGENT_VAULT_KEYS is not set: vault credentials cannot be created (docs/vaults.md)")
	}
	opts = append(opts, sessions.WithVaultKeys(vaultKeys), sessions.WithLimits(cfg.sessionLimits()), sessions.WithKeyCacheTTL(cfg.KeyCacheTTL))
	svc := sessions.New(st, notifier, logger, opts...)
	if err := listener.Listen(store.TopicKeys, svc.Keys()); err != nil {
		st.Close()
		return nil, err
	}
	unregisterPool, err := cfg.registerPool(st.Pool())
	if err != nil {
		st.Close()
		return nil, err
	}
	arrivals := workqueue.NewArrivals()
	if err := listener.Listen(store.TopicWork, arrivals); err != nil {
		unregisterPool()
		st.Close()
		return nil, err
	}
	work := workqueue.New(st, arrivals, workqueue.Config{LeaseTTL: cfg.WorkLeaseTTL}, logger)
	svc.Wakes().Start()
	a := &API{
		Store: st, Service: svc, Previews: previews,
		notifier: notifier, temporal: tc, unregisterPool: unregisterPool,
		services: startstop.Group{listener, previews},
	}
	a.Handler = httpapi.New(httpapi.Config{Service: svc, Auth: svc, Logger: logger, Ready: a.ready, Previews: previews, AdminKey: cfg.AdminKey,
		Tracer: cfg.Tracing.Provider, Observer: cfg.httpObserver(), Work: work})
	if err := a.services.Start(ctx); err != nil {
		unregisterPool()
		st.Close()
		return nil, err
	}
	return a, nil
}

// readyTimeout bounds one readiness check.
const readyTimeout = 5 * time.Second

// ready: the database answers, the notifier listens and, when sessions run, Temporal answers.
func (a *API) ready(ctx context.Context) error {
	// A probe answers promptly: a dependency that does not answer in time is not ready.
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	select {
	case <-a.notifier.Ready():
	default:
		return errors.New("event notifier is not listening yet")
	}
	if err := a.Store.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if a.temporal != nil {
		if _, err := a.temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			return fmt.Errorf("temporal: %w", err)
		}
	}
	return nil
}

// Close stops the background wake-ups, listening and the preview hub, and closes the database pool. The Temporal
// client is the caller's.
func (a *API) Close() {
	a.Service.Wakes().Stop()
	a.services.Stop()
	a.unregisterPool()
	a.Store.Close()
}

// BindAPIKey makes key (MANAGED_AGENT_API_KEY) valid in the workspace named "default",
// ending the configured key it replaces.
func (a *API) BindAPIKey(ctx context.Context, key string) (string, error) {
	return a.Service.BindConfiguredKey(ctx, key, "default")
}

// Serve runs an HTTP server on ln until ctx ends, then drains it. limits bound what one
// client can hold: deadlines per request (none that cut a stream), idle keep-alives and the
// number of connections.
func Serve(ctx context.Context, ln net.Listener, handler http.Handler, logger *slog.Logger, limits ServerLimits) error {
	srv := &http.Server{
		Handler:           withLimits(handler, limits),
		ReadHeaderTimeout: limits.ReadHeaderTimeout,
		IdleTimeout:       limits.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if d, ok := handler.(interface{ CloseStreams() }); ok {
		srv.RegisterOnShutdown(d.CloseStreams)
	}
	if limits.MaxConnections > 0 {
		ln = netutil.LimitListener(ln, limits.MaxConnections)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Shutdown ends live streams (RegisterOnShutdown) and waits for other requests.
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	<-errc
	return nil
}

// missingDatabaseURL says what to do without MANAGED_AGENT_DATABASE_URL. `dev` runs a private
// PostgreSQL only where the server binaries are installed, so it is suggested only there (not,
// for example, in the container image, which has none).
func missingDatabaseURL() string {
	msg := "MANAGED_AGENT_DATABASE_URL is not set: point it at PostgreSQL (postgres://user:password@host:5432/db)"
	if _, err := pgserver.FindBinaries(); err == nil {
		msg += ", or use `managed-agents dev` to run a private one"
	}
	return msg
}
