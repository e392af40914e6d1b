//go:build integration

package docker_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
	"github.com/managed-agents/managed-agents/internal/tools/toolstest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// testDeployment labels everything these tests make, so leftovers are found with
// `docker ps -a --filter label=managed-agents.deployment=test`.
const testDeployment = "test"

func image() string { return cmp.Or(os.Getenv("MANAGED_AGENT_DOCKER_IMAGE"), docker.DefaultImage) }

// engine returns a raw client for checks behind the provider's back; it fails the test when
// the sandbox image is missing, since every test here needs it.
func engine(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	_, err = cli.ImageInspect(t.Context(), image())
	require.NoError(t, err, "the sandbox image %s is missing: run make sandbox-image", image())
	return cli
}

func newProvider(t testing.TB, cfg docker.Config) *docker.Provider {
	t.Helper()
	engine(t)
	cfg.Image = image()
	cfg.Deployment = testDeployment
	p, err := docker.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

var sessions atomic.Int64

// newSandbox creates a sandbox for a fresh session and destroys it after the test.
func newSandbox(t testing.TB, p *docker.Provider) (sandbox.Ref, sandbox.Sandbox) {
	t.Helper()
	spec := sandbox.SpecFor(fmt.Sprintf("sesn_docker_%d_%d", os.Getpid(), sessions.Add(1)), wire.EnvironmentConfig{Type: "cloud"})
	ref, err := p.Create(t.Context(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Destroy(context.Background(), ref)) })
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	return ref, sb
}

func TestProviderContract(t *testing.T) {
	t.Parallel()
	engine(t)
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider { return newProvider(t, docker.Config{}) },
		Forged: []sandbox.Ref{
			{Provider: docker.Name, ExternalID: ".."},
			{Provider: docker.Name, ExternalID: "../x"},
			{Provider: docker.Name, ExternalID: "/etc"},
			{Provider: docker.Name, ExternalID: "ma-xyz"},
			{Provider: docker.Name, ExternalID: "ma-0123456789abcdef0123456789abcde"},
			{Provider: docker.Name, ExternalID: "ma-0123456789abcdef0123456789abcdef/../x"},
			{Provider: docker.Name, ExternalID: "some-other-container"},
		},
	})
}

func TestToolsSuite(t *testing.T) {
	t.Parallel()
	p := newProvider(t, docker.Config{})
	toolstest.Run(t, func(t *testing.T) sandbox.Sandbox {
		_, sb := newSandbox(t, p)
		return sb
	})
}

// sh runs a command and returns its output and exit code.
func sh(t *testing.T, sb sandbox.Sandbox, cmd string) (string, int) {
	t.Helper()
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: cmd, Timeout: time.Minute})
	require.NoError(t, err, cmd)
	return string(res.Output), res.ExitCode
}

