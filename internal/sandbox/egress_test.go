package sandbox_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestCeilingResolve(t *testing.T) {
	t.Parallel()
	unrestricted := sandbox.Network{Mode: sandbox.NetworkUnrestricted}
	limited := sandbox.Network{Mode: sandbox.NetworkLimited, AllowedHosts: []string{"api.github.com", "x.internal.corp"}}
	limitedWildcard := sandbox.Network{Mode: sandbox.NetworkLimited, AllowedHosts: []string{"*.github.com"}}
	limitedEmpty := sandbox.Network{Mode: sandbox.NetworkLimited}
	withPackages := sandbox.Network{Mode: sandbox.NetworkLimited, AllowedHosts: []string{"a.com"}, AllowPackageManagers: true}
	withMCP := sandbox.Network{Mode: sandbox.NetworkLimited, AllowedHosts: []string{"a.com"}, AllowMCPServers: true, MCPHosts: []string{"mcp.b.com"}}
	mcpNotAllowed := sandbox.Network{Mode: sandbox.NetworkLimited, AllowedHosts: []string{"a.com"}, MCPHosts: []string{"mcp.b.com"}}

	none := sandbox.Ceiling{Mode: sandbox.CeilingNone}
	allowlist := sandbox.Ceiling{Mode: sandbox.CeilingAllowlist}
	deploymentList := sandbox.Ceiling{Mode: sandbox.CeilingAllowlist, AllowedHosts: []string{"*.github.com", "pypi.org"}}
	full := sandbox.Ceiling{Mode: sandbox.CeilingFull}
	mirrors := sandbox.Ceiling{Mode: sandbox.CeilingFull, PackageHosts: []string{"mirror.corp"}}

	hosts := func(h ...string) sandbox.Egress { return sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: h} }
	noNet := sandbox.Egress{Mode: sandbox.EgressNone}
	for _, tc := range []struct {
		name    string
		ceiling sandbox.Ceiling
		network sandbox.Network
		want    sandbox.Egress
	}{
		{"zero ceiling is none", sandbox.Ceiling{}, unrestricted, noNet},
		{"none, unrestricted", none, unrestricted, noNet},
		{"none, limited", none, limited, noNet},
		{"full, unrestricted", full, unrestricted, sandbox.Egress{Mode: sandbox.EgressFull}},
		{"full, unset mode counts as unrestricted", full, sandbox.Network{}, sandbox.Egress{Mode: sandbox.EgressFull}},
		{"full, limited: the environment's hosts", full, limited, hosts("api.github.com", "x.internal.corp")},
		{"full, limited without hosts: no network", full, limitedEmpty, noNet},
		{"full, unknown mode reads as limited", full, sandbox.Network{Mode: "open", AllowedHosts: []string{"a.com"}}, hosts("a.com")},
		{"allowlist without a list, unrestricted: no network", allowlist, unrestricted, noNet},
		{"allowlist without a list, limited: the environment's hosts", allowlist, limited, hosts("api.github.com", "x.internal.corp")},
		{"allowlist with a list, unrestricted: the list", deploymentList, unrestricted, hosts("*.github.com", "pypi.org")},
		{"allowlist with a list, limited: the intersection", deploymentList, limited, hosts("api.github.com")},
		{"allowlist with a list, limited wildcard: the intersection", deploymentList, limitedWildcard, hosts("*.github.com")},
		{"allowlist with a list, nothing in common: no network", deploymentList, sandbox.Network{Mode: sandbox.NetworkLimited, AllowedHosts: []string{"b.org"}}, noNet},
		{"package managers add the default registries", full, withPackages, hosts(append([]string{"a.com"}, sortedDefaultPackageHosts()...)...)},
		{"package managers add the deployment's mirrors", mirrors, withPackages, hosts("a.com", "mirror.corp")},
		{"package hosts are intersected with the deployment list", deploymentList, withPackages, hosts("pypi.org")},
		{"MCP servers add their hosts", full, withMCP, hosts("a.com", "mcp.b.com")},
		{"MCP hosts only with allow_mcp_servers", full, mcpNotAllowed, hosts("a.com")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.ceiling.Resolve(tc.network))
		})
	}
}

func sortedDefaultPackageHosts() []string {
	return sandbox.Ceiling{Mode: sandbox.CeilingFull}.Resolve(sandbox.Network{Mode: sandbox.NetworkLimited, AllowPackageManagers: true}).Hosts
}

func TestCeilingCheck(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Ceiling{}.Check())
	require.NoError(t, sandbox.Ceiling{Mode: sandbox.CeilingAllowlist, AllowedHosts: []string{"*.a.com", "b.org", "10.0.0.1"}}.Check())
	require.EqualError(t, sandbox.Ceiling{Mode: "open"}.Check(), `network ceiling "open": must be none, allowlist or full`)
	require.ErrorContains(t, sandbox.Ceiling{Mode: sandbox.CeilingAllowlist, AllowedHosts: []string{"https://a.com"}}.Check(), `allowed host "https://a.com"`)
	require.ErrorContains(t, sandbox.Ceiling{Mode: sandbox.CeilingFull, PackageHosts: []string{"a.com:8080"}}.Check(), `package host "a.com:8080"`)
}

func TestSetMCPServers(t *testing.T) {
	t.Parallel()
	s := sandbox.Spec{Network: sandbox.Network{Mode: sandbox.NetworkLimited, AllowMCPServers: true}}
	s.SetMCPServers([]string{"https://MCP.example.com:8443/sse", "https://b.org/mcp", "::not a url", "https://b.org/other"})
	require.Equal(t, []string{"b.org", "mcp.example.com"}, s.Network.MCPHosts)
	s.Network.AllowMCPServers = false
	s.SetMCPServers([]string{"https://b.org/mcp"})
	require.Nil(t, s.Network.MCPHosts, "only with allow_mcp_servers")
}

func TestManagerResolvesTheCeilingBeforeHashing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sandbox.WithCeiling(sandbox.Ceiling{Mode: sandbox.CeilingFull}))
	var created sandbox.Spec
	f.provider.beforeMake = func(spec sandbox.Spec) { created = spec }
	const session = "sesn_ceiling"
	_, err := f.manager.Acquire(t.Context(), session)
	require.NoError(t, err)
	require.Equal(t, sandbox.Egress{Mode: sandbox.EgressFull}, created.Egress, "the provider gets the effective policy")

	unresolved := sandbox.SpecFor(session, wire.EnvironmentConfig{})
	require.NotEqual(t, unresolved.Hash(), get(t, f.bindings, session).SpecHash, "the stored hash covers the ceiling")
	require.Equal(t, created.Hash(), get(t, f.bindings, session).SpecHash)
}
