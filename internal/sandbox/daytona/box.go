package daytona

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// MaxFileSize bounds what ReadFile loads into memory; larger files are read with commands.
const MaxFileSize = 64 << 20

var (
	_ sandbox.Sandbox      = (*box)(nil)
	_ sandbox.FileSearcher = (*box)(nil)
)

// box is one attached sandbox: every operation is a request to its toolbox.
type box struct {
	p    *Provider
	id   string
	base string // <toolboxProxyUrl>/<id>
	work string // the workspace root, absolute in the sandbox
}

// resolve turns a workspace-relative (or absolute, inside the workspace) path into the
// sandbox's absolute path; anything that leaves the workspace is refused here, since the
// toolbox itself confines nothing.
func (b *box) resolve(p string) (string, error) {
	abs := p
	if !path.IsAbs(p) {
		abs = path.Join(b.work, p)
	}
	abs = path.Clean(abs)
	if abs != b.work && !strings.HasPrefix(abs, b.work+"/") {
		return "", fmt.Errorf("%q: %w", p, sandbox.ErrOutsideWorkspace)
	}
	return abs, nil
}

// call sends one toolbox request and returns the answer to read and close; a 404 is
// ErrGone when the control plane no longer has the sandbox, else notFound.
func (b *box) call(ctx context.Context, method, pathQuery, contentType string, body io.Reader, once bool, op string, notFound error) (*http.Response, error) {
	if once {
		ctx = remote.NoRetry(ctx)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+pathQuery, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	b.p.authorize(req)
	resp, err := b.p.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", op, ctx.Err())
		}
		return nil, b.goneOr(ctx, remote.Transport(op, err))
	}
	if err := remote.Check(resp, op, EnvAPIKey); err != nil {
		if !errors.Is(err, remote.ErrAuth) {
			err = b.goneOr(ctx, err)
			if !errors.Is(err, sandbox.ErrGone) && errors.Is(err, remote.ErrNotFound) && notFound != nil {
				return nil, fmt.Errorf("%w: %w", notFound, err)
			}
		}
		return nil, err
	}
	return resp, nil
}

// goneOr asks the control plane whether the sandbox still exists when the toolbox failed:
// the toolbox proxy cannot tell a deleted sandbox from a missing file or a passing fault.
func (b *box) goneOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	sb, gerr := b.p.get(context.WithoutCancel(ctx), b.id)
	switch {
	case errors.Is(gerr, sandbox.ErrGone):
		return fmt.Errorf("daytona sandbox %s no longer exists: %w", b.id, sandbox.ErrGone)
	case gerr == nil && gone(sb.State):
		return fmt.Errorf("daytona sandbox %s is %s: %w", b.id, sb.State, sandbox.ErrGone)
	case gerr == nil && sb.State != stateStarted:
		// Stopped behind the client's back (auto-stop): unavailable, so the Manager attaches
		// again, which starts it.
		return fmt.Errorf("daytona sandbox %s is %s: %w: %w", b.id, sb.State, sandbox.ErrUnavailable, err)
	}
	return err
}

