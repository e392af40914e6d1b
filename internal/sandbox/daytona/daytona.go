// Package daytona is the Daytona sandbox provider (MANAGED_AGENT_SANDBOX=daytona): a
// session's sandbox is a Daytona sandbox named after the session (sandbox.NameFor; names are
// unique in an organization) and labelled with it, made through Daytona's control plane
// (POST /sandbox, GET /sandbox/{id}, GET /sandbox?labels=, DELETE, start and stop) and used
// through its toolbox (<toolboxProxyUrl>/<sandboxId>: /process/execute, /files/upload); every
// path is resolved in the sandbox before it is used, since the toolbox confines nothing. The client is written from Daytona's published specs
// (libs/api-client-go/api/openapi.yaml and apps/daemon/pkg/toolbox/docs/swagger.yaml), not
// from its code.
//
// Create is idempotent on the name: before creating, and after a create whose answer was lost,
// the sandbox is looked up by its labels and adopted. Attach starts a stopped or archived
// sandbox and waits for it; a sandbox Daytona no longer has (deleted, auto-deleted) is
// sandbox.ErrGone, never replaced.
//
// It imports sandbox, sandbox/remote and libraries only.
package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// Name is the provider name stored in every Ref this provider makes.
const Name = "daytona"

// Labels every sandbox carries (REMOTE.md).
const (
	LabelSandbox    = "managed-agents/sandbox"
	LabelSession    = "managed-agents/session-id"
	LabelDeployment = "managed-agents/deployment"
)

// Sandbox states of Daytona's SandboxState the provider acts on.
const (
	stateStarted     = "started"
	stateStopped     = "stopped"
	stateArchived    = "archived"
	stateError       = "error"
	stateBuildFailed = "build_failed"
	stateDestroyed   = "destroyed"
	stateDestroying  = "destroying"
)

// Provider is the Daytona sandbox provider.
type Provider struct {
	cfg  Config
	http *http.Client
}

var (
	_ sandbox.Provider = (*Provider)(nil)
	_ sandbox.Lister   = (*Provider)(nil)
	_ sandbox.Stopper  = (*Provider)(nil)
)

// New returns the provider; c must come from ConfigFrom or name an API key.
func New(c Config) (*Provider, error) {
	if c.APIKey == "" {
		return nil, fmt.Errorf("%s is not set: the Daytona API key", EnvAPIKey)
	}
	c = c.withDefaults()
	return &Provider{cfg: c, http: remote.NewClient(c.Transport, c.Retry, c.Logger)}, nil
}

// Name implements sandbox.Provider.
func (p *Provider) Name() string { return Name }

// idPattern is what a Daytona sandbox id may look like: one path segment (ids are UUIDs on
// Daytona's cloud), so a tampered id can never name another path.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

func checkRef(ref sandbox.Ref) error { return remote.CheckRef(ref, Name, idPattern) }

// apiSandbox is the part of Daytona's Sandbox the provider reads.
type apiSandbox struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	State           string            `json:"state"`
	ErrorReason     string            `json:"errorReason"`
	Labels          map[string]string `json:"labels"`
	ToolboxProxyURL string            `json:"toolboxProxyUrl"`
	CreatedAt       string            `json:"createdAt"`
}

// createSandbox is Daytona's CreateSandbox.
type createSandbox struct {
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot,omitempty"`
	User                string            `json:"user,omitempty"`
	Env                 map[string]string `json:"env,omitempty"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    string            `json:"networkAllowList,omitempty"`
	DomainAllowList     string            `json:"domainAllowList,omitempty"`
	Target              string            `json:"target,omitempty"`
	CPU                 int64             `json:"cpu,omitempty"`
	Memory              int64             `json:"memory,omitempty"`
	Disk                int64             `json:"disk,omitempty"`
	AutoStopInterval    *int              `json:"autoStopInterval,omitempty"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval,omitempty"`
}

const gb = 1 << 30

