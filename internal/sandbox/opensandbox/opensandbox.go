// Package opensandbox is the OpenSandbox sandbox provider (MANAGED_AGENT_SANDBOX=opensandbox):
// a session's sandbox is an OpenSandbox sandbox made through the lifecycle API
// (specs/sandbox-lifecycle.yml: POST/GET/DELETE /sandboxes, pause, resume, renew-expiration,
// endpoints) whose built-in tools run through the execd daemon inside it (specs/execd-api.yaml:
// POST /command streaming ServerStreamEvents, /files/download, /files/upload). The client is
// written from the published specs: OpenSandbox's Go SDK is not served by the Go module proxy,
// and it buffers event lines without a bound.
//
// Create is idempotent on spec.Name through the sandbox's metadata (managed-agents/sandbox,
// managed-agents/session-id, managed-agents/deployment): an existing sandbox of the name is
// adopted, a create whose answer was lost is looked up again, and concurrent creates keep the
// oldest and delete the others. Attach resumes a paused sandbox; a sandbox that no longer
// exists (deleted, expired) is sandbox.ErrGone, never silently replaced.
//
// execd does not confine paths, so the workspace is confined here: every path is resolved in
// the sandbox (realpath) by a short script before the file call, and a command's directory by
// the command's own preamble; see box.go.
//
// It imports only sandbox, sandbox/remote and libraries.
package opensandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// Name is the provider name stored in every Ref this provider makes.
const Name = "opensandbox"

// The worker variables this provider reads.
const (
	envAPIURL       = "MANAGED_AGENT_OPENSANDBOX_API_URL"
	envAPIKey       = "MANAGED_AGENT_OPENSANDBOX_API_KEY"
	envImage        = "MANAGED_AGENT_OPENSANDBOX_IMAGE"
	envEntrypoint   = "MANAGED_AGENT_OPENSANDBOX_ENTRYPOINT"
	envCPU          = "MANAGED_AGENT_OPENSANDBOX_CPU"
	envMemory       = "MANAGED_AGENT_OPENSANDBOX_MEMORY"
	envTimeout      = "MANAGED_AGENT_OPENSANDBOX_TIMEOUT"
	envServerProxy  = "MANAGED_AGENT_OPENSANDBOX_USE_SERVER_PROXY"
	envExecdToken   = "MANAGED_AGENT_OPENSANDBOX_EXECD_ACCESS_TOKEN"
	envWorkspace    = "MANAGED_AGENT_OPENSANDBOX_WORKSPACE"
	envDeployment   = "MANAGED_AGENT_OPENSANDBOX_DEPLOYMENT"
	envReadyTimeout = "MANAGED_AGENT_OPENSANDBOX_READY_TIMEOUT"
)

// Settings are the variables ConfigFrom reads (the app's provider row declares them).
var Settings = []string{envAPIURL, envAPIKey, envImage, envEntrypoint, envCPU, envMemory, envTimeout,
	envServerProxy, envExecdToken, envWorkspace, envDeployment, envReadyTimeout}

// Defaults of Config.
const (
	DefaultAPIURL       = "http://localhost:8080/v1"
	DefaultImage        = "ubuntu:24.04"
	DefaultCPU          = "1"
	DefaultMemory       = "2Gi"
	DefaultWorkspace    = "/workspace"
	DefaultDeployment   = "default"
	DefaultReadyTimeout = 3 * time.Minute
	// DefaultAttachTimeout bounds how long Attach waits for a sandbox that is starting,
	// pausing or resuming.
	DefaultAttachTimeout = time.Minute
	// ExecdPort is the port execd listens on in every sandbox.
	ExecdPort = 44772
)

// DefaultEntrypoint keeps a sandbox running with nothing of its own: execd is injected
// before it (the server's own default for snapshot restores).
var DefaultEntrypoint = []string{"tail", "-f", "/dev/null"}

// Metadata keys every sandbox this provider makes carries.
const (
	metaSandbox    = "managed-agents/sandbox"
	metaSession    = "managed-agents/session-id"
	metaDeployment = "managed-agents/deployment"
)

