package docker

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"golang.org/x/sync/singleflight"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/packages"
)

// The packages of an environment are installed once per engine into an image of their own
// (EnvImageRepo:<key>), from a dedicated build container that never holds a workspace; every
// session of the environment then starts from that image. The key covers only what decides
// the image's content: the base image's id (a rebuilt base makes new environment images) and
// the package lists. Network, resources and variables do not change what is installed, so
// environments that differ only in those share one image.
//
// The build container runs as root with the engine's default capabilities (apt needs them);
// session containers never do. Its network is the one the session's sandbox gets (buildNet):
// none, the deployment's network, or under a hosts policy a network of its own whose only
// way out is the egress proxy, with the policy's hosts (the package registries among them
// when the environment allows package managers).

// EnvImageRepo is the repository of the environment images.
const EnvImageRepo = "managed-agents-env"

// Labels of environment images and their build containers.
const (
	LabelEnvKey  = "managed-agents.env-key"
	LabelEnvBase = "managed-agents.env-base"
)

// DefaultPackageTimeout bounds the install of one environment's packages.
const DefaultPackageTimeout = 5 * time.Minute

// envKey is the key of the environment image of packages on the base image of that id.
func envKey(baseID string, pkgs map[string][]string) string {
	h := sha256.New()
	fmt.Fprintf(h, "v1 base=%q\n", baseID)
	for _, m := range slices.Sorted(maps.Keys(pkgs)) {
		fmt.Fprintf(h, "packages %q %q\n", m, pkgs[m])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// ErrPackages marks a failed install of an environment's packages: permanent (retrying runs
// the same installer on the same input), and its message carries the installer's output.
var ErrPackages = fmt.Errorf("%w: installing the environment's packages failed", sandbox.ErrSetup)

// sessionImage is the image a spec's sandbox starts from: the base image when the spec has no
// packages, else its environment image, built first if this engine has none.
func (p *Provider) sessionImage(ctx context.Context, spec sandbox.Spec) (string, error) {
	base := p.baseImage(spec)
	if len(spec.Packages) == 0 {
		return base, nil
	}
	if err := packages.Check(spec.Packages, packages.System); err != nil {
		return "", fmt.Errorf("%w: %w", ErrPackages, err)
	}
	info, err := p.engine.ImageInspect(ctx, base)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("image %s not found (run make sandbox-image, or set MANAGED_AGENT_DOCKER_IMAGE): %w", base, err)
		}
		return "", fmt.Errorf("inspect image %s: %w", base, err)
	}
	key := envKey(info.ID, spec.Packages)
	tag := EnvImageRepo + ":" + key
	// One build per key and network in this process; across processes the build
	// container's name is the lock (see build). The image is shared by every network, but a
	// build's outcome is not: an install that failed without network says nothing about one
	// with it, and its output (the proxy's refusals name hosts) belongs to that policy.
	flight := key + " " + spec.Egress.Mode + " " + strings.Join(spec.Egress.Hosts, ",")
	if err := p.builds.failed(flight); err != nil {
		return "", err
	}
	// the build outlives a canceled caller: the next session of the environment finds it.
	_, err, _ = p.builds.group.Do(flight, func() (any, error) {
		err := p.ensureEnvImage(context.WithoutCancel(ctx), base, key, tag, spec.Packages, spec.Egress)
		if errors.Is(err, ErrPackages) {
			p.builds.fail(flight, err)
		}
		return nil, err
	})
	if err != nil {
		return "", err
	}
	return tag, nil
}

// failedBuildFor is how long a failed install is remembered: a retried acquisition, the
// teardown of the session (which creates to adopt) and the environment's next sessions fail
// at once with its output instead of running the installer again, up to its timeout.
const failedBuildFor = 10 * time.Minute

// envBuilds runs one build per environment image key at a time and remembers the installs
// that failed.
type envBuilds struct {
	group singleflight.Group
	mu    sync.Mutex
	fails map[string]failedBuild
}

type failedBuild struct {
	err error
	at  time.Time
}

