//go:build integration

package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/pgserver"
	"github.com/managed-agents/managed-agents/internal/pgtest"
	"github.com/managed-agents/managed-agents/internal/store"
)

// logBuffer is a role's log, read by the test while the role writes it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// probe answers the status and body of a GET, 0 when nothing answers.
func probe(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// role runs a role until the test ends; the returned channel has its result.
func role(t *testing.T, run func(context.Context) error) (context.CancelFunc, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		done <- run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(time.Minute):
			t.Error("the role did not stop")
		}
	})
	return cancel, done
}

// TestServeWaitsForPostgreSQL: an API started before its database (a fresh install, where
// every pod starts at once) waits for it instead of exiting: alive (/healthz) and not ready
// (/readyz says what it waits for), one log line per attempt without the password, and
// serving, migrated, once PostgreSQL is up. It crash-looped before.
func TestServeWaitsForPostgreSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ma-late-pg") // short: the server's socket lives in it
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	opts := pgserver.Options{DataDir: dir, Fast: true, Logger: slog.New(slog.DiscardHandler)}
	pg, err := pgserver.Start(ctx, opts) // made once, so the late start below is quick
	require.NoError(t, err)
	url := pg.URL()
	require.NoError(t, pg.Stop(ctx))
	pc, err := pgconn.ParseConfig(url)
	require.NoError(t, err)
	require.NotEmpty(t, pc.Password)

	var logs logBuffer
	addr := freeAddr(t)
	cfg := Config{DatabaseURL: url, Addr: addr, MetricsAddr: "0", LogFormat: "text", LogOutput: &logs, StartupTimeout: 2 * time.Minute}
	stop, done := role(t, func(ctx context.Context) error { return RunServe(ctx, cfg, "test") })

	require.Eventually(t, func() bool {
		return strings.Count(logs.String(), "waiting for PostgreSQL at "+pc.Host+" (socket): ") >= 2
	}, 30*time.Second, 50*time.Millisecond, "one line per attempt: %s", &logs)
	code, _ := probe("http://" + addr + "/healthz")
	require.Equal(t, http.StatusOK, code, "alive: a liveness probe must not restart it")
	code, body := probe("http://" + addr + "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "waiting for PostgreSQL at "+pc.Host)
	code, _ = probe("http://" + addr + "/v1/agents")
	require.Equal(t, http.StatusServiceUnavailable, code)
	select {
	case err := <-done:
		t.Fatalf("serve gave up instead of waiting: %v", err)
	default:
	}

	pg, err = pgserver.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	require.Equal(t, url, pg.URL(), "the same server, come up late")
	require.Eventually(t, func() bool {
		code, _ := probe("http://" + addr + "/readyz")
		return code == http.StatusOK
	}, time.Minute, 50*time.Millisecond, "ready once PostgreSQL is: %s", &logs)
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.CheckMigrated(ctx), "and the migrations are applied")
	require.NotContains(t, logs.String(), pc.Password)

	stop()
	require.NoError(t, <-done)
}