// Config configures a Provider.
type Config struct {
	// APIURL is the lifecycle API's base, e.g. http://localhost:8080/v1.
	APIURL *url.URL
	// APIKey is sent as OPEN-SANDBOX-API-KEY ("" sends none: a server without auth).
	APIKey string
	// Image is the image of specs that name none; Entrypoint its entry process.
	Image      string
	Entrypoint []string
	// CPU and Memory are the resourceLimits of specs that set none ("500m", "2Gi").
	CPU, Memory string
	// TTL is the sandbox's timeout (at least a minute); 0 asks for manual cleanup (the
	// sweeps and session deletion remove sandboxes). A sandbox in use is renewed.
	TTL time.Duration
	// UseServerProxy asks for execd endpoints proxied by the lifecycle server.
	UseServerProxy bool
	// ExecdToken is sent as X-EXECD-ACCESS-TOKEN when set.
	ExecdToken string
	// Workspace is the directory tools work in: absolute, or "~/dir" under the sandbox
	// user's home.
	Workspace string
	// Deployment tells this deployment's sandboxes from others' on one server.
	Deployment string
	// ReadyTimeout bounds Create's wait for Running; AttachTimeout Attach's.
	ReadyTimeout, AttachTimeout time.Duration
	// PollInterval is how often a wait reads the sandbox (default 500ms).
	PollInterval time.Duration
	// Retry bounds the retries of refused requests (zero: remote.DefaultRetry).
	Retry remote.Retry
	// Transport is the base round tripper (nil: a fresh one without proxy).
	Transport http.RoundTripper
	Logger    *slog.Logger
}

var (
	resourceValue = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[a-zA-Z]{0,2}$`)
	deploymentID  = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	workspacePath = regexp.MustCompile(`^(/|~/)[A-Za-z0-9._/-]*$`)
)

// ConfigFrom reads the MANAGED_AGENT_OPENSANDBOX_* variables from env (the ones Settings
// names), reporting every problem with its variable's name.
func ConfigFrom(env map[string]string) (Config, error) {
	s := remote.NewSettings(env)
	c := Config{
		APIURL:         s.URL(envAPIURL, DefaultAPIURL),
		APIKey:         s.String(envAPIKey, ""),
		Image:          s.String(envImage, DefaultImage),
		CPU:            s.String(envCPU, DefaultCPU),
		Memory:         s.String(envMemory, DefaultMemory),
		UseServerProxy: s.Bool(envServerProxy, false),
		ExecdToken:     s.String(envExecdToken, ""),
		Workspace:      s.String(envWorkspace, DefaultWorkspace),
		Deployment:     s.String(envDeployment, DefaultDeployment),
		ReadyTimeout:   s.Duration(envReadyTimeout, DefaultReadyTimeout, 5*time.Second),
	}
	var errs []error
	if v := s.String(envEntrypoint, ""); v != "" {
		if err := json.Unmarshal([]byte(v), &c.Entrypoint); err != nil || len(c.Entrypoint) == 0 || slices.Contains(c.Entrypoint, "") {
			errs = append(errs, fmt.Errorf(`%s=%q: must be a JSON array of the entry process's arguments, such as ["tail","-f","/dev/null"]`, envEntrypoint, v))
		}
	}
	switch v := strings.ToLower(s.String(envTimeout, "manual")); v {
	case "manual", "none", "0":
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute {
			errs = append(errs, fmt.Errorf(`%s=%q: must be "manual" (no expiry) or a duration of at least 1m, such as 24h`, envTimeout, v))
		}
		c.TTL = d
	}
	if err := errors.Join(append([]error{s.Err()}, append(errs, c.check()...)...)...); err != nil {
		return Config{}, err
	}
	return c, nil
}

// check validates what ConfigFrom parsed and New is given.
func (c Config) check() []error {
	var errs []error
	if !resourceValue.MatchString(c.CPU) {
		errs = append(errs, fmt.Errorf(`%s=%q: must be a CPU quantity such as "1" or "500m"`, envCPU, c.CPU))
	}
	if !resourceValue.MatchString(c.Memory) {
		errs = append(errs, fmt.Errorf(`%s=%q: must be a memory quantity such as "2Gi" or "512Mi"`, envMemory, c.Memory))
	}
	if !workspacePath.MatchString(c.Workspace) || strings.Contains(c.Workspace, "..") || c.Workspace == "/" || c.Workspace == "~/" {
		errs = append(errs, fmt.Errorf(`%s=%q: must be an absolute directory such as /workspace, or ~/dir under the sandbox user's home`, envWorkspace, c.Workspace))
	}
	if !deploymentID.MatchString(c.Deployment) {
		errs = append(errs, fmt.Errorf("%s=%q: must be letters, digits, '.', '_' or '-' (at most 63)", envDeployment, c.Deployment))
	}
	if c.TTL != 0 && c.TTL < time.Minute {
		errs = append(errs, fmt.Errorf("%s=%s: must be at least 1m", envTimeout, c.TTL))
	}
	if strings.TrimSpace(c.Image) == "" {
		errs = append(errs, fmt.Errorf("%s is empty: the image of environments that name none", envImage))
	}
	return errs
}

