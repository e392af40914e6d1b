//go:build integration

package docker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// fakeManagers stands in for every package manager (there is no internet here): it records
// each run, with a nonce no other run has, in /var/lib/fake-managers/log, marks each
// package installed, and fails on packages named fail-* (printing like apt does) and hangs
// on slow-*. Two sessions that show the same log lines ran on one install.
const fakeManagers = `#!/bin/sh
m=$(basename "$0")
echo "$m $* nonce=$(cat /proc/sys/kernel/random/uuid)" >> /var/lib/fake-managers/log
for a; do
	case $a in
	fail-*) echo "E: Unable to locate package $a"; echo "fake $m: giving up" >&2; exit 100 ;;
	slow-*) sleep 600 ;;
	netinfo-*) { ls /sys/class/net | tr '\n' ' '; [ -n "$HTTPS_PROXY" ] && echo proxy=set || echo proxy=unset; } > "/var/lib/fake-managers/installed/$m-$a" ;;
	-*|install|update) ;;
	*) touch "/var/lib/fake-managers/installed/$m-$(echo "$a" | tr / _)" ;;
	esac
done
echo "fake $m: done"
`

const (
	fakeImage     = "managed-agents-sandbox:test-fake-managers"
	fakeHashLabel = "managed-agents.test-fake-managers"
)

var fakeOnce sync.Once

// fakeManagerImage builds (once per run) the sandbox image with fake managers in
// /usr/local/bin, which comes first on the sandbox's PATH.
func fakeManagerImage(t *testing.T) string {
	t.Helper()
	cli := engine(t)
	fakeOnce.Do(func() {
		ctx := context.Background()
		// Current when made from this base image with this script: no rebuild, no dangling
		// images left by every run.
		base, err := cli.ImageInspect(ctx, image())
		require.NoError(t, err)
		sum := sha256.Sum256([]byte(base.ID + fakeManagers))
		want := hex.EncodeToString(sum[:16])
		if info, err := cli.ImageInspect(ctx, fakeImage); err == nil && info.Config != nil && info.Config.Labels[fakeHashLabel] == want {
			return
		}
		name := fmt.Sprintf("ma-test-fake-managers-%d", os.Getpid())
		_, err = cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: &container.Config{Image: image(), User: "0:0"},
			HostConfig: &container.HostConfig{NetworkMode: "none"}})
		require.NoError(t, err)
		defer func() { _, _ = cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true}) }()
		_, err = cli.ContainerStart(ctx, name, client.ContainerStartOptions{})
		require.NoError(t, err)
		script := `mkdir -p /var/lib/fake-managers/installed && chmod -R a+rwX /var/lib/fake-managers &&
cat > /usr/local/bin/fake-manager && chmod 755 /usr/local/bin/fake-manager &&
for m in apt-get cargo gem go npm pip; do ln -sf fake-manager /usr/local/bin/$m; done`
		run := rootExec(t, cli, name, script, fakeManagers)
		require.Zero(t, run.code, run.out)
		_, err = cli.ContainerCommit(ctx, name, client.ContainerCommitOptions{Reference: fakeImage, Changes: []string{"LABEL " + fakeHashLabel + "=" + want}})
		require.NoError(t, err)
	})
	return fakeImage
}

type execOutcome struct {
	code int
	out  string
}

// rootExec runs a script as root in a container behind the provider's back, stdin given.
func rootExec(t *testing.T, cli *client.Client, ctr, script, stdin string) execOutcome {
	t.Helper()
	ctx := t.Context()
	created, err := cli.ExecCreate(ctx, ctr, client.ExecCreateOptions{User: "0:0", Cmd: []string{"sh", "-c", script}, AttachStdin: true, AttachStdout: true, AttachStderr: true})
	require.NoError(t, err)
	att, err := cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	require.NoError(t, err)
	defer att.Close()
	_, err = att.Conn.Write([]byte(stdin))
	require.NoError(t, err)
	require.NoError(t, att.CloseWrite())
	var out strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := att.Reader.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			break
		}
	}
	info, err := cli.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
	require.NoError(t, err)
	return execOutcome{code: info.ExitCode, out: out.String()}
}

var pkgRuns atomic.Int64

// unique is a package name no earlier run of these tests used, so its environment image is
// not cached from before.
func unique(prefix string) string {
	return fmt.Sprintf("%s%d-%d-%d", prefix, os.Getpid(), time.Now().UnixNano(), pkgRuns.Add(1))
}

