//go:build integration

package docker_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// The network tests reach only what they make: a normal bridge network of their own (the
// "outside"), two HTTP servers on it, the provider's egress proxy and the sandboxes. Nothing
// else is contacted, not even the engine's bridge gateway.

const serverPort = 8080

// netFixture is an outside network with an allowed and a refused server on it, and a
// provider of its own deployment (so its proxy container is its own) that uses it.
type netFixture struct {
	cli      *client.Client
	p        *docker.Provider
	outside  string // the outside network's name
	allowed  string // the allowed server's address on the outside network
	sessions int
	name     string
}

func proxyImage() string { return docker.DefaultProxyImage }

func newNetFixture(t testing.TB, key string) *netFixture {
	t.Helper()
	cli := engine(t)
	_, err := cli.ImageInspect(t.Context(), proxyImage())
	require.NoError(t, err, "the egress proxy image %s is missing: run make egress-image", proxyImage())
	name := fmt.Sprintf("ma-test-%d-%s", os.Getpid(), strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
	f := &netFixture{cli: cli, outside: name + "-outside", name: name}
	ctx := context.Background()

	_, err = cli.NetworkCreate(t.Context(), f.outside, client.NetworkCreateOptions{Driver: "bridge", Labels: map[string]string{docker.LabelDeployment: testDeployment}})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := cli.NetworkRemove(ctx, f.outside, client.NetworkRemoveOptions{})
		require.NoError(t, err, "every container left the outside network")
	})
	f.startServer(t, name+"-allowed", "allowed.test", "allowed-ok")
	f.startServer(t, name+"-refused", "refused.test", "refused-reached")
	info, err := cli.ContainerInspect(t.Context(), name+"-allowed", client.ContainerInspectOptions{})
	require.NoError(t, err)
	f.allowed = info.Container.NetworkSettings.Networks[f.outside].IPAddress.String()
	require.NotEmpty(t, f.allowed)

	deployment := "t" + fmt.Sprint(os.Getpid()) + "-" + fmt.Sprint(sessions.Add(1))
	p, err := docker.New(docker.Config{Image: image(), Deployment: deployment,
		Net: docker.NetworkConfig{Network: f.outside, ProxyPorts: []int{serverPort}, ProxyKey: key}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	// The provider starts the proxy; the test removes it (before the outside network).
	t.Cleanup(func() {
		_, err := cli.ContainerRemove(ctx, p.ProxyName(), client.ContainerRemoveOptions{Force: true})
		if err != nil && !strings.Contains(err.Error(), "No such container") {
			t.Errorf("remove the egress proxy: %v", err)
		}
	})
	f.p = p
	return f
}

// startServer runs a python HTTP server answering body, known on the outside network as alias.
func (f *netFixture) startServer(t testing.TB, name, alias, body string) {
	t.Helper()
	ctx := context.Background()
	_, err := f.cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:  image(),
			User:   docker.User,
			Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
			Labels: map[string]string{docker.LabelDeployment: testDeployment},
			// The image's entrypoint is the sandbox's idle loop: replace it.
			Entrypoint: []string{"/bin/sh", "-c", fmt.Sprintf(
				"mkdir -p /tmp/www && echo %s > /tmp/www/index.html && cd /tmp/www && exec python3 -m http.server %d", body, serverPort)},
		},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(f.outside)},
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			f.outside: {Aliases: []string{alias}},
		}},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := f.cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true})
		require.NoError(t, err)
	})
	_, err = f.cli.ContainerStart(t.Context(), name, client.ContainerStartOptions{})
	require.NoError(t, err)
}

// sandbox creates a sandbox for a fresh session of env under ceiling.
func (f *netFixture) sandbox(t *testing.T, ceiling sandbox.Ceiling, env wire.EnvironmentConfig) (sandbox.Spec, sandbox.Ref, sandbox.Sandbox) {
	t.Helper()
	f.sessions++
	spec := sandbox.SpecFor(fmt.Sprintf("sesn_%s_%d", f.name, f.sessions), env)
	spec.Egress = ceiling.Resolve(spec.Network)
	ref, err := f.p.Create(t.Context(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.p.Destroy(context.Background(), ref)) })
	sb, err := f.p.Attach(t.Context(), ref)
	require.NoError(t, err)
	return spec, ref, sb
}