// Check validates the variables without reaching the server (the app's Validate).
func Check(env map[string]string) error {
	_, err := ConfigFrom(env)
	return err
}

// Provider is the OpenSandbox sandbox provider.
type Provider struct {
	cfg    Config
	api    *api
	client *http.Client
	logger *slog.Logger
}

var (
	_ sandbox.Provider = (*Provider)(nil)
	_ sandbox.Lister   = (*Provider)(nil)
	_ sandbox.Stopper  = (*Provider)(nil)
)

// New checks c and returns the provider.
func New(c Config) (*Provider, error) {
	if c.APIURL == nil {
		u, _ := url.Parse(DefaultAPIURL)
		c.APIURL = u
	}
	c.Image = cmp.Or(c.Image, DefaultImage)
	c.CPU = cmp.Or(c.CPU, DefaultCPU)
	c.Memory = cmp.Or(c.Memory, DefaultMemory)
	c.Workspace = cmp.Or(c.Workspace, DefaultWorkspace)
	c.Deployment = cmp.Or(c.Deployment, DefaultDeployment)
	if len(c.Entrypoint) == 0 {
		c.Entrypoint = DefaultEntrypoint
	}
	if err := errors.Join(c.check()...); err != nil {
		return nil, err
	}
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, DefaultReadyTimeout)
	c.AttachTimeout = cmp.Or(c.AttachTimeout, DefaultAttachTimeout)
	c.PollInterval = cmp.Or(c.PollInterval, 500*time.Millisecond)
	logger := cmp.Or(c.Logger, slog.Default())
	client := remote.NewClient(c.Transport, c.Retry, logger)
	return &Provider{cfg: c, api: &api{base: c.APIURL, key: c.APIKey, client: client}, client: client, logger: logger}, nil
}

// Name implements sandbox.Provider.
func (p *Provider) Name() string { return Name }

// sandboxID is the shape of the ids this provider accepts: the server's ids (UUIDs in the
// Docker runtime, names in Kubernetes) are one path segment.
var sandboxID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func checkRef(ref sandbox.Ref) error { return remote.CheckRef(ref, Name, sandboxID) }

// labelValue is a Kubernetes label value, what the server accepts as a metadata value.
var labelValue = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)

// createRequest renders spec.
func (p *Provider) createRequest(spec sandbox.Spec) createRequest {
	req := createRequest{
		Image:          imageSpec{URI: cmp.Or(spec.Image, p.cfg.Image)},
		Entrypoint:     p.cfg.Entrypoint,
		ResourceLimits: map[string]string{"cpu": p.cfg.CPU, "memory": p.cfg.Memory},
		Env:            maps.Clone(spec.Env),
		Metadata:       map[string]string{metaSandbox: spec.Name, metaDeployment: p.cfg.Deployment},
	}
	if labelValue.MatchString(spec.SessionID) {
		req.Metadata[metaSession] = spec.SessionID
	}
	if p.cfg.TTL > 0 {
		secs := int64(p.cfg.TTL / time.Second)
		req.Timeout = &secs
	}
	if r := spec.Resources; r.MilliCPU > 0 {
		req.ResourceLimits["cpu"] = strconv.FormatInt(r.MilliCPU, 10) + "m"
	}
	if r := spec.Resources; r.MemoryBytes > 0 {
		req.ResourceLimits["memory"] = strconv.FormatInt((r.MemoryBytes+(1<<20)-1)>>20, 10) + "Mi"
	}
	switch spec.Egress.Mode {
	case sandbox.EgressFull:
	case sandbox.EgressHosts:
		pol := &networkPolicy{DefaultAction: "deny", Egress: []networkRule{}}
		for _, h := range spec.Egress.Hosts {
			pol.Egress = append(pol.Egress, networkRule{Action: "allow", Target: h})
		}
		req.NetworkPolicy = pol
	default:
		req.NetworkPolicy = &networkPolicy{DefaultAction: "deny", Egress: []networkRule{}}
	}
	return req
}

