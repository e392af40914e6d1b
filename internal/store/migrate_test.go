//go:build integration

package store

import (
	"bytes"
	"io/fs"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/pgtest"
)

// logBuffer collects log lines from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// applied counts the migrations Migrate reported applying.
func (b *logBuffer) applied() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), `msg="applied migration"`)
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// embeddedVersions are the versions of the migration files, parsed as goose does (the
// leading number of the file name).
func embeddedVersions(t *testing.T) []int64 {
	t.Helper()
	files, err := fs.Glob(migrations, "migrations/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := make([]int64, 0, len(files))
	for _, f := range files {
		num, _, ok := strings.Cut(path.Base(f), "_")
		require.True(t, ok, "migration file %s has no version prefix", f)
		v, err := strconv.ParseInt(num, 10, 64)
		require.NoError(t, err, "migration file %s", f)
		out = append(out, v)
	}
	return out
}

// appliedVersions lists goose's record of applied versions, one row per application, so a
// migration applied twice shows up twice.
func appliedVersions(t *testing.T, st *Store) []int64 {
	t.Helper()
	rows, err := st.Pool().Query(t.Context(), `SELECT version_id FROM goose_db_version WHERE version_id > 0 AND is_applied ORDER BY id`)
	require.NoError(t, err)
	var out []int64
	for rows.Next() {
		var v int64
		require.NoError(t, rows.Scan(&v))
		out = append(out, v)
	}
	require.NoError(t, rows.Err())
	return out
}

func userTables(t *testing.T, st *Store) []string {
	t.Helper()
	rows, err := st.Pool().Query(t.Context(), `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		out = append(out, name)
	}
	require.NoError(t, rows.Err())
	return out
}

// The tables the queries of this package use.
var storeTables = []string{"agent_versions", "agents", "api_keys", "environments", "event_sends", "events", "sandbox_bindings", "sessions", "workspaces"}

func TestMigrateFreshDatabase(t *testing.T) {
	t.Parallel()
	st := openStore(t, pgtest.URL(t))
	require.Empty(t, userTables(t, st), "the database starts empty")

	var logs logBuffer
	require.NoError(t, st.Migrate(t.Context(), logs.logger()))

	want := embeddedVersions(t)
	require.Equal(t, len(want), logs.applied(), "every embedded migration is applied and logged")
	require.ElementsMatch(t, want, appliedVersions(t, st))
	require.Subset(t, userTables(t, st), storeTables)
}

func TestMigrateTwiceIsANoOp(t *testing.T) {
	t.Parallel()
	st := openStore(t, pgtest.URL(t))
	require.NoError(t, st.Migrate(t.Context(), discardLogger()))
	before := appliedVersions(t, st)

	var logs logBuffer
	require.NoError(t, st.Migrate(t.Context(), logs.logger()))
	require.Zero(t, logs.applied(), "a second run applies nothing")
	require.Equal(t, before, appliedVersions(t, st))

	// The store still works after the second run: the pool was not closed with the
	// database/sql wrapper Migrate builds over it.
	_, err := st.CreateWorkspace(t.Context(), "after")
	require.NoError(t, err)
}

// Several replicas starting at once each migrate with their own pool; goose's session
// advisory lock lets one apply the schema while the others wait and find nothing to do.
func TestMigrateConcurrentlyFromSeveralStores(t *testing.T) {
	t.Parallel()
	const replicas = 5
	url := pgtest.URL(t)
	stores := make([]*Store, replicas)
	for i := range stores {
		stores[i] = openStore(t, url)
	}

	var logs logBuffer
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Go(func() { errs[i] = st.Migrate(t.Context(), logs.logger()) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "replica %d", i)
	}

	want := embeddedVersions(t)
	require.Equal(t, len(want), logs.applied(), "the schema is applied once in total")
	require.ElementsMatch(t, want, appliedVersions(t, stores[0]), "goose recorded each version once")
	require.Subset(t, userTables(t, stores[0]), storeTables)
}

// A worker does not migrate: it refuses a database the API has not migrated yet.
func TestCheckMigrated(t *testing.T) {
	t.Parallel()
	st := openStore(t, pgtest.URL(t))
	require.ErrorIs(t, st.CheckMigrated(t.Context()), ErrSchemaNotCurrent, "a fresh database")
	require.NoError(t, st.Migrate(t.Context(), discardLogger()))
	require.NoError(t, st.CheckMigrated(t.Context()), "after Migrate")
}