func (b *box) workDir(ctx context.Context) (string, error) {
	resp, err := b.call(ctx, http.MethodGet, "/work-dir", "", nil, false, "get the working directory of sandbox "+b.id, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Dir string `json:"dir"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&out); err != nil {
		return "", fmt.Errorf("get the working directory of sandbox %s: %w", b.id, err)
	}
	if !path.IsAbs(out.Dir) || path.Clean(out.Dir) == "/" {
		return "", fmt.Errorf("sandbox %s: the toolbox answered a working directory %q that cannot be a workspace; set %s", b.id, out.Dir, EnvWorkspace)
	}
	return path.Clean(out.Dir), nil
}

// Exec codes of the wrapper script.
const (
	noDirCode   = 199
	noDirMarker = "\x00managed-agents: no such directory\x00"
	// daemonGrace is how much longer the toolbox's own timeout is than the wrapper's, so the
	// wrapper's (exact, process-group) kill always comes first.
	daemonGrace = 10 * time.Second
)

// wrap is the command sent to /process/execute. The toolbox splits a command into words and
// runs it without a shell, with a 10 s default timeout and no output cap; so the command runs
// under `bash -c` in a script that kills its whole process group at the timeout (GNU
// timeout), merges stderr into stdout in order, and passes only max+1 bytes on (draining the
// rest, so the command never dies of SIGPIPE), its exit status the command's.
// The inner bash gets tag as its $0, so a canceled call can find and kill its process group.
func wrap(cmd, dir, tag string, timeout time.Duration, max int) string {
	secs := fmt.Sprintf("%.3f", timeout.Seconds())
	script := fmt.Sprintf("cd %s 2>/dev/null || { printf %s; exit %d; }\n"+
		"timeout -s KILL %s bash -c %s %s </dev/null 2>&1 | { head -c %d; cat >/dev/null; }\n"+
		"exit \"${PIPESTATUS[0]}\"",
		shellQuote(dir), shellQuote(strings.ReplaceAll(noDirMarker, "\x00", `\0`)), noDirCode, secs, shellQuote(cmd), tag, max+1)
	return "bash -c " + shellQuote(script)
}

// kill ends the process group of a command whose call was canceled (the worker shutting
// down, a turn interrupted): the toolbox does not end a command when its caller goes away.
// GNU timeout leads its own process group, found through /proc by the tag on the inner bash.
func (b *box) kill(ctx context.Context, tag string) {
	script := fmt.Sprintf(`for d in /proc/[0-9]*; do tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -q %s || continue; `+
		`set -- $(sed 's/^.*) //' "$d/stat" 2>/dev/null); [ -n "$3" ] && kill -KILL -- "-$3" 2>/dev/null; done; exit 0`, shellQuote(tag))
	body, _ := json.Marshal(map[string]any{"command": "bash -c " + shellQuote(script), "timeout": 30})
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	resp, err := b.call(kctx, http.MethodPost, "/process/execute", "application/json", bytes.NewReader(body), false, "kill a canceled command in sandbox "+b.id, nil)
	if err != nil {
		b.p.cfg.logger().WarnContext(ctx, "could not end a canceled command in a daytona sandbox", "sandbox", b.id, "error", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Exec implements sandbox.Sandbox with one POST /process/execute, sent once.
func (b *box) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.ExecResult{}, err
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = b.p.cfg.Timeout
	}
	max := req.MaxOutput
	if max <= 0 {
		max = b.p.cfg.MaxOutput
	}
	dir, err := b.resolve(req.Dir)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	tag := "ma-exec-" + rand.Text()
	body, _ := json.Marshal(map[string]any{
		"command": wrap(req.Command, dir, tag, timeout, max),
		"timeout": int(math.Ceil((timeout + daemonGrace).Seconds())),
	})
	op := "run a command in sandbox " + b.id
	start := time.Now()
	resp, err := b.call(ctx, http.MethodPost, "/process/execute", "application/json", bytes.NewReader(body), true, op, nil)
	var se *remote.StatusError
	if errors.As(err, &se) && se.Status == http.StatusRequestTimeout {
		// The toolbox's own timeout: something the command left behind held its output open.
		return sandbox.ExecResult{ExitCode: 128 + int(syscall.SIGKILL), TimedOut: true}, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			b.kill(ctx, tag)
		}
		return sandbox.ExecResult{}, err
	}
	defer resp.Body.Close()
	// JSON escapes at most six bytes per byte of output; the wrapper already cut it at max+1.
	limit := int64(max+1)*6 + 64<<10
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return sandbox.ExecResult{}, b.goneOr(ctx, remote.Transport(op, err))
	}
	if int64(len(data)) > limit {
		return sandbox.ExecResult{}, fmt.Errorf("%s: the answer is larger than the output cap allows", op)
	}
	var out struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("%s: decode the answer: %w", op, err)
	}
	if out.ExitCode == noDirCode && out.Result == noDirMarker {
		return sandbox.ExecResult{}, fmt.Errorf("run in %q: %w", req.Dir, sandbox.ErrNotExist)
	}
	res := sandbox.ExecResult{ExitCode: out.ExitCode, Output: []byte(out.Result)}
	if len(res.Output) > max {
		res.Output, res.Truncated = res.Output[:max], true
	}
	if out.ExitCode == 128+int(syscall.SIGKILL) && time.Since(start) >= timeout {
		res.TimedOut = true
	}
	return res, nil
}

// ReadFile implements sandbox.Sandbox with one GET /files/download.
func (b *box) ReadFile(ctx context.Context, p string) ([]byte, error) {
	abs, err := b.resolve(p)
	if err != nil {
		return nil, err
	}
	op := fmt.Sprintf("read %q", p)
	resp, err := b.call(ctx, http.MethodGet, "/files/download?"+url.Values{"path": {abs}}.Encode(), "", nil, false, op, sandbox.ErrNotExist)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxFileSize+1))
	if err != nil {
		return nil, b.goneOr(ctx, remote.Transport(op, err))
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: file is too large (the limit is %d bytes); read parts of it with bash", op, MaxFileSize)
	}
	return data, nil
}

// WriteFile implements sandbox.Sandbox with one multipart POST /files/upload.
func (b *box) WriteFile(ctx context.Context, p string, data []byte) error {
	abs, err := b.resolve(p)
	if err != nil {
		return err
	}
	if abs == b.work {
		return fmt.Errorf("write %q: the workspace root is a directory", p)
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", path.Base(abs))
	if err == nil {
		_, err = fw.Write(data)
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return fmt.Errorf("write %q: %w", p, err)
	}
	resp, err := b.call(ctx, http.MethodPost, "/files/upload?"+url.Values{"path": {abs}}.Encode(), mw.FormDataContentType(), &buf, false, fmt.Sprintf("write %q", p), nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.Body.Close()
}