// newFakeProvider is a provider on the image with fake package managers.
func newFakeProvider(t *testing.T, cfg docker.Config) *docker.Provider {
	t.Helper()
	cfg.Image = fakeManagerImage(t)
	cfg.Deployment = testDeployment
	p, err := docker.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// packagesSpec is a new session's spec of an environment with those packages.
func packagesSpec(p wire.Packages) sandbox.Spec {
	return sandbox.SpecFor(fmt.Sprintf("sesn_pkg_%d_%d", os.Getpid(), sessions.Add(1)), wire.EnvironmentConfig{Type: "cloud", Packages: &p})
}

// createPackaged creates a sandbox for spec and destroys it (and, at the end, the
// environment image it started from) after the test.
func createPackaged(t *testing.T, p *docker.Provider, spec sandbox.Spec) (sandbox.Ref, sandbox.Sandbox) {
	t.Helper()
	cli := engine(t)
	ref, err := p.Create(t.Context(), spec)
	require.NoError(t, err)
	info, err := cli.ContainerInspect(t.Context(), ref.ExternalID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, p.Destroy(context.Background(), ref))
		// Fails while another session of the environment still uses the image: its
		// cleanup removes it then.
		if img := info.Container.Config.Image; strings.HasPrefix(img, docker.EnvImageRepo+":") {
			_, _ = cli.ImageRemove(context.Background(), img, client.ImageRemoveOptions{})
		}
	})
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	return ref, sb
}

func imageOf(t *testing.T, ref sandbox.Ref) string {
	t.Helper()
	info, err := engine(t).ContainerInspect(t.Context(), ref.ExternalID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	return info.Container.Config.Image
}

func TestPackagesAreInstalledOnceAndCached(t *testing.T) {
	t.Parallel()
	p := newFakeProvider(t, docker.Config{})
	pkgs := wire.Packages{Pip: []string{unique("requests-") + "==2.31.0"}}
	first := packagesSpec(pkgs)
	refA, a := createPackaged(t, p, first)
	logA, code := sh(t, a, "cat /var/lib/fake-managers/log")
	require.Zero(t, code, logA)
	require.Equal(t, 1, strings.Count(logA, "\n"), "one install: %s", logA)
	require.Contains(t, logA, "pip install --no-cache-dir "+pkgs.Pip[0]+" nonce=", "the manager's own pinning syntax, as given")
	out, code := sh(t, a, "ls /var/lib/fake-managers/installed; id -u")
	require.Zero(t, code, out)
	require.Equal(t, "pip-"+pkgs.Pip[0]+"\n1000\n", out, "installed, and the session still runs as the sandbox user")
	require.True(t, strings.HasPrefix(imageOf(t, refA), docker.EnvImageRepo+":"))

	// The second session of the environment, from a fresh provider (another worker), starts
	// from the cached image: the log is the first install's, nonce and all.
	second := packagesSpec(pkgs)
	refB, b := createPackaged(t, newFakeProvider(t, docker.Config{}), second)
	logB, _ := sh(t, b, "cat /var/lib/fake-managers/log")
	require.Equal(t, logA, logB, "the installer did not run again")
	require.Equal(t, imageOf(t, refA), imageOf(t, refB))
	_, err := b.ReadFile(t.Context(), "anything")
	require.ErrorIs(t, err, sandbox.ErrNotExist, "the cached image carries no workspace")

	// Another package set is another image, installed on its own.
	other := packagesSpec(wire.Packages{Pip: []string{pkgs.Pip[0], unique("numpy-")}})
	refC, c := createPackaged(t, p, other)
	require.NotEqual(t, imageOf(t, refA), imageOf(t, refC))
	logC, _ := sh(t, c, "cat /var/lib/fake-managers/log")
	require.Equal(t, 1, strings.Count(logC, "\n"))
	require.NotEqual(t, logA, logC)
}

func TestPackageManagersRunInAlphabeticalOrder(t *testing.T) {
	t.Parallel()
	p := newFakeProvider(t, docker.Config{})
	tag := unique("")
	_, sb := createPackaged(t, p, packagesSpec(wire.Packages{
		Pip: []string{"pandas-" + tag}, Npm: []string{"express@4.18.0"}, Go: []string{"golang.org/x/tools/cmd/goimports@latest"},
		Gem: []string{"rails:7.1.0"}, Cargo: []string{"hyperfine@1.18.0"}, Apt: []string{"jq=1.6-2.1"},
	}))
	out, code := sh(t, sb, `sed 's/ nonce=.*//' /var/lib/fake-managers/log`)
	require.Zero(t, code, out)
	require.Equal(t, strings.Join([]string{
		"apt-get update",
		"apt-get install -y --no-install-recommends jq=1.6-2.1",
		"cargo install --root /usr/local hyperfine@1.18.0",
		"gem install --no-document rails:7.1.0",
		"go install golang.org/x/tools/cmd/goimports@latest",
		"npm install -g express@4.18.0",
		"pip install --no-cache-dir pandas-" + tag,
	}, "\n")+"\n", out)
}

func TestConcurrentFirstSessionsBuildOnce(t *testing.T) {
	t.Parallel()
	pkgs := wire.Packages{Npm: []string{unique("left-pad@")}}
	cli := engine(t)
	const n = 3
	logs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		// One provider each: workers that share nothing but the engine.
		p := newFakeProvider(t, docker.Config{})
		spec := packagesSpec(pkgs)
		wg.Go(func() {
			ref, err := p.Create(t.Context(), spec)
			if err != nil {
				errs[i] = err
				return
			}
			sb, err := p.Attach(t.Context(), ref)
			if err != nil {
				errs[i] = err
				return
			}
			res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "cat /var/lib/fake-managers/log"})
			logs[i], errs[i] = string(res.Output), err
		})
		t.Cleanup(func() {
			ref := sandbox.Ref{Provider: docker.Name, ExternalID: docker.ContainerName(spec.Name)}
			info, err := cli.ContainerInspect(context.Background(), ref.ExternalID, client.ContainerInspectOptions{})
			require.NoError(t, p.Destroy(context.Background(), ref))
			if err == nil && i == 0 {
				_, _ = cli.ImageRemove(context.Background(), info.Container.Config.Image, client.ImageRemoveOptions{})
			}
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
	}
	require.Equal(t, 1, strings.Count(logs[0], "\n"), logs[0])
	for i := range n {
		require.Equal(t, logs[0], logs[i], "one build served every first session")
	}
}

