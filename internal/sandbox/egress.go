package sandbox

import (
	"fmt"
	"net/url"
	"slices"

	"github.com/managed-agents/managed-agents/internal/hostpattern"
)

// Ceilings of the deployment (MANAGED_AGENT_SANDBOX_NETWORK): the most network any sandbox
// gets; an environment's networking can only narrow it.
const (
	CeilingNone      = "none"
	CeilingAllowlist = "allowlist"
	CeilingFull      = "full"
)

// Effective egress modes of one sandbox: no network at all, only the listed hosts (through
// the allowlisting proxy), or a normal network.
const (
	EgressNone  = "none"
	EgressHosts = "hosts"
	EgressFull  = "full"
)

// DefaultPackageHosts are the hosts allow_package_managers adds: the public registries of the
// managers config.packages names (apt for Debian and Ubuntu, cargo, gem, go, npm, pip). A
// deployment with mirrors replaces the list (MANAGED_AGENT_SANDBOX_PACKAGE_HOSTS).
var DefaultPackageHosts = []string{
	"deb.debian.org", "security.debian.org", "archive.ubuntu.com", "security.ubuntu.com", "ports.ubuntu.com",
	"crates.io", "index.crates.io", "static.crates.io",
	"rubygems.org", "index.rubygems.org",
	"proxy.golang.org", "sum.golang.org",
	"registry.npmjs.org",
	"pypi.org", "files.pythonhosted.org",
}

// Ceiling is the deployment's network ceiling.
type Ceiling struct {
	// Mode is CeilingNone ("" counts as none), CeilingAllowlist or CeilingFull.
	Mode string
	// AllowedHosts is, under CeilingAllowlist, the deployment's own allowlist
	// (MANAGED_AGENT_SANDBOX_ALLOWED_HOSTS): unrestricted environments get it, limited ones
	// get the intersection of theirs with it. Empty means the deployment lists no hosts of
	// its own: limited environments get their lists as they are, unrestricted ones get no
	// network (there is no list to give them).
	AllowedHosts []string
	// PackageHosts are the hosts allow_package_managers adds (nil is DefaultPackageHosts).
	PackageHosts []string
}

// Egress is the network one sandbox gets: what a provider enforces.
type Egress struct {
	// Mode is EgressNone, EgressHosts or EgressFull; "" counts as EgressNone, so a spec
	// nobody resolved gets no network.
	Mode string `json:"mode"`
	// Hosts (EgressHosts only) are the patterns the proxy lets through, normalized, sorted,
	// none covered by another; never empty (an empty list resolves to EgressNone).
	Hosts []string `json:"hosts,omitempty"`
}

// Resolve is the one place the ceiling meets an environment's networking (the table in
// docs/sandbox-networking.md):
//
//	ceiling    unrestricted           limited (L = allowed_hosts + package + MCP hosts)
//	none       none                   none
//	allowlist  the deployment list D  L ∩ D (L when D is empty)
//	full       full                   L
//
// A host list that comes out empty is no network at all (EgressNone). A network mode it does
// not know is treated as limited, the narrower reading.
func (c Ceiling) Resolve(n Network) Egress {
	unrestricted := n.Mode == NetworkUnrestricted || n.Mode == ""
	switch c.Mode {
	case CeilingFull:
		if unrestricted {
			return Egress{Mode: EgressFull}
		}
		return hostsEgress(c.limitedHosts(n))
	case CeilingAllowlist:
		switch {
		case unrestricted:
			return hostsEgress(c.AllowedHosts)
		case len(c.AllowedHosts) == 0:
			return hostsEgress(c.limitedHosts(n))
		}
		return hostsEgress(hostpattern.Intersect(c.limitedHosts(n), c.AllowedHosts))
	}
	return Egress{Mode: EgressNone}
}

// limitedHosts is what a limited environment asks for.
func (c Ceiling) limitedHosts(n Network) []string {
	hosts := slices.Clone(n.AllowedHosts)
	if n.AllowPackageManagers {
		if c.PackageHosts == nil {
			hosts = append(hosts, DefaultPackageHosts...)
		} else {
			hosts = append(hosts, c.PackageHosts...)
		}
	}
	if n.AllowMCPServers {
		hosts = append(hosts, n.MCPHosts...)
	}
	return hosts
}

func hostsEgress(hosts []string) Egress {
	if hosts = hostpattern.Minimal(hosts); len(hosts) == 0 {
		return Egress{Mode: EgressNone}
	}
	return Egress{Mode: EgressHosts, Hosts: hosts}
}

// Check refuses a ceiling a deployment cannot mean: an unknown mode, a list under a ceiling
// other than allowlist, or entries that are not host names or `*.domain` wildcards.
func (c Ceiling) Check() error {
	switch c.Mode {
	case "", CeilingNone, CeilingAllowlist, CeilingFull:
	default:
		return fmt.Errorf("network ceiling %q: must be none, allowlist or full", c.Mode)
	}
	for _, h := range c.AllowedHosts {
		if !ValidPattern(h) {
			return fmt.Errorf("allowed host %q: must be a host name or a *.domain wildcard (no scheme, port or path)", h)
		}
	}
	for _, h := range c.PackageHosts {
		if !ValidPattern(h) {
			return fmt.Errorf("package host %q: must be a host name or a *.domain wildcard (no scheme, port or path)", h)
		}
	}
	return nil
}

// ValidPattern reports whether p is a host name, an IP literal or a `*.domain` wildcard.
func ValidPattern(p string) bool {
	p = hostpattern.Normalize(p)
	if hostpattern.IsWildcard(p) {
		p = p[2:]
	}
	return hostpattern.ValidHost(p)
}

// SetMCPServers records the hosts of the agent's MCP server URLs, which allow_mcp_servers
// adds to a limited environment's hosts. URLs that do not parse are skipped: the MCP client
// refuses them anyway.
func (s *Spec) SetMCPServers(urls []string) {
	s.Network.MCPHosts = nil
	if s.Network.Mode != NetworkLimited || !s.Network.AllowMCPServers {
		return
	}
	var hosts []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			continue
		}
		hosts = append(hosts, hostpattern.Normalize(u.Hostname()))
	}
	s.Network.MCPHosts = sortedSet(hosts)
}
