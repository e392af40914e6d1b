//go:build integration

package e2e

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMakeRunStopsCleanlyOnCtrlC runs the README's `make run` and presses Ctrl-C as a terminal
// does (SIGINT to the whole foreground process group: make and what it runs). The server must
// shut down cleanly and make must print no error line: `go run` used to exit 1 on the signal,
// so make said `Error 1`. make itself, like any program, may end by the SIGINT it was sent.
func TestMakeRunStopsCleanlyOnCtrlC(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is needed: apt-get install make")
	}
	addr := freeAddr(t)
	cmd := exec.Command("make", "run")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "MANAGED_AGENT_ADDR="+addr, "MANAGED_AGENT_DATA_DIR="+filepath.Join(reachableTempDir(t), "data"))
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group, as a shell gives a foreground job; dies with the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() { done <- cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})

	ready := false
	for deadline := time.Now().Add(3 * time.Minute); !ready && time.Now().Before(deadline); {
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
		select {
		case err := <-done:
			t.Fatalf("make run exited before it was ready: %v\n%s", err, out.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	require.True(t, ready, "make run did not become ready:\n%s", out.String())

	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT))
	select {
	case err := <-done:
		var exit *exec.ExitError
		if err != nil && (!errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled()) {
			t.Fatalf("make run failed on Ctrl-C: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("make run did not stop on Ctrl-C:\n%s", out.String())
	}
	require.NotContains(t, out.String(), "make: ***", "no make error line")
	require.False(t, strings.Contains(out.String(), "level=ERROR"), "a clean stop logs no error:\n%s", out.String())
	require.Contains(t, out.String(), "stopped PostgreSQL", "dev stopped what it started")
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
