// Package pgserver owns a private PostgreSQL server: a cluster in a directory of ours, run
// as a child process from the server binaries installed on this machine, reachable only
// through a Unix socket. `managed-agents dev` and internal/pgtest use it so that nobody has
// to set up a database by hand.
//
// It knows nothing of our schema and must never import other internal packages: callers
// apply migrations to the database it hands out.
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/managed-agents/managed-agents/internal/childproc"
)

// DefaultDatabase is the database Start creates when Options.Database is empty.
const DefaultDatabase = "managed_agents"

const (
	// port only names the socket file (.s.PGSQL.5432): the server has no TCP listener.
	port       = 5432
	socketName = ".s.PGSQL.5432"
	// maxSocketPath is the longest socket path the kernel accepts: sun_path holds 108
	// bytes including the terminating NUL.
	maxSocketPath = 107
	logName       = "postgres.log"

	// startTimeout bounds Start when the caller's context has no deadline; crash recovery
	// of a large dev cluster is the slow case.
	startTimeout = 2 * time.Minute
	// stopTimeout bounds the fast shutdown when Stop's context has no deadline.
	stopTimeout = 30 * time.Second
	// quitGrace is how long an immediate shutdown gets before the process group is killed.
	quitGrace = 5 * time.Second
)

// Options configures Start.
type Options struct {
	// DataDir holds the cluster; it is created and initialized if missing, and reused with
	// all its data otherwise. The Unix socket lives here too unless the path would be too
	// long for a socket (then in a fresh directory under /tmp).
	DataDir string
	// Database is created if missing; default DefaultDatabase.
	Database string
	// Fast trades durability for speed (fsync, synchronous_commit and full_page_writes
	// off): for tests, whose data does not matter after a crash.
	Fast bool
	// Logger receives our own messages; the server's log goes to postgres.log in DataDir.
	// Default slog.Default().
	Logger *slog.Logger
}

// Server is a running PostgreSQL started by Start.
type Server struct {
	url           string
	dataDir       string
	socketDir     string
	ownsSocketDir bool
	logPath       string
	logger        *slog.Logger
	password      string
	// What Restart needs to start the server again the same way.
	binDir string
	user   *serverUser
	fast   bool

	process  *os.Process
	exited   chan struct{} // closed once the postmaster has exited
	exitErr  error         // set before exited is closed
	stopping atomic.Bool

	mu      sync.Mutex
	stopped bool
}

