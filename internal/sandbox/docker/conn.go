package docker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// Connections to the runner (runner.go). The provider's one http.Transport keeps them per
// container (the request's host is the container's name) and dials a new one with an exec
// when none is idle, so concurrent commands in one sandbox each get a connection, and a
// sequence of commands reuses one.
const (
	// maxIdleConns is how many idle connections each container keeps: each is a runner
	// process in the container, counting against its pids limit.
	maxIdleConns = 2
	// idleConnTimeout closes a connection unused this long (its runner exits): below the
	// runner's own idle timeout (sandboxd's two minutes), so the worker never sends a call on
	// a connection the runner is closing.
	idleConnTimeout = 90 * time.Second
	// maxConns bounds the runners one container has at once (each counts against its pids
	// and memory limits); further concurrent calls wait for a connection.
	maxConns = 8
	// dialTimeout bounds the exec that opens a connection.
	dialTimeout = 30 * time.Second
)

func (p *Provider) newTransport() *http.Transport {
	return &http.Transport{
		DialContext:         p.dialRunner,
		MaxIdleConnsPerHost: maxIdleConns,
		MaxConnsPerHost:     maxConns,
		Proxy:               nil, // the engine's stream, never a proxy's
		IdleConnTimeout:     idleConnTimeout,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

// dialRunner opens a connection to the runner of the container addr names (host:port, the
// port meaningless): an exec of `managed-agents sandboxd --stdio`, its stdin and stdout the
// connection. The runner's token is the provider's: the stream is reachable only through
// the engine's API, which is the real authority; the token keeps the daemon's one rule.
func (p *Provider) dialRunner(ctx context.Context, _, addr string) (net.Conn, error) {
	name, _, err := net.SplitHostPort(addr)
	if err != nil || !sandbox.IsName(name) {
		return nil, fmt.Errorf("docker sandbox runner: %q is not a sandbox container", addr)
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	created, err := p.engine.ExecCreate(ctx, name, client.ExecCreateOptions{
		User:         User,
		WorkingDir:   Workspace,
		Cmd:          []string{runnerPath, "sandboxd", "--stdio", "--workspace", Workspace},
		Env:          []string{"MANAGED_AGENT_SANDBOXD_TOKEN=" + p.token, "MANAGED_AGENT_LOG_LEVEL=warn"},
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return nil, execError(name, err)
	}
	attach, err := p.engine.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, execError(name, err)
	}
	return newExecConn(attach.HijackedResponse, p.cfg.Logger.With("sandbox", name)), nil
}

// execError classifies a failure to start an exec: the container gone is ErrGone, one that
// is stopped is unavailable (the Manager drops the client, and Attach starts it again).
func execError(name string, err error) error {
	switch {
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("docker sandbox %s: %w", name, sandbox.ErrGone)
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("docker sandbox %s is not running: %w: %w", name, sandbox.ErrUnavailable, err)
	}
	return fmt.Errorf("exec in docker sandbox %s: %w: %w", name, sandbox.ErrUnavailable, err)
}

// execConn is an exec's hijacked stream as a connection: writes go to the exec's stdin as
// they are; reads come from its stdout, demultiplexed from the engine's framing; its stderr
// (the runner's own complaints, never a command's output) goes to the log.
type execConn struct {
	attach client.HijackedResponse
	stdout *io.PipeReader
}

func newExecConn(attach client.HijackedResponse, logger *slog.Logger) *execConn {
	pr, pw := io.Pipe()
	errR, errW := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, errW, attach.Reader)
		pw.CloseWithError(cmpErr(err, io.EOF))
		errW.Close()
	}()
	go func() {
		lines := bufio.NewScanner(errR)
		for lines.Scan() {
			logger.Warn("docker sandbox runner", "stderr", lines.Text())
		}
		_, _ = io.Copy(io.Discard, errR)
	}()
	return &execConn{attach: attach, stdout: pr}
}

func cmpErr(err, def error) error {
	if err == nil {
		return def
	}
	return err
}

func (c *execConn) Read(p []byte) (int, error)  { return c.stdout.Read(p) }
func (c *execConn) Write(p []byte) (int, error) { return c.attach.Conn.Write(p) }

// Close ends the exec's stdin, which ends the runner: what it was running is killed.
func (c *execConn) Close() error {
	c.attach.Close()
	return c.stdout.CloseWithError(net.ErrClosed)
}

func (c *execConn) LocalAddr() net.Addr  { return c.attach.Conn.LocalAddr() }
func (c *execConn) RemoteAddr() net.Addr { return c.attach.Conn.RemoteAddr() }

// The transport sets no deadlines on a plain HTTP connection; the write side honours them.
func (c *execConn) SetDeadline(t time.Time) error      { return c.attach.Conn.SetWriteDeadline(t) }
func (c *execConn) SetReadDeadline(time.Time) error    { return nil }
func (c *execConn) SetWriteDeadline(t time.Time) error { return c.attach.Conn.SetWriteDeadline(t) }