func TestPackageFailureShowsTheInstallersOutput(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	p := newFakeProvider(t, docker.Config{})
	bad := unique("fail-")
	spec := packagesSpec(wire.Packages{Apt: []string{"curl"}, Pip: []string{bad}})
	_, err := p.Create(t.Context(), spec)
	require.ErrorIs(t, err, sandbox.ErrSetup)
	require.ErrorIs(t, err, docker.ErrPackages)
	require.ErrorContains(t, err, "the pip installer exited with status 100")
	require.ErrorContains(t, err, "E: Unable to locate package "+bad)
	require.ErrorContains(t, err, "fake pip: giving up", "stderr too")
	_, err = cli.ContainerInspect(t.Context(), docker.ContainerName(spec.Name), client.ContainerInspectOptions{})
	require.True(t, cerrdefs.IsNotFound(err), "no session container made")
	base, err := cli.ImageInspect(t.Context(), fakeManagerImage(t))
	require.NoError(t, err)
	_, err = cli.ContainerInspect(t.Context(), docker.BuildContainer(base.ID, spec.Packages), client.ContainerInspectOptions{})
	require.True(t, cerrdefs.IsNotFound(err), "the build container is removed")
	require.NoError(t, p.Destroy(t.Context(), sandbox.Ref{Provider: docker.Name, ExternalID: docker.ContainerName(spec.Name)}))

	// The retry (or the teardown's create, or the environment's next session) fails at once
	// with the same output: the installer does not run again.
	again := packagesSpec(wire.Packages{Apt: []string{"curl"}, Pip: []string{bad}})
	_, err = p.Create(t.Context(), again)
	require.ErrorIs(t, err, docker.ErrPackages)
	require.ErrorContains(t, err, "E: Unable to locate package "+bad)
	require.ErrorContains(t, err, "the same install failed")
}

func TestPackageInstallTimesOut(t *testing.T) {
	t.Parallel()
	p := newFakeProvider(t, docker.Config{PackageTimeout: 2 * time.Second})
	spec := packagesSpec(wire.Packages{Gem: []string{unique("slow-")}})
	_, err := p.Create(t.Context(), spec)
	require.ErrorIs(t, err, docker.ErrPackages)
	require.ErrorContains(t, err, "installing the gem packages took longer than 2s")
	require.ErrorContains(t, err, "ma-install: gem")
	require.NoError(t, p.Destroy(t.Context(), sandbox.Ref{Provider: docker.Name, ExternalID: docker.ContainerName(spec.Name)}))
}

