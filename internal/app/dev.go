package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/metrics"
	"github.com/managed-agents/managed-agents/internal/pgserver"
	"github.com/managed-agents/managed-agents/internal/secretbox"
	"github.com/managed-agents/managed-agents/internal/startstop"
	"github.com/managed-agents/managed-agents/internal/store"
)

// RunDev runs everything a laptop needs in one process on embedded defaults: a private
// PostgreSQL under the data dir (unless MANAGED_AGENT_DATABASE_URL is set), a Temporal dev
// server (unless MANAGED_AGENT_TEMPORAL_ADDRESS is set), the API and a worker that shares
// the API's store and preview hub. It validates the configuration before it creates the data
// dir, stops what it started when ctx ends, and data survives restarts.
func RunDev(ctx context.Context, cfg Config) (err error) {
	logger, err := start(cfg)
	if err != nil {
		return err
	}
	cfg, stopTracing, err := startTracing(ctx, cfg, "dev", logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	stopPprof, err := servePprof(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer stopPprof()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("create data dir %s: %w", cfg.DataDir, err)
	}
	if cfg.VaultKeys, err = devVaultKeys(cfg); err != nil {
		return err
	}
	// Every role of dev records into one registry, answered at the API's own /metrics.
	cfg, reg, err := newMetrics(cfg)
	if err != nil {
		return err
	}
	// The children dev started, each brought back when it dies.
	var watches startstop.Group
	if cfg.DatabaseURL == "" {
		pg, err := pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(cfg.DataDir, "postgres"), Logger: logger})
		if err != nil {
			return fmt.Errorf("start private PostgreSQL: %w", err)
		}
		defer func() {
			if err := pg.Stop(context.WithoutCancel(ctx)); err != nil {
				logger.Error("stop PostgreSQL", "error", err)
			}
		}()
		cfg.DatabaseURL = pg.URL()
		defer writeDatabaseURL(cfg.DataDir, pg.URL(), logger)()
		watches = append(watches, &childWatch{name: "PostgreSQL", exited: pg.Exited, restart: pg.Restart, logger: logger})
	}
	tc, srv, stopTemporal, err := devTemporal(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer stopTemporal()
	if srv != nil {
		watches = append(watches, &childWatch{name: "the Temporal dev server", exited: srv.Exited, restart: srv.Restart, logger: logger})
	}
	// Deferred after the children's stops, so it runs before them: a child that is being
	// stopped is not brought back.
	if err := watches.Start(ctx); err != nil {
		return err
	}
	defer watches.Stop()
	api, err := NewAPI(ctx, cfg.withPoolLabel("api"), tc, logger)
	if err != nil {
		return err
	}
	defer api.Close()
	// The worker has a database pool of its own, as it has in a deployment, where it is a
	// process of its own: with one pool a request's transaction waited for a connection
	// behind the worker's steps (a POST's acknowledgement p50 60-80 ms with 50 busy sessions
	// on 2 cores, 17-23 ms with a pool each).
	workerStore, unregisterPool, err := openWorkerStore(ctx, newStarting(cfg, logger), cfg.withPoolLabel("worker"))
	if err != nil {
		return err
	}
	defer workerStore.Close()
	defer unregisterPool()
	w, err := NewWorker(cfg, tc, workerStore, api.Previews, logger)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	defer w.Stop()

	key, generated, err := devAPIKey(cfg)
	if err != nil {
		return err
	}
	ws, err := api.BindAPIKey(ctx, key)
	if generated && errors.Is(err, store.ErrKeyEnded) {
		// The kept key was revoked (or replaced by a configured one): make a new one.
		logger.Warn("the API key kept in the data dir was revoked or replaced; generating a new one")
		if err := os.Remove(filepath.Join(cfg.DataDir, "api-key")); err != nil {
			return fmt.Errorf("remove the ended api key: %w", err)
		}
		if key, generated, err = devAPIKey(cfg); err != nil {
			return err
		}
		ws, err = api.BindAPIKey(ctx, key)
	}
	if err != nil {
		return err
	}
	if cfg.Kubeconfig != "" {
		// The controller runs beside the API against the developer's cluster; if it fails
		// (cluster unreachable, CRDs missing), dev stops with its error rather than run half.
		var stopController func() error
		ctx, stopController = devController(ctx, cfg, api, ws, logger)
		defer func() {
			if cerr := stopController(); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s (MANAGED_AGENT_ADDR / --addr): %w", cfg.Addr, err)
	}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(os.Stdout, "managed-agents dev is running\n  URL:      %s\n  API key:  %s%s\n  data dir: %s\n\nTry:\n  curl -s %s/v1/agents -H 'x-api-key: %s' -H 'anthropic-version: 2023-06-01' -H 'anthropic-beta: managed-agents-2026-04-01'\n\n",
		url, key, map[bool]string{true: " (generated; kept in the data dir)", false: ""}[generated], cfg.DataDir, url, key)
	return Serve(ctx, ln, withMetricsEndpoint{api: api.Handler, metrics: metrics.Handler(reg)}, logger, DefaultServerLimits)
}

// devTemporal connects to MANAGED_AGENT_TEMPORAL_ADDRESS, or starts the Temporal CLI dev
// server with its state in the data dir (so workflows survive a restart of dev) and returns
// it too.
func devTemporal(ctx context.Context, cfg Config, logger *slog.Logger) (client.Client, *durable.DevServer, func(), error) {
	if cfg.TemporalAddress != "" {
		tc, err := DialTemporal(ctx, cfg, logger)
		if err != nil {
			return nil, nil, nil, err
		}
		return tc, nil, tc.Close, nil
	}
	logFile, err := os.OpenFile(filepath.Join(cfg.DataDir, "temporal.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open temporal log: %w", err)
	}
	srv, err := durable.StartDevServer(ctx, durable.DevServerOptions{DBFile: filepath.Join(cfg.DataDir, "temporal.db"), UI: true, Output: logFile})
	if err != nil {
		logFile.Close()
		return nil, nil, nil, err
	}
	logger.Info("started Temporal dev server", "address", srv.FrontendHostPort())
	return srv.Client(), srv, func() {
		if err := srv.Stop(); err != nil {
			logger.Error("stop Temporal dev server", "error", err)
		}
		logFile.Close()
	}, nil
}

// devAPIKey returns the configured key, or the one generated on a first start and kept in
// the data dir so restarts print the same key.
func devAPIKey(cfg Config) (key string, generated bool, err error) {
	if cfg.APIKey != "" {
		return cfg.APIKey, false, nil
	}
	path := filepath.Join(cfg.DataDir, "api-key")
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), true, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("read %s: %w", path, err)
	}
	raw := make([]byte, 24)
	_, _ = rand.Read(raw)
	key = "sk-ma-dev-" + base64.RawURLEncoding.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("write %s: %w", path, err)
	}
	return key, true, nil
}

