//go:build integration

package pgserver

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// testLogger shows our log lines with -v or when the test fails.
func testLogger(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(t.Output(), nil)) }

// reachableTempDir is t.TempDir, which the server user (as root, `postgres`) may pass
// through: the testing package makes its parent 0700, and Start changes no directory it did
// not create.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711))
		require.NoError(t, os.Chmod(dir, 0o711))
	}
	return dir
}

func startServer(t *testing.T, opts Options) *Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	begin := time.Now()
	s, err := Start(t.Context(), opts)
	require.NoError(t, err)
	t.Logf("Start took %s", time.Since(begin))
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(reachableTempDir(t), "pg")

	s := startServer(t, Options{DataDir: dataDir, Fast: true})
	require.Contains(t, s.URL(), "postgres://postgres@/managed_agents?host="+dataDir)
	conn := connect(t, s.URL())
	_, err := conn.Exec(t.Context(), "CREATE TABLE notes (body text); INSERT INTO notes VALUES ('kept')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))
	require.NoError(t, s.Stop(t.Context()))
	require.NoError(t, s.Stop(t.Context()), "a second Stop is a no-op")
	require.NoFileExists(t, filepath.Join(dataDir, "postmaster.pid"))

	s = startServer(t, Options{DataDir: dataDir, Fast: true})
	var body string
	require.NoError(t, connect(t, s.URL()).QueryRow(t.Context(), "SELECT body FROM notes").Scan(&body))
	require.Equal(t, "kept", body)
}

func TestDatabaseNames(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(reachableTempDir(t), "pg")
	tests := []struct {
		database string
		want     string
	}{
		{database: "", want: DefaultDatabase},
		{database: "other", want: "other"},
		{database: "Needs Quoting-1", want: "Needs Quoting-1"},
	}
	for _, tt := range tests {
		s := startServer(t, Options{DataDir: dataDir, Database: tt.database, Fast: true})
		var got string
		require.NoError(t, connect(t, s.URL()).QueryRow(t.Context(), "SELECT current_database()").Scan(&got))
		require.Equal(t, tt.want, got)
		require.NoError(t, s.Stop(t.Context()))
	}
}

func TestLongDataDirGetsShortSocketDir(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(reachableTempDir(t), strings.Repeat("d", 40), strings.Repeat("e", 40), "pg")
	require.Greater(t, len(filepath.Join(dataDir, socketName)), maxSocketPath)

	s := startServer(t, Options{DataDir: dataDir, Fast: true})
	require.True(t, strings.HasPrefix(s.socketDir, "/tmp/mapg"), s.socketDir)
	var one int
	require.NoError(t, connect(t, s.URL()).QueryRow(t.Context(), "SELECT 1").Scan(&one))
	require.NoError(t, s.Stop(t.Context()))
	require.NoDirExists(t, s.socketDir)
}

// A crash leaves postmaster.pid behind; its pid may since belong to an unrelated live
// process, which PostgreSQL alone would take for a running server.
func TestStartAfterCrash(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(reachableTempDir(t), "pg")
	s := startServer(t, Options{DataDir: dataDir, Fast: true})
	conn := connect(t, s.URL())
	_, err := conn.Exec(t.Context(), "SET synchronous_commit = on; CREATE TABLE notes (body text); INSERT INTO notes VALUES ('kept')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))

	require.NoError(t, syscall.Kill(-s.process.Pid, syscall.SIGKILL))
	<-s.exited
	pidFile := filepath.Join(dataDir, "postmaster.pid")
	lock, err := os.ReadFile(pidFile)
	require.NoError(t, err, "a killed server leaves its pid file")
	// PostgreSQL treats a pid it may not signal, or its parent's, as stale by itself; a live
	// process of the server's own user is what fools it.
	u, err := resolveServerUser()
	require.NoError(t, err)
	sleeper := exec.Command("sleep", "60")
	sleeper.SysProcAttr = u.sysProcAttr()
	require.NoError(t, sleeper.Start())
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	_, rest, _ := strings.Cut(string(lock), "\n")
	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(sleeper.Process.Pid)+"\n"+rest), 0o600))

	s = startServer(t, Options{DataDir: dataDir, Fast: true})
	var body string
	require.NoError(t, connect(t, s.URL()).QueryRow(t.Context(), "SELECT body FROM notes").Scan(&body))
	require.Equal(t, "kept", body)
}