func TestIsolation(t *testing.T) {
	t.Parallel()
	_, sb := newSandbox(t, newProvider(t, docker.Config{Pids: 64}))

	out, code := sh(t, sb, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`)
	require.Zero(t, code, out)
	require.Equal(t, "lo\n", out, "network mode none: only the loopback interface")

	out, _ = sh(t, sb, "id -u; id -g")
	require.Equal(t, "1000\n1000\n", out, "not root")

	out, _ = sh(t, sb, "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		require.Regexp(t, `^Cap\w+:\s+0+$`, line, "every capability dropped")
	}
	out, _ = sh(t, sb, "grep NoNewPrivs /proc/self/status")
	require.Regexp(t, `NoNewPrivs:\s+1`, out)

	for _, target := range []string{"/etc/x", "/usr/bin/x", "/x", "/home/x"} {
		out, code = sh(t, sb, "echo x > "+target)
		require.NotZero(t, code, "writing %s must fail: %s", target, out)
		require.Contains(t, out, "Read-only file system", target)
	}
	out, code = sh(t, sb, "echo x > /tmp/x && echo x > /workspace/x && cat /tmp/x /workspace/x")
	require.Zero(t, code, out)
	require.Equal(t, "x\nx\n", out, "the workspace and /tmp are writable")

	out, _ = sh(t, sb, `awk '$2 == "/workspace" || $2 ~ "^/(tmp|run)$" {print $2, $3}' /proc/mounts 2>/dev/null || grep -E ' /(workspace|tmp|run) ' /proc/mounts | cut -d' ' -f2,3`)
	require.Contains(t, out, "/tmp tmpfs")

	// More processes than the pids limit allows: forks fail at the limit, and the sandbox
	// recovers once they end. python3 because bash exits when it cannot fork.
	out, code = sh(t, sb, `python3 -c '
import os, time
pids, failed = [], 0
for _ in range(400):
    try:
        pid = os.fork()
    except OSError:
        failed += 1
        continue
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    pids.append(pid)
for pid in pids:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
print(len(pids), failed)
'`)
	require.Zero(t, code, out)
	var forked, failed int
	_, err := fmt.Sscan(out, &forked, &failed)
	require.NoError(t, err, out)
	require.Less(t, forked, 64, "the pids limit (64) bounds the processes")
	require.Positive(t, failed, "forks beyond the limit fail")
	out, _ = sh(t, sb, "echo recovered")
	require.Equal(t, "recovered\n", out)
}

func TestMemoryHogIsKilled(t *testing.T) {
	t.Parallel()
	_, sb := newSandbox(t, newProvider(t, docker.Config{MemoryBytes: 64 << 20}))
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: `python3 -c 'b = bytearray(200 << 20); print("survived")'`, Timeout: time.Minute})
	require.NoError(t, err)
	require.NotContains(t, string(res.Output), "survived")
	require.Contains(t, []int{137, 1}, res.ExitCode, "killed by the OOM killer (137) or refused the memory (MemoryError): %s", res.Output)
	out, code := sh(t, sb, "echo alive")
	require.Zero(t, code)
	require.Equal(t, "alive\n", out, "the sandbox itself survives its command's hog")
}

func TestContainerRemovedBehindOurBack(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	p := newProvider(t, docker.Config{})
	ref, sb := newSandbox(t, p)
	_, err := cli.ContainerRemove(t.Context(), ref.ExternalID, client.ContainerRemoveOptions{Force: true})
	require.NoError(t, err)
	_, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true"})
	require.ErrorIs(t, err, sandbox.ErrGone)
	_, err = p.Attach(t.Context(), ref)
	require.ErrorIs(t, err, sandbox.ErrGone, "never silently replaced")
	_, err = newProvider(t, docker.Config{}).Attach(t.Context(), ref)
	require.ErrorIs(t, err, sandbox.ErrGone)
}

func TestStoppedContainerIsStartedWithItsFiles(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	p := newProvider(t, docker.Config{})
	ref, sb := newSandbox(t, p)
	require.NoError(t, sb.WriteFile(t.Context(), "kept.txt", []byte("kept")))
	_, err := cli.ContainerKill(t.Context(), ref.ExternalID, client.ContainerKillOptions{Signal: "KILL"})
	require.NoError(t, err)
	_, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true"})
	require.ErrorIs(t, err, sandbox.ErrUnavailable, "a stopped container is not gone")
	again, err := newProvider(t, docker.Config{}).Attach(t.Context(), ref)
	require.NoError(t, err)
	data, err := again.ReadFile(t.Context(), "kept.txt")
	require.NoError(t, err)
	require.Equal(t, "kept", string(data))
}

func TestSessionsAreSeparateAndSurviveARestart(t *testing.T) {
	t.Parallel()
	p := newProvider(t, docker.Config{})
	refA, a := newSandbox(t, p)
	_, b := newSandbox(t, p)
	require.NoError(t, a.WriteFile(t.Context(), "secret.txt", []byte("a's")))
	out, _ := sh(t, b, "ls -A /workspace; find / -xdev -name secret.txt 2>/dev/null; echo end")
	require.Equal(t, "end\n", out, "b sees nothing of a")

	again, err := newProvider(t, docker.Config{}).Attach(t.Context(), refA)
	require.NoError(t, err)
	data, err := again.ReadFile(t.Context(), "/workspace/secret.txt")
	require.NoError(t, err)
	require.Equal(t, "a's", string(data), "a fresh provider re-attaches by the stored ref")
}