func (b *envBuilds) fail(key string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fails == nil {
		b.fails = map[string]failedBuild{}
	}
	for k, f := range b.fails {
		if time.Since(f.at) > failedBuildFor {
			delete(b.fails, k)
		}
	}
	b.fails[key] = failedBuild{err: err, at: time.Now()}
}

func (b *envBuilds) failed(key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.fails[key]
	if !ok || time.Since(f.at) > failedBuildFor {
		return nil
	}
	return fmt.Errorf("%w (the same install failed %s ago; it is tried again %s after that)", f.err, time.Since(f.at).Round(time.Second), failedBuildFor)
}

// ensureEnvImage builds the environment image unless it exists. Concurrent first sessions
// of one environment on different workers do not both build: the build container's name
// derives from the key, so the second one's create conflicts and it waits for the image
// (or, if that build fails or disappears, builds itself).
func (p *Provider) ensureEnvImage(ctx context.Context, base, key, tag string, pkgs map[string][]string, eg sandbox.Egress) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.PackageTimeout+time.Minute)
	defer cancel()
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		if _, err := p.engine.ImageInspect(ctx, tag); err == nil {
			return nil
		} else if !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("inspect image %s: %w", tag, err)
		}
		err := p.build(ctx, base, key, tag, pkgs, eg)
		if !errors.Is(err, errBuildBusy) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for another worker's build of %s: %w", tag, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// buildStartGrace is how long a build container may sit created but not started before
// another worker takes it for a crashed worker's.
const buildStartGrace = 30 * time.Second

// errBuildBusy means another worker is building the same image right now.
var errBuildBusy = errors.New("another build of this environment image runs")

// buildName is the build container of an environment image key.
func buildName(key string) string { return "ma-build-" + key }

// build installs packages in a fresh container of base, manager by manager in alphabetical
// order, and commits the result as tag. The container is removed whatever happens.
func (p *Provider) build(ctx context.Context, base, key, tag string, pkgs map[string][]string, eg sandbox.Egress) error {
	name := buildName(key)
	pids := max(p.cfg.Pids, 1024) // installers fork compilers and scripts freely
	netMode, env, err := p.buildNet(ctx, name, eg)
	if err != nil {
		return fmt.Errorf("the network of the package build of %s: %w", tag, err)
	}
	if eg.Mode == sandbox.EgressHosts {
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = p.removeNetwork(rctx, name)
		}()
	}
	_, err = p.engine.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image: base,
			User:  "0:0",
			Env:   env,
			// No labels: a commit keeps the container's, and the image must not carry a
			// deployment's. The name says what it is.
		},
		HostConfig: &container.HostConfig{
			NetworkMode: netMode,
			SecurityOpt: []string{"no-new-privileges"},
			Runtime:     p.cfg.Runtime,
			LogConfig:   container.LogConfig{Type: "none"},
			Resources:   container.Resources{NanoCPUs: int64(p.cfg.CPUs * 1e9), Memory: p.cfg.MemoryBytes, MemorySwap: p.cfg.MemoryBytes, PidsLimit: &pids},
		},
	})
	if cerrdefs.IsConflict(err) {
		return p.busyOrStale(ctx, name)
	}
	if err != nil {
		return fmt.Errorf("create the package build container of %s: %w", tag, err)
	}
	defer func() {
		// Not the caller's context: a canceled or timed-out install still gets cleaned up.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_, _ = p.engine.ContainerRemove(rctx, name, client.ContainerRemoveOptions{Force: true})
	}()
	if _, err := p.engine.ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start the package build container of %s: %w", tag, err)
	}
	deadline := time.Now().Add(p.cfg.PackageTimeout)
	for _, m := range packages.Managers(pkgs) {
		code, out, err := p.runAsRoot(ctx, name, time.Until(deadline), packages.Command(packages.System, m, pkgs[m]))
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return fmt.Errorf("%w: installing the %s packages took longer than %s; the installer's output ends with:\n%s", ErrPackages, m, p.cfg.PackageTimeout, out)
		case err != nil:
			return fmt.Errorf("install the %s packages: %w", m, err)
		case code != 0:
			return fmt.Errorf("%w: the %s installer exited with status %d; its output ends with:\n%s", ErrPackages, m, code, out)
		}
	}
	_, err = p.engine.ContainerCommit(ctx, name, client.ContainerCommitOptions{
		Reference: tag,
		Comment:   "managed-agents environment packages",
		Changes:   []string{fmt.Sprintf("LABEL %s=%s %s=%q", LabelEnvKey, key, LabelEnvBase, base)},
	})
	if err != nil {
		return fmt.Errorf("commit the environment image %s: %w", tag, err)
	}
	return nil
}