func run(t *testing.T, sb sandbox.Sandbox, cmd string) (string, int) {
	t.Helper()
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: cmd})
	require.NoError(t, err)
	return string(res.Output), res.ExitCode
}

func limited(hosts ...string) wire.EnvironmentConfig {
	return wire.EnvironmentConfig{Type: "cloud", Networking: &wire.Networking{Type: "limited", AllowedHosts: hosts}}
}

// curl retries while the proxy, started with the first sandbox, begins to listen.
const curl = "curl -sS --max-time 20 --retry 10 --retry-connrefused --retry-delay 1 "

func TestLimitedEgressGoesThroughTheProxy(t *testing.T) {
	t.Parallel()
	f := newNetFixture(t, "")
	full := sandbox.Ceiling{Mode: sandbox.CeilingFull}
	spec, ref, sb := f.sandbox(t, full, limited("allowed.test"))
	require.Equal(t, sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{"allowed.test"}}, spec.Egress)

	out, code := run(t, sb, curl+"http://allowed.test:8080/")
	require.Equal(t, 0, code, out)
	require.Equal(t, "allowed-ok\n", out, "an allowed host, plain HTTP through the proxy")

	out, code = run(t, sb, curl+"--proxytunnel http://allowed.test:8080/")
	require.Equal(t, 0, code, out)
	require.Equal(t, "allowed-ok\n", out, "an allowed host through a CONNECT tunnel")

	out, code = run(t, sb, curl+"-w ' %{http_code}' http://refused.test:8080/")
	require.Equal(t, 0, code, out)
	require.Equal(t, "egress to refused.test:8080 refused by the sandbox allowlist: refused.test is not an allowed host (allowed hosts: allowed.test)\n 403", out,
		"what an agent running curl sees")

	out, code = run(t, sb, curl+"--proxytunnel http://refused.test:8080/")
	require.NotEqual(t, 0, code)
	require.Contains(t, out, "CONNECT tunnel failed, response 403", "curl's message for a refused CONNECT (https)")
	out, _ = run(t, sb, "curl -sS -v --proxytunnel http://refused.test:8080/ 2>&1")
	require.Contains(t, out, "HTTP/1.1 403 Egress to refused.test refused by the sandbox allowlist", "curl -v shows the reason")

	// Around the proxy there is no way out: the allowed server's own address (on another
	// network) is unreachable. (Engines before 25 still give an internal network a default
	// route; their isolation rules drop what takes it.)
	out, code = run(t, sb, fmt.Sprintf("curl -sS --noproxy '*' --max-time 5 http://%s:%d/", f.allowed, serverPort))
	require.NotEqual(t, 0, code, "a direct connection bypassing the proxy must fail: %s", out)
	require.NotContains(t, out, "allowed-ok")
	out, code = run(t, sb, "curl -sS --noproxy '*' --max-time 5 http://allowed.test:8080/")
	require.NotEqual(t, 0, code, "names of the outside do not resolve in the sandbox: %s", out)

	logs, err := f.cli.ContainerLogs(t.Context(), f.p.ProxyName(), client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	require.NoError(t, err)
	b, err := io.ReadAll(logs)
	require.NoError(t, err)
	require.NoError(t, logs.Close())
	require.Contains(t, string(b), `"msg":"egress refused","sandbox":"`+ref.ExternalID+`","host":"refused.test"`, "the proxy logs every refusal")
}

