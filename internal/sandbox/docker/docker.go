// Package docker is the isolating sandbox provider: one container per session on a Docker
// Engine (the standard DOCKER_HOST, through the official client github.com/moby/moby/client),
// with the session's workspace on a named volume at /workspace.
//
// Every container runs the configured image as a non-root user (1000:1000) with a read-only
// root filesystem (tmpfs for /tmp and /run), all capabilities dropped, no-new-privileges, CPU,
// memory and pids limits, no network unless the deployment's ceiling allows more (network.go:
// a session network behind the egress proxy, or a normal network) and, optionally, another
// OCI runtime such as gVisor's runsc. Its mounts are the workspace volume and the read-only
// runner volume. Containers share the host kernel: that is the limit of this boundary
// (gVisor narrows it).
//
// Commands, file operations and searches are requests to the container's runner (runner.go,
// conn.go): the managed-agents binary on a read-only volume, run as `sandboxd --stdio` with
// one exec per kept-alive connection, so a command costs a request, not a runtime exec. The
// runner runs the local provider's code (sandbox/workspace) against /workspace: paths that
// leave it are refused by os.Root, a command is the leader of its own process group, killed
// whole on timeout or cancellation (or when the connection goes), its output capped.
//
// Create is idempotent on the spec's name: the container and volume names derive from it,
// so a retried create adopts what an earlier attempt made. The optional FileSearcher
// capability is offered (the runner serves it).
//
// An environment's packages are installed once into an image of their own (packages.go);
// an optional warm pool of started containers makes a first acquisition a rename (pool.go).
//
// The package imports only the sandbox interfaces (and wire, startstop), sandboxd (the
// runner's protocol), the Docker client and x/sync; it must never import agent, store,
// httpapi, durable, Temporal or Kubernetes packages.
package docker

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/disks"
	"github.com/managed-agents/managed-agents/internal/sandboxd"
)

// Name is the provider name stored in sandbox refs.
const Name = "docker"

// DefaultImage is the image `make sandbox-image` builds.
const DefaultImage = "managed-agents-sandbox:dev"

// Defaults of the configuration.
const (
	DefaultCPUs        = 1.0
	DefaultMemoryBytes = 1 << 30
	DefaultPids        = 256
	DefaultDeployment  = "default"
	DefaultTimeout     = 120 * time.Second
	DefaultMaxOutput   = 1 << 20
)

// Workspace is the workspace directory inside every container (as hosted).
const Workspace = "/workspace"

// User is the uid:gid commands run as; the image's /workspace belongs to it, and a fresh
// volume copies that ownership.
const User = "1000:1000"

// Labels on every container and volume, so a sweep can find what a deployment made.
const (
	LabelSandbox    = "managed-agents.sandbox"
	LabelSession    = "managed-agents.session"
	LabelSpecHash   = "managed-agents.spec-hash"
	LabelDeployment = "managed-agents.deployment"
)

// tmpfsSize bounds each writable tmpfs; tmpfs pages count against the memory limit anyway.
const tmpfsOptions = "rw,nosuid,nodev,size=256m"

// containerPath is the PATH of commands: the image is imported without a configuration of
// its own, so the container cannot inherit one.
const containerPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Config is the deployment's docker sandbox settings (MANAGED_AGENT_DOCKER_*).
type Config struct {
	// Image every sandbox starts from (default DefaultImage).
	Image string
	// CPUs, MemoryBytes and Pids are the limits of a sandbox whose spec asks for none.
	CPUs        float64
	MemoryBytes int64
	Pids        int64
	// Runtime is the OCI runtime ("" is the engine's default, e.g. runsc for gVisor).
	Runtime string
	// Deployment is the value of LabelDeployment on what this provider makes.
	Deployment string
	// Timeout and MaxOutput apply to commands whose request has none.
	Timeout   time.Duration
	MaxOutput int

	// PackageTimeout bounds the install of an environment's packages (packages.go; default
	// DefaultPackageTimeout).
	PackageTimeout time.Duration
	// WarmPool is how many started containers the pool keeps per image and spec hash
	// (pool.go; 0, the default, keeps none). Logger is where the pool reports.
	WarmPool int
	Logger   *slog.Logger
	// Net is the networking of sandboxes (network.go).
	Net NetworkConfig
	// DiskBytes bounds the workspace of a sandbox whose spec names no size (disk.go; 0 is
	// DefaultDiskBytes, DiskUnbounded leaves workspaces on plain volumes). DiskDir holds the
	// workspace filesystems (default DefaultDiskDir).
	DiskBytes int64
	DiskDir   string
	// Runner is the managed-agents binary the containers run to serve commands and files
	// (runner.go): a Linux executable of the engine's architecture, best statically linked
	// (CGO_ENABLED=0) so it runs in any image. "" is the running executable.
	Runner string
}

