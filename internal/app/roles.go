package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/managed-agents/managed-agents/internal/credentials"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/stream"
)

// The Run functions are the subcommands: each validates the whole configuration before it
// opens, starts or writes anything, then runs its role until ctx ends.

// start validates cfg and builds the logger.
func start(cfg Config) (*slog.Logger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg.Logger()
}

// RunServe serves the REST API and SSE streams (the API pod): NewAPI, with Temporal when
// MANAGED_AGENT_TEMPORAL_ADDRESS is set. It listens at once and waits for PostgreSQL (then
// applies the migrations) and Temporal, answering /healthz but not /readyz meanwhile, so a
// fresh install, where everything starts together, does not crash-loop.
func RunServe(ctx context.Context, cfg Config, version string) error {
	logger, err := start(cfg)
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return errors.New(missingDatabaseURL())
	}
	cfg, reg, stopTracing, err := instrument(ctx, cfg, "api", logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	stopMetrics, err := serveMetrics(ctx, cfg, reg, logger)
	if err != nil {
		return err
	}
	defer stopMetrics()
	stopPprof, err := servePprof(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer stopPprof()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s (MANAGED_AGENT_ADDR / --addr): %w", cfg.Addr, err)
	}
	boot := newStarting(cfg, logger)
	handler := &startingHandler{s: boot}
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	served := make(chan error, 1)
	go func() { served <- Serve(serveCtx, ln, handler, logger, DefaultServerLimits) }()
	logger.Info("listening; starting", "addr", ln.Addr().String(), "version", version)
	// stop ends the listener on a failed start and returns err.
	stop := func(err error) error {
		stopServing()
		<-served
		return stopped(ctx, err)
	}

	if err := migrateWhenReachable(ctx, boot, cfg, logger); err != nil {
		return stop(err)
	}
	var tc client.Client
	if cfg.TemporalAddress != "" {
		if tc, err = boot.waitTemporal(ctx, cfg, logger); err != nil {
			return stop(err)
		}
		defer tc.Close()
	} else {
		logger.Warn("MANAGED_AGENT_TEMPORAL_ADDRESS is not set: the API accepts events but no session runs until workers are configured")
	}
	boot.done()
	api, err := NewAPI(ctx, cfg, tc, logger)
	if err != nil {
		return stop(err)
	}
	defer api.Close()
	if cfg.APIKey != "" {
		// A configured key an operator revoked stays refused; the API still serves every
		// other key rather than crash-loop on each restart until the variable changes.
		if _, err := api.BindAPIKey(ctx, cfg.APIKey); errors.Is(err, store.ErrKeyEnded) {
			logger.Error("MANAGED_AGENT_API_KEY was revoked or has expired: it is not accepted; configure a new key", "error", err)
		} else if err != nil {
			return stop(err)
		}
	}
	handler.serve(api.Handler)
	logger.Info("serving", "addr", ln.Addr().String(), "version", version)
	return <-served
}

// migrateWhenReachable waits for the database server and applies the migrations, so that
// workers and the controller, which wait for them, can go on while the API still waits for
// Temporal.
func migrateWhenReachable(ctx context.Context, boot *starting, cfg Config, logger *slog.Logger) error {
	st, err := boot.waitPostgres(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	return st.Migrate(ctx, logger)
}

// RunWorker runs session workflows and their activities. The worker does not migrate: it
// requires a database that `migrate` or `serve` has brought to this build's schema, so that
// one role owns schema changes and a worker of an older build never races a newer API. At
// start it waits for PostgreSQL, the migrations and Temporal (MANAGED_AGENT_STARTUP_TIMEOUT).
func RunWorker(ctx context.Context, cfg Config, version string) error {
	logger, err := start(cfg)
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return errors.New("MANAGED_AGENT_DATABASE_URL is not set")
	}
	if cfg.TemporalAddress == "" {
		return errors.New("MANAGED_AGENT_TEMPORAL_ADDRESS is not set: a worker needs Temporal")
	}
	cfg, reg, stopTracing, err := instrument(ctx, cfg, "worker", logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	boot := newStarting(cfg, logger)
	st, unregisterPool, err := openWorkerStore(ctx, boot, cfg)
	if err != nil {
		return stopped(ctx, err)
	}
	defer st.Close()
	defer unregisterPool()
	if err := boot.waitMigrated(ctx, st); err != nil {
		return stopped(ctx, err)
	}
	stopMetrics, err := serveMetrics(ctx, cfg, reg, logger)
	if err != nil {
		return err
	}
	defer stopMetrics()
	stopPprof, err := servePprof(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer stopPprof()
	tc, err := boot.waitTemporal(ctx, cfg, logger)
	if err != nil {
		return stopped(ctx, err)
	}
	defer tc.Close()
	boot.done()
	// Publish-only: a worker never subscribes, so it needs no listener.
	previews := stream.NewPostgresHub(st.Pool(), nil, logger)
	if err := previews.Start(ctx); err != nil {
		return err
	}
	defer previews.Stop()
	w, err := NewWorker(cfg, tc, st, previews, logger)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	defer w.Stop()
	logger.Info("worker running", "task_queue", cfg.TaskQueue, "version", version)
	<-ctx.Done()
	return nil
}

// RunMigrate applies the SQL migrations and returns.
func RunMigrate(ctx context.Context, cfg Config) error {
	logger, err := start(cfg)
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return errors.New("MANAGED_AGENT_DATABASE_URL is not set")
	}
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	return st.Migrate(ctx, logger)
}

// RunVaultRekey reseals every vault credential that is not sealed with the first key of
// MANAGED_AGENT_VAULT_KEYS (the last step of a key rotation, docs/vaults.md) and prints how
// many it resealed. The database must be migrated.
func RunVaultRekey(ctx context.Context, cfg Config, out io.Writer) error {
	logger, err := start(cfg)
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return errors.New("MANAGED_AGENT_DATABASE_URL is not set")
	}
	keys, err := cfg.vaultKeys()
	if err != nil {
		return err
	}
	if keys.Empty() {
		return errors.New("MANAGED_AGENT_VAULT_KEYS is not set: it must list the new key first and every key still in use after it")
	}
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.CheckMigrated(ctx); err != nil {
		return fmt.Errorf("%w: run `managed-agents migrate` (or start the API) first", err)
	}
	n, err := credentials.Rekey(ctx, st, keys, logger)
	fmt.Fprintf(out, "resealed %d vault credentials with key %s\n", n, keys.Primary())
	return err
}

// instrument starts a role's tracing and makes its metrics registry (nil when metrics are
// off or the caller brought its own); stopTracing flushes the spans.
func instrument(ctx context.Context, cfg Config, role string, logger *slog.Logger) (_ Config, reg *prometheus.Registry, stopTracing func(), err error) {
	cfg, stopTracing, err = startTracing(ctx, cfg, role, logger)
	if err != nil {
		return cfg, nil, nil, err
	}
	if cfg, reg, err = withMetrics(cfg); err != nil {
		stopTracing()
		return cfg, nil, nil, err
	}
	return cfg, reg, stopTracing, nil
}

// openWorkerStore opens a worker's database pool, waiting for the server as boot does, and
// registers the pool's metrics: the worker role's own, or dev's worker beside its API.
func openWorkerStore(ctx context.Context, boot *starting, cfg Config) (*store.Store, func(), error) {
	st, err := boot.waitPostgres(ctx, cfg.DatabaseURL, cfg.storeOptions()...)
	if err != nil {
		return nil, nil, err
	}
	unregister, err := cfg.registerPool(st.Pool())
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, unregister, nil
}
