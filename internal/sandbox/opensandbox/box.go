package opensandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// Limits of a box.
const (
	DefaultExecTimeout = 10 * time.Minute
	DefaultMaxOutput   = 1 << 20
	// MaxFileSize bounds what ReadFile loads into memory (what the other providers allow).
	MaxFileSize = 64 << 20
	// maxEventLine bounds one event line of the command stream beyond the output cap: an
	// output event is one JSON line, escapes can make it several times its text.
	maxEventLine = 1 << 20
	// scriptTimeout bounds the short scripts that resolve paths.
	scriptTimeout = 30 * time.Second
)

// box is the execd client of one sandbox.
type box struct {
	p       *Provider
	id      string
	base    *url.URL
	headers map[string]string

	mu        sync.Mutex
	lastRenew time.Time
	expires   *time.Time
}

var _ sandbox.FileSearcher = (*box)(nil)

// request builds an execd request carrying the endpoint's headers and the access token.
func (b *box) request(ctx context.Context, method, p string, query url.Values, body io.Reader) (*http.Request, error) {
	u := *b.base
	u.Path += p
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, v := range b.headers {
		req.Header.Set(k, v)
	}
	if b.p.cfg.ExecdToken != "" {
		req.Header.Set("X-EXECD-ACCESS-TOKEN", b.p.cfg.ExecdToken)
	}
	return req, nil
}

// send sends an execd request. A transport failure or a 404 of the proxy is checked against
// the lifecycle API: a sandbox that no longer exists is ErrGone.
func (b *box) send(req *http.Request, op string) (*http.Response, error) {
	resp, err := b.p.client.Do(req)
	if err != nil {
		if req.Context().Err() != nil {
			return nil, fmt.Errorf("%s: %w", op, req.Context().Err())
		}
		return nil, b.goneOr(req.Context(), remote.Transport(op, err))
	}
	return resp, nil
}

// goneOr returns ErrGone when the lifecycle API says the sandbox no longer runs, else err.
func (b *box) goneOr(ctx context.Context, err error) error {
	check, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s, gerr := b.p.get(check, b.id)
	switch {
	case errors.Is(gerr, sandbox.ErrGone):
		return fmt.Errorf("%w (%w)", gerr, err)
	case gerr == nil && ended(s.Status.State):
		return fmt.Errorf("opensandbox sandbox %s is %s (%w): %w", b.id, s.Status.State, err, sandbox.ErrGone)
	case gerr == nil && (s.Status.State == statePaused || s.Status.State == statePausing):
		return fmt.Errorf("opensandbox sandbox %s is %s (%w): %w", b.id, s.Status.State, err, sandbox.ErrUnavailable)
	}
	return err
}

// check maps an execd answer: 2xx is nil; a 404 the sandbox's absence explains is ErrGone.
func (b *box) check(ctx context.Context, resp *http.Response, op string) error {
	err := remote.Check(resp, op, envExecdToken)
	if err == nil {
		return nil
	}
	if errors.Is(err, remote.ErrNotFound) || errors.Is(err, sandbox.ErrUnavailable) {
		return b.goneOr(ctx, err)
	}
	return err
}

// touch renews the sandbox's expiry when a quarter of the TTL has passed since the last
// renewal, so a sandbox in use does not expire under its session.
func (b *box) touch(ctx context.Context) error {
	ttl := b.p.cfg.TTL
	if ttl == 0 {
		return nil
	}
	b.mu.Lock()
	due := time.Since(b.lastRenew) > ttl/4
	if due {
		b.lastRenew = time.Now()
	}
	b.mu.Unlock()
	if !due {
		return nil
	}
	err := b.p.api.do(ctx, http.MethodPost, "/sandboxes/"+b.id+"/renew-expiration", nil,
		renewRequest{ExpiresAt: time.Now().Add(ttl).UTC().Truncate(time.Second)}, nil, "renew opensandbox sandbox "+b.id)
	if errors.Is(err, remote.ErrNotFound) {
		return fmt.Errorf("opensandbox sandbox %s no longer exists (deleted or expired): %w", b.id, sandbox.ErrGone)
	}
	if err != nil {
		// Not fatal: the next call tries again.
		b.mu.Lock()
		b.lastRenew = time.Time{}
		b.mu.Unlock()
		b.p.logger.WarnContext(ctx, "could not renew an opensandbox sandbox's expiry", "id", b.id, "err", err)
	}
	return nil
}

