package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// Metadata keys every sandbox this package makes carries.
const (
	MetaSandbox    = "managed-agents/sandbox"
	MetaSession    = "managed-agents/session-id"
	MetaDeployment = "managed-agents/deployment"
)

// newSandbox is spec/openapi.yml's NewSandbox (the fields this client sets).
type newSandbox struct {
	TemplateID string `json:"templateID"`
	// Timeout is seconds of life from now.
	Timeout   int  `json:"timeout"`
	AutoPause bool `json:"autoPause"`
	Secure    bool `json:"secure"`
	// AllowInternetAccess is snake_case in the spec, unlike everything else.
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Network             *networkConfig    `json:"network,omitempty"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	// Lifecycle is CubeAPI's form of autoPause (which it does not read): onTimeout "pause"
	// or "kill".
	Lifecycle *lifecycle `json:"lifecycle,omitempty"`
}

type lifecycle struct {
	OnTimeout string `json:"onTimeout"`
}

// networkConfig is NewSandbox.network: allowOut takes IPs, CIDRs and domains (matched on
// HTTP Host and TLS SNI), denyOut IPs and CIDRs.
type networkConfig struct {
	AllowOut []string `json:"allowOut,omitempty"`
	DenyOut  []string `json:"denyOut,omitempty"`
}

// sandboxInfo is the union of Sandbox (create, connect), SandboxDetail (get) and
// ListedSandbox (list), the fields this client reads.
type sandboxInfo struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          string            `json:"domain,omitempty"`
	StartedAt       time.Time         `json:"startedAt"`
	State           string            `json:"state,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
}

// Sandbox states of SandboxDetail.
const (
	stateRunning = "running"
	statePaused  = "paused"
)

// api is the control-plane client.
type api struct {
	base       *url.URL
	key        string
	bearer     bool
	credential string
	http       *http.Client
}

func (a *api) do(ctx context.Context, op, method, p string, query url.Values, body, out any) (int, error) {
	u := *a.base
	u.Path = strings.TrimRight(u.Path, "/") + p
	u.RawQuery = query.Encode()
	resp, err := remote.SendJSON(ctx, a.http, method, u.String(), body, a.auth, op, a.credential)
	if err != nil {
		// An answer that is not a success still has its status.
		var se *remote.StatusError
		if errors.As(err, &se) {
			return se.Status, err
		}
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
			return resp.StatusCode, remote.Transport(op, fmt.Errorf("decode the answer: %w", err))
		}
	}
	return resp.StatusCode, nil
}

// auth puts the key on req: X-API-Key for E2B, a Bearer token for CubeAPI.
func (a *api) auth(req *http.Request) {
	switch {
	case a.key == "":
	case a.bearer:
		req.Header.Set("Authorization", "Bearer "+a.key)
	default:
		req.Header.Set("X-API-Key", a.key)
	}
}

func (a *api) create(ctx context.Context, body newSandbox) (sandboxInfo, error) {
	var out sandboxInfo
	_, err := a.do(ctx, "create sandbox", http.MethodPost, "/sandboxes", nil, body, &out)
	return out, err
}

func (a *api) get(ctx context.Context, id string) (sandboxInfo, error) {
	var out sandboxInfo
	_, err := a.do(ctx, "get sandbox "+id, http.MethodGet, "/sandboxes/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// connect resumes a paused sandbox (201) or finds it running (200) and sets its time to live.
func (a *api) connect(ctx context.Context, id string, ttl time.Duration) (sandboxInfo, error) {
	var out sandboxInfo
	_, err := a.do(ctx, "connect to sandbox "+id, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/connect", nil,
		map[string]int{"timeout": seconds(ttl)}, &out)
	return out, err
}

func (a *api) kill(ctx context.Context, id string) error {
	_, err := a.do(ctx, "kill sandbox "+id, http.MethodDelete, "/sandboxes/"+url.PathEscape(id), nil, nil, nil)
	return err
}

func (a *api) pause(ctx context.Context, id string) (int, error) {
	return a.do(ctx, "pause sandbox "+id, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/pause", nil, nil, nil)
}

func (a *api) setTimeout(ctx context.Context, id string, ttl time.Duration) error {
	_, err := a.do(ctx, "set the timeout of sandbox "+id, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/timeout", nil,
		map[string]int{"timeout": seconds(ttl)}, nil)
	return err
}

// list pages through GET /v2/sandboxes for the running and paused sandboxes whose metadata
// has every pair of meta.
func (a *api) list(ctx context.Context, meta map[string]string) ([]sandboxInfo, error) {
	var pairs []string
	for _, k := range sortedKeys(meta) {
		pairs = append(pairs, url.QueryEscape(k)+"="+url.QueryEscape(meta[k]))
	}
	var all []sandboxInfo
	next := ""
	for range 1000 {
		// state is an array in form style, exploded (OpenAPI's default): state=running&state=paused.
		q := url.Values{"metadata": {strings.Join(pairs, "&")}, "state": {stateRunning, statePaused}, "limit": {"100"}}
		if next != "" {
			q.Set("nextToken", next)
		}
		page, token, err := a.listPage(ctx, q)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if token == "" || len(page) == 0 {
			return all, nil
		}
		next = token
	}
	return nil, fmt.Errorf("list sandboxes: more than 1000 pages")
}

func (a *api) listPage(ctx context.Context, q url.Values) ([]sandboxInfo, string, error) {
	u := *a.base
	u.Path = strings.TrimRight(u.Path, "/") + "/v2/sandboxes"
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", err
	}
	a.auth(req)
	resp, err := a.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", fmt.Errorf("list sandboxes: %w", ctx.Err())
		}
		return nil, "", remote.Transport("list sandboxes", err)
	}
	if err := remote.Check(resp, "list sandboxes", a.credential); err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var out []sandboxInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&out); err != nil {
		return nil, "", remote.Transport("list sandboxes", fmt.Errorf("decode the answer: %w", err))
	}
	return out, resp.Header.Get("X-Next-Token"), nil
}

func seconds(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