// Start initializes the cluster in opts.DataDir if there is none yet, starts the server,
// waits until it accepts connections and creates opts.Database if missing. The server runs
// until Stop, or until this process dies (the kernel then asks it to shut down).
func Start(ctx context.Context, opts Options) (*Server, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if opts.DataDir == "" {
		return nil, errors.New("pgserver: Options.DataDir is required")
	}
	database := opts.Database
	if database == "" {
		database = DefaultDatabase
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pgserver: data directory %q: %w", opts.DataDir, err)
	}
	binDir, err := FindBinaries()
	if err != nil {
		return nil, fmt.Errorf("pgserver: %w", err)
	}
	u, err := resolveServerUser()
	if err != nil {
		return nil, fmt.Errorf("pgserver: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}

	if blocked := u.blockedAncestor(dataDir); blocked != "" {
		// Running as root below a directory the server user cannot pass (a clone under /root):
		// the cluster gets a directory of its own instead of a chmod of one we did not make.
		moved := relocatedClusterDir(dataDir)
		logger.Info("the PostgreSQL server user cannot reach the data directory, so the cluster lives in a directory of its own",
			"data_dir", dataDir, "private_parent", blocked, "server_user", u.name, "cluster_dir", moved)
		dataDir = moved
	}

	begin := time.Now()
	exists, err := hasCluster(dataDir)
	if err != nil {
		return nil, fmt.Errorf("pgserver: %w", err)
	}
	if exists {
		err = u.adoptCluster(dataDir, logger)
	} else {
		err = initCluster(ctx, binDir, dataDir, u, opts.Fast, logger)
		if err == nil {
			logger.Info("initialized a PostgreSQL cluster", "data_dir", dataDir, "duration", time.Since(begin).Round(time.Millisecond))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("pgserver: %w", err)
	}

	s := &Server{dataDir: dataDir, socketDir: dataDir, logPath: filepath.Join(dataDir, logName), logger: logger, exited: make(chan struct{}),
		binDir: binDir, user: u, fast: opts.Fast}
	if len(filepath.Join(dataDir, socketName)) > maxSocketPath {
		// Too long for a Unix socket (a deep t.TempDir, say): the socket moves to a short
		// directory of its own, removed by Stop. URL points there.
		if s.socketDir, err = os.MkdirTemp("/tmp", "mapg"); err != nil {
			return nil, fmt.Errorf("pgserver: socket directory: %w", err)
		}
		s.ownsSocketDir = true
		if err := u.ownDir(s.socketDir, logger); err != nil {
			s.removeSocketDir()
			return nil, fmt.Errorf("pgserver: socket directory: %w", err)
		}
	}
	if s.password, err = loadPassword(dataDir); err != nil {
		s.removeSocketDir()
		return nil, fmt.Errorf("pgserver: %w", err)
	}
	s.url = s.urlFor(database)

	if err := s.startRetrying(ctx, binDir, u, opts.Fast); err != nil {
		s.removeSocketDir()
		return nil, fmt.Errorf("pgserver: %w", err)
	}
	if err := s.requirePassword(ctx); err != nil {
		_ = s.Stop(context.Background())
		return nil, fmt.Errorf("pgserver: %w", err)
	}
	if err := s.ensureDatabase(ctx, database); err != nil {
		_ = s.Stop(context.Background())
		return nil, fmt.Errorf("pgserver: %w", err)
	}
	logger.Info("started PostgreSQL", "data_dir", dataDir, "socket_dir", s.socketDir, "pid", s.process.Pid,
		"duration", time.Since(begin).Round(time.Millisecond))
	return s, nil
}

// URL is a pgx (libpq-style) connection URL for the database named in Options, as the
// superuser `postgres` over the Unix socket, with its password (the server requires it).
func (s *Server) URL() string { return s.url }

// Exited is closed when the server process exits: after Stop, or when it dies. After a
// Restart it is a new channel.
func (s *Server) Exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exited
}

// Restart starts a server that died again, the same way and on the same socket, so URL and
// the pools built on it stay valid; it returns nil at once if the server is running. It is
// how a supervisor brings back a crashed server; it must not race Stop.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return errors.New("pgserver: restart: the server was stopped")
	}
	select {
	case <-s.exited:
	default:
		s.mu.Unlock()
		return nil
	}
	s.stopping.Store(false)
	s.exited, s.exitErr, s.process = make(chan struct{}), nil, nil
	s.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	if s.ownsSocketDir {
		if err := s.user.ownDir(s.socketDir, s.logger); err != nil {
			return fmt.Errorf("pgserver: restart: socket directory: %w", err)
		}
	}
	err := s.startRetrying(ctx, s.binDir, s.user, s.fast)
	if err != nil {
		// start's failure path stopped this Server (and closed exited); a later Restart may
		// try again.
		s.mu.Lock()
		s.stopped = false
		s.mu.Unlock()
		return fmt.Errorf("pgserver: restart: %w", err)
	}
	s.logger.Info("restarted PostgreSQL", "data_dir", s.dataDir, "pid", s.process.Pid)
	return nil
}

// Stop shuts the server down (fast shutdown: open transactions roll back, then a
// checkpoint, so the next Start needs no recovery) and waits for it to exit. If ctx ends
// first it escalates to an immediate shutdown and then kills the process group. Calling it
// again returns nil.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	defer s.removeSocketDir()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, stopTimeout)
		defer cancel()
	}
	begin := time.Now()
	s.stopping.Store(true)
	select {
	case <-s.exited: // crashed or killed earlier; already reported
		return nil
	default:
	}
	if err := s.signal(syscall.SIGINT); err != nil {
		return err
	}
	select {
	case <-s.exited:
		s.logger.Info("stopped PostgreSQL", "data_dir", s.dataDir, "duration", time.Since(begin).Round(time.Millisecond))
		return nil
	case <-ctx.Done():
	}
	s.logger.Warn("PostgreSQL did not finish a fast shutdown in time; forcing an immediate shutdown", "data_dir", s.dataDir)
	_ = s.signal(syscall.SIGQUIT)
	select {
	case <-s.exited:
	case <-time.After(quitGrace):
		// Backends are in the postmaster's process group (we made it a group leader).
		_ = syscall.Kill(-s.process.Pid, syscall.SIGKILL)
		<-s.exited
	}
	return fmt.Errorf("pgserver: stop %s: fast shutdown did not finish: %w", s.dataDir, ctx.Err())
}

