package sandbox

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// Spec describes the sandbox a session needs. SpecFor builds it from the session's
// environment; providers apply what they support and ignore the rest (local has no image,
// resources or network isolation).
type Spec struct {
	// Name is the deterministic name Create is idempotent on (NameFor the session id).
	Name      string `json:"name"`
	SessionID string `json:"session_id"`
	// Image is the image or template to start from; "" is the provider's default.
	Image string `json:"image,omitempty"`
	// Resources are limits; zero values are the provider's defaults.
	Resources Resources `json:"resources"`
	Network   Network   `json:"network"`
	// Egress is the network the sandbox gets: the deployment's ceiling resolved against
	// Network (Ceiling.Resolve, which the Manager applies). The zero value is no network.
	Egress Egress `json:"egress"`
	// Packages maps a package manager (apt, cargo, gem, go, npm, pip) to the packages it
	// installs when the sandbox is created, each list sorted.
	Packages map[string][]string `json:"packages,omitempty"`
	// Env is added to every command's environment.
	Env map[string]string `json:"env,omitempty"`
}

// Resources are a sandbox's limits.
type Resources struct {
	MilliCPU    int64 `json:"milli_cpu,omitempty"`
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	DiskBytes   int64 `json:"disk_bytes,omitempty"`
}

// Network modes of an environment (API.md): the deployment's ceiling may narrow them further.
const (
	NetworkUnrestricted = "unrestricted"
	NetworkLimited      = "limited"
)

// Network is the egress policy an environment asks for.
type Network struct {
	// Mode is NetworkUnrestricted or NetworkLimited.
	Mode string `json:"mode"`
	// AllowedHosts (sorted), AllowMCPServers and AllowPackageManagers apply to limited only.
	AllowedHosts         []string `json:"allowed_hosts,omitempty"`
	AllowMCPServers      bool     `json:"allow_mcp_servers,omitempty"`
	AllowPackageManagers bool     `json:"allow_package_managers,omitempty"`
	// MCPHosts are the hosts of the agent's MCP server URLs (sorted), set only when
	// AllowMCPServers (SetMCPServers).
	MCPHosts []string `json:"mcp_hosts,omitempty"`
}

// namePrefix starts every sandbox name, so a provider's resources are recognisable.
const namePrefix = "ma-"

// NameFor is the deterministic sandbox name of a session: lowercase hex, so it is a valid
// name for every provider (Kubernetes, Docker, remote services), where session ids are
// mixed-case and would collide when lowercased.
func NameFor(sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return namePrefix + hex.EncodeToString(sum[:16])
}

// SpecFor is the one place a session's environment becomes a sandbox spec. Lists are sorted
// and empty ones dropped so that equal environments give equal specs (and hashes).
func SpecFor(sessionID string, env wire.EnvironmentConfig) Spec {
	spec := Spec{Name: NameFor(sessionID), SessionID: sessionID, Network: Network{Mode: NetworkUnrestricted}}
	if n := env.Networking; n != nil {
		spec.Network.Mode = cmp.Or(n.Type, NetworkUnrestricted)
		if spec.Network.Mode == NetworkLimited {
			spec.Network.AllowedHosts = sortedSet(n.AllowedHosts)
			spec.Network.AllowMCPServers = n.AllowMCPServers != nil && *n.AllowMCPServers
			spec.Network.AllowPackageManagers = n.AllowPackageManagers != nil && *n.AllowPackageManagers
		}
	}
	if p := env.Packages; p != nil {
		for manager, list := range map[string][]string{"apt": p.Apt, "cargo": p.Cargo, "gem": p.Gem, "go": p.Go, "npm": p.Npm, "pip": p.Pip} {
			if list = sortedSet(list); len(list) > 0 {
				if spec.Packages == nil {
					spec.Packages = map[string][]string{}
				}
				spec.Packages[manager] = list
			}
		}
	}
	return spec
}

// Hash is a stable hash of the canonical spec, stored with the binding: it tells whether a
// session's sandbox was made from the environment as it is now, and keys per-environment
// caches (installed packages). The session's identity (Name, SessionID) is left out, so two
// sessions of one environment hash alike. Every field is written quoted and in a fixed
// order, maps by sorted key, so the encoding is canonical and cannot fail.
func (s Spec) Hash() string {
	h := sha256.New()
	fmt.Fprintf(h, "v2 image=%q cpu=%d mem=%d disk=%d net=%q mcp=%t pkgmgr=%t\n",
		s.Image, s.Resources.MilliCPU, s.Resources.MemoryBytes, s.Resources.DiskBytes,
		s.Network.Mode, s.Network.AllowMCPServers, s.Network.AllowPackageManagers)
	for _, host := range s.Network.AllowedHosts {
		fmt.Fprintf(h, "host %q\n", host)
	}
	for _, host := range s.Network.MCPHosts {
		fmt.Fprintf(h, "mcp-host %q\n", host)
	}
	// The effective policy, so a changed deployment ceiling is a changed spec.
	fmt.Fprintf(h, "egress %q\n", cmp.Or(s.Egress.Mode, EgressNone))
	for _, host := range s.Egress.Hosts {
		fmt.Fprintf(h, "egress-host %q\n", host)
	}
	for _, manager := range slices.Sorted(maps.Keys(s.Packages)) {
		fmt.Fprintf(h, "packages %q %q\n", manager, s.Packages[manager])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		fmt.Fprintf(h, "env %q=%q\n", k, s.Env[k])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func sortedSet(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	return slices.Compact(slices.Sorted(slices.Values(list)))
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckEnv refuses environment variables no process can be given: a name that is not a shell
// identifier, or a value with a NUL byte. Providers call it before they create anything.
func (s Spec) CheckEnv() error {
	for k, v := range s.Env {
		if !envName.MatchString(k) {
			return fmt.Errorf("invalid environment variable name %q", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("environment variable %s contains a NUL byte", k)
		}
	}
	return nil
}

// Environ is a command environment built from scratch: base (the provider's PATH, HOME, LANG)
// overridden by the spec's variables, sorted by name so it is the same on every call.
func (s Spec) Environ(base map[string]string) []string {
	vars := maps.Clone(base)
	maps.Copy(vars, s.Env)
	env := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// namePattern is the shape of every name NameFor gives.
var namePattern = regexp.MustCompile(`^` + namePrefix + `[0-9a-f]{32}$`)

// IsName says whether s has the shape of a name NameFor gives.
func IsName(s string) bool { return namePattern.MatchString(s) }

// CheckRef is the check every provider whose external ids are NameFor names makes before it
// asks its backend anything: a Ref of another provider is ErrForeignRef, an id of any other
// shape (tampered, corrupted) ErrInvalidRef, so it can never name something else. what says
// what the id names ("docker sandbox id").
func CheckRef(ref Ref, provider, what string) error {
	if ref.Provider != "" && ref.Provider != provider {
		return fmt.Errorf("sandbox ref of provider %q given to the %s provider: %w", ref.Provider, provider, ErrForeignRef)
	}
	if !IsName(ref.ExternalID) {
		return fmt.Errorf("%s %q: %w", what, ref.ExternalID, ErrInvalidRef)
	}
	return nil
}
