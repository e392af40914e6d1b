package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// ErrNotFound is a 404 from a provider: the provider maps it to sandbox.ErrGone where the
// path names a sandbox, or to a missing file.
var ErrNotFound = errors.New("not found")

// ErrAuth is a 401 or 403: the deployment's credentials are wrong, which no retry mends.
var ErrAuth = errors.New("the sandbox provider refused the credentials")

// StatusError is a provider's answer that is not a success.
type StatusError struct {
	// Op says what was asked ("create sandbox", "read file a.txt").
	Op     string
	Status int
	// Message is the provider's own message (from its JSON error body when it has one),
	// cut at a few hundred bytes.
	Message string
	// Credential names the variable holding the credential, for 401/403.
	Credential string
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: HTTP %d", e.Op, e.Status)
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
		fmt.Fprintf(&b, " (the provider refused the credentials: check %s)", e.Credential)
	}
	return b.String()
}

// Unwrap maps the status onto the errors callers test with errors.Is.
func (e *StatusError) Unwrap() error {
	switch {
	case e.Status == http.StatusNotFound:
		return ErrNotFound
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return ErrAuth
	case e.Status == http.StatusTooManyRequests || e.Status >= 500:
		// What the retries could not get through: the provider may answer later.
		return sandbox.ErrUnavailable
	}
	return nil
}

// maxErrorBody is how much of an error answer is read for its message.
const maxErrorBody = 8 << 10

// Check returns nil for a 2xx answer and otherwise a *StatusError with the provider's
// message; it reads (a bounded part of) the body of an error answer and closes it. credential
// names the variable of the credential the request carried.
func Check(resp *http.Response, op, credential string) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return &StatusError{Op: op, Status: resp.StatusCode, Message: message(body), Credential: credential}
}

// message is the human part of an error body: the "message", "error" or "detail" field of a
// JSON object when there is one, else the text itself, on one line and cut short.
func message(body []byte) string {
	var obj map[string]any
	if json.Unmarshal(body, &obj) == nil {
		for _, k := range []string{"message", "error", "detail", "msg"} {
			if s, ok := obj[k].(string); ok && s != "" {
				return cut(s)
			}
		}
	}
	return cut(string(body))
}

func cut(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const max = 300
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// Transport wraps an error of the transport (no answer at all) as sandbox.ErrUnavailable,
// with what was asked.
func Transport(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, sandbox.ErrUnavailable, err)
}
