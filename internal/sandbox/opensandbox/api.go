package opensandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// The wire types of the lifecycle API (specs/sandbox-lifecycle.yml), only the fields this
// client uses.

type imageSpec struct {
	URI string `json:"uri"`
}

type networkRule struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

type networkPolicy struct {
	DefaultAction string        `json:"defaultAction"`
	Egress        []networkRule `json:"egress"`
}

type createRequest struct {
	Image          imageSpec         `json:"image"`
	Entrypoint     []string          `json:"entrypoint"`
	Timeout        *int64            `json:"timeout"`
	ResourceLimits map[string]string `json:"resourceLimits"`
	Env            map[string]string `json:"env,omitempty"`
	Metadata       map[string]string `json:"metadata"`
	NetworkPolicy  *networkPolicy    `json:"networkPolicy,omitempty"`
}

type sandboxStatus struct {
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// sandboxInfo is both CreateSandboxResponse and Sandbox.
type sandboxInfo struct {
	ID        string            `json:"id"`
	Status    sandboxStatus     `json:"status"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	ExpiresAt *time.Time        `json:"expiresAt,omitempty"`
	CreatedAt time.Time         `json:"createdAt"`
}

type listResponse struct {
	Items      []sandboxInfo `json:"items"`
	Pagination struct {
		HasNextPage bool `json:"hasNextPage"`
	} `json:"pagination"`
}

type endpointResponse struct {
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers,omitempty"`
}

type renewRequest struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// Lifecycle states (SandboxState). Clients must tolerate others.
const (
	statePending    = "Pending"
	stateRunning    = "Running"
	statePausing    = "Pausing"
	statePaused     = "Paused"
	stateResuming   = "Resuming"
	stateStopping   = "Stopping"
	stateTerminated = "Terminated"
	stateFailed     = "Failed"
)

// ended says whether a sandbox in state can never run again.
func ended(state string) bool {
	return state == stateStopping || state == stateTerminated || state == stateFailed
}

// api is the lifecycle API client.
type api struct {
	base   *url.URL
	key    string
	client *http.Client
}

// do sends one lifecycle request with the API key; body (if not nil) is sent as JSON and
// a 2xx answer is decoded into out (if not nil). The answer of a non-2xx status is a
// *remote.StatusError.
func (a *api) do(ctx context.Context, method, path string, query url.Values, body, out any, op string) error {
	u := *a.base
	u.Path += path
	u.RawQuery = query.Encode()
	resp, err := remote.SendJSON(ctx, a.client, method, u.String(), body, a.header, op, envAPIKey)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAPIBody)).Decode(out); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", op, ctx.Err())
		}
		return remote.Transport(op, fmt.Errorf("decode the answer: %w", err))
	}
	return nil
}

// header puts the lifecycle API's headers and key on req.
func (a *api) header(req *http.Request) {
	req.Header.Set("Accept", "application/json")
	if a.key != "" {
		req.Header.Set("OPEN-SANDBOX-API-KEY", a.key)
	}
}

// maxAPIBody bounds a lifecycle answer (a page of a list is the largest).
const maxAPIBody = 8 << 20
