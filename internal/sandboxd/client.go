package sandboxd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

var (
	_ sandbox.Sandbox      = (*Client)(nil)
	_ sandbox.FileSearcher = (*searchClient)(nil)
)

// Client is a sandbox.Sandbox served by a sandboxd daemon. Errors the daemon reports map
// back onto sandbox.ErrNotExist, ErrOutsideWorkspace and ErrGone (a workspace that vanished);
// a daemon that cannot be reached (refused, reset, a proxy's 5xx) is sandbox.ErrUnavailable:
// a pod being restarted refuses too, so only the provider, which sees the pod, may call it
// gone.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// searchClient is a Client of a daemon that offers sandbox.FileSearcher.
type searchClient struct{ *Client }

// Connect checks the daemon at baseURL (its health, with the token) and returns its client:
// one that is a sandbox.FileSearcher when the daemon offers search. hc nil means
// http.DefaultClient; its timeout, if any, must allow for the longest command.
func Connect(ctx context.Context, baseURL, token string, hc *http.Client) (sandbox.Sandbox, error) {
	sb, err := Open(baseURL, token, hc, false)
	if err != nil {
		return nil, err
	}
	c := sb.(*Client)
	var h healthResponse
	if err := c.call(ctx, "health", http.MethodGet, RouteHealth, nil, nil, &h); err != nil {
		return nil, err
	}
	for _, capability := range h.Capabilities {
		if capability == CapabilitySearch {
			return searchClient{c}, nil
		}
	}
	return c, nil
}

// Open returns the client of the daemon at baseURL without asking it anything: for a caller
// that knows the daemon's capabilities already (the docker provider runs its own), so an
// attach costs no round trip. search says whether the daemon serves find and grep.
func Open(baseURL, token string, hc *http.Client, search bool) (sandbox.Sandbox, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sandboxd endpoint %q: must be an http or https URL", baseURL)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	c := &Client{base: u, token: token, http: hc}
	if search {
		return searchClient{c}, nil
	}
	return c, nil
}

// Exec implements sandbox.Sandbox. Canceling ctx aborts the call, and the daemon kills the
// command's process group when it sees the connection go.
func (c *Client) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	body := execRequest{Command: req.Command, Dir: req.Dir, TimeoutMS: req.Timeout.Milliseconds(), MaxOutput: req.MaxOutput}
	if req.Timeout > 0 && body.TimeoutMS == 0 {
		body.TimeoutMS = 1 // a sub-millisecond timeout is still one, not the default
	}
	if req.Timeout > 0 {
		// The daemon enforces the timeout; this bounds the wait for a daemon that does not
		// answer (stopped, or hung by what it runs).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout+ExecAnswerGrace)
		defer cancel()
	}
	var out execResponse
	if err := c.call(ctx, "exec", http.MethodPost, RouteExec, nil, body, &out); err != nil {
		return sandbox.ExecResult{}, err
	}
	res := sandbox.ExecResult{ExitCode: out.ExitCode, Output: out.Output, Truncated: out.Truncated, TimedOut: out.TimedOut}
	if out.Error != nil {
		return res, remoteError(out.Error)
	}
	return res, nil
}

