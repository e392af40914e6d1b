package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// box is one session's container.
type box struct {
	engine    engine
	id        string
	timeout   time.Duration
	maxOutput int
}

// Bounds of the calls Exec makes besides the command itself.
const (
	// killTimeout bounds the exec that kills a command's group.
	killTimeout = 10 * time.Second
	// drainGrace is how long Exec keeps reading after the command's group is killed. Only a
	// process that left the group (setsid) and kept the output open can make it wait.
	drainGrace = 2 * time.Second
)

// execScript runs as the exec's process, which the runtime makes a session (and so process
// group) leader of its own: it resolves the working directory inside the container, refuses one outside the
// workspace, reports "ok <pgid>" as the first line of stdout (before the command can write
// anything) so the caller can kill the group, runs the command, then kills what the command
// left in its group, as the local provider does. $1 is the directory, $2 the command.
//
// It forks nothing but the command's shell on the way: the directory is resolved with the
// cd builtin (realpath runs only to tell why a directory was refused), and the command's
// status goes out as the last line of the script's own stderr (the command's stderr is
// merged into stdout), which saves polling the engine for the exec's exit. A script killed
// before it prints it (a timeout, a cancellation) leaves the caller to ask the engine.
const execScript = `if cd -P -- "$1" 2>/dev/null; then d=$PWD; else
	d=$(realpath -m -- "$1" 2>/dev/null) || { echo "err notexist"; exit 1; }
	case $d in /workspace|/workspace/*) ;; *) echo "err outside"; exit 1 ;; esac
	[ -e "$d" ] || { echo "err notexist"; exit 1; }
	echo "err notdir"; exit 1
fi
case $d in /workspace|/workspace/*) ;; *) echo "err outside"; exit 1 ;; esac
read -r line < /proc/$$/stat; set -- "$2" ${line##*) }; g=$4
echo "ok $g"
bash -c "$1" </dev/null 2>&1
s=$?
[ "$g" = $$ ] && for round in 1 2 3; do
	found=
	for f in /proc/[0-9]*/stat; do
		read -r line 2>/dev/null < "$f" || continue
		pid=${f#/proc/}; pid=${pid%/stat}
		set -- ${line##*) }
		if [ "$3" = "$g" ] && [ "$pid" != $$ ]; then kill -KILL "$pid" 2>/dev/null; found=1; fi
	done
	[ -n "$found" ] || break
done
echo "` + exitTrailer + `$s" >&2
exit $s`

// exitTrailer starts the line with which the exec and file scripts report their exit
// status on their own stderr, last.
const exitTrailer = "ma-exit "

// Exec implements sandbox.Sandbox.
func (b *box) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.ExecResult{}, err
	}
	dir := "."
	if req.Dir != "" {
		var err error
		if dir, err = rel(req.Dir); err != nil {
			return sandbox.ExecResult{}, err
		}
	}
	timeout := positiveOr(req.Timeout, b.timeout)
	out := &cappedBuffer{max: positiveOr(req.MaxOutput, b.maxOutput)}
	header := newHeaderWriter(out)
	var trailer bytes.Buffer // the script's stderr

	run, err := b.start(ctx, []string{"bash", "-c", execScript, "ma-exec", path.Join(Workspace, dir), req.Command}, false)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	defer run.attach.Close()
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(header, &tailBuffer{buf: &trailer}, run.attach.Reader)
		copied <- err
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var res sandbox.ExecResult
	var ctxErr error
	select {
	case err = <-copied:
	case <-timer.C:
		res.TimedOut = true
		err = b.killAndDrain(header, copied, run.attach)
	case <-ctx.Done():
		ctxErr = ctx.Err()
		err = b.killAndDrain(header, copied, run.attach)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return res, fmt.Errorf("read command output: %w", err)
	}
	if refusal := header.refusal(); refusal != "" {
		return sandbox.ExecResult{}, refusalError(refusal, req.Dir)
	}
	res.Output, res.Truncated = out.bytes()
	if code, _, ok := cutTrailer(trailer.Bytes()); ok && !res.TimedOut && ctxErr == nil {
		res.ExitCode = code
	} else if res.ExitCode, err = b.exitCode(run.id); err != nil {
		return res, err
	}
	if ctxErr != nil {
		return res, fmt.Errorf("command canceled: %w", ctxErr)
	}
	return res, nil
}

// killAndDrain kills the command's process group inside the container and waits for the
// output to end, for at most drainGrace.
func (b *box) killAndDrain(header *headerWriter, copied <-chan error, attach client.HijackedResponse) error {
	if pgid, ok := header.waitPgid(drainGrace); ok {
		b.killGroup(pgid)
	}
	grace := time.NewTimer(drainGrace)
	defer grace.Stop()
	select {
	case err := <-copied:
		return err
	case <-grace.C:
		attach.Close() // unblocks the copy
		<-copied
		return nil
	}
}

// killGroup kills a process group inside the container with a second exec (the engine has
// no call that signals a process of an exec). Best effort: the command's own exit shows
// whether it worked.
func (b *box) killGroup(pgid int) {
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	run, err := b.start(ctx, []string{"bash", "-c", `kill -KILL -- "-$1" 2>/dev/null; true`, "ma-kill", strconv.Itoa(pgid)}, false)
	if err != nil {
		return
	}
	defer run.attach.Close()
	_, _ = io.Copy(io.Discard, run.attach.Reader)
}

// running is one started exec.
type running struct {
	id     string
	attach client.HijackedResponse
}