func TestSessionNetworksAreSeparateAndRemoved(t *testing.T) {
	t.Parallel()
	f := newNetFixture(t, "")
	full := sandbox.Ceiling{Mode: sandbox.CeilingFull}
	_, refA, a := f.sandbox(t, full, limited("allowed.test"))
	_, refB, _ := f.sandbox(t, full, limited("allowed.test"))

	netOf := func(ref sandbox.Ref) string {
		info, err := f.cli.ContainerInspect(t.Context(), ref.ExternalID, client.ContainerInspectOptions{})
		require.NoError(t, err)
		nets := info.Container.NetworkSettings.Networks
		require.Len(t, nets, 1)
		ep, ok := nets[ref.ExternalID+"-net"]
		require.True(t, ok, "on its own network: %v", nets)
		return ep.IPAddress.String()
	}
	ipB := netOf(refB)
	require.NotEqual(t, netOf(refA), ipB)
	out, code := run(t, a, fmt.Sprintf("curl -sS --noproxy '*' --max-time 5 http://%s:%d/", ipB, serverPort))
	require.NotEqual(t, 0, code, "one sandbox cannot reach another: %s", out)

	// The proxy was started by the provider; a second provider (a restarted worker) adopts it.
	before, err := f.cli.ContainerInspect(t.Context(), f.p.ProxyName(), client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.Equal(t, "65532:65532", before.Container.Config.User)
	require.True(t, before.Container.HostConfig.ReadonlyRootfs)
	require.Equal(t, []string{"ALL"}, before.Container.HostConfig.CapDrop)

	// Destroy removes the session network.
	require.NoError(t, f.p.Destroy(t.Context(), refB))
	nets, err := f.cli.NetworkList(t.Context(), client.NetworkListOptions{Filters: client.Filters{}.Add("name", refB.ExternalID+"-net")})
	require.NoError(t, err)
	require.Empty(t, nets.Items)
	require.NoError(t, f.p.Destroy(t.Context(), refB), "a second destroy is fine")
}

// With a configured key, a proxy recreated behind the worker's back accepts the credentials
// of sandboxes made before (a generated key dies with its proxy: docs/sandbox-networking.md).
func TestARecreatedProxyServesExistingSandboxes(t *testing.T) {
	t.Parallel()
	f := newNetFixture(t, "0123456789abcdef0123456789abcdef-test-key")
	_, ref, sb := f.sandbox(t, sandbox.Ceiling{Mode: sandbox.CeilingFull}, limited("allowed.test"))
	out, code := run(t, sb, curl+"http://allowed.test:8080/")
	require.Equal(t, 0, code, out)

	// The proxy disappears behind the worker's back; the next Attach (a restarted worker)
	// starts a new one and puts it on the sandbox's network again.
	_, err := f.cli.ContainerRemove(t.Context(), f.p.ProxyName(), client.ContainerRemoveOptions{Force: true})
	require.NoError(t, err)
	sb, err = f.p.Attach(t.Context(), ref)
	require.NoError(t, err)
	out, code = run(t, sb, curl+"http://allowed.test:8080/")
	require.Equal(t, 0, code, out)
	require.Equal(t, "allowed-ok\n", out)
}

func TestFullEgressUsesTheDeploymentNetwork(t *testing.T) {
	t.Parallel()
	f := newNetFixture(t, "")
	spec, _, sb := f.sandbox(t, sandbox.Ceiling{Mode: sandbox.CeilingFull}, wire.EnvironmentConfig{Type: "cloud"})
	require.Equal(t, sandbox.EgressFull, spec.Egress.Mode)
	out, code := run(t, sb, "curl -sS --max-time 10 http://refused.test:8080/")
	require.Equal(t, 0, code, out)
	require.Equal(t, "refused-reached\n", out, "full reaches a server on the deployment network by name, no proxy")
	out, _ = run(t, sb, "env | grep -ci _proxy || true")
	require.Equal(t, "0\n", out, "no proxy variables")
}

func TestNoneEgressHasOnlyLoopback(t *testing.T) {
	t.Parallel()
	f := newNetFixture(t, "")
	spec, _, sb := f.sandbox(t, sandbox.Ceiling{Mode: sandbox.CeilingNone}, limited("allowed.test"))
	require.Equal(t, sandbox.EgressNone, spec.Egress.Mode)
	out, code := run(t, sb, "ls /sys/class/net")
	require.Equal(t, 0, code)
	require.Equal(t, "lo\n", out)
	out, code = run(t, sb, fmt.Sprintf("curl -sS --max-time 5 http://%s:%d/", f.allowed, serverPort))
	require.NotEqual(t, 0, code, out)
}

// hostServer listens on all of the host's addresses, as a careless service does, and
// answers a known body; it returns the port.
func hostServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "host-service-reached")
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// gateway is the IPv4 gateway the engine lists for a network (or would: the subnet's first
// address).
func gateway(t *testing.T, cli *client.Client, netName string) string {
	t.Helper()
	info, err := cli.NetworkInspect(t.Context(), netName, client.NetworkInspectOptions{})
	require.NoError(t, err)
	for _, c := range info.Network.IPAM.Config {
		if c.Gateway.IsValid() && c.Gateway.Is4() {
			return c.Gateway.String()
		}
		if c.Subnet.IsValid() && c.Subnet.Addr().Is4() {
			return c.Subnet.Masked().Addr().Next().String() // where the engine puts the gateway
		}
	}
	t.Fatalf("network %s lists no IPv4 gateway", netName)
	return ""
}

