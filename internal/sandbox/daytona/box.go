package daytona

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strconv"
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

const (
	// daemonGrace is how much longer the toolbox's own timeout is than the wrapper's, so the
	// wrapper's (exact, process-group) kill always comes first.
	daemonGrace = 10 * time.Second
	// scriptTimeout bounds the short scripts that resolve paths.
	scriptTimeout = 30 * time.Second
	// maxCommand bounds the encoded command: the toolbox passes it as one argument of bash,
	// and Linux refuses an argument longer than 128 KiB (MAX_ARG_STRLEN).
	maxCommand = 128<<10 - 1024
)

// command is what /process/execute runs for script. The toolbox splits a command into words
// on spaces, with quotes that only toggle (no backslash escapes), and runs it without a shell;
// so the script travels base64-encoded inside a single-quoted word, which splits the same way
// under that parser and under a POSIX shell's.
func command(script string) (string, error) {
	c := `bash -c 'eval "$(base64 -d <<< ` + base64.StdEncoding.EncodeToString([]byte(script)) + `)"'`
	if len(c) > maxCommand {
		return "", fmt.Errorf("the command is too long for Daytona's toolbox (%d bytes encoded, the limit is %d): write it to a file with the write tool and run that", len(c), maxCommand)
	}
	return c, nil
}

// preamble resolves rel in the sandbox: it sets ma_root to the real workspace directory
// (made if missing) and ma_p to the real path of the target (symlinks resolved, missing
// components kept), and refuses a target outside the workspace. Verdicts are the first line
// of the output, after a nonce the command's own output cannot know.
func (b *box) preamble(nonce, rel string) string {
	return remote.PathPreamble(nonce, remote.ShellQuote(b.work), rel, true)
}

// pathCheck reads the refusals of preamble's scripts.
var pathCheck = remote.PathCheck{MaxFileSize: MaxFileSize,
	NoRoot: "the workspace directory cannot be made in the sandbox (" + EnvWorkspace + ")"}