// Create makes the sandbox of spec.Name, or adopts the one that exists, waits until it runs
// and prepares its workspace. A sandbox that fails to start (or does not within
// ReadyTimeout) is deleted again and the error wraps sandbox.ErrSetup.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Ref, error) {
	if spec.Name == "" {
		return sandbox.Ref{}, errors.New("opensandbox sandbox: the spec has no name (sandbox.NameFor)")
	}
	if !sandbox.IsName(spec.Name) {
		return sandbox.Ref{}, fmt.Errorf("opensandbox sandbox name %q: not a name sandbox.NameFor makes", spec.Name)
	}
	if err := spec.CheckEnv(); err != nil {
		return sandbox.Ref{}, fmt.Errorf("opensandbox sandbox %s: %w: %w", spec.Name, sandbox.ErrSetup, err)
	}
	if len(spec.Packages) > 0 {
		return sandbox.Ref{}, fmt.Errorf("the opensandbox provider does not install an environment's packages; build them into the image (%s): %w", envImage, sandbox.ErrSetup)
	}
	parent := ctx
	ctx, cancel := context.WithTimeoutCause(ctx, p.cfg.ReadyTimeout, errNotReadyInTime)
	defer cancel()
	id, err := p.ensure(ctx, spec)
	if err != nil {
		return sandbox.Ref{}, err
	}
	ref := sandbox.Ref{Provider: Name, ExternalID: id}
	b, err := p.connect(ctx, id, true)
	if err == nil {
		err = b.prepare(ctx)
	}
	if err != nil {
		if parent.Err() != nil || errors.Is(err, remote.ErrAuth) || (errors.Is(err, sandbox.ErrUnavailable) && !errors.Is(context.Cause(ctx), errNotReadyInTime)) {
			// The caller gave up, or the server is unwell: keep the sandbox for the retried
			// acquisition to adopt (or the orphan sweep to remove).
			return sandbox.Ref{}, fmt.Errorf("opensandbox sandbox %s (%s): %w", spec.Name, id, err)
		}
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := p.Destroy(cleanup, ref); derr != nil {
			return sandbox.Ref{}, fmt.Errorf("opensandbox sandbox %s (%s): %w (and deleting it failed: %v)", spec.Name, id, err, derr)
		}
		return sandbox.Ref{}, fmt.Errorf("opensandbox sandbox %s (%s): %w: %w", spec.Name, id, sandbox.ErrSetup, err)
	}
	return ref, nil
}

var errNotReadyInTime = fmt.Errorf("not running within the ready timeout (%s)", envReadyTimeout)

// ensure returns the id of the live sandbox of spec.Name, creating it if there is none.
func (p *Provider) ensure(ctx context.Context, spec sandbox.Spec) (string, error) {
	found, err := p.find(ctx, spec.Name)
	if err != nil {
		return "", err
	}
	if len(found) == 0 {
		var created sandboxInfo
		err := p.api.do(ctx, http.MethodPost, "/sandboxes", nil, p.createRequest(spec), &created, "create opensandbox sandbox "+spec.Name)
		var se *remote.StatusError
		lost := err != nil && (errors.Is(err, sandbox.ErrUnavailable) && (!errors.As(err, &se) || se.Status >= 500))
		switch {
		case lost:
			// The answer may have been lost after the server made it: look again.
			if again, ferr := p.find(ctx, spec.Name); ferr == nil && len(again) > 0 {
				p.logger.WarnContext(ctx, "adopting the sandbox a create whose answer was lost made", "sandbox", spec.Name, "id", again[0].ID, "err", err)
				break
			}
			return "", err
		case err != nil:
			return "", err
		}
		// Concurrent creates of one name (two workers) each made one: list again and keep the
		// oldest, deleting the others.
		if found, err = p.find(ctx, spec.Name); err != nil {
			return "", err
		}
		if len(found) == 0 && !lost {
			found = []sandboxInfo{created}
		}
		for _, extra := range found[1:] {
			p.logger.InfoContext(ctx, "deleting a duplicate sandbox of a concurrent create", "sandbox", spec.Name, "id", extra.ID, "kept", found[0].ID)
			if err := p.Destroy(ctx, sandbox.Ref{Provider: Name, ExternalID: extra.ID}); err != nil {
				return "", err
			}
		}
	}
	if len(found) == 0 {
		return "", fmt.Errorf("opensandbox sandbox %s: created but not listed by the server", spec.Name)
	}
	s := found[0]
	if have := s.Metadata[metaSession]; have != "" && labelValue.MatchString(spec.SessionID) && have != spec.SessionID {
		return "", fmt.Errorf("opensandbox sandbox %s (%s) belongs to session %s, not %s", spec.Name, s.ID, have, spec.SessionID)
	}
	if !sandboxID.MatchString(s.ID) {
		return "", fmt.Errorf("opensandbox sandbox %s: the server named it %q, which is not an id this provider accepts", spec.Name, s.ID)
	}
	return s.ID, nil
}