// devVaultKeys returns the configured vault keyring, or the one generated on a first start
// and kept in the data dir (vault-keys, mode 0600), so credentials stored by one run of dev
// decrypt in the next.
func devVaultKeys(cfg Config) (string, error) {
	if cfg.VaultKeys != "" {
		return cfg.VaultKeys, nil
	}
	path := filepath.Join(cfg.DataDir, "vault-keys")
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		spec := strings.TrimSpace(string(b))
		if _, err := secretbox.Parse(spec); err != nil {
			return "", fmt.Errorf("%s: %v (remove the file to generate a new key; credentials sealed with the old one are then lost)", path, err)
		}
		return spec, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	spec := secretbox.NewSpec("dev1")
	if err := os.WriteFile(path, []byte(spec+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return spec, nil
}

// devController runs the controller manager in the background against cfg.Kubeconfig's
// cluster, with namespace default mapped to the dev key's workspace ws, so `kubectl apply`
// and the printed API key see the same sessions. The returned context ends when the
// controller fails; stop waits for it and returns its error.
func devController(ctx context.Context, cfg Config, api *API, ws string, logger *slog.Logger) (context.Context, func() error) {
	cfg.ControllerMetricsAddr = orDefault(cfg.ControllerMetricsAddr, "0")
	cfg.ControllerHealthAddr = orDefault(cfg.ControllerHealthAddr, "0")
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan error, 1)
	go func() {
		err := RunControllerManager(ctx, cfg, ControllerDeps{Store: api.Store, Service: api.Service, Workspaces: map[string]string{"default": ws}}, logger)
		if err != nil {
			logger.Error("controller stopped", "error", err)
			err = fmt.Errorf("controller (--kubeconfig %s): %w", cfg.Kubeconfig, err)
		}
		done <- err
		cancel(err)
	}()
	return ctx, func() error {
		cancel(nil)
		return <-done
	}
}
