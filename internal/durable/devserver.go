package durable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/managed-agents/managed-agents/internal/childproc"
	"go.temporal.io/sdk/client"
)

// devServerArgs are the fast local settings of DESIGN.md §2: the stock single-shard dev
// server adds ~45 ms to every workflow task and can stall a long poll for 20 s; these bring a
// start→activity→complete round trip to ~15–30 ms.
var devServerArgs = []string{
	"--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000",
	"--dynamic-config-value", "history.timerProcessorMaxPollRPS=1000",
	"--dynamic-config-value", "history.visibilityProcessorMaxPollRPS=1000",
	"--dynamic-config-value", `history.longPollExpirationInterval="2s"`,
	// Eager activities: an activity the workflow schedules comes back in the reply to its
	// workflow task instead of through matching.
	"--dynamic-config-value", "system.enableActivityEagerExecution=true",
	// Our SDK may be newer or older than the CLI's server; the check only logs noise.
	"--dynamic-config-value", "frontend.enableServerVersionCheck=false",
	// The CLI turns this on so that a search attribute a user adds is visible at once; it
	// makes every signal and every workflow task's history read the namespace and the
	// search attributes from SQLite again (5–6 % of the dev server's CPU in a profile of
	// plain turns). We add no search attributes after the start.
	"--dynamic-config-value", "system.forceSearchAttributesCacheRefreshOnRead=false",
}

// devServerFileArgs are the SQLite settings of a dev server that keeps its state in a file.
// SQLite's default rollback journal writes and fsyncs a journal file for every commit, and
// the history service commits several times per workflow task: measured with `managed-agents
// bench`, Temporal's CPU per plain turn fell from 22–28 ms to 12–13 ms with a write-ahead log
// and fsyncs only at checkpoints, as fast as the in-memory server. synchronous=NORMAL in WAL
// mode keeps every commit across a crash of the server process (a SIGKILL); only a power loss
// or an OS crash may lose the last commits, which a dev server can afford.
var devServerFileArgs = []string{
	"--sqlite-pragma", "journal_mode=wal",
	"--sqlite-pragma", "synchronous=normal",
}

const (
	// devServerReadyTimeout bounds a start when the caller's context has no deadline.
	devServerReadyTimeout = time.Minute
	// devServerStopGrace is how long a server gets to shut down on SIGINT before it is killed.
	devServerStopGrace = 10 * time.Second
)

// DevServerOptions configures a local Temporal dev server.
type DevServerOptions struct {
	// DBFile persists the server's state (SQLite); empty keeps it in memory. With a DBFile the
	// server's pid is kept in DBFile+".pid", so that a start can stop a server an earlier run
	// left behind on the same file (two servers on one SQLite file fail with SQLITE_BUSY).
	DBFile string
	// UI enables the Web UI (on the frontend port + 1000).
	UI bool
	// Output receives the server's own log; nil discards it.
	Output io.Writer
}

// DevServer is a running `temporal server start-dev`, a child of this process: it gets
// SIGINT from the kernel when this process dies, however it dies, so it never outlives us.
// The SDK's testsuite.StartDevServer cannot set that (nor a process group), hence our own.
type DevServer struct {
	path     string
	args     []string
	output   io.Writer
	pidFile  string
	hostPort string
	client   client.Client

	mu      sync.Mutex
	process *os.Process
	exited  chan struct{} // closed when the current process has exited
	stopped bool
}

// FindTemporalCLI returns the Temporal CLI: bin/temporal (what `make tools` installs) in the
// working directory or the nearest parent that has one — tests run in package directories —
// then beside this executable, then PATH. The error says how to get it.
func FindTemporalCLI() (string, error) {
	if dir, err := os.Getwd(); err == nil {
		for {
			p := filepath.Join(dir, "bin", "temporal")
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	// Beside our own binary: `make build` puts both in bin/.
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "temporal")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	return "", errors.New("the Temporal CLI was not found in ./bin or on PATH: run `make tools` (installs it into ./bin), or set MANAGED_AGENT_TEMPORAL_ADDRESS to a running Temporal server")
}

// StartDevServer starts the official Temporal CLI dev server on a free local port with the
// fast settings, and waits until it answers. It never downloads anything.
func StartDevServer(ctx context.Context, opts DevServerOptions) (*DevServer, error) {
	path, err := FindTemporalCLI()
	if err != nil {
		return nil, err
	}
	var db string
	if opts.DBFile != "" {
		if db, err = filepath.Abs(opts.DBFile); err != nil {
			return nil, fmt.Errorf("temporal db file %q: %w", opts.DBFile, err)
		}
		if err := stopStale(db+".pid", db); err != nil {
			return nil, err
		}
	}
	// A free port is only free when asked: the server also binds ports of its own next to it
	// (the UI's, its internal services'), and any of them may be taken by the time it starts.
	// A server that exits during startup is tried again on another port.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("start Temporal dev server: %w", err)
		}
		s := &DevServer{path: path, output: opts.Output, hostPort: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
		if s.output == nil {
			s.output = io.Discard
		}
		s.args = []string{"server", "start-dev", "--ip", "127.0.0.1", "--port", strconv.Itoa(port),
			"--namespace", "default", "--log-level", "error"}
		if !opts.UI {
			s.args = append(s.args, "--headless")
		}
		if db != "" {
			s.args = append(s.args, "--db-filename", db)
			s.args = append(s.args, devServerFileArgs...)
			s.pidFile = db + ".pid"
		}
		s.args = append(s.args, devServerArgs...)
		err = s.Restart(ctx)
		if err == nil {
			return s, nil
		}
		_ = s.Stop()
		if !errors.Is(err, errExitedDuringStartup) || attempt == devServerStartAttempts || ctx.Err() != nil {
			return nil, err
		}
	}
}