// An allowlisted sandbox reaches the proxy and nothing else: not a host service listening on
// all addresses through its network's gateway, nor through the gateway of the deployment's
// network. A full-egress sandbox on that network does reach it, which shows the service
// answers containers at all.
func TestAnAllowlistedSandboxNeverReachesTheHost(t *testing.T) {
	t.Parallel()
	f := newNetFixture(t, "")
	port := hostServer(t)
	full := sandbox.Ceiling{Mode: sandbox.CeilingFull}

	_, _, open := f.sandbox(t, full, wire.EnvironmentConfig{Type: "cloud"})
	outsideGW := gateway(t, f.cli, f.outside)
	out, code := run(t, open, fmt.Sprintf("curl -sS --noproxy '*' --max-time 10 http://%s:%d/", outsideGW, port))
	require.Equal(t, 0, code, "control: a full-egress sandbox reaches the host service: %s", out)
	require.Equal(t, "host-service-reached", out)

	_, ref, sb := f.sandbox(t, full, limited("allowed.test"))
	sessionGW := gateway(t, f.cli, ref.ExternalID+"-net")
	for _, addr := range []string{sessionGW, outsideGW} {
		out, code := run(t, sb, fmt.Sprintf("curl -sS --noproxy '*' --max-time 5 http://%s:%d/", addr, port))
		require.NotEqual(t, 0, code, "the host at %s must be unreachable from an allowlisted sandbox: %s", addr, out)
		require.NotContains(t, out, "host-service-reached")
	}
	// The proxy still works, and refuses the host by address too.
	out, code = run(t, sb, curl+"http://allowed.test:8080/")
	require.Equal(t, 0, code, out)
	require.Equal(t, "allowed-ok\n", out)
	out, _ = run(t, sb, fmt.Sprintf(curl+"-w ' %%{http_code}' http://%s:%d/", sessionGW, port))
	require.NotContains(t, out, "host-service-reached")
}

func TestOrphanedSessionNetworksAreListed(t *testing.T) {
	t.Parallel()
	f := newNetFixture(t, "")
	_, ref, _ := f.sandbox(t, sandbox.Ceiling{Mode: sandbox.CeilingFull}, limited("allowed.test"))
	// The container goes behind our back; its network stays until someone removes it.
	_, err := f.cli.ContainerRemove(t.Context(), ref.ExternalID, client.ContainerRemoveOptions{Force: true})
	require.NoError(t, err)
	listed, err := f.p.List(t.Context())
	require.NoError(t, err)
	var found []string
	for _, r := range listed {
		found = append(found, r.Ref.ExternalID)
	}
	require.Contains(t, found, ref.ExternalID, "the orphan sweep sees the network whose container is gone")
	require.NoError(t, f.p.Destroy(t.Context(), ref))
	nets, err := f.cli.NetworkList(t.Context(), client.NetworkListOptions{Filters: client.Filters{}.Add("name", ref.ExternalID+"-net")})
	require.NoError(t, err)
	require.Empty(t, nets.Items, "Destroy removes it")
}

// BenchmarkProviderCreateHosts is a hosts-policy sandbox's Create and Destroy (its own
// network, the proxy joined to it), next to BenchmarkProviderCreateNone's plain container.
func BenchmarkProviderCreateHosts(b *testing.B) { benchCreate(b, limited("allowed.test")) }

// BenchmarkProviderCreateNone is the same for a sandbox without network.
func BenchmarkProviderCreateNone(b *testing.B) {
	benchCreate(b, wire.EnvironmentConfig{Type: "cloud", Networking: &wire.Networking{Type: "limited"}})
}

func benchCreate(b *testing.B, env wire.EnvironmentConfig) {
	f := newNetFixture(b, "")
	ceiling := sandbox.Ceiling{Mode: sandbox.CeilingFull}
	warm := sandbox.SpecFor(fmt.Sprintf("sesn_%s_warm", f.name), limited("allowed.test"))
	warm.Egress = ceiling.Resolve(warm.Network)
	ref, err := f.p.Create(b.Context(), warm) // starts the proxy outside the measurement
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, f.p.Destroy(context.Background(), ref)) })
	n := 0
	for b.Loop() {
		n++
		spec := sandbox.SpecFor(fmt.Sprintf("sesn_%s_%d", f.name, n), env)
		spec.Egress = ceiling.Resolve(spec.Network)
		ref, err := f.p.Create(b.Context(), spec)
		require.NoError(b, err)
		require.NoError(b, f.p.Destroy(b.Context(), ref))
	}
}