// ReadFile implements sandbox.Sandbox.
func (c *Client) ReadFile(ctx context.Context, path string) ([]byte, error) {
	var buf bytes.Buffer
	if err := c.call(ctx, "read", http.MethodGet, RouteFile, url.Values{"path": {path}}, nil, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteFile implements sandbox.Sandbox.
func (c *Client) WriteFile(ctx context.Context, path string, data []byte) error {
	if len(data) > MaxWriteBody {
		return fmt.Errorf("write %q: %d bytes, the limit is %d", path, len(data), MaxWriteBody)
	}
	return c.call(ctx, "write", http.MethodPut, RouteFile, url.Values{"path": {path}}, rawBody(data), nil)
}

// FindFiles implements sandbox.FileSearcher.
func (c searchClient) FindFiles(ctx context.Context, req sandbox.FindRequest) (sandbox.FindResult, error) {
	var out findResponse
	body := findRequest{Dir: req.Dir, Pattern: req.Pattern, Prune: req.Prune, MaxListed: req.MaxListed}
	if err := c.call(ctx, "find", http.MethodPost, RouteFind, nil, body, &out); err != nil {
		return sandbox.FindResult{}, err
	}
	return sandbox.FindResult{Paths: out.Paths, Cut: out.Cut}, nil
}

// GrepFiles implements sandbox.FileSearcher.
func (c searchClient) GrepFiles(ctx context.Context, req sandbox.GrepRequest) (sandbox.GrepResult, error) {
	var out grepResponse
	body := grepRequest{Dir: req.Dir, Pattern: req.Pattern, Prune: req.Prune, MaxFileSize: req.MaxFileSize, MaxFiles: req.MaxFiles, MaxMatches: req.MaxMatches}
	if err := c.call(ctx, "grep", http.MethodPost, RouteGrep, nil, body, &out); err != nil {
		return sandbox.GrepResult{}, err
	}
	res := sandbox.GrepResult{Total: out.Total, Files: out.Files, Skipped: out.Skipped, Cut: out.Cut}
	for _, m := range out.Matches {
		res.Matches = append(res.Matches, sandbox.GrepMatch{Path: m.Path, Line: m.Line, Text: m.Text})
	}
	return res, nil
}

// rawBody marks a request body sent as it is rather than as JSON.
type rawBody []byte

// call makes one request; in is JSON-encoded (or sent as is when rawBody), a 2xx answer is
// decoded into out (copied as is when it is a *bytes.Buffer), anything else becomes the error
// it describes.
func (c *Client) call(ctx context.Context, op, method, route string, query url.Values, in, out any) error {
	u := c.base.JoinPath(route)
	u.RawQuery = query.Encode()
	var body io.Reader
	contentType := ""
	switch v := in.(type) {
	case nil:
	case rawBody:
		body, contentType = bytes.NewReader(v), "application/octet-stream"
	default:
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("sandboxd %s: encode the request: %w", op, err)
		}
		body, contentType = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fmt.Errorf("sandboxd %s: %w", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("sandboxd %s: %w", op, ctxErr)
		}
		return fmt.Errorf("sandboxd %s: %w: %w", op, sandbox.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return responseError(op, resp)
	}
	switch v := out.(type) {
	case nil:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<10))
		return nil
	case *bytes.Buffer:
		// The daemon never sends more than a file ReadFile may return.
		if resp.ContentLength > 0 && resp.ContentLength <= MaxWriteBody {
			v.Grow(int(resp.ContentLength))
		}
		if _, err := io.Copy(v, io.LimitReader(resp.Body, MaxWriteBody+1)); err != nil {
			return c.bodyError(ctx, op, err)
		}
		if v.Len() > MaxWriteBody {
			return fmt.Errorf("sandboxd %s: the answer is over %d bytes", op, MaxWriteBody)
		}
		return nil
	default:
		// Bounded: a command in the sandbox could write an answer of its own into the stream.
		if err := json.NewDecoder(io.LimitReader(resp.Body, MaxJSONResponse)).Decode(out); err != nil {
			return c.bodyError(ctx, op, err)
		}
		return nil
	}
}

func (c *Client) bodyError(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("sandboxd %s: %w", op, ctxErr)
	}
	return fmt.Errorf("sandboxd %s: reading the answer: %w: %w", op, sandbox.ErrUnavailable, err)
}

// responseError turns a non-2xx answer into the error it describes. An answer that is not
// the daemon's JSON (a proxy's page, a 5xx) is a transport failure.
func responseError(op string, resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body errorBody
	if err := json.Unmarshal(data, &body); err != nil || body.Error == nil || resp.StatusCode >= 500 {
		return fmt.Errorf("sandboxd %s: HTTP %d: %s: %w", op, resp.StatusCode, strings.TrimSpace(string(data)), sandbox.ErrUnavailable)
	}
	if body.Error.Type == errTypeUnauthorized {
		return fmt.Errorf("sandboxd %s: the daemon refused the sandbox token (HTTP 401)", op)
	}
	return remoteError(body.Error)
}

// remoteErr is an error the daemon reported: its message as the daemon's sandbox wrote it
// (so tools show the same text as on the local provider), matching the sentinel of its type.
type remoteErr struct {
	msg      string
	sentinel error
}

func (e *remoteErr) Error() string { return e.msg }
func (e *remoteErr) Unwrap() error { return e.sentinel }

func remoteError(d *errorDetail) error {
	var sentinel error
	switch d.Type {
	case errTypeNotFound:
		sentinel = sandbox.ErrNotExist
	case errTypeOutside:
		sentinel = sandbox.ErrOutsideWorkspace
	case errTypeGone:
		sentinel = sandbox.ErrGone
	case errTypeCanceled:
		sentinel = context.Canceled
	}
	return &remoteErr{msg: d.Message, sentinel: sentinel}
}