// devServerStartAttempts bounds the ports StartDevServer tries.
const devServerStartAttempts = 3

// errExitedDuringStartup: the server process ended before it answered.
var errExitedDuringStartup = errors.New("the server exited during startup (its log is the dev server's output)")

// Restart starts the server process again on the same port and files, if it is not running,
// and waits until it answers; the client stays valid (it reconnects). It is how a supervisor
// brings back a server that died.
func (s *DevServer) Restart(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, devServerReadyTimeout)
		defer cancel()
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return errors.New("temporal dev server: stopped")
	}
	if s.exited != nil {
		select {
		case <-s.exited:
		default:
			s.mu.Unlock()
			return nil // running
		}
	}
	exited, err := s.startProcess()
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("start Temporal dev server (%s): %w", s.path, err)
	}
	if err := s.waitReady(ctx, exited); err != nil {
		// Only this attempt ends: a supervisor may Restart again.
		s.Kill()
		<-exited
		return fmt.Errorf("start Temporal dev server (%s): %w", s.path, err)
	}
	return nil
}

// startProcess starts the child; s.mu is held.
func (s *DevServer) startProcess() (<-chan struct{}, error) {
	cmd := exec.Command(s.path, s.args...)
	cmd.Stdout, cmd.Stderr = s.output, s.output
	// Its own process group, so a Ctrl-C at the terminal reaches only us and the server stays
	// up while running steps drain; the parent-death signal ends it if we die without Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGINT}
	waited, err := childproc.Start(cmd)
	if err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		<-waited
		close(exited)
	}()
	s.process, s.exited = cmd.Process, exited
	if s.pidFile != "" {
		if err := os.WriteFile(s.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			return nil, fmt.Errorf("write %s: %w", s.pidFile, err)
		}
	}
	return exited, nil
}

func (s *DevServer) waitReady(ctx context.Context, exited <-chan struct{}) error {
	for {
		if s.client == nil {
			// Through Dial, so the loopback connection is not compressed either (Config.compress).
			c, err := Dial(ctx, Config{Address: s.hostPort, Namespace: "default"}, slog.New(slog.DiscardHandler))
			if err == nil {
				s.client = c
				return nil
			}
		} else if _, err := s.client.CheckHealth(ctx, &client.CheckHealthRequest{}); err == nil {
			return nil
		}
		select {
		case <-exited:
			return errExitedDuringStartup
		case <-ctx.Done():
			return fmt.Errorf("the server did not answer in time: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Client is connected to the server; Stop closes it.
func (s *DevServer) Client() client.Client { return s.client }

// FrontendHostPort is the server's gRPC address.
func (s *DevServer) FrontendHostPort() string { return s.hostPort }

// Exited is closed when the current server process exits (after Stop, or when it dies).
func (s *DevServer) Exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exited
}

// Kill ends the server process at once, as a crash would; Restart brings it back. For tests
// of supervision.
func (s *DevServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.process != nil {
		_ = syscall.Kill(-s.process.Pid, syscall.SIGKILL)
	}
}

// Stop closes the client, then stops the server (SIGINT, SIGKILL after a grace) and waits for
// it to exit. Calling it again returns nil.
func (s *DevServer) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	if s.client != nil {
		s.client.Close()
	}
	if s.process == nil {
		return nil
	}
	defer func() {
		if s.pidFile != "" {
			_ = os.Remove(s.pidFile)
		}
	}()
	select {
	case <-s.exited:
		return nil
	default:
	}
	_ = syscall.Kill(-s.process.Pid, syscall.SIGINT)
	select {
	case <-s.exited:
		return nil
	case <-time.After(devServerStopGrace):
	}
	_ = syscall.Kill(-s.process.Pid, syscall.SIGKILL)
	<-s.exited
	return fmt.Errorf("temporal dev server (pid %d) did not stop within %s and was killed", s.process.Pid, devServerStopGrace)
}

// stopStale stops a dev server that an earlier run left on dbFile, as its pid file says: a
// process is that server only if its command line is a start-dev with this db file, so a
// reused pid is left alone.
func stopStale(pidFile, dbFile string) error {
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", pidFile, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !isDevServerOn(pid, dbFile) {
		return os.Remove(pidFile)
	}
	// Its group: the CLI may have children of its own.
	_ = syscall.Kill(-pid, syscall.SIGINT)
	_ = syscall.Kill(pid, syscall.SIGINT)
	for deadline := time.Now().Add(devServerStopGrace); isDevServerOn(pid, dbFile); {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline.Add(devServerStopGrace)) {
			return fmt.Errorf("a Temporal dev server left by an earlier run (pid %d) on %s does not stop: kill it and start again", pid, dbFile)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return os.Remove(pidFile)
}

// isDevServerOn reports whether pid is a live (not zombie) `temporal server start-dev` on dbFile.
func isDevServerOn(pid int, dbFile string) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(cmdline), "\x00")
	var startDev, onDB bool
	for i, a := range args {
		startDev = startDev || a == "start-dev"
		onDB = onDB || (a == "--db-filename" && i+1 < len(args) && args[i+1] == dbFile)
	}
	return startDev && onDB
}

// freePort asks the kernel for a free TCP port on the loopback interface.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