// waitPing waits for execd to answer /ping after the sandbox started.
func (b *box) waitPing(ctx context.Context) error {
	var last error
	for {
		req, err := b.request(ctx, http.MethodGet, "/ping", nil, nil)
		if err != nil {
			return err
		}
		resp, err := b.p.client.Do(req)
		if err == nil {
			last = b.check(ctx, resp, "ping execd of opensandbox sandbox "+b.id)
			if last == nil {
				resp.Body.Close()
				return nil
			}
			if errors.Is(last, sandbox.ErrGone) || errors.Is(last, remote.ErrAuth) {
				return last
			}
		} else {
			last = err
		}
		if err := sleep(ctx, b.p.cfg.PollInterval); err != nil {
			return fmt.Errorf("execd of opensandbox sandbox %s does not answer (%v): %w", b.id, last, context.Cause(ctx))
		}
	}
}

// prepare makes the workspace directory of a new sandbox.
func (b *box) prepare(ctx context.Context) error {
	res, err := b.run(ctx, "mkdir -p -- "+b.rootExpr()+" && realpath -e -- "+b.rootExpr(), scriptTimeout, 64<<10)
	if err != nil {
		return fmt.Errorf("prepare the workspace of opensandbox sandbox %s: %w", b.id, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("prepare the workspace %s of opensandbox sandbox %s (exit %d): %s", b.p.cfg.Workspace, b.id, res.ExitCode, strings.TrimSpace(string(res.Output)))
	}
	return nil
}

// rootExpr is the workspace directory as a shell word.
func (b *box) rootExpr() string {
	if rest, ok := strings.CutPrefix(b.p.cfg.Workspace, "~/"); ok {
		return `"$HOME"/` + remote.ShellQuote(rest)
	}
	return remote.ShellQuote(b.p.cfg.Workspace)
}

// The resolve preamble: it sets ma_root to the real workspace directory and ma_p to the
// real path of the target (symlinks resolved, missing components kept), and refuses a
// target outside the workspace. Its verdict is the first line of the output, after a nonce
// the command's own output cannot know.
func (b *box) resolve(nonce, rel string) string {
	return remote.PathPreamble(nonce, b.rootExpr(), rel, false)
}

// pathCheck reads the refusals of resolve's scripts.
var pathCheck = remote.PathCheck{MaxFileSize: MaxFileSize,
	NoRoot: "the workspace directory is missing in the sandbox (" + envWorkspace + ")"}

// Exec runs req.Command with bash in the workspace (or req.Dir under it): one POST /command.
// stderr is joined onto stdout in the sandbox (exec 2>&1), so the output keeps the order it
// was written in. The command runs in a child bash, so a command that kills its own shell
// still has the shell's status (128+signal).
func (b *box) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	rel, err := remote.CleanRel(req.Dir)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	if err := b.touch(ctx); err != nil {
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
	nonce := remote.NewNonce()
	script := b.resolve(nonce, rel) + remote.DirCheck + `export HOME="$ma_root"
unset -f ma_say; unset ma_root ma_p
exec 2>&1 </dev/null
printf '%s ok\n' ` + nonce + `
bash -c ` + remote.ShellQuote(req.Command) + `; exit $?`
	// The verdict line is not the command's output: allow for it beyond the cap.
	res, err := b.run(ctx, script, timeout, maxOut+len(nonce)+64)
	if err != nil {
		return res, err
	}
	words, rest, verr := remote.SplitVerdict(nonce, res.Output)
	if verr != nil {
		return sandbox.ExecResult{}, fmt.Errorf("exec in opensandbox sandbox %s: %w", b.id, verr)
	}
	if words[0] != "ok" {
		return sandbox.ExecResult{}, pathCheck.Error(words, "working directory", req.Dir)
	}
	res.Output = rest
	if len(res.Output) > maxOut {
		res.Output, res.Truncated = res.Output[:maxOut], true
	}
	return res, nil
}

// streamEvent is execd's ServerStreamEvent.
type streamEvent struct {
	Type  string `json:"type"`
	Text  string `json:"text"`
	Error *struct {
		EName  string `json:"ename"`
		EValue string `json:"evalue"`
	} `json:"error"`
}

// run sends one command (never retried: a repetition would run it twice) and collects its
// output up to maxOut bytes (more sets Truncated; the stream is still read to the end so
// the command is not blocked).
func (b *box) run(ctx context.Context, script string, timeout time.Duration, maxOut int) (sandbox.ExecResult, error) {
	var out bytes.Buffer
	res, err := b.stream(ctx, script, timeout, func(p []byte) {
		if room := maxOut - out.Len(); room > 0 {
			out.Write(p[:min(len(p), room)])
		}
	}, maxOut)
	res.Output = out.Bytes()
	return res, err
}

// stream runs script and hands its output to sink as it arrives. The exit code comes from
// the stream's last event, as execd sends it: execution_complete is exit 0, an error event
// (ename CommandExecError) carries the exit code in evalue. On timeout or cancellation the
// command is interrupted (DELETE /command?id=) and its process group killed.
func (b *box) stream(ctx context.Context, script string, timeout time.Duration, sink func([]byte), maxOut int) (sandbox.ExecResult, error) {
	op := "run a command in opensandbox sandbox " + b.id
	body, _ := json.Marshal(map[string]any{
		"command": script,
		// execd's own limit is a backstop: the client interrupts at the timeout itself.
		"timeout": (timeout + 5*time.Second).Milliseconds(),
	})
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := b.request(remote.NoRetry(runCtx), http.MethodPost, "/command", nil, bytes.NewReader(body))
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := b.p.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return sandbox.ExecResult{}, fmt.Errorf("%s: %w", op, ctx.Err())
		}
		if runCtx.Err() != nil {
			// Timed out before execd answered: the command may not even have started.
			return sandbox.ExecResult{TimedOut: true, ExitCode: -1}, nil
		}
		return sandbox.ExecResult{}, b.goneOr(ctx, remote.Transport(op, err))
	}
	defer resp.Body.Close()
	if err := b.check(ctx, resp, op); err != nil {
		return sandbox.ExecResult{}, err
	}
	var res sandbox.ExecResult
	var commandID string
	written := 0
	events := newEventReader(resp.Body, maxOut+maxEventLine)
	for {
		data, rerr := events.next()
		if rerr != nil {
			stopped := runCtx.Err() != nil
			if stopped {
				b.interrupt(ctx, commandID)
			}
			switch {
			case ctx.Err() != nil:
				return res, fmt.Errorf("%s: %w", op, ctx.Err())
			case stopped:
				res.TimedOut, res.ExitCode = true, -1
				return res, nil
			case errors.Is(rerr, errLineTooLong):
				return res, fmt.Errorf("%s: %w", op, rerr)
			}
			// The stream ended without a last event: the connection dropped mid-command.
			b.interrupt(ctx, commandID)
			return res, b.goneOr(ctx, remote.Transport(op, fmt.Errorf("the command stream ended before the command did: %w", rerr)))
		}
		var ev streamEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			continue // not an event of ours (a comment, a keep-alive)
		}
		switch ev.Type {
		case "init":
			commandID = ev.Text
		case "stdout", "stderr":
			n := len(ev.Text)
			if written+n > maxOut {
				res.Truncated = true
			}
			sink([]byte(ev.Text))
			written += n
		case "execution_complete":
			return res, nil
		case "error":
			res.ExitCode = 1
			if ev.Error != nil {
				if code, err := strconv.Atoi(strings.TrimSpace(ev.Error.EValue)); err == nil {
					res.ExitCode = code
				} else if ev.Error.EName != "CommandExecError" || ev.Error.EValue != "" {
					return res, fmt.Errorf("%s: execd: %s: %s", op, ev.Error.EName, ev.Error.EValue)
				}
			}
			return res, nil
		}
	}
}

