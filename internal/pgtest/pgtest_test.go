//go:build integration

package pgtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestURLGivesEachParallelTestItsOwnEmptyDatabase(t *testing.T) {
	names := make(chan string, 8)
	t.Run("group", func(t *testing.T) {
		for i := range cap(names) {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				begin := time.Now()
				url := URL(t)
				t.Logf("URL took %s", time.Since(begin))
				conn := connect(t, url)

				var tables int
				require.NoError(t, conn.QueryRow(t.Context(),
					"SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')").Scan(&tables))
				require.Zero(t, tables, "a fresh database is empty")

				// The same table name in every database: no test sees another's.
				_, err := conn.Exec(t.Context(), "CREATE TABLE items (n int)")
				require.NoError(t, err)
				_, err = conn.Exec(t.Context(), "INSERT INTO items VALUES ($1)", i)
				require.NoError(t, err)
				var n int
				require.NoError(t, conn.QueryRow(t.Context(), "SELECT n FROM items").Scan(&n))
				require.Equal(t, i, n)

				var name string
				require.NoError(t, conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name))
				names <- name
			})
		}
	})
	close(names)
	seen := map[string]bool{}
	for name := range names {
		require.False(t, seen[name], "database %s handed out twice", name)
		seen[name] = true
	}
	require.Len(t, seen, cap(names))
}

func TestDatabaseIsDroppedAfterTheTest(t *testing.T) {
	var url string
	t.Run("user", func(t *testing.T) {
		url = URL(t)
		// A connection the test forgot to close must not keep its database alive.
		_, err := pgx.Connect(t.Context(), url)
		require.NoError(t, err)
	})
	_, err := pgx.Connect(t.Context(), url)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "connecting to a dropped database fails: %v", err)
	require.Equal(t, "3D000", pgErr.Code, "invalid_catalog_name")
}

// The MANAGED_AGENT_TEST_DATABASE_URL path: databases created on a server we did not start.
func TestExternalServer(t *testing.T) {
	URL(t) // makes sure the shared server runs, to play the external one
	c, err := connectAdmin(t.Context(), shared.adminURL)
	require.NoError(t, err)
	t.Cleanup(c.admin.Close)

	var url string
	t.Run("user", func(t *testing.T) {
		url, err = c.createDatabase(t)
		require.NoError(t, err)
		var one int
		require.NoError(t, connect(t, url).QueryRow(t.Context(), "SELECT 1").Scan(&one))
	})
	_, err = pgx.Connect(t.Context(), url)
	require.Error(t, err, "dropped after the test")
}

// BenchmarkURL measures database creation; the drops all run when the benchmark ends.
func BenchmarkURL(b *testing.B) {
	URL(b) // the server start is not what this measures
	for b.Loop() {
		URL(b)
	}
}
