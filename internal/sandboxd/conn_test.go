package sandboxd_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandboxd"
	"github.com/managed-agents/managed-agents/internal/tools/toolstest"
)

// pipeDaemon serves a sandbox the way the docker provider's runner does: every connection
// the client's transport dials is a fresh ServeConn over two OS pipes (a process's stdin and
// stdout), and ends when the client closes it.
type pipeDaemon struct {
	srv   *sandboxd.Server
	wg    sync.WaitGroup
	mu    sync.Mutex
	dials int
}

func newPipeDaemon(t *testing.T, sb sandbox.Sandbox) (*pipeDaemon, *http.Client) {
	t.Helper()
	srv, err := sandboxd.New(sandboxd.Config{Sandbox: sb, Token: token})
	require.NoError(t, err)
	d := &pipeDaemon{srv: srv}
	tr := &http.Transport{DialContext: d.dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		d.wg.Wait() // every ServeConn ends once its peer hangs up
	})
	return d, &http.Client{Transport: tr}
}

func (d *pipeDaemon) dial(context.Context, string, string) (net.Conn, error) {
	toServer, fromClient, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	toClient, fromServer, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.dials++
	d.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		_ = d.srv.ServeConn(context.Background(), sandboxd.NewPipeConn(toServer, fromServer))
	}()
	return sandboxd.NewPipeConn(toClient, fromClient), nil
}

func (d *pipeDaemon) dialed() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials
}

func TestToolsSuiteOverPipes(t *testing.T) {
	t.Parallel()
	toolstest.Run(t, func(t *testing.T) sandbox.Sandbox {
		ws, _ := newWorkspace(t)
		_, hc := newPipeDaemon(t, ws)
		sb, err := sandboxd.Connect(t.Context(), "http://sandbox", token, hc)
		require.NoError(t, err)
		return sb
	})
}

// TestPipeConnectionIsReused: a sequence of calls costs one connection (one exec, for the
// docker provider), not one each.
func TestPipeConnectionIsReused(t *testing.T) {
	t.Parallel()
	ws, _ := newWorkspace(t)
	d, hc := newPipeDaemon(t, ws)
	sb, err := sandboxd.Open("http://sandbox", token, hc, true)
	require.NoError(t, err)
	for range 5 {
		res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo hi"})
		require.NoError(t, err)
		require.Equal(t, "hi\n", string(res.Output))
	}
	require.NoError(t, sb.WriteFile(t.Context(), "f.txt", []byte("x")))
	_, err = sb.ReadFile(t.Context(), "f.txt")
	require.NoError(t, err)
	require.Equal(t, 1, d.dialed())
}

// TestHangingUpKillsTheCommand: when the peer goes (a worker canceled the call, or died),
// the daemon kills what the call was running, whole process group included.
func TestHangingUpKillsTheCommand(t *testing.T) {
	t.Parallel()
	ws, dir := newWorkspace(t)
	_, hc := newPipeDaemon(t, ws)
	sb, err := sandboxd.Open("http://sandbox", token, hc, false)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "touch started; (sleep 2; touch child) & sleep 2; touch parent", Timeout: time.Minute})
		errc <- err
	}()
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dir, "started"))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the command started")
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	time.Sleep(3 * time.Second) // past when either process would have touched its file
	for _, f := range []string{"parent", "child"} {
		_, err := os.Stat(filepath.Join(dir, f))
		require.ErrorIs(t, err, os.ErrNotExist, "%s ran on after the peer hung up", f)
	}
}