// interrupt asks execd to stop a command (its process group is killed), best effort.
func (b *box) interrupt(ctx context.Context, commandID string) {
	if commandID == "" {
		return
	}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := b.request(ictx, http.MethodDelete, "/command", url.Values{"id": {commandID}}, nil)
	if err != nil {
		return
	}
	resp, err := b.p.client.Do(req)
	if err != nil {
		b.p.logger.WarnContext(ctx, "could not interrupt a command in an opensandbox sandbox", "id", b.id, "command", commandID, "err", err)
		return
	}
	_ = remote.Check(resp, "interrupt", envExecdToken)
	resp.Body.Close()
}

var errLineTooLong = errors.New("an event of the command stream is longer than the output cap allows")

// eventReader reads execd's stream: events as SSE frames (`data:` lines ending with a
// blank line) or as bare JSON lines (what execd writes), each bounded.
type eventReader struct {
	r   *bufio.Reader
	max int
}

func newEventReader(r io.Reader, max int) *eventReader {
	return &eventReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the JSON of the next event.
func (e *eventReader) next() ([]byte, error) {
	var data []byte
	for {
		line, err := e.line()
		if err != nil {
			if len(data) > 0 && errors.Is(err, io.EOF) {
				return data, nil
			}
			return nil, err
		}
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				return data, nil
			}
		case line[0] == '{':
			// A bare JSON line (execd's own framing) is a whole event.
			return line, nil
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			if string(field) == "data" {
				value = bytes.TrimPrefix(value, []byte(" "))
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, value...)
				if len(data) > e.max {
					return nil, errLineTooLong
				}
			}
		}
	}
}

