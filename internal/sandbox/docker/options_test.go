package docker_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/mount"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/egress"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// The container settings are checked here without an engine; the integration tests check
// that a real engine applies them. A runtime such as runsc cannot run here, so this is where
// MANAGED_AGENT_DOCKER_RUNTIME is proven to reach the container.
func TestCreateOptions(t *testing.T) {
	t.Parallel()
	p, err := docker.New(docker.Config{DiskBytes: docker.DiskUnbounded, Image: "img:1", CPUs: 0.5, MemoryBytes: 64 << 20, Pids: 100, Runtime: "runsc", Deployment: "prod-eu"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	spec := sandbox.SpecFor("sesn_01", wire.EnvironmentConfig{Type: "cloud"})
	spec.Env = map[string]string{"FOO": "bar", "LANG": "C"}
	opts := p.CreateOptions(spec)

	require.Equal(t, spec.Name, opts.Name, "a NameFor name is the container name as is")
	require.Equal(t, "img:1", opts.Config.Image)
	require.Equal(t, "1000:1000", opts.Config.User)
	require.Equal(t, "/workspace", opts.Config.WorkingDir)
	require.Equal(t, []string{"FOO=bar", "HOME=/workspace", "LANG=C", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, opts.Config.Env)
	require.Equal(t, map[string]string{
		docker.LabelSandbox:    spec.Name,
		docker.LabelSession:    "sesn_01",
		docker.LabelSpecHash:   spec.Hash(),
		docker.LabelDeployment: "prod-eu",
	}, opts.Config.Labels)

	hc := opts.HostConfig
	require.Equal(t, "runsc", hc.Runtime)
	require.EqualValues(t, "none", hc.NetworkMode)
	require.True(t, hc.ReadonlyRootfs)
	require.Equal(t, []string{"ALL"}, hc.CapDrop)
	require.Equal(t, []string{"no-new-privileges"}, hc.SecurityOpt)
	require.False(t, hc.Privileged)
	require.Empty(t, hc.Binds, "no host mounts")
	require.Equal(t, []mount.Mount{
		{Type: mount.TypeVolume, Source: spec.Name + "-workspace", Target: "/workspace"},
		{Type: mount.TypeVolume, Source: docker.RunnerVolume(p), Target: docker.RunnerDir, ReadOnly: true, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
	}, hc.Mounts, "the workspace and the read-only runner, nothing of the host")
	require.ElementsMatch(t, []string{"/tmp", "/run"}, keys(hc.Tmpfs))
	require.Equal(t, int64(5e8), hc.NanoCPUs)
	require.Equal(t, int64(64<<20), hc.Memory)
	require.Equal(t, int64(64<<20), hc.MemorySwap, "no swap")
	require.Equal(t, int64(100), *hc.PidsLimit)

	spec.Resources = sandbox.Resources{MilliCPU: 250, MemoryBytes: 32 << 20}
	hc = p.CreateOptions(spec).HostConfig
	require.Equal(t, int64(2.5e8), hc.NanoCPUs, "the spec's resources win")
	require.Equal(t, int64(32<<20), hc.Memory)
}

func TestDefaultsAndLimits(t *testing.T) {
	t.Parallel()
	p, err := docker.New(docker.Config{DiskBytes: docker.DiskUnbounded})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	opts := p.CreateOptions(sandbox.Spec{Name: "any name/../x"})
	require.Equal(t, docker.DefaultImage, opts.Config.Image)
	require.Regexp(t, `^ma-[0-9a-f]{32}$`, opts.Name, "any name maps to a valid container name")
	require.Equal(t, docker.ContainerName("any name/../x"), opts.Name)
	require.NotEqual(t, docker.ContainerName("any name/../y"), opts.Name)
	require.Equal(t, int64(1e9), opts.HostConfig.NanoCPUs)
	require.Equal(t, int64(1<<30), opts.HostConfig.Memory)
	require.Equal(t, int64(256), *opts.HostConfig.PidsLimit)
	require.Empty(t, opts.HostConfig.Runtime, "the engine's default runtime")
	require.Equal(t, docker.DefaultDeployment, opts.Config.Labels[docker.LabelDeployment])

	for _, cfg := range []docker.Config{{CPUs: 0.001}, {MemoryBytes: 1 << 20}, {Pids: 2}, {DiskBytes: 1 << 20}} {
		_, err := docker.New(cfg)
		require.Error(t, err, "%+v", cfg)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestCreateOptionsOfEachEgress(t *testing.T) {
	t.Parallel()
	key := "0123456789abcdef0123456789abcdef"
	p, err := docker.New(docker.Config{DiskBytes: docker.DiskUnbounded, Net: docker.NetworkConfig{Network: "sandboxes", ProxyKey: key}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	spec := sandbox.SpecFor("sesn_egress", wire.EnvironmentConfig{Type: "cloud"})
	spec.Env = map[string]string{"HTTP_PROXY": "http://elsewhere:1", "A": "1"}

	require.EqualValues(t, "none", p.CreateOptions(spec).HostConfig.NetworkMode, "an unresolved spec has no network")
	spec.Egress = sandbox.Egress{Mode: sandbox.EgressFull}
	opts := p.CreateOptions(spec)
	require.EqualValues(t, "sandboxes", opts.HostConfig.NetworkMode)
	require.Contains(t, opts.Config.Env, "HTTP_PROXY=http://elsewhere:1", "full sets no proxy")

	spec.Egress = sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{"*.github.com", "pypi.org"}}
	opts = p.CreateOptions(spec)
	require.EqualValues(t, spec.Name+"-net", opts.HostConfig.NetworkMode)
	env := map[string]string{}
	for _, kv := range opts.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		_, dup := env[k]
		require.False(t, dup, "%s set twice", k)
		env[k] = v
	}
	u, err := url.Parse(env["HTTPS_PROXY"])
	require.NoError(t, err)
	require.Equal(t, "egress-proxy:3128", u.Host)
	password, _ := u.User.Password()
	policy, err := egress.Verify([]byte(key), u.User.Username(), password)
	require.NoError(t, err)
	require.Equal(t, egress.Policy{Sandbox: spec.Name, Hosts: []string{"*.github.com", "pypi.org"}}, policy, "the credentials carry the host list")
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "https_proxy"} {
		require.Equal(t, env["HTTPS_PROXY"], env[k], "the proxy wins over the environment's %s", k)
	}
	require.Equal(t, "localhost,127.0.0.1,::1", env["NO_PROXY"])
	require.Equal(t, "1", env["A"])
}