// start creates and attaches to an exec of cmd in the workspace.
func (b *box) start(ctx context.Context, cmd []string, stdin bool) (running, error) {
	created, err := b.engine.ExecCreate(ctx, b.id, client.ExecCreateOptions{
		User:         User,
		WorkingDir:   Workspace,
		Cmd:          cmd,
		AttachStdin:  stdin,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return running{}, b.execError(err)
	}
	attach, err := b.engine.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return running{}, b.execError(err)
	}
	return running{id: created.ID, attach: attach.HijackedResponse}, nil
}

// execError classifies a failure to start an exec: the container gone is ErrGone, one that
// is stopped is unavailable (the Manager drops the client, and Attach starts it again).
func (b *box) execError(err error) error {
	switch {
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("docker sandbox %s: %w", b.id, sandbox.ErrGone)
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("docker sandbox %s is not running: %w: %w", b.id, sandbox.ErrUnavailable, err)
	}
	return fmt.Errorf("exec in docker sandbox %s: %w: %w", b.id, sandbox.ErrUnavailable, err)
}

// exitCode waits for the engine to record the exec's exit: the output can end a moment
// before. A process killed by a signal reports 128+n, as a shell does.
func (b *box) exitCode(execID string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		info, err := b.engine.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return -1, b.execError(err)
		}
		if !info.Running {
			return info.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("docker sandbox %s: the command's exit was not recorded: %w", b.id, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// cutTrailer takes the exit status off the end of a script's stderr: ok is false when the
// script never printed it.
func cutTrailer(stderr []byte) (code int, rest []byte, ok bool) {
	body := bytes.TrimSuffix(stderr, []byte("\n"))
	i := bytes.LastIndexByte(body, '\n') + 1
	digits, found := bytes.CutPrefix(body[i:], []byte(exitTrailer))
	if !found {
		return 0, stderr, false
	}
	code, err := strconv.Atoi(string(digits))
	if err != nil {
		return 0, stderr, false
	}
	return code, body[:i], true
}

// tailBuffer keeps the last tailSize bytes (at least) of what is written to it: where the
// trailer is, whatever else reached the script's stderr before.
type tailBuffer struct{ buf *bytes.Buffer }

const tailSize = 4096

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if t.buf.Len() > 2*tailSize {
		t.buf.Next(t.buf.Len() - tailSize)
	}
	return len(p), nil
}

func refusalError(refusal, dir string) error {
	switch refusal {
	case "outside":
		return fmt.Errorf("exec in %q: %w", dir, sandbox.ErrOutsideWorkspace)
	case "notexist":
		return fmt.Errorf("exec in %q: %w", dir, sandbox.ErrNotExist)
	case "notdir":
		return fmt.Errorf("exec in %q: %w", dir, syscall.ENOTDIR)
	}
	return fmt.Errorf("exec in %q: %s", dir, refusal)
}

// headerWriter takes the first line of the command's stdout (execScript's report) and passes
// the rest on to the shared output.
type headerWriter struct {
	out    io.Writer
	mu     sync.Mutex
	line   []byte
	done   bool
	report string
	ready  chan struct{}
}

func newHeaderWriter(out io.Writer) *headerWriter {
	return &headerWriter{out: out, ready: make(chan struct{})}
}

func (h *headerWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		return h.out.Write(p)
	}
	i := bytes.IndexByte(p, '\n')
	if i < 0 {
		h.line = append(h.line, p...)
		h.mu.Unlock()
		return len(p), nil
	}
	h.line = append(h.line, p[:i]...)
	h.report, h.done = string(h.line), true
	close(h.ready)
	h.mu.Unlock()
	if _, err := h.out.Write(p[i+1:]); err != nil {
		return 0, err
	}
	return len(p), nil
}

// waitPgid returns the process group the script reported, waiting at most d for it.
func (h *headerWriter) waitPgid(d time.Duration) (int, bool) {
	select {
	case <-h.ready:
	case <-time.After(d):
		return 0, false
	}
	pgid, err := strconv.Atoi(strings.TrimPrefix(h.report, "ok "))
	return pgid, err == nil && strings.HasPrefix(h.report, "ok ") && pgid > 1
}

// refusal is the script's reason for not running the command, "" if it ran (or the report
// never came).
func (h *headerWriter) refusal() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r, ok := strings.CutPrefix(h.report, "err "); ok {
		return r
	}
	return ""
}

// cappedBuffer keeps the first max bytes written to it from both streams and counts the rest
// as truncated; it goes on accepting, so the command never blocks on a full pipe.
type cappedBuffer struct {
	mu        sync.Mutex
	buf       []byte
	max       int
	truncated bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - len(c.buf)
	if len(p) > room {
		c.buf = append(c.buf, p[:max(room, 0)]...)
		c.truncated = true
		return len(p), nil
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

func (c *cappedBuffer) bytes() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf, c.truncated
}

func positiveOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// rel turns a tool's path into one relative to the workspace. An absolute path is accepted
// only inside /workspace; anything lexically outside is refused here, symlinks inside the
// container by the scripts that resolve the path there.
func rel(p string) (string, error) {
	if p == "" {
		return "", errors.New("path is empty")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errors.New("path contains a NUL byte")
	}
	clean := path.Clean(p)
	if path.IsAbs(clean) {
		if clean == Workspace {
			return ".", nil
		}
		if r, ok := strings.CutPrefix(clean, Workspace+"/"); ok {
			return r, nil
		}
		return "", fmt.Errorf("%q: %w", p, sandbox.ErrOutsideWorkspace)
	}
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%q: %w", p, sandbox.ErrOutsideWorkspace)
	}
	return clean, nil
}