// line reads one line without its end, bounded by max.
func (e *eventReader) line() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := e.r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > e.max {
			return nil, errLineTooLong
		}
		if err == nil {
			return bytes.TrimRight(buf, "\r\n"), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if len(buf) > 0 && errors.Is(err, io.EOF) {
				return bytes.TrimRight(buf, "\r\n"), nil
			}
			return nil, err
		}
	}
}

// ReadFile resolves the path in the sandbox (one command), then downloads the real file
// (GET /files/download).
func (b *box) ReadFile(ctx context.Context, p string) ([]byte, error) {
	rel, err := remote.CleanRel(p)
	if err != nil {
		return nil, err
	}
	if err := b.touch(ctx); err != nil {
		return nil, err
	}
	nonce := remote.NewNonce()
	script := b.resolve(nonce, rel) + remote.ReadCheck(MaxFileSize) + `printf '%s ok %s\n%s' ` + nonce + ` "$ma_n" "$ma_p"`
	real, size, err := b.resolvePath(ctx, nonce, script, "read", p)
	if err != nil {
		return nil, err
	}
	req, err := b.request(ctx, http.MethodGet, "/files/download", url.Values{"path": {real}}, nil)
	if err != nil {
		return nil, err
	}
	op := "read " + strconv.Quote(p) + " in opensandbox sandbox " + b.id
	resp, err := b.send(req, op)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := b.check(ctx, resp, op); err != nil {
		if errors.Is(err, remote.ErrNotFound) {
			return nil, fmt.Errorf("read %q: %w", p, sandbox.ErrNotExist)
		}
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxFileSize+1))
	if err != nil {
		return nil, b.goneOr(ctx, remote.Transport(op, err))
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("read %q: file grew past the limit of %d bytes while being read (it had %d)", p, MaxFileSize, size)
	}
	return data, nil
}

// resolvePath runs a resolve script and returns the real path it printed after its verdict.
func (b *box) resolvePath(ctx context.Context, nonce, script, what, p string) (string, int64, error) {
	res, err := b.run(ctx, script, scriptTimeout, 64<<10)
	if err != nil {
		return "", 0, err
	}
	words, rest, err := remote.SplitVerdict(nonce, res.Output)
	if err != nil {
		return "", 0, fmt.Errorf("%s %q in opensandbox sandbox %s: %w", what, p, b.id, err)
	}
	if words[0] != "ok" {
		return "", 0, pathCheck.Error(words, what, p)
	}
	var size int64
	if len(words) > 1 {
		size, _ = strconv.ParseInt(words[1], 10, 64)
	}
	real := string(rest)
	if !strings.HasPrefix(real, "/") {
		return "", 0, fmt.Errorf("%s %q: the path check gave no path", what, p)
	}
	return real, size, nil
}

// WriteFile resolves the path in the sandbox and makes its directory (one command), then
// uploads the content to the real path (POST /files/upload).
func (b *box) WriteFile(ctx context.Context, p string, data []byte) error {
	rel, err := remote.CleanRel(p)
	if err != nil {
		return err
	}
	if rel == "" {
		return fmt.Errorf("write %q: is a directory", p)
	}
	if err := b.touch(ctx); err != nil {
		return err
	}
	nonce := remote.NewNonce()
	script := b.resolve(nonce, rel) + remote.WriteCheck + `printf '%s ok 0\n%s' ` + nonce + ` "$ma_p"`
	real, _, err := b.resolvePath(ctx, nonce, script, "write", p)
	if err != nil {
		return err
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	meta, _ := json.Marshal(map[string]any{"path": real, "mode": 644})
	part, err := mw.CreatePart(formFile("metadata", "metadata.json", "application/json"))
	if err != nil {
		return err
	}
	_, _ = part.Write(meta)
	part, err = mw.CreatePart(formFile("file", path.Base(real), "application/octet-stream"))
	if err != nil {
		return err
	}
	_, _ = part.Write(data)
	if err := mw.Close(); err != nil {
		return err
	}
	req, err := b.request(ctx, http.MethodPost, "/files/upload", nil, bytes.NewReader(body.Bytes()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	op := "write " + strconv.Quote(p) + " in opensandbox sandbox " + b.id
	resp, err := b.send(req, op)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return b.check(ctx, resp, op)
}

// formFile is the header of a multipart file part: execd reads both parts as files.
func formFile(name, filename, contentType string) textproto.MIMEHeader {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, name, filename))
	h.Set("Content-Type", contentType)
	return h
}