// TestRolesGiveUpAfterTheStartupTimeout: a dependency that never comes up ends the role
// after MANAGED_AGENT_STARTUP_TIMEOUT with an error that says what it waited for, and the
// password appears neither there nor in the log. Meanwhile the controller's probes say alive,
// not ready.
func TestRolesGiveUpAfterTheStartupTimeout(t *testing.T) {
	t.Parallel()
	const password = "s3cret-pa55word"
	nowhere := "/nonexistent/ma-" + ids.New("")
	migrated := pgtest.URL(t)
	st, err := store.Open(context.Background(), migrated)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(context.Background(), slog.New(slog.DiscardHandler)))
	st.Close()
	unmigrated := pgtest.URL(t)

	tests := []struct {
		name   string
		run    func(context.Context, Config) error
		cfg    Config
		health bool // the role serves probes on ControllerHealthAddr while it waits
		want   []string
	}{
		{name: "serve, PostgreSQL over TCP", run: func(ctx context.Context, c Config) error { return RunServe(ctx, c, "test") },
			cfg:  Config{DatabaseURL: "postgres://ma:" + password + "@127.0.0.1:1/ma"},
			want: []string{"PostgreSQL at 127.0.0.1:1: not ready after 2s (MANAGED_AGENT_STARTUP_TIMEOUT)"}},
		{name: "worker, PostgreSQL on a socket", run: func(ctx context.Context, c Config) error { return RunWorker(ctx, c, "test") },
			cfg:  Config{DatabaseURL: "postgres://ma:" + password + "@/ma?host=" + nowhere, TemporalAddress: "127.0.0.1:1"},
			want: []string{"PostgreSQL at " + nowhere + " (socket): not ready after 2s"}},
		{name: "worker, the migrations", run: func(ctx context.Context, c Config) error { return RunWorker(ctx, c, "test") },
			cfg:  Config{DatabaseURL: unmigrated, TemporalAddress: "127.0.0.1:1"},
			want: []string{"the database migrations (the API applies them at start): not ready after 2s", store.ErrSchemaNotCurrent.Error(), "run `managed-agents migrate`"}},
		{name: "worker, Temporal", run: func(ctx context.Context, c Config) error { return RunWorker(ctx, c, "test") },
			cfg:  Config{DatabaseURL: migrated, TemporalAddress: "127.0.0.1:1"},
			want: []string{"Temporal at 127.0.0.1:1: not ready after 2s"}},
		{name: "controller, PostgreSQL", run: func(ctx context.Context, c Config) error { return RunController(ctx, c, "test") },
			cfg: Config{DatabaseURL: "postgres://ma:" + password + "@127.0.0.1:1/ma"}, health: true,
			want: []string{"PostgreSQL at 127.0.0.1:1: not ready after 2s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs logBuffer
			cfg := tt.cfg
			cfg.MetricsAddr, cfg.ControllerMetricsAddr, cfg.LogFormat, cfg.LogOutput, cfg.StartupTimeout = "0", "0", "text", &logs, 2*time.Second
			cfg.Addr, cfg.ControllerHealthAddr = freeAddr(t), freeAddr(t)
			begin := time.Now()
			_, done := role(t, func(ctx context.Context) error { return tt.run(ctx, cfg) })
			if tt.health {
				require.Eventually(t, func() bool {
					code, _ := probe("http://" + cfg.ControllerHealthAddr + "/healthz")
					return code == http.StatusOK
				}, 10*time.Second, 20*time.Millisecond)
				code, body := probe("http://" + cfg.ControllerHealthAddr + "/readyz")
				require.Equal(t, http.StatusServiceUnavailable, code)
				require.Contains(t, body, "waiting for PostgreSQL")
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the role never gave up")
			}
			require.Error(t, err)
			require.GreaterOrEqual(t, time.Since(begin), 2*time.Second, "it waited: %v", err)
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
			require.NotContains(t, err.Error(), password)
			require.NotContains(t, logs.String(), password)
			require.Contains(t, logs.String(), "waiting for ")
		})
	}
}

// TestWorkerWaitsForTheMigrations: a worker started before the API applied the migrations
// waits for them, then runs. It exited with "run `managed-agents migrate`" before, and
// Kubernetes restarted it until the API was done.
func TestWorkerWaitsForTheMigrations(t *testing.T) {
	t.Parallel()
	temporal, err := durable.StartDevServer(context.Background(), durable.DevServerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = temporal.Stop() })
	url := pgtest.URL(t)
	var logs logBuffer
	cfg := Config{DatabaseURL: url, TemporalAddress: temporal.FrontendHostPort(), TaskQueue: "wait-" + ids.New(""), SandboxDir: t.TempDir(),
		MetricsAddr: "0", LogFormat: "text", LogOutput: &logs, StartupTimeout: 2 * time.Minute}
	stop, done := role(t, func(ctx context.Context) error { return RunWorker(ctx, cfg, "test") })
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "waiting for the database migrations")
	}, 30*time.Second, 50*time.Millisecond, "%s", &logs)

	require.NoError(t, RunMigrate(context.Background(), Config{DatabaseURL: url, LogOutput: io.Discard}))
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "worker running")
	}, time.Minute, 50*time.Millisecond, "%s", &logs)
	require.Contains(t, logs.String(), "done waiting for the database migrations")
	stop()
	require.NoError(t, <-done)
}
