//go:build integration

package store

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/pgtest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// waitFor bounds every wait for something asynchronous (a wake-up, a reconnect). It is a
// deadline for a hang, not a speed assertion.
const waitFor = 15 * time.Second

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openStore connects to url and closes the store when the test ends; it does not migrate.
func openStore(t testing.TB, url string) *Store {
	t.Helper()
	st, err := Open(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// newStore is a migrated store on the test's own database.
func newStore(t testing.TB) *Store {
	t.Helper()
	st := openStore(t, pgtest.URL(t))
	require.NoError(t, st.Migrate(context.Background(), discardLogger()))
	return st
}

// migratedURL is a migrated database's URL, for tests that open their own stores.
func migratedURL(t testing.TB) string {
	t.Helper()
	url := pgtest.URL(t)
	st, err := Open(context.Background(), url)
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Migrate(context.Background(), discardLogger()))
	return url
}

// withPoolSize raises pgxpool's default of max(4, NumCPU) connections, for tests and
// benchmarks with more concurrent writers than that.
func withPoolSize(url string, n int) string {
	param := "pool_max_conns=" + strconv.Itoa(n)
	if strings.Contains(url, "://") {
		if strings.Contains(url, "?") {
			return url + "&" + param
		}
		return url + "?" + param
	}
	return url + " " + param
}

// fixture is a workspace with one agent and one environment, the parents every session needs.
type fixture struct {
	st      *Store
	ws      string
	agentID string
	envID   string
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	return newFixtureOn(t, newStore(t))
}

func newFixtureOn(t testing.TB, st *Store) fixture {
	t.Helper()
	ctx := context.Background()
	ws, err := st.CreateWorkspace(ctx, "test")
	require.NoError(t, err)
	f := fixture{st: st, ws: ws, agentID: ids.New(ids.Agent), envID: ids.New(ids.Environment)}
	now := time.Now()
	require.NoError(t, st.InsertAgent(ctx, f.agentID, ws, json.RawMessage(`{"name":"a","model":"m"}`), now))
	require.NoError(t, st.InsertEnvironment(ctx, EnvironmentRecord{
		ID: f.envID, WorkspaceID: ws, Name: "env-" + f.envID, Config: json.RawMessage(`{}`), Scope: "workspace", CreatedAt: now,
	}))
	return f
}

// sessionRecord is a minimal valid session row of the fixture.
func (f fixture) sessionRecord(id string, createdAt time.Time) SessionRecord {
	return SessionRecord{
		ID: id, WorkspaceID: f.ws, AgentID: f.agentID, AgentVersion: 1, EnvironmentID: f.envID,
		Agent: json.RawMessage(`{}`), Status: "idle", Usage: json.RawMessage(`{}`), CreatedAt: createdAt,
	}
}

// newSession inserts a session and returns its id.
func (f fixture) newSession(t testing.TB) string {
	t.Helper()
	id := ids.New(ids.Session)
	require.NoError(t, f.st.InsertSession(context.Background(), f.sessionRecord(id, time.Now())))
	return id
}

// micros is a time PostgreSQL stores exactly (timestamptz has microsecond resolution).
func micros(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// requireSameEvents compares events field by field: times by instant, bodies as JSON
// (jsonb normalizes whitespace and key order).
func requireSameEvents(t testing.TB, want, got []wire.Event) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		require.Equal(t, w.ID, g.ID, "event %d id", i)
		require.Equal(t, w.Type, g.Type, "event %d type", i)
		require.Equal(t, w.Seq, g.Seq, "event %d seq", i)
		require.True(t, w.CreatedAt.Equal(g.CreatedAt), "event %d created_at: want %s, got %s", i, w.CreatedAt, g.CreatedAt)
		requireSameTime(t, w.ProcessedAt, g.ProcessedAt, fmt.Sprintf("event %d processed_at", i))
		require.JSONEq(t, string(w.Body), string(g.Body), "event %d body", i)
	}
}

func requireSameTime(t testing.TB, want, got *time.Time, what string) {
	t.Helper()
	if want == nil {
		require.Nil(t, got, what)
		return
	}
	require.NotNil(t, got, what)
	require.True(t, want.Equal(*got), "%s: want %s, got %s", what, *want, *got)
}

func seqsOf(evs []wire.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}