// request renders the CreateSandbox of spec.
func (p *Provider) request(spec sandbox.Spec) createSandbox {
	r := createSandbox{
		Name: spec.Name, Snapshot: p.cfg.Snapshot, User: p.cfg.User, Env: spec.Env,
		Labels: map[string]string{LabelSandbox: spec.Name, LabelSession: spec.SessionID, LabelDeployment: p.cfg.Deployment},
		Target: p.cfg.Target, AutoStopInterval: p.cfg.AutoStop, AutoArchiveInterval: p.cfg.AutoArchive, AutoDeleteInterval: p.cfg.AutoDelete,
	}
	if spec.Image != "" {
		r.Snapshot = spec.Image
	}
	// Daytona counts whole cores and whole GB: round up, so a sandbox never gets less.
	ceil := func(n, unit int64) int64 { return (n + unit - 1) / unit }
	if spec.Resources.MilliCPU > 0 {
		r.CPU = ceil(spec.Resources.MilliCPU, 1000)
	}
	if spec.Resources.MemoryBytes > 0 {
		r.Memory = ceil(spec.Resources.MemoryBytes, gb)
	}
	if spec.Resources.DiskBytes > 0 {
		r.Disk = ceil(spec.Resources.DiskBytes, gb)
	}
	switch spec.Egress.Mode {
	case sandbox.EgressFull:
	case sandbox.EgressHosts:
		// Host names go to the name-based allowlist, IP literals to the CIDR one.
		var names, cidrs []string
		for _, h := range spec.Egress.Hosts {
			if a, err := netip.ParseAddr(h); err == nil {
				cidrs = append(cidrs, netip.PrefixFrom(a, a.BitLen()).String())
			} else {
				names = append(names, h)
			}
		}
		r.DomainAllowList = strings.Join(names, ",")
		r.NetworkAllowList = strings.Join(cidrs, ",")
		if len(cidrs) == 0 {
			// Only names: nothing by address.
			r.NetworkAllowList = ""
		}
	default:
		r.NetworkBlockAll = true
	}
	return r
}

// Create implements sandbox.Provider: it adopts the sandbox of spec.Name if one exists,
// otherwise creates it, and waits until it is started. A sandbox that fails to start
// (error, build_failed) is deleted again and the error wraps sandbox.ErrSetup.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Ref, error) {
	if !sandbox.IsName(spec.Name) {
		return sandbox.Ref{}, fmt.Errorf("daytona sandbox name %q: not a name sandbox.NameFor makes", spec.Name)
	}
	if err := spec.CheckEnv(); err != nil {
		return sandbox.Ref{}, fmt.Errorf("daytona sandbox %s: %w: %w", spec.Name, sandbox.ErrSetup, err)
	}
	if len(spec.Packages) > 0 {
		return sandbox.Ref{}, fmt.Errorf("the daytona sandbox provider does not install an environment's packages; build them into a snapshot (%s or the environment's image): %w", EnvSnapshot, sandbox.ErrSetup)
	}
	sb, err := p.ensure(ctx, spec)
	if err != nil {
		return sandbox.Ref{}, err
	}
	ref := sandbox.Ref{Provider: Name, ExternalID: sb.ID}
	if _, err := p.waitStarted(ctx, sb.ID); err != nil {
		if errors.Is(err, errFailed) && ctx.Err() == nil {
			cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if derr := p.Destroy(cleanup, ref); derr != nil {
				return sandbox.Ref{}, fmt.Errorf("daytona sandbox %s: %w (and deleting it failed: %v)", spec.Name, err, derr)
			}
			return sandbox.Ref{}, fmt.Errorf("daytona sandbox %s: %w: %w", spec.Name, sandbox.ErrSetup, err)
		}
		return sandbox.Ref{}, fmt.Errorf("daytona sandbox %s: %w", spec.Name, err)
	}
	return ref, nil
}

// ensure finds the sandbox of spec.Name or creates it.
func (p *Provider) ensure(ctx context.Context, spec sandbox.Spec) (apiSandbox, error) {
	if sb, ok, err := p.find(ctx, spec.Name); err != nil || ok {
		return sb, err
	}
	var sb apiSandbox
	err := p.do(ctx, http.MethodPost, "/sandbox", p.request(spec), &sb, "create sandbox "+spec.Name)
	if err == nil {
		if !idPattern.MatchString(sb.ID) {
			return apiSandbox{}, fmt.Errorf("create sandbox %s: Daytona answered an id of an unexpected shape %q", spec.Name, sb.ID)
		}
		return sb, nil
	}
	var se *remote.StatusError
	lost := errors.Is(err, sandbox.ErrUnavailable) || (errors.As(err, &se) && se.Status == http.StatusConflict)
	if !lost || ctx.Err() != nil {
		return apiSandbox{}, err
	}
	// The answer was lost (or another worker made it first): adopt what was made.
	found, ok, ferr := p.find(ctx, spec.Name)
	if ferr != nil {
		return apiSandbox{}, fmt.Errorf("%w (and looking it up failed: %v)", err, ferr)
	}
	if !ok {
		return apiSandbox{}, err
	}
	return found, nil
}