func TestMissingManagerIsNamed(t *testing.T) {
	t.Parallel()
	engine(t)
	p, err := docker.New(docker.Config{Image: image(), Deployment: testDeployment}) // the plain image has no pip
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	spec := packagesSpec(wire.Packages{Pip: []string{unique("six-")}})
	_, err = p.Create(t.Context(), spec)
	require.ErrorIs(t, err, docker.ErrPackages)
	require.ErrorContains(t, err, "pip is not installed in the sandbox image")
}

func TestBadPackageSpecsAreRefused(t *testing.T) {
	t.Parallel()
	p := newFakeProvider(t, docker.Config{})
	for bad, why := range map[string]string{
		"--index-url=http://evil": "must not start with '-'",
		"two words":               "must not hold spaces or control characters",
		"a\nb":                    "must not hold spaces or control characters",
	} {
		spec := packagesSpec(wire.Packages{Pip: []string{bad}})
		_, err := p.Create(t.Context(), spec)
		require.ErrorIs(t, err, sandbox.ErrSetup, bad)
		require.ErrorContains(t, err, why)
	}
}

// fixedSpec is the spec source of one session.
type fixedSpec struct{ spec sandbox.Spec }

func (f fixedSpec) SandboxSpec(context.Context, string) (sandbox.Spec, error) { return f.spec, nil }

// Through the Manager, as the worker acquires: the error the session.error is made of keeps
// the installer's output and is a setup failure (which the workflow does not retry).
func TestPackageFailureThroughTheManager(t *testing.T) {
	t.Parallel()
	p := newFakeProvider(t, docker.Config{})
	registry, err := sandbox.NewRegistry(p)
	require.NoError(t, err)
	bad := unique("fail-")
	spec := packagesSpec(wire.Packages{Npm: []string{bad}})
	bindings := sandboxtest.NewBindings()
	m := sandbox.NewManager(registry, bindings, fixedSpec{spec})
	_, err = m.Acquire(t.Context(), spec.SessionID)
	require.ErrorIs(t, err, sandbox.ErrSetup)
	// The installer's stdout and stderr reach the engine through separate pipes: their lines
	// may interleave either way.
	require.ErrorContains(t, err, "the npm installer exited with status 100; its output ends with:\n")
	require.ErrorContains(t, err, "\nma-install: npm "+bad+"\n")
	require.ErrorContains(t, err, "\nE: Unable to locate package "+bad)
	require.ErrorContains(t, err, "\nfake npm: giving up")
	require.NoError(t, m.Teardown(t.Context(), spec.SessionID), "nothing to destroy, and the session's delete can finish")
	_, err = bindings.Binding(t.Context(), spec.SessionID)
	require.ErrorIs(t, err, sandbox.ErrNoBinding)
}

// The installer gets the network its session's sandbox gets: none by default, and under a
// hosts policy an interface on a network of its own and the egress proxy's variables (so
// allow_package_managers works through the proxy, and nothing else is reachable).
func TestPackageBuildGetsTheSandboxsNetwork(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	_, err := cli.ImageInspect(t.Context(), proxyImage())
	require.NoError(t, err, "the egress proxy image %s is missing: run make egress-image", proxyImage())
	deployment := fmt.Sprintf("test-pkgnet-%d", os.Getpid())
	p, err := docker.New(docker.Config{Image: fakeManagerImage(t), Deployment: deployment})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = p.Close()
		_, _ = cli.ContainerRemove(context.Background(), "ma-egress-"+deployment, client.ContainerRemoveOptions{Force: true})
	})

	none := packagesSpec(wire.Packages{Pip: []string{unique("netinfo-")}})
	_, a := createPackaged(t, p, none)
	out, code := sh(t, a, "cat /var/lib/fake-managers/installed/pip-"+none.Packages["pip"][0])
	require.Zero(t, code, out)
	require.Equal(t, "lo proxy=unset\n", out, "no network for the installer under the none policy")

	hosts := packagesSpec(wire.Packages{Pip: []string{unique("netinfo-")}})
	hosts.Egress = sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{"pypi.org"}}
	_, b := createPackaged(t, p, hosts)
	out, code = sh(t, b, "cat /var/lib/fake-managers/installed/pip-"+hosts.Packages["pip"][0])
	require.Zero(t, code, out)
	require.Contains(t, out, "eth0", "an interface on the build's own network")
	require.Contains(t, out, "proxy=set", "the egress proxy's variables")

	nets, err := cli.NetworkList(t.Context(), client.NetworkListOptions{})
	require.NoError(t, err)
	for _, n := range nets.Items {
		require.False(t, strings.HasPrefix(n.Name, "ma-build-"), "the build's network is removed with it: %s", n.Name)
	}
}