// find lists the live sandboxes of this deployment named name, oldest first.
func (p *Provider) find(ctx context.Context, name string) ([]sandboxInfo, error) {
	all, err := p.list(ctx, map[string]string{metaSandbox: name, metaDeployment: p.cfg.Deployment})
	if err != nil {
		return nil, err
	}
	var out []sandboxInfo
	for _, s := range all {
		// Filter again: a server that ignores a filter must not make us adopt another's.
		if s.Metadata[metaSandbox] == name && s.Metadata[metaDeployment] == p.cfg.Deployment && !ended(s.Status.State) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b sandboxInfo) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// maxPages bounds a listing (pageSize 100 each).
const maxPages = 100

// list pages through GET /sandboxes filtered by metadata.
func (p *Provider) list(ctx context.Context, meta map[string]string) ([]sandboxInfo, error) {
	filter := url.Values{}
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		filter.Set(k, meta[k])
	}
	var out []sandboxInfo
	for page := 1; page <= maxPages; page++ {
		q := url.Values{"metadata": {filter.Encode()}, "page": {strconv.Itoa(page)}, "pageSize": {"100"}}
		var resp listResponse
		if err := p.api.do(ctx, http.MethodGet, "/sandboxes", q, nil, &resp, "list opensandbox sandboxes"); err != nil {
			return nil, err
		}
		out = append(out, resp.Items...)
		if !resp.Pagination.HasNextPage || len(resp.Items) == 0 {
			return out, nil
		}
	}
	return out, nil
}

// get reads one sandbox; a missing one is sandbox.ErrGone.
func (p *Provider) get(ctx context.Context, id string) (sandboxInfo, error) {
	var s sandboxInfo
	err := p.api.do(ctx, http.MethodGet, "/sandboxes/"+id, nil, nil, &s, "read opensandbox sandbox "+id)
	if errors.Is(err, remote.ErrNotFound) {
		return s, fmt.Errorf("opensandbox sandbox %s no longer exists (deleted or expired): %w", id, sandbox.ErrGone)
	}
	return s, err
}

// errFailed marks a sandbox the server says will never run.
var errFailed = errors.New("the sandbox has ended")

