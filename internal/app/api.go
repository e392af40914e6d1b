package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/httpapi"
	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/stream"
)

// API is the wired REST API: store, notifier, service and HTTP handler.
type API struct {
	Store   *store.Store
	Service *sessions.Service
	Handler http.Handler
	// Previews carries token previews between processes (PostgreSQL NOTIFY); a worker in the
	// same process publishes to it.
	Previews *stream.PostgresHub
	notifier *store.Notifier
	stop     context.CancelFunc
	done     chan struct{}
	temporal client.Client
}

// UseRunner makes sessions run: committed client events start or signal the session's
// Temporal workflow, and /readyz checks Temporal too.
func (a *API) UseRunner(tc client.Client, taskQueue string, retry durable.ModelRetry, logger *slog.Logger) {
	a.temporal = tc
	a.Service.SetRunner(&durable.Runner{Client: tc, TaskQueue: taskQueue, Retry: retry, Logger: logger})
}

// NewAPI connects to the database, applies migrations, starts the notifier and builds the
// handler. Close releases it all.
func NewAPI(ctx context.Context, databaseURL string, logger *slog.Logger) (*API, error) {
	if databaseURL == "" {
		return nil, errors.New("MANAGED_AGENT_DATABASE_URL is not set: point it at PostgreSQL, or use `managed-agents dev` to run a private one")
	}
	st, err := store.Open(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	if err := st.Migrate(ctx, logger); err != nil {
		st.Close()
		return nil, err
	}
	notifier := store.NewNotifier(st.Pool(), logger)
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	previews := stream.NewPostgresHub(st.Pool(), logger)
	var wg sync.WaitGroup
	wg.Go(func() { notifier.Run(runCtx) })
	wg.Go(func() { previews.Run(runCtx) })
	go func() {
		wg.Wait()
		close(done)
	}()
	svc := sessions.New(st, notifier, logger)
	svc.Wakes().Start()
	a := &API{Store: st, Service: svc, Previews: previews, notifier: notifier, stop: stop, done: done}
	a.Handler = httpapi.New(httpapi.Config{Service: svc, Auth: svc, Logger: logger, Ready: a.ready, Previews: previews})
	return a, nil
}

// ready: the database answers, the notifier listens and, when sessions run, Temporal answers.
func (a *API) ready(ctx context.Context) error {
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

// Close stops the background wake-ups and the notifier and closes the database pool.
func (a *API) Close() {
	a.Service.Wakes().Stop()
	a.stop()
	<-a.done
	a.Store.Close()
}

// BindAPIKey makes key valid, in its own workspace if it is new.
func (a *API) BindAPIKey(ctx context.Context, key string) (string, error) {
	ws, err := a.Store.EnsureAPIKey(ctx, key, "default")
	if err != nil {
		return "", fmt.Errorf("register api key: %w", err)
	}
	return ws, nil
}

// Serve runs an HTTP server on ln until ctx ends, then drains it.
func Serve(ctx context.Context, ln net.Listener, handler http.Handler, logger *slog.Logger) error {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	if d, ok := handler.(interface{ CloseStreams() }); ok {
		srv.RegisterOnShutdown(d.CloseStreams)
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
	return nil
}