func TestRefusesSecondServerOnSameDir(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(reachableTempDir(t), "pg")
	s := startServer(t, Options{DataDir: dataDir, Fast: true})

	_, err := Start(t.Context(), Options{DataDir: dataDir, Fast: true, Logger: testLogger(t)})
	require.ErrorContains(t, err, "already running")

	var one int
	require.NoError(t, connect(t, s.URL()).QueryRow(t.Context(), "SELECT 1").Scan(&one), "the first server is untouched")
}

// TestRestartAfterCrash: a server that died is started again on the same URL, with its data
// (checkpointed: the test cluster runs without fsync and synchronous commit).
func TestRestartAfterCrash(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{DataDir: filepath.Join(reachableTempDir(t), "pg"), Fast: true})
	url := s.URL()
	conn := connect(t, url)
	_, err := conn.Exec(t.Context(), "CREATE TABLE notes (body text); INSERT INTO notes VALUES ('kept')")
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), "CHECKPOINT") // after the commit
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))
	require.NoError(t, s.Restart(t.Context()), "Restart of a running server is a no-op")

	require.NoError(t, syscall.Kill(s.process.Pid, syscall.SIGKILL))
	<-s.Exited()
	require.NoError(t, s.Restart(t.Context()))
	require.Equal(t, url, s.URL())
	var body string
	require.NoError(t, connect(t, url).QueryRow(t.Context(), "SELECT body FROM notes").Scan(&body))
	require.Equal(t, "kept", body)
	require.NoError(t, s.Stop(t.Context()))
	require.Error(t, s.Restart(t.Context()), "a stopped server is not restarted")
}

// TestPasswordRequired: the socket alone does not let a process in (the cluster used trust
// authentication, so any process of our user could open it); the URL we hand out carries the
// password, kept in the data directory readable by us only, and survives a restart.
func TestPasswordRequired(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(reachableTempDir(t), "pg")
	s := startServer(t, Options{DataDir: dataDir, Fast: true})
	u, err := url.Parse(s.URL())
	require.NoError(t, err)
	q := u.Query()
	require.NotEmpty(t, q.Get("password"))
	q.Del("password")
	u.RawQuery = q.Encode()
	_, err = pgx.Connect(t.Context(), u.String())
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "a connection without the password is refused")
	require.Equal(t, "28P01", pgErr.Code) // invalid_password
	connect(t, s.URL())

	info, err := os.Stat(filepath.Join(dataDir, passwordName))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	first := s.URL()
	require.NoError(t, s.Stop(t.Context()))
	s = startServer(t, Options{DataDir: dataDir, Fast: true})
	require.Equal(t, first, s.URL(), "the password is generated once")
	connect(t, s.URL())
}

// TestUnreachableDataDirGetsAClusterOfItsOwn: as root, a data directory below a directory the
// server user cannot pass through (a clone under /root, say) is not made passable: that
// directory is left as it was, and the cluster lives in a directory of its own, found again on
// the next start; parents Start creates itself are made passable.
func TestUnreachableDataDirGetsAClusterOfItsOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the server runs as another user only when we are root")
	}
	home := relocatedHome
	relocatedHome = filepath.Join(reachableTempDir(t), "clusters")
	t.Cleanup(func() { relocatedHome = home })
	private := filepath.Join(t.TempDir(), "private")
	require.NoError(t, os.Mkdir(private, 0o700))
	dataDir := filepath.Join(private, "pg")
	s := startServer(t, Options{DataDir: dataDir, Fast: true})
	connect(t, s.URL())
	info, err := os.Stat(private)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "the directory is not changed")
	ok, err := hasCluster(relocatedClusterDir(dataDir))
	require.NoError(t, err)
	require.True(t, ok, "the cluster is in its own directory")
	first := s.URL()
	require.NoError(t, s.Stop(t.Context()))
	s = startServer(t, Options{DataDir: dataDir, Fast: true})
	require.Equal(t, first, s.URL(), "the next start finds the same cluster")

	s2 := startServer(t, Options{DataDir: filepath.Join(reachableTempDir(t), "new", "deeper", "pg"), Fast: true})
	connect(t, s2.URL())
}
