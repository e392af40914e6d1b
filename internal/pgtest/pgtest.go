// Package pgtest gives every test its own empty PostgreSQL database, so that database tests
// run with t.Parallel and never see each other's rows. A test binary starts one private
// server (internal/pgserver) the first time a test asks, or uses the server named by
// MANAGED_AGENT_TEST_DATABASE_URL.
//
// It must never import internal/store or any other package of ours but pgserver: callers
// apply their own migrations to the database they get.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/managed-agents/managed-agents/internal/pgserver"
)

// EnvURL names a running server to create the test databases on instead of starting one.
// Its user must be allowed to create and drop databases.
const EnvURL = "MANAGED_AGENT_TEST_DATABASE_URL"

const (
	startTimeout = 2 * time.Minute
	dropTimeout  = 30 * time.Second
)

var (
	mainCalled atomic.Bool

	setupOnce sync.Once
	setupErr  error
	shared    *cluster
)

// cluster is the server the databases are created on, reached through its admin database.
type cluster struct {
	adminURL string
	admin    *pgxpool.Pool
	server   *pgserver.Server // nil when the server is external
	tmpDir   string
}

// Main runs the tests of a package, then stops the server if one was started, and exits
// with the tests' code. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit, for a TestMain that has more to stop afterwards.
func Run(m *testing.M) int {
	mainCalled.Store(true)
	code := m.Run()
	if shared != nil {
		if err := shared.close(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// URL creates an empty database for this test and returns a pgx connection URL for it. The
// database is dropped (connections still open are terminated) when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("pgtest: the package's TestMain must call pgtest.Main(m), which stops the server after the tests")
	}
	setupOnce.Do(func() { shared, setupErr = setup() })
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	u, err := shared.createDatabase(t)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func setup() (*cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if u := os.Getenv(EnvURL); u != "" {
		c, err := connectAdmin(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("pgtest: %s: %w", EnvURL, err)
		}
		return c, nil
	}
	c, err := startServer(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgtest: start a private PostgreSQL (or set %s to use a running server): %w", EnvURL, err)
	}
	return c, nil
}

func startServer(ctx context.Context) (*cluster, error) {
	tmpDir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	// As root the server runs as another user, which must pass through this directory.
	if err := os.Chmod(tmpDir, 0o755); err != nil {
		_ = os.RemoveAll(tmpDir)
		return nil, err
	}
	server, err := pgserver.Start(ctx, pgserver.Options{
		DataDir: filepath.Join(tmpDir, "data"),
		// The admin database exists in every cluster; tests never use it.
		Database: "postgres",
		Fast:     true,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		_ = os.RemoveAll(tmpDir)
		return nil, err
	}
	c, err := connectAdmin(ctx, server.URL())
	if err != nil {
		_ = server.Stop(context.Background())
		_ = os.RemoveAll(tmpDir)
		return nil, err
	}
	c.server, c.tmpDir = server, tmpDir
	return c, nil
}

func connectAdmin(ctx context.Context, adminURL string) (*cluster, error) {
	admin, err := pgxpool.New(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := admin.Ping(ctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return &cluster{adminURL: adminURL, admin: admin}, nil
}

func (c *cluster) close() error {
	c.admin.Close()
	if c.server == nil {
		return nil
	}
	err := c.server.Stop(context.Background())
	return errors.Join(err, os.RemoveAll(c.tmpDir))
}

func (c *cluster) createDatabase(t testing.TB) (string, error) {
	name, err := databaseName(t.Name())
	if err != nil {
		return "", err
	}
	ident := pgx.Identifier{name}.Sanitize()
	// template0 is never connected to, so parallel creations cannot fail with "source
	// database is being accessed by other users", and it is pristine on a shared server.
	if _, err := c.admin.Exec(t.Context(), "CREATE DATABASE "+ident+" TEMPLATE template0"); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	t.Cleanup(func() {
		// t.Context is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		if _, err := c.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return withDatabase(c.adminURL, name)
}

// databaseName is unique and carries the test's name, so a database left behind on a shared
// server (by a killed test binary) says where it came from. PostgreSQL truncates names
// beyond 63 bytes.
func databaseName(testName string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("pgtest: database name: %w", err)
	}
	readable := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		default:
			return '_'
		}
	}, testName)
	if len(readable) > 30 {
		readable = readable[:30]
	}
	return "pgtest_" + readable + "_" + hex.EncodeToString(b[:]), nil
}

// withDatabase points a connection string, URL or keyword/value form, at another database.
func withDatabase(connString, database string) (string, error) {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			return "", fmt.Errorf("pgtest: parse connection URL: %w", err)
		}
		u.Path, u.RawPath = "/"+database, ""
		q := u.Query()
		if q.Has("dbname") { // libpq lets dbname in the query override the path
			q.Set("dbname", database)
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	// Keyword/value form: a later keyword overrides an earlier one.
	return strings.TrimSpace(connString) + " dbname=" + database, nil
}