func TestMissingProxyImageSaysHowToBuildIt(t *testing.T) {
	t.Parallel()
	engine(t)
	p, err := docker.New(docker.Config{Image: image(), Deployment: fmt.Sprintf("t%d-noproxy", os.Getpid()),
		Net: docker.NetworkConfig{ProxyImage: "managed-agents-egress:no-such-tag"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	spec := sandbox.SpecFor(fmt.Sprintf("sesn_noproxy_%d", os.Getpid()), limited("allowed.test"))
	spec.Egress = sandbox.Ceiling{Mode: sandbox.CeilingFull}.Resolve(spec.Network)
	_, err = p.Create(t.Context(), spec)
	require.ErrorContains(t, err, "make egress-image")
	_, err = engine(t).ContainerInspect(t.Context(), docker.ContainerName(spec.Name), client.ContainerInspectOptions{})
	require.Error(t, err, "no sandbox without its way out")
}

// A proxy that exits instead of listening fails the create with the proxy's own words.
func TestAProxyThatCannotStartFailsWithItsLog(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	p, err := docker.New(docker.Config{Image: image(), Deployment: fmt.Sprintf("t%d-badproxy", os.Getpid()),
		Net: docker.NetworkConfig{Network: "none", ProxyPorts: []int{0}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	t.Cleanup(func() {
		_, err := cli.ContainerRemove(context.Background(), p.ProxyName(), client.ContainerRemoveOptions{Force: true})
		require.NoError(t, err)
	})
	spec := sandbox.SpecFor(fmt.Sprintf("sesn_badproxy_%d", os.Getpid()), limited("allowed.test"))
	spec.Egress = sandbox.Ceiling{Mode: sandbox.CeilingFull}.Resolve(spec.Network)
	_, err = p.Create(t.Context(), spec)
	require.ErrorContains(t, err, "the egress proxy did not start listening")
	require.ErrorContains(t, err, "MANAGED_AGENT_EGRESS_PROXY_PORTS")
}

// A sandbox that lists another sandbox (by its address or its container name, which the
// engine's DNS resolves for the proxy) is refused: the proxy never dials into the sandbox
// networks it sits on, so sessions stay apart though one proxy serves them all.
func TestTheProxyNeverReachesAnotherSandbox(t *testing.T) {
	t.Parallel()
	f := newNetFixture(t, "")
	full := sandbox.Ceiling{Mode: sandbox.CeilingFull}
	_, refB, b := f.sandbox(t, full, limited("allowed.test"))
	info, err := f.cli.ContainerInspect(t.Context(), refB.ExternalID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	ep := info.Container.NetworkSettings.Networks[refB.ExternalID+"-net"]
	require.NotNil(t, ep, "B sits on its session network")
	ipB := ep.IPAddress.String()
	require.NotEmpty(t, ipB)

	_, _, a := f.sandbox(t, full, limited("allowed.test", ipB, refB.ExternalID))
	out, code := run(t, a, curl+"http://allowed.test:8080/")
	require.Equal(t, 0, code, out)
	require.Equal(t, "allowed-ok\n", out, "the proxy works for A")
	for _, host := range []string{ipB, refB.ExternalID} {
		out, code = run(t, a, curl+"-w ' %{http_code}' http://"+host+":8080/")
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "an address on a sandbox network", host)
		require.True(t, strings.HasSuffix(out, " 403"), "%s: %s", host, out)
	}

	// A's credentials are bound to A's network: used from B (a leak), the proxy refuses them.
	proxyA, code := run(t, a, "printenv HTTP_PROXY")
	require.Equal(t, 0, code, proxyA)
	out, code = run(t, b, curl+"-w ' %{http_code}' -x '"+strings.TrimSpace(proxyA)+"' http://allowed.test:8080/")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasSuffix(out, " 407"), "A's credentials from B: %s", out)
	out, code = run(t, b, curl+"http://allowed.test:8080/")
	require.Equal(t, 0, code, out)
	require.Equal(t, "allowed-ok\n", out, "B's own credentials work")
}
