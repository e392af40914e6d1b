package pgtest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestWithDatabase(t *testing.T) {
	tests := []struct {
		name     string
		conn     string
		wantDB   string
		wantHost string
	}{
		{name: "socket URL", conn: "postgres://postgres@/postgres?host=/tmp/pg&port=5432&sslmode=disable", wantDB: "t1", wantHost: "/tmp/pg"},
		{name: "TCP URL", conn: "postgresql://u:p@db.internal:5433/admin?sslmode=require", wantDB: "t1", wantHost: "db.internal"},
		{name: "URL without database", conn: "postgres://u@localhost", wantDB: "t1", wantHost: "localhost"},
		{name: "dbname in the query", conn: "postgres://u@localhost/ignored?dbname=admin", wantDB: "t1", wantHost: "localhost"},
		{name: "keyword/value", conn: "host=/tmp/pg user=postgres dbname=postgres", wantDB: "t1", wantHost: "/tmp/pg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := withDatabase(tt.conn, tt.wantDB)
			require.NoError(t, err)
			cfg, err := pgx.ParseConfig(got)
			require.NoError(t, err, got)
			require.Equal(t, tt.wantDB, cfg.Database, got)
			require.Equal(t, tt.wantHost, cfg.Host, got)
		})
	}
}

func TestDatabaseName(t *testing.T) {
	valid := regexp.MustCompile(`^pgtest_[a-z0-9_]+_[0-9a-f]{16}$`)
	tests := []string{"TestX", "TestAppend/parallel_#01", strings.Repeat("TestVeryLong", 20), "Test/ünïcode"}
	seen := map[string]bool{}
	for _, testName := range tests {
		for range 2 {
			name, err := databaseName(testName)
			require.NoError(t, err)
			require.Regexp(t, valid, name)
			require.LessOrEqual(t, len(name), 63, "PostgreSQL truncates longer names")
			require.False(t, seen[name], "names are unique")
			seen[name] = true
		}
	}
}
