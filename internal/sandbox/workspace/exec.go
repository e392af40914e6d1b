package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// drainGrace is how long Exec keeps reading output after the command's process group is gone.
// Only a process that left the group (setsid) and kept the output pipe open can make it wait
// that long; its later output is dropped.
const drainGrace = 500 * time.Millisecond

// Exec implements sandbox.Sandbox. The command runs as `bash -c` in its own process group with
// the workspace's cleared environment. When the command exits, times out or ctx ends, the
// whole group is killed: a call leaves nothing running in its group (a process that must
// outlive the call has to detach with setsid and redirect its output).
func (w *Workspace) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.ExecResult{}, err
	}
	dir, err := w.execDir(req.Dir)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	timeout := cmpPositive(req.Timeout, w.timeout)
	out := &cappedBuffer{max: cmpPositive(req.MaxOutput, w.maxOutput)}

	cmd := exec.Command("bash", "-c", req.Command)
	cmd.Dir = dir
	cmd.Env = w.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	drained, err := startWithPipe(cmd, out)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	pgid := cmd.Process.Pid
	preferOOMVictim(pgid)

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	var res sandbox.ExecResult
	var ctxErr error
	select {
	case err = <-waited:
	case <-timer.C:
		res.TimedOut = true
		killGroup(pgid)
		err = <-waited
	case <-ctx.Done():
		ctxErr = ctx.Err()
		killGroup(pgid)
		err = <-waited
	}
	// The leader is reaped, but its group lives on while any member does, so the id cannot
	// have been reused yet if there is anyone left to kill.
	killGroup(pgid)
	drained.wait()

	res.Output, res.Truncated = out.buf, out.truncated
	res.ExitCode, err = exitCode(cmd, err)
	if err != nil {
		return res, fmt.Errorf("run command: %w", err)
	}
	if ctxErr != nil {
		return res, fmt.Errorf("command canceled: %w", ctxErr)
	}
	return res, nil
}

// execDir resolves the request's working directory inside the workspace. The command may of
// course cd anywhere afterwards (this provider is not a security boundary); the check keeps
// the Dir semantics identical to providers that are one.
func (w *Workspace) execDir(dir string) (string, error) {
	if dir == "" {
		// Checked so a destroyed sandbox says so, instead of a confusing failure to start bash.
		if _, err := os.Stat(w.dir); errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("workspace %s: %w", w.dir, sandbox.ErrGone)
		}
		return w.dir, nil
	}
	root, rel, err := w.open(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	info, err := root.Stat(rel)
	if err != nil {
		return "", describe("exec in", dir, err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("exec in %q: %w", dir, syscall.ENOTDIR)
	}
	return filepath.Join(w.dir, rel), nil
}

// drain tracks the goroutine copying the command's output.
type drain struct {
	done chan struct{}
	r    *os.File
}

// wait waits for the output to end, for at most drainGrace.
func (d drain) wait() {
	grace := time.NewTimer(drainGrace)
	defer grace.Stop()
	select {
	case <-d.done:
	case <-grace.C:
		_ = d.r.Close() // unblocks the pending read
		<-d.done
	}
	_ = d.r.Close()
}

// startWithPipe starts cmd with stdout and stderr on one pipe, so the output interleaves as
// written, and copies it into out until every writer has closed the pipe. The copy goes on
// past the cap, discarding, so a chatty command never blocks on a full pipe.
func startWithPipe(cmd *exec.Cmd, out io.Writer) (drain, error) {
	r, wr, err := os.Pipe()
	if err != nil {
		return drain{}, fmt.Errorf("create output pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = wr, wr
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = wr.Close()
		return drain{}, fmt.Errorf("start bash: %w", err)
	}
	// The child holds its own copy; ours must go or the reader never sees EOF.
	_ = wr.Close()
	d := drain{done: make(chan struct{}), r: r}
	go func() {
		defer close(d.done)
		_, _ = io.Copy(out, r)
	}()
	return d, nil
}

func killGroup(pgid int) {
	// ESRCH (nobody left) is the usual outcome and not an error.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// exitCode returns the command's exit status the way a shell reports it (128+n for a signal)
// and passes on only errors that are not about the status.
func exitCode(cmd *exec.Cmd, waitErr error) (int, error) {
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return -1, waitErr
	}
	status, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && status.Signaled() {
		return 128 + int(status.Signal()), nil
	}
	return cmd.ProcessState.ExitCode(), nil
}

// cappedBuffer keeps the first max bytes written to it and counts the rest as truncated.
type cappedBuffer struct {
	buf       []byte
	max       int
	truncated bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	room := b.max - len(b.buf)
	if len(p) > room {
		b.buf = append(b.buf, p[:max(room, 0)]...)
		b.truncated = true
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func cmpPositive[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// commandOOMScoreAdj is the OOM killer's preference for a command's processes over the daemon
// that runs them: when a command fills the sandbox's memory, the kernel kills the command, not
// sandboxd, so the sandbox answers the call and the next one (the docker provider's
// TestMemoryHogIsKilled). Raising the score needs no privilege; lowering it would.
const commandOOMScoreAdj = "1000"

// preferOOMVictim makes pid, and what it starts from now on, the first the OOM killer picks.
// Best effort: where /proc is not writable the kernel's own choice stands. The few
// microseconds between the start and the write are not enough for a command to allocate.
func preferOOMVictim(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte(commandOOMScoreAdj), 0)
}