// find looks the sandbox of name up by its labels.
func (p *Provider) find(ctx context.Context, name string) (apiSandbox, bool, error) {
	list, err := p.list(ctx, map[string]string{LabelSandbox: name, LabelDeployment: p.cfg.Deployment})
	if err != nil {
		return apiSandbox{}, false, err
	}
	for _, sb := range list {
		if sb.Labels[LabelSandbox] == name && sb.Labels[LabelDeployment] == p.cfg.Deployment && !gone(sb.State) && idPattern.MatchString(sb.ID) {
			return sb, true, nil
		}
	}
	return apiSandbox{}, false, nil
}

func gone(state string) bool { return state == stateDestroyed || state == stateDestroying }

// maxListPages bounds how many pages one listing reads.
const maxListPages = 100

// list reads GET /sandbox?labels=: a bare array (the published v0 spec) or a page object
// with items and a next cursor (later API versions), following cursors.
func (p *Provider) list(ctx context.Context, labels map[string]string) ([]apiSandbox, error) {
	enc, _ := json.Marshal(labels)
	q := url.Values{"labels": {string(enc)}}
	var all []apiSandbox
	for range maxListPages {
		var raw json.RawMessage
		if err := p.do(ctx, http.MethodGet, "/sandbox?"+q.Encode(), nil, &raw, "list sandboxes"); err != nil {
			return nil, err
		}
		if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
			var items []apiSandbox
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, fmt.Errorf("list sandboxes: %w", err)
			}
			return append(all, items...), nil
		}
		var page struct {
			Items      []apiSandbox `json:"items"`
			NextCursor string       `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all, nil
		}
		q.Set("cursor", page.NextCursor)
	}
	return all, nil
}

// errFailed marks a sandbox Daytona says will not start.
var errFailed = errors.New("the sandbox failed")

// waitStarted polls the sandbox until it is started, starting it when it is stopped or
// archived; ErrGone when Daytona no longer has it.
func (p *Provider) waitStarted(ctx context.Context, id string) (apiSandbox, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, p.cfg.ReadyTimeout, fmt.Errorf("not started within %s (%s)", p.cfg.ReadyTimeout, EnvReadyTimeout))
	defer cancel()
	last := ""
	for {
		sb, err := p.get(ctx, id)
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
				return apiSandbox{}, fmt.Errorf("sandbox %s (last state %q): %w", id, last, cause)
			}
			return apiSandbox{}, err
		}
		last = sb.State
		switch sb.State {
		case stateStarted:
			return sb, nil
		case stateError, stateBuildFailed:
			return apiSandbox{}, fmt.Errorf("sandbox %s is in state %s: %s: %w", id, sb.State, sb.ErrorReason, errFailed)
		case stateDestroyed, stateDestroying:
			return apiSandbox{}, fmt.Errorf("sandbox %s is %s: %w", id, sb.State, sandbox.ErrGone)
		case stateStopped, stateArchived:
			if err := p.do(ctx, http.MethodPost, "/sandbox/"+id+"/start", nil, nil, "start sandbox "+id); err != nil {
				return apiSandbox{}, p.goneIf404(err)
			}
		}
		t := time.NewTimer(p.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return apiSandbox{}, fmt.Errorf("sandbox %s (last state %q): %w", id, last, context.Cause(ctx))
		case <-t.C:
		}
	}
}

func (p *Provider) get(ctx context.Context, id string) (apiSandbox, error) {
	var sb apiSandbox
	if err := p.do(ctx, http.MethodGet, "/sandbox/"+id, nil, &sb, "get sandbox "+id); err != nil {
		return apiSandbox{}, p.goneIf404(err)
	}
	return sb, nil
}

func (p *Provider) goneIf404(err error) error {
	if errors.Is(err, remote.ErrNotFound) {
		return fmt.Errorf("%w: %w", sandbox.ErrGone, err)
	}
	return err
}

// Attach implements sandbox.Provider: the sandbox is started if it was stopped or archived
// (auto-stop, the idle sweep), and its toolbox is found.
func (p *Provider) Attach(ctx context.Context, ref sandbox.Ref) (sandbox.Sandbox, error) {
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	sb, err := p.waitStarted(ctx, ref.ExternalID)
	if errors.Is(err, errFailed) {
		return nil, fmt.Errorf("attach daytona sandbox: %w", err)
	}
	if err != nil {
		return nil, err
	}
	toolbox, err := p.toolboxURL(ctx, sb)
	if err != nil {
		return nil, err
	}
	b := &box{p: p, id: sb.ID, base: toolbox, work: p.cfg.Workspace}
	if b.work == "" {
		if b.work, err = b.workDir(ctx); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// toolboxURL is <toolboxProxyUrl>/<id>: from the sandbox, else from its toolbox-proxy-url.
func (p *Provider) toolboxURL(ctx context.Context, sb apiSandbox) (string, error) {
	base := sb.ToolboxProxyURL
	if base == "" {
		var out struct {
			URL string `json:"url"`
		}
		if err := p.do(ctx, http.MethodGet, "/sandbox/"+sb.ID+"/toolbox-proxy-url", nil, &out, "get the toolbox of sandbox "+sb.ID); err != nil {
			return "", p.goneIf404(err)
		}
		base = out.URL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("sandbox %s: Daytona answered a toolbox URL %q that is not an http(s) URL", sb.ID, base)
	}
	return strings.TrimRight(base, "/") + "/" + sb.ID, nil
}

// Destroy implements sandbox.Provider; a sandbox already gone is not an error.
func (p *Provider) Destroy(ctx context.Context, ref sandbox.Ref) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	err := p.do(ctx, http.MethodDelete, "/sandbox/"+ref.ExternalID+"?force=true", nil, nil, "delete sandbox "+ref.ExternalID)
	if err != nil && !errors.Is(err, remote.ErrNotFound) {
		return err
	}
	return nil
}

// Stop implements sandbox.Stopper: Daytona keeps the sandbox's filesystem, Attach starts it.
func (p *Provider) Stop(ctx context.Context, ref sandbox.Ref) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	err := p.do(ctx, http.MethodPost, "/sandbox/"+ref.ExternalID+"/stop", nil, nil, "stop sandbox "+ref.ExternalID)
	if err == nil {
		return nil
	}
	if errors.Is(err, remote.ErrNotFound) {
		return p.goneIf404(err)
	}
	// Refused because it is not running: stopped is what was asked.
	if sb, gerr := p.get(ctx, ref.ExternalID); gerr == nil && (sb.State == stateStopped || sb.State == stateArchived) {
		return nil
	}
	return err
}

// List implements sandbox.Lister: the sandboxes labelled with this deployment.
func (p *Provider) List(ctx context.Context) ([]sandbox.Resource, error) {
	list, err := p.list(ctx, map[string]string{LabelDeployment: p.cfg.Deployment})
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Resource, 0, len(list))
	for _, sb := range list {
		if gone(sb.State) || sb.Labels[LabelDeployment] != p.cfg.Deployment || sb.Labels[LabelSandbox] == "" || !idPattern.MatchString(sb.ID) {
			continue
		}
		created, _ := time.Parse(time.RFC3339Nano, sb.CreatedAt)
		out = append(out, sandbox.Resource{Ref: sandbox.Ref{Provider: Name, ExternalID: sb.ID}, SessionID: sb.Labels[LabelSession], Created: created})
	}
	return out, nil
}

// maxAnswer bounds a control-plane answer.
const maxAnswer = 16 << 20

// do sends one control-plane request with a JSON body (nil: none) and decodes a JSON answer
// into out (nil: discarded).
func (p *Provider) do(ctx context.Context, method, pathQuery string, body, out any, op string) error {
	resp, err := remote.SendJSON(ctx, p.http, method, p.cfg.APIURL.String()+pathQuery, body, p.authorize, op, EnvAPIKey)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return remote.Transport(op, err)
	}
	if len(data) > maxAnswer {
		return fmt.Errorf("%s: the answer is larger than %d bytes", op, maxAnswer)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: decode the answer: %w", op, err)
	}
	return nil
}

func (p *Provider) authorize(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+p.cfg.APIKey)
	if p.cfg.OrganizationID != "" {
		req.Header.Set("X-Daytona-Organization-ID", p.cfg.OrganizationID)
	}
	req.Header.Set("X-Daytona-Source", "managed-agents")
}