func (s *Server) signal(sig syscall.Signal) error {
	if err := s.process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pgserver: signal postgres (pid %d): %w", s.process.Pid, err)
	}
	return nil
}

func (s *Server) removeSocketDir() {
	if s.ownsSocketDir {
		_ = os.RemoveAll(s.socketDir)
	}
}

// urlFor keeps the slashes of the socket directory readable in the URL; pgx treats a host
// that starts with "/" as a socket directory. The port is explicit so that a PGPORT in the
// client's environment cannot point it at another socket name.
func (s *Server) urlFor(database string) string {
	host := strings.ReplaceAll(url.QueryEscape(s.socketDir), "%2F", "/")
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable&password=%s",
		superuser, url.PathEscape(database), host, port, url.QueryEscape(s.password))
}

// start runs postgres as our child and waits until it accepts connections.
func (s *Server) start(ctx context.Context, binDir string, u *serverUser, fast bool) error {
	if err := clearStaleLock(filepath.Join(s.dataDir, "postmaster.pid"), s.dataDir, s.logger); err != nil {
		return err
	}
	if err := clearStaleLock(filepath.Join(s.socketDir, socketName+".lock"), s.dataDir, s.logger); err != nil {
		return err
	}
	// Keep the previous run's log: after a crash it is the one worth reading.
	_ = os.Rename(s.logPath, s.logPath+".1")
	logFile, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor once started

	args := []string{
		"-D", s.dataDir,
		"-k", s.socketDir,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=",
	}
	if fast {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	cmd := exec.Command(filepath.Join(binDir, "postgres"), args...)
	cmd.Dir = "/"
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = u.sysProcAttr()

	waited, err := childproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	go func() {
		s.exitErr = <-waited
		if !s.stopping.Load() {
			s.logger.Error("PostgreSQL exited unexpectedly", "data_dir", s.dataDir, "err", s.exitErr, "log", s.logPath)
		}
		close(s.exited)
	}()
	s.process = cmd.Process

	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop(context.Background())
		return err
	}
	return nil
}

// oldServerExitingWait bounds how long Start waits for a crashed server's backends to exit.
const oldServerExitingWait = 20 * time.Second

// startRetrying starts the server, waiting out the backends of a server that was just killed:
// they leave on their own once their postmaster is gone (each runs in its own session, so
// killing the postmaster's group does not reach them), and until the last one has exited
// PostgreSQL refuses to start on the still-attached shared memory.
func (s *Server) startRetrying(ctx context.Context, binDir string, u *serverUser, fast bool) error {
	deadline := time.Now().Add(oldServerExitingWait)
	for {
		err := s.start(ctx, binDir, u, fast)
		if err == nil || !strings.Contains(err.Error(), "pre-existing shared memory block") ||
			s.ownsSocketDir || time.Now().After(deadline) {
			return err
		}
		s.logger.Warn("the previous server's processes are still exiting; retrying", "data_dir", s.dataDir)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
		// start's failure path stopped this Server; the next attempt is a fresh start.
		s.mu.Lock()
		s.stopped = false
		s.mu.Unlock()
		s.stopping.Store(false)
		s.exited, s.exitErr, s.process = make(chan struct{}), nil, nil
	}
}

func (s *Server) waitReady(ctx context.Context) error {
	admin := s.urlFor("postgres")
	for {
		conn, err := pgx.Connect(ctx, admin)
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited during startup (%v); its log %s ends with:\n%s", s.exitErr, s.logPath, tail(s.logPath))
		case <-ctx.Done():
			return fmt.Errorf("postgres did not accept connections in time (last error: %v); log in %s: %w", err, s.logPath, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *Server) ensureDatabase(ctx context.Context, database string) error {
	conn, err := pgx.Connect(ctx, s.urlFor("postgres"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", database).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", database, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{database}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: created meanwhile
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", database, err)
	}
	s.logger.Info("created database", "database", database)
	return nil
}

// tail returns the end of a log file for an error message.
func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	defer f.Close()
	const maxTail = 4 << 10
	if info, err := f.Stat(); err == nil && info.Size() > maxTail {
		_, _ = f.Seek(-maxTail, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}
