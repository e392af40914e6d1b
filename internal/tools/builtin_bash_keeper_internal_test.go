package tools

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The output keeper does not hold the wrapper's own output (the Exec's pipe): the call's
// result does not wait for the keeper's prune, however long that takes. Here the prune's
// find blocks, and the pipe must still reach its end while the keeper runs on.
func TestBashKeeperLeavesTheExecOutput(t *testing.T) {
	work, bin := t.TempDir(), t.TempDir()
	// A find that blocks, then leaves a mark: the keeper prunes after a call that kept more
	// than 64 KB.
	mark := filepath.Join(bin, "find-ended")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "find"), []byte("#!/bin/sh\nsleep 30\ntouch "+mark+"\n"), 0o755))
	call := callDir(StateDir + "/calls/sevt_keeper")
	require.NoError(t, os.MkdirAll(filepath.Join(work, string(call)), 0o755))

	script := bashOnceScript(call, bashInput{Command: `printf %s "$__MA_KEEPER_PID" > keeper.pid; head -c 70000 /dev/zero`}, time.Minute)
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "LANG=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// One pipe for both, as a provider's Exec gives them.
	out, w, err := os.Pipe()
	require.NoError(t, err)
	defer out.Close()
	cmd.Stdout, cmd.Stderr = w, w
	require.NoError(t, cmd.Start())
	require.NoError(t, w.Close())
	// The end of the pipe comes when the shell exits, not when the keeper does: with a copy
	// in the keeper this read would last as long as the blocked find.
	wrapperOutput, err := io.ReadAll(out)
	require.NoError(t, err)
	require.NoError(t, cmd.Wait())
	require.Empty(t, string(wrapperOutput), "the wrapper prints nothing of its own on success")

	raw, err := os.ReadFile(filepath.Join(work, "keeper.pid"))
	require.NoError(t, err)
	keeper, err := strconv.Atoi(string(raw))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(-keeper, syscall.SIGKILL) }) // the keeper leads its group
	require.NoFileExists(t, mark, "the output ended only after the keeper's prune")

	exit, err := os.ReadFile(filepath.Join(work, call.file(recExit)))
	require.NoError(t, err)
	require.Equal(t, "exit 0 0\n", string(exit))
	kept, err := os.Stat(filepath.Join(work, call.file(recOutput)))
	require.NoError(t, err)
	require.EqualValues(t, 70000, kept.Size())
}
