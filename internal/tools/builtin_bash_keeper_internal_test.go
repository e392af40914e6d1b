package tools

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	// A find that blocks, then leaves a mark; the calls before this one kept pruneAfter
	// bytes, so the keeper prunes after it.
	started, mark := filepath.Join(bin, "find-started"), filepath.Join(bin, "find-ended")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "find"), []byte("#!/bin/sh\ntouch "+started+"\nsleep 30\ntouch "+mark+"\n"), 0o755))
	call := callDir(StateDir + "/calls/sevt_keeper")
	require.NoError(t, os.MkdirAll(filepath.Join(work, string(call)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(work, StateDir, bashUnpruned), []byte(strconv.Itoa(pruneAfter)+"\n"), 0o644))

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
	// The keeper is in its prune: this test would pass without it having started.
	require.Eventually(t, func() bool {
		_, err := os.Stat(started)
		return err == nil
	}, 30*time.Second, 5*time.Millisecond)
	require.NoFileExists(t, mark, "the blocked find is still running")

	exit, err := os.ReadFile(filepath.Join(work, call.file(recExit)))
	require.NoError(t, err)
	require.Equal(t, "exit 0 0\n", string(exit))
	kept, err := os.Stat(filepath.Join(work, call.file(recOutput)))
	require.NoError(t, err)
	require.EqualValues(t, 70000, kept.Size())
}

// The keeper walks the sandbox's records (bashPrune) only once the calls since its last walk
// have kept more than pruneAfter bytes: small calls add up in the unpruned record and start
// nothing, the call that passes the sum prunes and starts the count again.
func TestBashKeeperPrunesOnceTheKeptBytesAddUp(t *testing.T) {
	work, bin := t.TempDir(), t.TempDir()
	walks := filepath.Join(bin, "walks")
	// A find that counts its runs and finds nothing.
	require.NoError(t, os.WriteFile(filepath.Join(bin, "find"), []byte("#!/bin/sh\necho >> "+walks+"\n"), 0o755))
	run := func(id string, kept int) {
		t.Helper()
		call := callDir(StateDir + "/calls/" + id)
		require.NoError(t, os.MkdirAll(filepath.Join(work, string(call)), 0o755))
		script := bashOnceScript(call, bashInput{Command: `printf %s "$__MA_KEEPER_PID" > keeper.pid; head -c ` + strconv.Itoa(kept) + ` /dev/zero`}, time.Minute)
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "LANG=C.UTF-8"}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		// The count is written before the keeper reports the call done, so it is in place
		// when the wrapper exits: after the result a keeper writes only in its prune.
		counted, err := os.ReadFile(filepath.Join(work, StateDir, bashUnpruned))
		require.NoError(t, err)
		raw, err := os.ReadFile(filepath.Join(work, "keeper.pid"))
		require.NoError(t, err)
		keeper, err := strconv.Atoi(string(raw))
		require.NoError(t, err)
		// The keeper prunes after the result: wait until it has exited.
		require.Eventually(t, func() bool { return exited(keeper) }, 30*time.Second, 5*time.Millisecond)
		final, err := os.ReadFile(filepath.Join(work, StateDir, bashUnpruned))
		require.NoError(t, err)
		require.Equal(t, string(counted), string(final), "the keeper changed the count after the result")
	}
	state := func() (unpruned string, walked int) {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(work, StateDir, bashUnpruned))
		require.NoError(t, err)
		w, err := os.ReadFile(walks)
		if errors.Is(err, os.ErrNotExist) {
			return string(raw), 0
		}
		require.NoError(t, err)
		return string(raw), len(w)
	}

	run("sevt_a", 1000)
	u, walked := state()
	require.Equal(t, "1000\n", u)
	require.Zero(t, walked)
	run("sevt_b", pruneAfter-1000)
	u, walked = state()
	require.Equal(t, strconv.Itoa(pruneAfter)+"\n", u, "up to pruneAfter bytes add up")
	require.Zero(t, walked)
	run("sevt_empty", 0)
	u, walked = state()
	require.Equal(t, strconv.Itoa(pruneAfter)+"\n", u, "a call that kept nothing adds nothing")
	require.Zero(t, walked)
	run("sevt_c", 1)
	u, walked = state()
	require.Equal(t, "0\n", u, "the call past the sum prunes and starts the count again")
	require.Equal(t, 2, walked, "one prune: a find of the calls and one of the spill files")
	run("sevt_d", 10)
	u, walked = state()
	require.Equal(t, "10\n", u)
	require.Equal(t, 2, walked)

	// A spill file was written (spill sets the count past pruneAfter): the next call prunes
	// although it kept nothing.
	require.NoError(t, os.WriteFile(filepath.Join(work, StateDir, bashUnpruned), []byte(strconv.Itoa(pruneAfter+1)+"\n"), 0o644))
	run("sevt_after_spill", 0)
	u, walked = state()
	require.Equal(t, "0\n", u)
	require.Equal(t, 4, walked)

	// A FIFO in the count's place would block the keeper's read: it is replaced.
	require.NoError(t, os.Remove(filepath.Join(work, StateDir, bashUnpruned)))
	require.NoError(t, syscall.Mkfifo(filepath.Join(work, StateDir, bashUnpruned), 0o644))
	run("sevt_fifo", 5)
	u, walked = state()
	require.Equal(t, "5\n", u)
	require.Equal(t, 4, walked)
}

// exited reports whether pid is gone or a zombie: a keeper outlives the wrapper and is
// reparented, and where nothing reaps it (a container whose init does not) it stays a zombie.
func exited(pid int) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	stat := string(raw)
	i := strings.LastIndex(stat, ") ")
	return i < 0 || len(stat) < i+3 || stat[i+2] == 'Z' || stat[i+2] == 'X'
}
