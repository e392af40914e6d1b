// Package e2b is the E2B sandbox provider (MANAGED_AGENT_SANDBOX=e2b) and, with another base
// URL, auth header and defaults, the CubeSandbox one (=cubesandbox), which speaks E2B's API.
// The control plane is E2B's REST API (spec/openapi.yml: POST /sandboxes, GET
// /v2/sandboxes?metadata=, connect, pause, timeout, DELETE); the data plane is envd in the
// sandbox: commands through Connect-RPC process.Process/Start (connect-go with a JSON codec
// over plain structs mirroring process.proto), uploads through POST /files.
//
// Create is idempotent on spec.Name through the sandbox's metadata (managed-agents/sandbox):
// it adopts what a lost attempt made. Attach connects by the stored id, resuming a paused
// sandbox; a 404 is sandbox.ErrGone, never a silent replacement. Paths are confined in the
// sandbox itself by the scripts in exec.go and files.go (symbolic links resolved), since envd
// would follow a link anywhere.
//
// It imports only sandbox, sandbox/remote and libraries.
package e2b

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// Provider is the e2b (or cubesandbox) sandbox provider.
type Provider struct {
	cfg    Config
	api    *api
	http   *http.Client
	logger *slog.Logger
}

var (
	_ sandbox.Provider     = (*Provider)(nil)
	_ sandbox.Lister       = (*Provider)(nil)
	_ sandbox.Stopper      = (*Provider)(nil)
	_ sandbox.FileSearcher = (*box)(nil)
)

// New checks c and returns the provider.
func New(c Config) (*Provider, error) {
	var errs []error
	if c.Name != NameE2B && c.Name != NameCube {
		errs = append(errs, fmt.Errorf("e2b provider: name %q is neither %s nor %s", c.Name, NameE2B, NameCube))
	}
	if c.APIURL == nil {
		errs = append(errs, errors.New("e2b provider: no API URL"))
	}
	if c.Template == "" {
		errs = append(errs, errors.New("e2b provider: no template"))
	}
	if c.Workspace == "" || !strings.HasPrefix(c.Workspace, "/") {
		errs = append(errs, fmt.Errorf("e2b provider: workspace %q is not an absolute path", c.Workspace))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.Workspace = strings.TrimRight(c.Workspace, "/")
	c.Domain = cmp.Or(c.Domain, DefaultE2BDomain)
	c.Scheme = cmp.Or(c.Scheme, "https")
	c.User = cmp.Or(c.User, DefaultUser)
	c.Deployment = cmp.Or(c.Deployment, DefaultDeployment)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, DefaultReadyTimeout)
	logger := cmp.Or(c.Logger, slog.Default())
	client := remote.NewClient(c.Transport, c.Retry, logger)
	return &Provider{cfg: c, http: client, logger: logger,
		api: &api{base: c.APIURL, key: c.APIKey, bearer: c.Bearer, credential: c.CredentialVar, http: client}}, nil
}

// Name implements sandbox.Provider.
func (p *Provider) Name() string { return p.cfg.Name }