// run sends script as one POST /process/execute (once: never repeated, since a repetition
// would run it twice; otherwise the script is one whose repetition does no harm, and refused
// answers are retried), with the toolbox's own timeout at timeout, and reads at most max bytes of output (JSON
// escapes allowed for). A 408 is the toolbox's timeout.
func (b *box) run(ctx context.Context, script string, once bool, timeout time.Duration, max int) (code int, out []byte, err error) {
	c, err := command(script)
	if err != nil {
		return 0, nil, err
	}
	body, _ := json.Marshal(map[string]any{"command": c, "timeout": int(math.Ceil(timeout.Seconds()))})
	op := "run a command in sandbox " + b.id
	resp, err := b.call(ctx, http.MethodPost, "/process/execute", "application/json", bytes.NewReader(body), once, op, nil)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	// JSON escapes at most six bytes per byte of output.
	limit := int64(max)*6 + 64<<10
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return 0, nil, b.goneOr(ctx, remote.Transport(op, err))
	}
	if int64(len(data)) > limit {
		return 0, nil, fmt.Errorf("%s: the answer is larger than the output cap allows", op)
	}
	var res struct {
		ExitCode *int   `json:"exitCode"`
		Code     *int   `json:"code"` // what daemons before the rename answered
		Result   string `json:"result"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return 0, nil, fmt.Errorf("%s: decode the answer: %w", op, err)
	}
	switch {
	case res.ExitCode != nil:
		code = *res.ExitCode
	case res.Code != nil:
		code = *res.Code
	default:
		return 0, nil, fmt.Errorf("%s: the answer has no exit code", op)
	}
	return code, []byte(res.Result), nil
}

// Exec implements sandbox.Sandbox with one POST /process/execute, sent once. The script
// resolves the working directory in the sandbox, then runs the command under `bash -c` led
// by GNU timeout (its own process group, killed whole at the timeout), stderr merged into
// stdout in order, only max+1 bytes passed on (the rest drained, so the command never dies of
// SIGPIPE). When the command ends, what it left running in its group is killed, as the other
// providers do: else a background process would hold the toolbox's output pipe open until
// the toolbox's timeout. The inner bash gets tag as its $0, so a canceled call can find and
// kill its process group.
func (b *box) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.ExecResult{}, err
	}
	rel, err := remote.CleanRel(req.Dir)
	if err != nil {
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
	nonce := remote.NewNonce()
	tag := "ma-exec-" + strings.ToLower(rand.Text())
	script := b.preamble(nonce, rel) + remote.DirCheck + `unset -f ma_say; unset ma_root ma_p
printf '%s ok\n' ` + nonce + `
exec 2>/dev/null
timeout -s KILL ` + fmt.Sprintf("%.3f", timeout.Seconds()) + ` bash -c ` + remote.ShellQuote(req.Command) + ` ` + tag + ` </dev/null > >(head -c ` + strconv.Itoa(max+1) + `; cat >/dev/null) 2>&1 &
ma_pid=$!
wait "$ma_pid"; ma_st=$?
kill -KILL -- -"$ma_pid" 2>/dev/null
exit "$ma_st"`
	start := time.Now()
	code, out, err := b.run(ctx, script, true, timeout+daemonGrace, max+len(nonce)+64)
	var se *remote.StatusError
	if errors.As(err, &se) && se.Status == http.StatusRequestTimeout {
		// The toolbox's own timeout: something outside the command's process group held
		// its output open.
		return sandbox.ExecResult{ExitCode: 128 + int(syscall.SIGKILL), TimedOut: true}, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			b.kill(ctx, tag)
		}
		return sandbox.ExecResult{}, err
	}
	words, rest, err := remote.SplitVerdict(nonce, out)
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("exec in sandbox %s (exit %d): %w", b.id, code, err)
	}
	if words[0] != "ok" {
		return sandbox.ExecResult{}, pathCheck.Error(words, "working directory", req.Dir)
	}
	res := sandbox.ExecResult{ExitCode: code, Output: rest}
	if len(res.Output) > max {
		res.Output, res.Truncated = res.Output[:max], true
	}
	if code == 128+int(syscall.SIGKILL) && time.Since(start) >= timeout {
		res.TimedOut = true
	}
	return res, nil
}

// kill ends the process group of a command whose call was canceled (the worker shutting
// down, a turn interrupted): the toolbox does not end a command when its caller goes away.
// GNU timeout leads its own process group, found through /proc by the tag on the inner bash
// (the pattern's bracket keeps grep from finding itself).
func (b *box) kill(ctx context.Context, tag string) {
	pattern := "[" + tag[:1] + "]" + tag[1:]
	script := `for d in /proc/[0-9]*; do tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -q ` + remote.ShellQuote(pattern) + ` || continue; ` +
		`set -- $(sed 's/^.*) //' "$d/stat" 2>/dev/null); [ -n "$3" ] && kill -KILL -- "-$3" 2>/dev/null; done; exit 0`
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scriptTimeout)
	defer cancel()
	if _, _, err := b.run(kctx, script, false, scriptTimeout, 1<<20); err != nil {
		b.p.cfg.logger().WarnContext(ctx, "could not end a canceled command in a daytona sandbox", "sandbox", b.id, "error", err)
	}
}

// ReadFile implements sandbox.Sandbox with one command: the path is resolved in the sandbox
// and the file, if it is a regular one inside the workspace, comes back base64-encoded (the
// toolbox answers text; its download would follow a symlink anywhere).
func (b *box) ReadFile(ctx context.Context, p string) ([]byte, error) {
	rel, err := remote.CleanRel(p)
	if err != nil {
		return nil, err
	}
	nonce := remote.NewNonce()
	script := b.preamble(nonce, rel) + remote.ReadCheck(MaxFileSize) + `ma_say ok "$ma_n"
base64 -w0 < "$ma_p"`
	code, out, err := b.run(ctx, script, false, scriptTimeout+time.Duration(MaxFileSize>>20)*time.Second, base64.StdEncoding.EncodedLen(MaxFileSize)+256)
	if err != nil {
		return nil, err
	}
	words, rest, err := remote.SplitVerdict(nonce, out)
	if err != nil {
		return nil, fmt.Errorf("read %q in sandbox %s: %w", p, b.id, err)
	}
	if words[0] != "ok" {
		return nil, pathCheck.Error(words, "read", p)
	}
	if code != 0 {
		return nil, fmt.Errorf("read %q in sandbox %s: exit %d", p, b.id, code)
	}
	data, err := base64.StdEncoding.DecodeString(string(rest))
	if err != nil {
		return nil, fmt.Errorf("read %q in sandbox %s: the content did not decode: %w", p, b.id, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("read %q: file grew past the limit of %d bytes while being read", p, MaxFileSize)
	}
	return data, nil
}

// WriteFile implements sandbox.Sandbox: one command resolves the path in the sandbox and
// makes its directory, then one multipart POST /files/upload writes the real path.
func (b *box) WriteFile(ctx context.Context, p string, data []byte) error {
	rel, err := remote.CleanRel(p)
	if err != nil {
		return err
	}
	if rel == "" {
		return fmt.Errorf("write %q: is a directory", p)
	}
	nonce := remote.NewNonce()
	script := b.preamble(nonce, rel) + remote.WriteCheck + `ma_say ok
printf '%s' "$ma_p"`
	_, out, err := b.run(ctx, script, false, scriptTimeout, 64<<10)
	if err != nil {
		return err
	}
	words, rest, err := remote.SplitVerdict(nonce, out)
	if err != nil {
		return fmt.Errorf("write %q in sandbox %s: %w", p, b.id, err)
	}
	if words[0] != "ok" {
		return pathCheck.Error(words, "write", p)
	}
	real := string(rest)
	if !path.IsAbs(real) {
		return fmt.Errorf("write %q: the path check gave no path", p)
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", path.Base(real))
	if err == nil {
		_, err = fw.Write(data)
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return fmt.Errorf("write %q: %w", p, err)
	}
	resp, err := b.call(ctx, http.MethodPost, "/files/upload?"+url.Values{"path": {real}}.Encode(), mw.FormDataContentType(), &buf, false, fmt.Sprintf("write %q", p), nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.Body.Close()
}