// waitRunning polls the sandbox until it is Running, resuming it if it is paused (resume
// true). ErrGone if it is missing, errFailed if it ended.
func (p *Provider) waitRunning(ctx context.Context, id string, resume bool) (sandboxInfo, error) {
	resumed := false
	last := "no state yet"
	for {
		s, err := p.get(ctx, id)
		if err != nil && (errors.Is(err, sandbox.ErrGone) || ctx.Err() == nil) {
			return s, err
		}
		if err == nil {
			st := s.Status
			last = strings.TrimSpace(st.State + " " + st.Reason + " " + st.Message)
			switch {
			case st.State == stateRunning:
				return s, nil
			case ended(st.State):
				return s, fmt.Errorf("opensandbox sandbox %s is %s: %w", id, last, errFailed)
			case st.State == statePaused && resume && !resumed:
				if err := p.api.do(ctx, http.MethodPost, "/sandboxes/"+id+"/resume", nil, nil, nil, "resume opensandbox sandbox "+id); err != nil {
					if errors.Is(err, remote.ErrNotFound) {
						return s, fmt.Errorf("opensandbox sandbox %s no longer exists: %w", id, sandbox.ErrGone)
					}
					var se *remote.StatusError
					if !errors.As(err, &se) || se.Status != http.StatusConflict {
						return s, err
					}
				}
				resumed = true
				continue
			}
			// Pending, Pausing, Resuming and states this client does not know: wait.
		}
		if err := sleep(ctx, p.cfg.PollInterval); err != nil {
			return s, fmt.Errorf("opensandbox sandbox %s not running (%s): %w", id, last, context.Cause(ctx))
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// connect waits for the sandbox to run and returns the client of its execd.
func (p *Provider) connect(ctx context.Context, id string, created bool) (*box, error) {
	s, err := p.waitRunning(ctx, id, true)
	if errors.Is(err, errFailed) && !created {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrGone, err)
	}
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if p.cfg.UseServerProxy {
		q.Set("use_server_proxy", "true")
	}
	var ep endpointResponse
	if err := p.api.do(ctx, http.MethodGet, "/sandboxes/"+id+"/endpoints/"+strconv.Itoa(ExecdPort), q, nil, &ep, "read the execd endpoint of opensandbox sandbox "+id); err != nil {
		if errors.Is(err, remote.ErrNotFound) {
			return nil, fmt.Errorf("opensandbox sandbox %s no longer exists: %w", id, sandbox.ErrGone)
		}
		return nil, err
	}
	base, err := execdBase(p.cfg.APIURL.Scheme, ep.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("opensandbox sandbox %s: %w", id, err)
	}
	b := &box{p: p, id: id, base: base, headers: ep.Headers, lastRenew: time.Now(), expires: s.ExpiresAt}
	if created {
		if err := b.waitPing(ctx); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// execdBase turns the endpoint the server gives (host[:port][/path], no scheme) into a URL.
func execdBase(scheme, endpoint string) (*url.URL, error) {
	if endpoint == "" {
		return nil, errors.New("the server gave no execd endpoint")
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = scheme + "://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("the server gave an execd endpoint that is not a URL: %q", endpoint)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

// Attach returns the client of an existing sandbox, resuming it if it is paused;
// sandbox.ErrGone if it no longer exists or has ended. It never creates.
func (p *Provider) Attach(ctx context.Context, ref sandbox.Ref) (sandbox.Sandbox, error) {
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, p.cfg.AttachTimeout)
	defer cancel()
	b, err := p.connect(wait, ref.ExternalID, false)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Destroy deletes the sandbox; one already gone is not an error.
func (p *Provider) Destroy(ctx context.Context, ref sandbox.Ref) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	err := p.api.do(ctx, http.MethodDelete, "/sandboxes/"+ref.ExternalID, nil, nil, nil, "delete opensandbox sandbox "+ref.ExternalID)
	if err != nil && !errors.Is(err, remote.ErrNotFound) {
		return err
	}
	return nil
}

// Stop pauses the sandbox (its files and processes are kept); Attach resumes it. The pause
// is asynchronous: Stop returns once the server accepted it.
func (p *Provider) Stop(ctx context.Context, ref sandbox.Ref) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	err := p.api.do(ctx, http.MethodPost, "/sandboxes/"+ref.ExternalID+"/pause", nil, nil, nil, "pause opensandbox sandbox "+ref.ExternalID)
	var se *remote.StatusError
	switch {
	case errors.Is(err, remote.ErrNotFound):
		return fmt.Errorf("opensandbox sandbox %s no longer exists: %w", ref.ExternalID, sandbox.ErrGone)
	case errors.As(err, &se) && se.Status == http.StatusConflict:
		// Already paused or pausing.
		return nil
	}
	return err
}

// List returns the sandboxes of this deployment (the orphan sweep).
func (p *Provider) List(ctx context.Context) ([]sandbox.Resource, error) {
	all, err := p.list(ctx, map[string]string{metaDeployment: p.cfg.Deployment})
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Resource, 0, len(all))
	for _, s := range all {
		if s.Metadata[metaDeployment] != p.cfg.Deployment || s.Metadata[metaSandbox] == "" || !sandboxID.MatchString(s.ID) ||
			s.Status.State == stateTerminated {
			continue
		}
		out = append(out, sandbox.Resource{Ref: sandbox.Ref{Provider: Name, ExternalID: s.ID}, SessionID: s.Metadata[metaSession], Created: s.CreatedAt})
	}
	return out, nil
}