func (c Config) withDefaults() Config {
	c.Image = cmp.Or(c.Image, DefaultImage)
	c.CPUs = cmp.Or(c.CPUs, DefaultCPUs)
	c.MemoryBytes = cmp.Or(c.MemoryBytes, DefaultMemoryBytes)
	c.Pids = cmp.Or(c.Pids, DefaultPids)
	c.Deployment = cmp.Or(c.Deployment, DefaultDeployment)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.MaxOutput = cmp.Or(c.MaxOutput, DefaultMaxOutput)
	c.PackageTimeout = cmp.Or(c.PackageTimeout, DefaultPackageTimeout)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Net = c.Net.withDefaults()
	c.DiskBytes = cmp.Or(c.DiskBytes, DefaultDiskBytes)
	c.DiskDir = cmp.Or(c.DiskDir, DefaultDiskDir)
	return c
}

// engine is what the provider uses of the Docker client.
type engine interface {
	ContainerCreate(context.Context, client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	ContainerStart(context.Context, string, client.ContainerStartOptions) (client.ContainerStartResult, error)
	ContainerInspect(context.Context, string, client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerRemove(context.Context, string, client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	ContainerStop(context.Context, string, client.ContainerStopOptions) (client.ContainerStopResult, error)
	ContainerList(context.Context, client.ContainerListOptions) (client.ContainerListResult, error)
	VolumeCreate(context.Context, client.VolumeCreateOptions) (client.VolumeCreateResult, error)
	VolumeRemove(context.Context, string, client.VolumeRemoveOptions) (client.VolumeRemoveResult, error)
	ExecCreate(context.Context, string, client.ExecCreateOptions) (client.ExecCreateResult, error)
	ExecAttach(context.Context, string, client.ExecAttachOptions) (client.ExecAttachResult, error)
	ExecInspect(context.Context, string, client.ExecInspectOptions) (client.ExecInspectResult, error)
	// For packages.go and pool.go.
	ImageInspect(context.Context, string, ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ContainerCommit(context.Context, string, client.ContainerCommitOptions) (client.ContainerCommitResult, error)
	ContainerRename(context.Context, string, client.ContainerRenameOptions) (client.ContainerRenameResult, error)
	VolumeInspect(context.Context, string, client.VolumeInspectOptions) (client.VolumeInspectResult, error)
	VolumeList(context.Context, client.VolumeListOptions) (client.VolumeListResult, error)
	// For runner.go.
	ContainerStatPath(context.Context, string, client.ContainerStatPathOptions) (client.ContainerStatPathResult, error)
	CopyToContainer(context.Context, string, client.CopyToContainerOptions) (client.CopyToContainerResult, error)
}

var _ sandbox.Provider = (*Provider)(nil)

// Provider creates, attaches and destroys docker sandboxes on one engine.
type Provider struct {
	cli    *client.Client
	engine engine
	cfg    Config
	builds envBuilds
	pool   *pool        // nil without a warm pool
	disks  *disks.Disks // nil when workspaces are unbounded
	egress *egressState
	runner *runnerState
	// token is what this provider's runners require (conn.go); transport keeps the
	// connections to them, http is the client over it.
	token     string
	transport *http.Transport
	http      *http.Client
}

// New returns a provider on the engine DOCKER_HOST names (the local socket by default). It
// does not contact the engine; the first operation does.
func New(cfg Config) (*Provider, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	bin, err := loadRunner(cfg.Runner)
	if err != nil {
		return nil, err
	}
	dk, err := newDisks(cfg)
	if err != nil {
		return nil, err
	}
	if !bin.static {
		cfg.Logger.Warn("the docker sandbox runner is dynamically linked: images without a compatible C library cannot run it; build it with CGO_ENABLED=0 (make build does) or set MANAGED_AGENT_DOCKER_RUNNER", "runner", bin.path)
	}
	cli, err := client.New(client.FromEnv) // negotiates the API version on first use
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	var token [24]byte
	_, _ = rand.Read(token[:])
	p := &Provider{cli: cli, engine: cli, cfg: cfg, egress: &egressState{}, runner: &runnerState{bin: bin}, disks: dk, token: hex.EncodeToString(token[:])}
	p.transport = p.newTransport()
	p.http = &http.Client{Transport: p.transport}
	if cfg.WarmPool > 0 {
		p.pool = newPool(p, cfg.WarmPool, cfg.Logger)
	}
	return p, nil
}

func (c Config) check() error {
	switch {
	case c.CPUs < 0.01:
		return fmt.Errorf("docker sandbox: %g CPUs is too few (at least 0.01)", c.CPUs)
	case c.MemoryBytes < 6<<20:
		return fmt.Errorf("docker sandbox: %d bytes of memory is too little (the engine needs at least 6 MiB)", c.MemoryBytes)
	case c.Pids < 8:
		return fmt.Errorf("docker sandbox: a pids limit of %d is too low (at least 8)", c.Pids)
	case c.DiskBytes != DiskUnbounded && c.DiskBytes < disks.MinSize:
		return fmt.Errorf("docker sandbox: a workspace disk of %d bytes is too small (at least %d)", c.DiskBytes, disks.MinSize)
	case c.WarmPool < 0:
		return fmt.Errorf("docker sandbox: a warm pool of %d containers is negative", c.WarmPool)
	}
	return nil
}

// Close releases the client's connections, those to the runners too (their runners exit).
func (p *Provider) Close() error {
	p.transport.CloseIdleConnections()
	return p.cli.Close()
}

// Name implements sandbox.Provider.
func (p *Provider) Name() string { return Name }

// ContainerName is the container of a sandbox name: the name itself when it already has the
// shape sandbox.NameFor gives, otherwise a hash of it, so any name maps to one valid,
// recognisable container name.
func ContainerName(name string) string {
	if sandbox.IsName(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "ma-" + hex.EncodeToString(sum[:16])
}

// volumeName is the workspace volume of a container: derived from the name, so Destroy
// finds it even when the container is already gone.
func volumeName(containerName string) string { return containerName + "-workspace" }

// CreateOptions is the container a spec becomes (exported for tests that check settings
// an engine here cannot run, such as another OCI runtime).
func (p *Provider) CreateOptions(spec sandbox.Spec) client.ContainerCreateOptions {
	name := ContainerName(spec.Name)
	nanoCPUs := int64(p.cfg.CPUs * 1e9)
	if spec.Resources.MilliCPU > 0 {
		nanoCPUs = spec.Resources.MilliCPU * 1e6
	}
	memory := cmp.Or(spec.Resources.MemoryBytes, p.cfg.MemoryBytes)
	pids := p.cfg.Pids
	return client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:      cmp.Or(spec.Image, p.cfg.Image),
			User:       User,
			WorkingDir: Workspace,
			Env:        p.sandboxEnv(spec, name),
			Labels:     p.labels(spec),
		},
		HostConfig: &container.HostConfig{
			NetworkMode:    p.networkMode(spec, name),
			ReadonlyRootfs: true,
			Tmpfs:          map[string]string{"/tmp": tmpfsOptions + ",mode=1777", "/run": tmpfsOptions + ",mode=755"},
			Mounts: []mount.Mount{
				{Type: mount.TypeVolume, Source: volumeName(name), Target: Workspace, VolumeOptions: p.workspaceVolumeOptions(volumeName(name))},
				{Type: mount.TypeVolume, Source: p.runner.bin.volume(), Target: RunnerDir, ReadOnly: true, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
			},
			CapDrop:     []string{"ALL"},
			SecurityOpt: []string{"no-new-privileges"},
			Runtime:     p.cfg.Runtime,
			// Command output is returned by exec, never logged: nothing grows on the host's disk.
			LogConfig: container.LogConfig{Type: "none"},
			Resources: container.Resources{
				NanoCPUs:   nanoCPUs,
				Memory:     memory,
				MemorySwap: memory, // no swap beyond the memory limit
				PidsLimit:  &pids,
			},
		},
	}
}

func (p *Provider) labels(spec sandbox.Spec) map[string]string {
	return map[string]string{
		LabelSandbox:    spec.Name,
		LabelSession:    spec.SessionID,
		LabelSpecHash:   spec.Hash(),
		LabelDeployment: p.cfg.Deployment,
	}
}

// containerEnv is the container's base environment: PATH, HOME (the workspace, so `cd ~` goes
// there) and LANG, which the spec's variables may override. Every exec inherits it, so it
// survives a worker restart with the container.
func containerEnv() map[string]string {
	return map[string]string{"PATH": containerPath, "HOME": Workspace, "LANG": "C.UTF-8"}
}

// Create makes and starts the container of spec.Name with an empty workspace volume, or
// adopts (and starts, if stopped) the one an earlier Create of that name made.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Ref, error) {
	if spec.Name == "" {
		return sandbox.Ref{}, errors.New("create docker sandbox: the spec has no name")
	}
	if err := spec.CheckEnv(); err != nil {
		return sandbox.Ref{}, fmt.Errorf("create docker sandbox: %w", err)
	}
	netID, subnet, err := p.prepareNetwork(ctx, spec, ContainerName(spec.Name))
	if err != nil {
		return sandbox.Ref{}, fmt.Errorf("create docker sandbox: %w", err)
	}
	opts := p.CreateOptions(spec)
	if netID != "" {
		opts.HostConfig.NetworkMode = container.NetworkMode(netID) // the name may be ambiguous on old engines
		opts.Config.Env = p.sandboxEnvFrom(spec, opts.Name, subnet)
	}
	ref := sandbox.Ref{Provider: Name, ExternalID: opts.Name}
	if info, err := p.engine.ContainerInspect(ctx, opts.Name, client.ContainerInspectOptions{}); err == nil {
		if err := p.adoptClaim(ctx, spec, opts.Name, info); err != nil {
			return sandbox.Ref{}, err
		}
		return ref, p.ensureRunning(ctx, opts.Name)
	} else if !cerrdefs.IsNotFound(err) {
		return sandbox.Ref{}, fmt.Errorf("create docker sandbox %s: %w", opts.Name, err)
	}
	image, err := p.sessionImage(ctx, spec)
	if err != nil {
		return sandbox.Ref{}, fmt.Errorf("create docker sandbox %s: %w", opts.Name, err)
	}
	opts.Config.Image = image
	if err := p.ensureRunner(ctx, image); err != nil {
		return sandbox.Ref{}, fmt.Errorf("create docker sandbox %s: %w", opts.Name, err)
	}
	if p.pool != nil {
		if claimed, err := p.pool.claim(ctx, spec, opts.Name); err != nil || claimed {
			return ref, err
		}
	}
	if err := p.createWorkspace(ctx, volumeName(opts.Name), p.diskSize(spec), opts.Config.Labels); err != nil {
		return sandbox.Ref{}, fmt.Errorf("create docker sandbox %s: %w", opts.Name, err)
	}
	if _, err := p.engine.ContainerCreate(ctx, opts); err != nil {
		switch {
		case cerrdefs.IsConflict(err):
			// A concurrent Create of the same name won; adopt its container once the engine
			// shows it (it reserves the name before the container can be inspected).
			if err := p.awaitContainer(ctx, opts.Name); err != nil {
				return sandbox.Ref{}, err
			}
		case cerrdefs.IsNotFound(err):
			return sandbox.Ref{}, fmt.Errorf("create docker sandbox %s: image %s not found (run make sandbox-image, or set MANAGED_AGENT_DOCKER_IMAGE): %w", opts.Name, opts.Config.Image, err)
		default:
			return sandbox.Ref{}, fmt.Errorf("create docker sandbox %s: %w", opts.Name, err)
		}
	}
	return ref, p.ensureRunning(ctx, opts.Name)
}

// awaitContainer waits until a container another Create is making can be inspected.
func (p *Provider) awaitContainer(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		_, err := p.engine.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
		if err == nil {
			return nil
		}
		if !cerrdefs.IsNotFound(err) {
			return p.engineError("inspect", name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create docker sandbox %s: a concurrent create holds the name but made no container: %w", name, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// ensureRunning starts a created or stopped container; one already running is left as is.
func (p *Provider) ensureRunning(ctx context.Context, name string) error {
	info, err := p.engine.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		return p.engineError("inspect", name, err)
	}
	if info.Container.State != nil && info.Container.State.Running {
		return nil
	}
	if err := p.mountWorkspace(ctx, info.Container); err != nil {
		return err
	}
	if _, err := p.engine.ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
		// A concurrent start may have won; only a container that is still not running fails.
		if again, ierr := p.engine.ContainerInspect(ctx, name, client.ContainerInspectOptions{}); ierr == nil && again.Container.State != nil && again.Container.State.Running {
			return nil
		}
		return p.engineError("start", name, err)
	}
	return nil
}

// engineError wraps an engine error, marking a missing container ErrGone.
func (p *Provider) engineError(op, name string, err error) error {
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%s docker sandbox %s: %w", op, name, sandbox.ErrGone)
	}
	return fmt.Errorf("%s docker sandbox %s: %w", op, name, err)
}

// checkRef refuses references of other providers and ids this provider never makes, before
// the engine is asked: a tampered id must not name some other container.
func checkRef(ref sandbox.Ref) error { return sandbox.CheckRef(ref, Name, "docker sandbox id") }

// Attach returns the sandbox of an existing container, starting it if it was stopped (its
// workspace is kept); sandbox.ErrGone if it was removed. It never creates one.
func (p *Provider) Attach(ctx context.Context, ref sandbox.Ref) (sandbox.Sandbox, error) {
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	info, err := p.engine.ContainerInspect(ctx, ref.ExternalID, client.ContainerInspectOptions{})
	if err != nil {
		return nil, p.engineError("attach", ref.ExternalID, err)
	}
	if info.Container.Config == nil || info.Container.Config.Labels[LabelSandbox] == "" {
		return nil, fmt.Errorf("docker container %s is not a managed-agents sandbox: %w", ref.ExternalID, sandbox.ErrInvalidRef)
	}
	if err := p.ensureRunning(ctx, ref.ExternalID); err != nil {
		return nil, err
	}
	if err := p.reattachNetwork(ctx, info.Container); err != nil {
		return nil, fmt.Errorf("attach docker sandbox %s: %w", ref.ExternalID, err)
	}
	return p.box(ref.ExternalID)
}

// box is the sandbox of a running container: the client of its runner, which dials on the
// first call (an attach costs no exec).
func (p *Provider) box(name string) (*box, error) {
	client, err := sandboxd.Open("http://"+name, p.token, p.http, true)
	if err != nil {
		return nil, fmt.Errorf("attach docker sandbox %s: %w", name, err)
	}
	return &box{daemon: client.(daemon), p: p, name: name}, nil
}

// Destroy force-removes the container and its workspace volume. Either being gone already
// is not an error.
func (p *Provider) Destroy(ctx context.Context, ref sandbox.Ref) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	if _, err := p.engine.ContainerRemove(ctx, ref.ExternalID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("destroy docker sandbox %s: %w", ref.ExternalID, err)
	}
	if err := p.removeWorkspace(ctx, volumeName(ref.ExternalID), true); err != nil {
		return fmt.Errorf("destroy docker sandbox %s: %w", ref.ExternalID, err)
	}
	return errors.Join(p.destroyClaim(ctx, ref.ExternalID), p.removeNetwork(ctx, ref.ExternalID))
}
