package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
)

const testProxyKey = "0123456789abcdef0123456789abcdef"

func TestNetworkConfigFromEnv(t *testing.T) {
	t.Setenv("MANAGED_AGENT_SANDBOX_NETWORK", "allowlist")
	t.Setenv("MANAGED_AGENT_SANDBOX_ALLOWED_HOSTS", "*.github.com, pypi.org files.pythonhosted.org")
	t.Setenv("MANAGED_AGENT_SANDBOX_PACKAGE_HOSTS", "mirror.corp")
	t.Setenv("MANAGED_AGENT_DOCKER_NETWORK", "sandboxes")
	t.Setenv("MANAGED_AGENT_DOCKER_EGRESS_IMAGE", "registry.corp/managed-agents:1.2")
	t.Setenv("MANAGED_AGENT_EGRESS_PROXY_KEY", testProxyKey)
	t.Setenv("MANAGED_AGENT_EGRESS_PROXY_PORTS", "8443,80,443,80")
	c := FromEnv(Config{})
	require.NoError(t, c.Validate())
	ceiling, err := c.Network.ceiling()
	require.NoError(t, err)
	require.Equal(t, sandbox.Ceiling{Mode: "allowlist", AllowedHosts: []string{"*.github.com", "pypi.org", "files.pythonhosted.org"},
		PackageHosts: []string{"mirror.corp"}}, ceiling)
	d, err := c.dockerConfig()
	require.NoError(t, err)
	require.Equal(t, docker.NetworkConfig{Network: "sandboxes", ProxyImage: "registry.corp/managed-agents:1.2", ProxyKey: testProxyKey,
		ProxyPorts: []int{80, 443, 8443}}, d.Net)
}

func TestNetworkConfigDefaults(t *testing.T) {
	t.Parallel()
	ceiling, err := Config{}.Network.ceiling()
	require.NoError(t, err)
	require.Equal(t, sandbox.Egress{Mode: sandbox.EgressNone}, ceiling.Resolve(sandbox.Network{Mode: sandbox.NetworkUnrestricted}), "no network by default")
	require.Nil(t, ceiling.PackageHosts, "the default registries")
}

func TestNetworkConfigErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("abc\n"), 0o600))
	good := filepath.Join(dir, "good")
	require.NoError(t, os.WriteFile(good, []byte(testProxyKey+"\n"), 0o600))
	for _, tc := range []struct {
		name    string
		n       NetworkConfig
		wantErr string
	}{
		{"unknown ceiling", NetworkConfig{Ceiling: "open"}, `MANAGED_AGENT_SANDBOX_NETWORK="open": must be none, allowlist or full`},
		{"a URL is no host", NetworkConfig{Ceiling: "allowlist", AllowedHosts: "https://a.com"}, `MANAGED_AGENT_SANDBOX_ALLOWED_HOSTS: "https://a.com" must be a host name`},
		{"a deployment list without allowlist", NetworkConfig{Ceiling: "full", AllowedHosts: "a.com"}, `MANAGED_AGENT_SANDBOX_ALLOWED_HOSTS applies only with MANAGED_AGENT_SANDBOX_NETWORK=allowlist (it is "full")`},
		{"a package host with a port", NetworkConfig{PackageHosts: "a.com:80"}, `MANAGED_AGENT_SANDBOX_PACKAGE_HOSTS: "a.com:80"`},
		{"ports", NetworkConfig{EgressPorts: "80,https"}, `MANAGED_AGENT_EGRESS_PROXY_PORTS="80,https": must be TCP ports`},
		{"a short key", NetworkConfig{EgressKey: "abc"}, "MANAGED_AGENT_EGRESS_PROXY_KEY: the key must have at least 32 bytes"},
		{"a short key file", NetworkConfig{EgressKeyFile: short}, "MANAGED_AGENT_EGRESS_PROXY_KEY_FILE=" + `"` + short + `"` + ": the key must have at least 32 bytes"},
		{"a missing key file", NetworkConfig{EgressKeyFile: filepath.Join(dir, "none")}, "MANAGED_AGENT_EGRESS_PROXY_KEY_FILE="},
		{"both keys", NetworkConfig{EgressKey: testProxyKey, EgressKeyFile: good}, "set one of them, not both"},
		{"network name", NetworkConfig{DockerNetwork: "a b"}, `MANAGED_AGENT_DOCKER_NETWORK="a b"`},
		{"proxy address", NetworkConfig{EgressAddr: "3128"}, `MANAGED_AGENT_EGRESS_PROXY_ADDR="3128": must be host:port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorContains(t, Config{Network: tc.n}.Validate(), tc.wantErr)
		})
	}
	key, err := NetworkConfig{EgressKeyFile: good}.key()
	require.NoError(t, err)
	require.Equal(t, testProxyKey, key, "the file's trailing newline is not part of the key")
}

func TestRunEgressProxyNeedsAKey(t *testing.T) {
	t.Parallel()
	err := RunEgressProxy(t.Context(), Config{LogLevel: "error"}, "test")
	require.ErrorContains(t, err, "MANAGED_AGENT_EGRESS_PROXY_KEY or MANAGED_AGENT_EGRESS_PROXY_KEY_FILE is required")
}

func TestRunEgressProxyServesHealthz(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- RunEgressProxy(ctx, Config{LogLevel: "error", Network: NetworkConfig{EgressKey: testProxyKey, EgressAddr: addr}}, "test")
	}()
	var resp *http.Response
	require.Eventually(t, func() bool {
		resp, err = http.Get("http://" + addr + "/healthz")
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "ok\n", string(body))
	cancel()
	require.NoError(t, <-done, "a stop is not an error")
}