// idPattern is the shape of a sandbox id: one DNS label (it becomes one in envd's host name).
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,62}$`)

func (p *Provider) checkRef(ref sandbox.Ref) error {
	return remote.CheckRef(ref, p.cfg.Name, idPattern)
}

func (p *Provider) ref(id string) sandbox.Ref {
	return sandbox.Ref{Provider: p.cfg.Name, ExternalID: id}
}

// find returns the id of this deployment's sandbox named name: the oldest, when concurrent
// creates made more than one (the others are killed by their creators or the sweep).
func (p *Provider) find(ctx context.Context, name string) (string, error) {
	list, err := p.api.list(ctx, map[string]string{MetaSandbox: name, MetaDeployment: p.cfg.Deployment})
	if err != nil {
		return "", fmt.Errorf("look up %s sandbox %s: %w", p.cfg.Name, name, err)
	}
	list = slices.DeleteFunc(list, func(s sandboxInfo) bool {
		return s.Metadata[MetaSandbox] != name || !idPattern.MatchString(s.SandboxID)
	})
	if len(list) == 0 {
		return "", nil
	}
	slices.SortFunc(list, func(a, b sandboxInfo) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), strings.Compare(a.SandboxID, b.SandboxID))
	})
	return list[0].SandboxID, nil
}

// egress is what E2B's network fields can say of spec.Egress: no network at all, an
// allowlist of domains (denyOut 0.0.0.0/0 with allowOut the hosts; E2B matches them on the
// HTTP Host header and TLS SNI, ports 80 and 443), or a normal network.
func egress(e sandbox.Egress) (*bool, *networkConfig) {
	switch e.Mode {
	case sandbox.EgressFull:
		on := true
		return &on, nil
	case sandbox.EgressHosts:
		return nil, &networkConfig{AllowOut: slices.Clone(e.Hosts), DenyOut: []string{"0.0.0.0/0"}}
	}
	off := false
	return &off, nil
}

// Create implements sandbox.Provider: it adopts this deployment's sandbox of spec.Name if
// there is one, else creates it and waits until envd answers. A create whose answer was lost
// (transport error, 5xx) is looked up again and adopted.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Ref, error) {
	if spec.Name == "" {
		return sandbox.Ref{}, fmt.Errorf("%s sandbox: the spec has no name (sandbox.NameFor)", p.cfg.Name)
	}
	if !sandbox.IsName(spec.Name) {
		return sandbox.Ref{}, fmt.Errorf("%s sandbox name %q: not a name sandbox.NameFor makes", p.cfg.Name, spec.Name)
	}
	if err := spec.CheckEnv(); err != nil {
		return sandbox.Ref{}, fmt.Errorf("%s sandbox: %w: %w", p.cfg.Name, sandbox.ErrSetup, err)
	}
	if len(spec.Packages) > 0 {
		return sandbox.Ref{}, fmt.Errorf("the %s sandbox provider does not install an environment's packages; build them into the template (%s): %w",
			p.cfg.Name, p.templateVar(), sandbox.ErrSetup)
	}
	if id, err := p.find(ctx, spec.Name); err != nil || id != "" {
		return p.ref(id), err
	}
	template := cmp.Or(spec.Image, p.cfg.Template)
	allow, network := egress(spec.Egress)
	body := newSandbox{
		TemplateID: template, Timeout: seconds(p.cfg.Timeout), AutoPause: p.cfg.AutoPause, Secure: true,
		AllowInternetAccess: allow, Network: network,
		Metadata: map[string]string{MetaSandbox: spec.Name, MetaSession: spec.SessionID, MetaDeployment: p.cfg.Deployment},
		EnvVars:  spec.Env,
	}
	if p.cfg.Name == NameCube {
		body.Lifecycle = &lifecycle{OnTimeout: "kill"}
		if p.cfg.AutoPause {
			body.Lifecycle.OnTimeout = "pause"
		}
	}
	info, err := p.api.create(ctx, body)
	if err != nil {
		var se *remote.StatusError
		if errors.As(err, &se) && se.Status >= 400 && se.Status < 500 && !errors.Is(err, remote.ErrAuth) && se.Status != http.StatusTooManyRequests {
			// The template does not exist or the request was refused: the same create fails again.
			return sandbox.Ref{}, fmt.Errorf("create %s sandbox from template %q: %w: %w", p.cfg.Name, template, sandbox.ErrSetup, err)
		}
		if !errors.Is(err, sandbox.ErrUnavailable) || ctx.Err() != nil {
			return sandbox.Ref{}, err
		}
		// The answer may have been lost after the sandbox was made.
		id, ferr := p.find(ctx, spec.Name)
		if ferr != nil || id == "" {
			return sandbox.Ref{}, err
		}
		p.logger.InfoContext(ctx, "adopted the sandbox a create whose answer was lost made", "provider", p.cfg.Name, "sandbox", id)
		return p.ref(id), nil
	}
	if !idPattern.MatchString(info.SandboxID) {
		return sandbox.Ref{}, fmt.Errorf("create %s sandbox: the service answered a sandbox id %q of an unknown shape", p.cfg.Name, info.SandboxID)
	}
	// Concurrent creates of one name each made a sandbox: all keep the oldest.
	if oldest, err := p.find(ctx, spec.Name); err == nil && oldest != "" && oldest != info.SandboxID {
		p.destroyQuietly(ctx, info.SandboxID)
		return p.ref(oldest), nil
	}
	if err := p.waitReady(ctx, info); err != nil {
		p.destroyQuietly(ctx, info.SandboxID)
		return sandbox.Ref{}, err
	}
	return p.ref(info.SandboxID), nil
}

func (p *Provider) templateVar() string {
	if p.cfg.Name == NameCube {
		return cubePrefix + "TEMPLATE"
	}
	return e2bPrefix + "TEMPLATE"
}

func (p *Provider) destroyQuietly(ctx context.Context, id string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := p.api.kill(dctx, id); err != nil && !errors.Is(err, remote.ErrNotFound) {
		p.logger.WarnContext(ctx, "could not kill a sandbox; the orphan sweep removes it", "provider", p.cfg.Name, "sandbox", id, "error", err)
	}
}

// waitReady waits until the new sandbox's envd answers /health (a slow start), up to
// ReadyTimeout.
func (p *Provider) waitReady(ctx context.Context, info sandboxInfo) error {
	e := p.envdFor(info.SandboxID, info)
	wctx, cancel := context.WithTimeout(ctx, p.cfg.ReadyTimeout)
	defer cancel()
	delay := 50 * time.Millisecond
	for {
		err := e.health(wctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if wctx.Err() != nil || errors.Is(err, remote.ErrAuth) {
			return fmt.Errorf("%s sandbox %s: envd did not answer within %s: %w", p.cfg.Name, info.SandboxID, p.cfg.ReadyTimeout, err)
		}
		select {
		case <-wctx.Done():
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// envdFor is the data-plane client of sandbox id.
func (p *Provider) envdFor(id string, info sandboxInfo) *envd {
	if p.cfg.ProxyURL != nil {
		return newEnvd(p.cfg.ProxyURL.String(), id, true, info, p.cfg.User, p.http)
	}
	domain := cmp.Or(info.Domain, p.cfg.Domain)
	return newEnvd(fmt.Sprintf("%s://%d-%s.%s", p.cfg.Scheme, EnvdPort, id, domain), id, false, info, p.cfg.User, p.http)
}

// Attach implements sandbox.Provider: POST /connect resumes a paused sandbox (or finds it
// running) and renews its time to live.
func (p *Provider) Attach(ctx context.Context, ref sandbox.Ref) (sandbox.Sandbox, error) {
	if err := p.checkRef(ref); err != nil {
		return nil, err
	}
	info, err := p.api.connect(ctx, ref.ExternalID, p.cfg.Timeout)
	if errors.Is(err, remote.ErrNotFound) {
		return nil, fmt.Errorf("%s sandbox %s: %w", p.cfg.Name, ref.ExternalID, sandbox.ErrGone)
	}
	if err != nil {
		return nil, err
	}
	b := &box{p: p, id: ref.ExternalID, envd: p.envdFor(ref.ExternalID, info), deadline: time.Now().Add(p.cfg.Timeout)}
	return b, nil
}

// Destroy implements sandbox.Provider; a sandbox already gone is not an error.
func (p *Provider) Destroy(ctx context.Context, ref sandbox.Ref) error {
	if err := p.checkRef(ref); err != nil {
		return err
	}
	if err := p.api.kill(ctx, ref.ExternalID); err != nil && !errors.Is(err, remote.ErrNotFound) {
		return err
	}
	return nil
}

// Stop implements sandbox.Stopper: the sandbox is paused (its memory and files kept) and the
// next Attach resumes it. One already paused (409) is stopped.
func (p *Provider) Stop(ctx context.Context, ref sandbox.Ref) error {
	if err := p.checkRef(ref); err != nil {
		return err
	}
	status, err := p.api.pause(ctx, ref.ExternalID)
	switch {
	case errors.Is(err, remote.ErrNotFound):
		return fmt.Errorf("%s sandbox %s: %w", p.cfg.Name, ref.ExternalID, sandbox.ErrGone)
	case status == http.StatusConflict:
		return nil
	}
	return err
}

// List implements sandbox.Lister: this deployment's running and paused sandboxes.
func (p *Provider) List(ctx context.Context) ([]sandbox.Resource, error) {
	list, err := p.api.list(ctx, map[string]string{MetaDeployment: p.cfg.Deployment})
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Resource, 0, len(list))
	for _, s := range list {
		if !idPattern.MatchString(s.SandboxID) || s.Metadata[MetaDeployment] != p.cfg.Deployment {
			continue
		}
		out = append(out, sandbox.Resource{Ref: p.ref(s.SandboxID), SessionID: s.Metadata[MetaSession], Created: s.StartedAt})
	}
	return out, nil
}

// box is one attached sandbox.
type box struct {
	p    *Provider
	id   string
	envd *envd

	mu       sync.Mutex
	deadline time.Time // when the sandbox's time to live runs out, as last set
}

// keepAlive makes sure the sandbox lives need longer (and a margin): a command may run longer
// than the configured time to live. A refusal is only logged (CubeAPI may not implement
// the call): the operation itself tells whether the sandbox is there.
func (b *box) keepAlive(ctx context.Context, need time.Duration) error {
	b.mu.Lock()
	left := time.Until(b.deadline)
	b.mu.Unlock()
	if left >= need+time.Minute {
		return nil
	}
	ttl := max(b.p.cfg.Timeout, need+2*time.Minute)
	if err := b.p.api.setTimeout(ctx, b.id, ttl); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.p.logger.WarnContext(ctx, "could not renew a sandbox's time to live", "provider", b.p.cfg.Name, "sandbox", b.id, "error", err)
		return nil
	}
	b.mu.Lock()
	b.deadline = time.Now().Add(ttl)
	b.mu.Unlock()
	return nil
}

// check tells a sandbox that is gone from a data plane that could not be reached: the
// control plane knows (404 → sandbox.ErrGone; paused → unavailable until the next Attach
// resumes it).
func (b *box) check(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, sandbox.ErrUnavailable) {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	info, gerr := b.p.api.get(cctx, b.id)
	switch {
	case errors.Is(gerr, remote.ErrNotFound):
		return fmt.Errorf("%s sandbox %s: %w", b.p.cfg.Name, b.id, sandbox.ErrGone)
	case gerr == nil && info.State == statePaused:
		return fmt.Errorf("%s sandbox %s is paused (the next attach resumes it): %w", b.p.cfg.Name, b.id, err)
	}
	return err
}