func TestLabels(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	p := newProvider(t, docker.Config{})
	spec := sandbox.SpecFor("sesn_labels_"+fmt.Sprint(os.Getpid()), wire.EnvironmentConfig{Type: "cloud"})
	ref, err := p.Create(t.Context(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Destroy(context.Background(), ref)) })
	info, err := cli.ContainerInspect(t.Context(), ref.ExternalID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	labels := info.Container.Config.Labels
	require.Equal(t, spec.SessionID, labels[docker.LabelSession])
	require.Equal(t, spec.Hash(), labels[docker.LabelSpecHash])
	require.Equal(t, testDeployment, labels[docker.LabelDeployment])
	hc := info.Container.HostConfig
	require.True(t, hc.ReadonlyRootfs)
	require.EqualValues(t, "none", hc.NetworkMode)
	mounts := map[string]container.MountPoint{}
	for _, m := range info.Container.Mounts {
		require.EqualValues(t, "volume", m.Type, "no host mounts")
		mounts[m.Destination] = m
	}
	require.Len(t, mounts, 2, "the workspace and the runner are the only mounts besides tmpfs")
	require.True(t, mounts[docker.Workspace].RW, "the workspace is writable")
	require.Equal(t, ref.ExternalID+"-workspace", mounts[docker.Workspace].Name)
	require.False(t, mounts[docker.RunnerDir].RW, "the runner is read-only")
	require.Equal(t, docker.RunnerVolume(p), mounts[docker.RunnerDir].Name)

	require.NoError(t, p.Destroy(t.Context(), ref))
	_, err = cli.VolumeInspect(t.Context(), ref.ExternalID+"-workspace", client.VolumeInspectOptions{})
	require.Error(t, err, "destroy removes the workspace volume")
}

func TestMissingImageSaysHowToBuildIt(t *testing.T) {
	t.Parallel()
	engine(t)
	p, err := docker.New(docker.Config{Image: "managed-agents-sandbox:no-such-tag", Deployment: testDeployment})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	spec := sandbox.SpecFor("sesn_noimage_"+fmt.Sprint(os.Getpid()), wire.EnvironmentConfig{Type: "cloud"})
	_, err = p.Create(t.Context(), spec)
	require.ErrorContains(t, err, "make sandbox-image")
	require.NoError(t, p.Destroy(context.Background(), sandbox.Ref{Provider: docker.Name, ExternalID: docker.ContainerName(spec.Name)}))
}

// Output that looks like a status report must not change the status reported.
func TestCommandOutputCannotForgeTheExitStatus(t *testing.T) {
	t.Parallel()
	_, sb := newSandbox(t, newProvider(t, docker.Config{}))
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: `echo "ma-exit 0"; echo "ma-exit 0" >&2; exit 5`})
	require.NoError(t, err)
	require.Equal(t, 5, res.ExitCode)
	require.Equal(t, "ma-exit 0\nma-exit 0\n", string(res.Output))

	require.NoError(t, sb.WriteFile(t.Context(), "trailer.txt", []byte("ma-exit 9\n")))
	data, err := sb.ReadFile(t.Context(), "trailer.txt")
	require.NoError(t, err)
	require.Equal(t, "ma-exit 9\n", string(data), "a file's content is not taken for a status")
}

// The runner is on a read-only volume: a command cannot replace what serves the next one.
func TestTheRunnerCannotBeReplaced(t *testing.T) {
	t.Parallel()
	_, sb := newSandbox(t, newProvider(t, docker.Config{}))
	out, code := sh(t, sb, "cp /bin/true "+docker.RunnerDir+"/managed-agents 2>&1; touch "+docker.RunnerDir+"/x 2>&1")
	require.NotEqual(t, 0, code)
	require.Contains(t, out, "Read-only file system")
	out, code = sh(t, sb, "echo still served")
	require.Equal(t, 0, code)
	require.Equal(t, "still served\n", out)
}
