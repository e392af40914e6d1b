//go:build integration

package durable

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
)

func TestDevServerStartsAndAnswers(t *testing.T) {
	ctx := context.Background()
	srv, err := StartDevServer(ctx, DevServerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Stop()) })
	_, err = srv.Client().CheckHealth(ctx, &client.CheckHealthRequest{})
	require.NoError(t, err)
	require.NotEmpty(t, srv.FrontendHostPort())
}

// TestDevServerStopsStaleServer: a server an earlier run left on the same db file (its pid
// file says which) is stopped before the new one starts, so two never share the SQLite file.
func TestDevServerStopsStaleServer(t *testing.T) {
	ctx := context.Background()
	path, err := FindTemporalCLI()
	require.NoError(t, err)
	db := filepath.Join(t.TempDir(), "temporal.db")
	port, err := freePort()
	require.NoError(t, err)
	stale := exec.Command(path, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", strconv.Itoa(port), "--db-filename", db)
	stale.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, stale.Start())
	staleDone := make(chan error, 1)
	go func() { staleDone <- stale.Wait() }()
	t.Cleanup(func() { _ = stale.Process.Kill() })
	require.NoError(t, os.WriteFile(db+".pid", []byte(strconv.Itoa(stale.Process.Pid)+"\n"), 0o600))

	srv, err := StartDevServer(ctx, DevServerOptions{DBFile: db})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Stop()) })
	select {
	case <-staleDone:
	default:
		t.Fatal("the stale server is still running")
	}
	b, err := os.ReadFile(db + ".pid")
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(srv.process.Pid)+"\n", string(b))
}

// TestDevServerStaleCheckSparesOtherProcesses: a pid file naming a process that is not a dev
// server on this file (a reused pid) is removed, and the process is left alone.
func TestDevServerStaleCheckSparesOtherProcesses(t *testing.T) {
	db := filepath.Join(t.TempDir(), "temporal.db")
	require.NoError(t, os.WriteFile(db+".pid", []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600))
	require.NoError(t, stopStale(db+".pid", db))
	_, err := os.Stat(db + ".pid")
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestDevServerRestart: a server that died comes back on the same address, and the client
// it handed out works again.
func TestDevServerRestart(t *testing.T) {
	ctx := context.Background()
	srv, err := StartDevServer(ctx, DevServerOptions{DBFile: filepath.Join(t.TempDir(), "temporal.db")})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Stop()) })
	addr := srv.FrontendHostPort()
	srv.Kill()
	<-srv.Exited()
	require.NoError(t, srv.Restart(ctx))
	require.Equal(t, addr, srv.FrontendHostPort())
	_, err = srv.Client().CheckHealth(ctx, &client.CheckHealthRequest{})
	require.NoError(t, err)
}

// TestDevServerFileSurvivesAKill: a file-backed server runs SQLite with a write-ahead log
// (devServerFileArgs), and what it committed before a SIGKILL is there after the restart.
func TestDevServerFileSurvivesAKill(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "temporal.db")
	srv, err := StartDevServer(ctx, DevServerOptions{DBFile: db})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Stop()) })
	run, err := srv.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "survives-a-kill", TaskQueue: "nobody-polls"}, "SomeWorkflow")
	require.NoError(t, err)

	srv.Kill()
	<-srv.Exited()
	// The SQLite header's read and write format versions are 2 in WAL mode, 1 otherwise.
	f, err := os.Open(db)
	require.NoError(t, err)
	header := make([]byte, 20)
	_, err = f.ReadAt(header, 0)
	require.NoError(t, f.Close())
	require.NoError(t, err)
	require.Equal(t, []byte{2, 2}, header[18:20], "journal mode of %s", db)

	require.NoError(t, srv.Restart(ctx))
	desc, err := srv.Client().DescribeWorkflow(ctx, "survives-a-kill", "")
	require.NoError(t, err)
	require.Equal(t, run.GetRunID(), desc.WorkflowExecution.RunID)
}
