package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/store"
)

// Admin runs the admin subcommands (workspaces and API keys) against the database, through
// the same service and audit log as the admin HTTP API.
type Admin struct {
	Service *sessions.Service
	store   *store.Store
	// Actor is who the audit log names for this process's actions.
	Actor sessions.Actor
}

// databaseURLFile is where dev writes the URL of its private PostgreSQL, so that `admin`
// (and other tools) can reach it while dev runs.
const databaseURLFile = "database-url"

// OpenAdmin connects to MANAGED_AGENT_DATABASE_URL, or to the private PostgreSQL of a
// running `dev` in cfg.DataDir, and checks the schema is current.
func OpenAdmin(ctx context.Context, cfg Config) (*Admin, error) {
	if _, err := start(cfg); err != nil {
		return nil, err
	}
	url := cfg.DatabaseURL
	if url == "" {
		b, err := os.ReadFile(filepath.Join(cfg.DataDir, databaseURLFile))
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("MANAGED_AGENT_DATABASE_URL is not set and no dev server runs with data dir %s (start `managed-agents dev`, or pass --data-dir)", cfg.DataDir)
		}
		if err != nil {
			return nil, fmt.Errorf("read dev's database url: %w", err)
		}
		url = strings.TrimSpace(string(b))
	}
	st, err := store.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := st.CheckMigrated(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("%w: run `managed-agents migrate` (or start the API) first", err)
	}
	// The audit lines (msg="admin action") go to stderr at info whatever the log level: the
	// command's other output stays quiet, its record of what it did does not.
	audit := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return &Admin{Service: sessions.New(st, store.NewNotifier(), audit), store: st, Actor: cliActor()}, nil
}

// Close releases the database pool.
func (a *Admin) Close() { a.store.Close() }

// cliActor names the operator for the audit log: the OS user running the command.
func cliActor() sessions.Actor {
	name := "unknown user"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return sessions.Actor(fmt.Sprintf("admin CLI (%s@%s)", name, host))
}

// writeDatabaseURL records dev's database URL in its data dir for `admin`; removed on stop.
func writeDatabaseURL(dataDir, url string, logger *slog.Logger) func() {
	path := filepath.Join(dataDir, databaseURLFile)
	if err := os.WriteFile(path, []byte(url+"\n"), 0o600); err != nil {
		logger.Warn("cannot record the database url for `managed-agents admin`", "path", path, "error", err)
		return func() {}
	}
	return func() { _ = os.Remove(path) }
}

// PrintKey writes a created key with its secret, which is shown only this once.
func PrintKey(out io.Writer, k sessions.NewKey) {
	fmt.Fprintf(out, "id:        %s\n", k.ID)
	if k.WorkspaceID != "" {
		fmt.Fprintf(out, "workspace: %s\n", k.WorkspaceID)
	} else {
		fmt.Fprintf(out, "admin:     true (authorises the admin API only)\n")
	}
	if k.EnvironmentID != "" {
		fmt.Fprintf(out, "environment: %s (an environment key: its work queue and the sessions it hands out only)\n", k.EnvironmentID)
	}
	if k.Label != "" {
		fmt.Fprintf(out, "label:     %s\n", k.Label)
	}
	if k.ExpiresAt != nil {
		fmt.Fprintf(out, "expires:   %s\n", k.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z"))
	}
	fmt.Fprintf(out, "key:       %s\n\nThe key is shown only now: store it safely.\n", k.Secret)
}
