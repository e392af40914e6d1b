package e2b

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// execScript runs a command for Exec, started by envd as `/bin/bash -l -c execScript ma-exec
// DIR COMMAND` with the workspace as its working directory. It confines DIR to the workspace
// (symbolic links resolved: envd would follow them anywhere), then runs COMMAND in a child
// bash in a process group of its own (job control), stderr merged into stdout so the output
// keeps its order, stdin empty. envd signals only the process it started, so a timeout sends
// it SIGTERM and the trap kills the whole group. Its own complaints go to its stderr, which
// nothing else writes to (prefixed "ma-e2b:"), with status 95; from the job on it is
// /dev/null, so that bash's job notices ("[1]+ Done", printed when the job ends before the
// wrapper's next line) never reach the output.
const execScript = `ws=$(pwd -P) || exit 95
if [ -n "$1" ]; then
	r=$(realpath -m -- "$1" 2>/dev/null) || { echo "ma-e2b:outside" >&2; exit 95; }
	case $r in "$ws"|"$ws"/*) ;; *) echo "ma-e2b:outside" >&2; exit 95 ;; esac
	[ -e "$r" ] || { echo "ma-e2b:missing" >&2; exit 95; }
	[ -d "$r" ] || { echo "ma-e2b:notdir" >&2; exit 95; }
	cd -- "$r" || { echo "ma-e2b:notdir" >&2; exit 95; }
fi
exec 2>/dev/null
set -m
bash -c "$2" </dev/null 2>&1 &
p=$!
trap 'trap "" TERM; kill -KILL -- -$p; exit 137' TERM
wait $p`

// scriptFailure is the status of execScript's (and the helper scripts') own refusals.
const scriptFailure = 95

// run is one process: its output, end, and whether it was killed for taking too long.
type run struct {
	stdout, stderr []byte
	truncated      bool
	timedOut       bool
	exitCode       int
}

// start runs cmd args in cwd and streams its events: onStdout (when set) receives stdout
// instead of the run keeping it; the run keeps at most max bytes of what it keeps (stdout,
// and stderr apart, counting both), reading and dropping the rest so the command runs on.
// timeout > 0 kills it when it expires (TimedOut); a canceled ctx kills it and returns
// ctx's error. A stream that ends without the process's end is sandbox.ErrUnavailable.
func (b *box) start(ctx context.Context, op string, args []string, timeout time.Duration, limit int, onStdout func([]byte) error) (run, error) {
	// The stream's context has no deadline: connect would send it as Connect-Timeout-Ms,
	// and envd would kill only the process it started when it passes, not the group.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	var expired atomic.Bool
	if timeout > 0 {
		timer := time.AfterFunc(timeout, func() { expired.Store(true); cancel() })
		defer timer.Stop()
	}
	req := connect.NewRequest(&StartRequest{Process: ProcessConfig{Cmd: "/bin/bash", Args: args, Cwd: b.p.cfg.Workspace}})
	req.Header().Set(HeaderKeepalive, "30")
	// A command is sent once: a repeated Start would run it twice.
	stream, err := b.envd.start.CallServerStream(remote.NoRetry(sctx), req)
	if err != nil {
		if expired.Load() && ctx.Err() == nil {
			return run{timedOut: true, exitCode: -1}, nil
		}
		return run{}, b.streamErr(ctx, op, err)
	}
	defer stream.Close()
	var r run
	var pid uint32
	ended := false
	keep := func(dst *[]byte, data []byte) {
		room := limit - len(r.stdout) - len(r.stderr)
		if len(data) > room {
			r.truncated = true
			data = data[:max(room, 0)]
		}
		*dst = append(*dst, data...)
	}
	for !ended && stream.Receive() {
		ev := stream.Msg().Event
		switch {
		case ev == nil:
		case ev.Start != nil:
			pid = ev.Start.Pid
		case ev.Data != nil:
			if onStdout != nil && len(ev.Data.Stdout) > 0 {
				if err := onStdout(ev.Data.Stdout); err != nil {
					b.kill(ctx, pid)
					return run{}, err
				}
			} else {
				keep(&r.stdout, ev.Data.Stdout)
			}
			keep(&r.stderr, ev.Data.Stderr)
		case ev.End != nil:
			ended = true
			r.exitCode = int(ev.End.ExitCode)
		}
	}
	switch {
	case ended:
		return r, nil
	case expired.Load() && ctx.Err() == nil:
		b.kill(ctx, pid)
		r.timedOut, r.exitCode = true, -1
		return r, nil
	case ctx.Err() != nil:
		b.kill(ctx, pid)
		return run{}, fmt.Errorf("%s: %w", op, ctx.Err())
	}
	// The connection dropped mid-command: the command may run on, so it is stopped too.
	b.kill(ctx, pid)
	return run{}, b.streamErr(ctx, op, stream.Err())
}

// kill stops the process pid started (execScript's trap takes its group along), bounded and
// even when ctx was canceled: a command must not outlive its call.
func (b *box) kill(ctx context.Context, pid uint32) {
	if pid == 0 {
		return
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := b.envd.sendSignal(kctx, pid, SignalTerm); err != nil {
		b.p.logger.WarnContext(ctx, "could not stop a command in an e2b sandbox", "sandbox", b.id, "pid", pid, "error", err)
	}
}

// streamErr describes a failed stream: the caller's cancellation as such, anything else as a
// data plane that could not be reached (or a sandbox gone, which check tells).
func (b *box) streamErr(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	if err == nil {
		err = errors.New("the stream ended before the process did")
	}
	var ce *connect.Error
	if errors.As(err, &ce) && (ce.Code() == connect.CodeUnauthenticated || ce.Code() == connect.CodePermissionDenied) {
		return fmt.Errorf("%s: envd refused the sandbox's access token or user %q: %w", op, b.p.cfg.User, err)
	}
	if errors.As(err, &ce) && ce.Code() == connect.CodeInvalidArgument {
		return fmt.Errorf("%s: %w", op, err)
	}
	return b.check(ctx, remote.Transport(op, err))
}

// Exec implements sandbox.Sandbox.
func (b *box) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	dir, err := confine("exec in", req.Dir)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultExecTimeout
	}
	maxOut := req.MaxOutput
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}
	if err := b.keepAlive(ctx, timeout); err != nil {
		return sandbox.ExecResult{}, err
	}
	r, err := b.start(ctx, "exec", []string{"-l", "-c", execScript, "ma-exec", dir, req.Command}, timeout, maxOut, nil)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	if r.exitCode == scriptFailure {
		if err := scriptRefusal("exec in", req.Dir, r.stderr); err != nil {
			return sandbox.ExecResult{}, err
		}
	}
	out := append(r.stdout, r.stderr...)
	return sandbox.ExecResult{ExitCode: r.exitCode, Output: out, Truncated: r.truncated, TimedOut: r.timedOut}, nil
}