// busyOrStale handles a build container that exists already: one running is another
// worker's build (wait for it); one left behind by a crashed build is removed, so the next
// attempt builds.
func (p *Provider) busyOrStale(ctx context.Context, name string) error {
	info, err := p.engine.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return errBuildBusy
	}
	if err != nil {
		return fmt.Errorf("inspect build container %s: %w", name, err)
	}
	started, _ := time.Parse(time.RFC3339Nano, info.Container.Created)
	running := info.Container.State != nil && info.Container.State.Running
	// A container another worker has just created is not started yet: removing it would
	// fail that worker's start ("marked for removal"). Only one left in "created" for long,
	// or exited, is a crashed worker's.
	starting := info.Container.State != nil && info.Container.State.Status == container.StateCreated && time.Since(started) < buildStartGrace
	if (!running && !starting) || time.Since(started) > p.cfg.PackageTimeout+time.Minute {
		if _, err := p.engine.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove stale build container %s: %w", name, err)
		}
	}
	return errBuildBusy
}

// runAsRoot runs cmd as root in the build container name (sessions never run anything as root) and returns its exit status and the tail of its combined output. A
// command still running after timeout fails with context.DeadlineExceeded; the caller
// removes the container, which ends it.
func (p *Provider) runAsRoot(ctx context.Context, name string, timeout time.Duration, cmd []string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	created, err := p.engine.ExecCreate(ctx, name, client.ExecCreateOptions{User: "0:0", WorkingDir: "/", Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return 0, "", execError(name, err)
	}
	attach, err := p.engine.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return 0, "", execError(name, err)
	}
	defer attach.Close()
	tail := &packages.Tail{}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(tail, tail, attach.Reader)
		copied <- err
	}()
	select {
	case err = <-copied:
	case <-ctx.Done():
		attach.Close()
		<-copied
		return 0, tail.String(), ctx.Err()
	}
	if err != nil {
		return 0, tail.String(), fmt.Errorf("read the installer's output: %w", err)
	}
	info, err := p.engine.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
	if err != nil {
		return 0, tail.String(), fmt.Errorf("inspect the installer's exit: %w", err)
	}
	return info.ExitCode, tail.String(), nil
}

// baseImage is the image a spec names, or the deployment's.
func (p *Provider) baseImage(spec sandbox.Spec) string { return cmp.Or(spec.Image, p.cfg.Image) }

// buildNet is the network mode and environment of a package build container: the network
// the session's sandbox gets, so an installer reaches what the sandbox may reach and no more.
func (p *Provider) buildNet(ctx context.Context, name string, eg sandbox.Egress) (container.NetworkMode, []string, error) {
	env := []string{"PATH=" + containerPath, "HOME=/root", "LANG=C.UTF-8"}
	switch eg.Mode {
	case sandbox.EgressFull:
		return container.NetworkMode(p.cfg.Net.Network), env, nil
	case sandbox.EgressHosts:
		spec := sandbox.Spec{Name: name, Egress: eg}
		netID, subnet, err := p.prepareNetwork(ctx, spec, name)
		if err != nil {
			return "", nil, err
		}
		pe := p.proxyEnv(spec, name, subnet)
		for _, k := range slices.Sorted(maps.Keys(pe)) {
			env = append(env, k+"="+pe[k])
		}
		return container.NetworkMode(netID), env, nil
	}
	return "none", env, nil
}
