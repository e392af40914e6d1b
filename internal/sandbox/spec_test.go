package sandbox_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func ptr[T any](v T) *T { return &v }

func TestSpecFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  wire.EnvironmentConfig
		want sandbox.Spec
	}{
		{"self hosted", wire.EnvironmentConfig{Type: "self_hosted"},
			sandbox.Spec{Network: sandbox.Network{Mode: sandbox.NetworkUnrestricted}}},
		{"unrestricted drops the limited-only keys",
			wire.EnvironmentConfig{Type: "cloud", Networking: &wire.Networking{Type: "unrestricted", AllowedHosts: []string{"x"}, AllowMCPServers: ptr(true)}},
			sandbox.Spec{Network: sandbox.Network{Mode: sandbox.NetworkUnrestricted}}},
		{"limited, hosts sorted and deduplicated",
			wire.EnvironmentConfig{Type: "cloud", Networking: &wire.Networking{Type: "limited", AllowedHosts: []string{"b.example", "a.example", "b.example"}, AllowPackageManagers: ptr(true)}},
			sandbox.Spec{Network: sandbox.Network{Mode: sandbox.NetworkLimited, AllowedHosts: []string{"a.example", "b.example"}, AllowPackageManagers: true}}},
		{"packages per manager, empty managers dropped",
			wire.EnvironmentConfig{Type: "cloud", Packages: &wire.Packages{Type: "packages", Pip: []string{"requests", "numpy"}, Apt: []string{}, Npm: []string{"left-pad"}}},
			sandbox.Spec{Network: sandbox.Network{Mode: sandbox.NetworkUnrestricted},
				Packages: map[string][]string{"pip": {"numpy", "requests"}, "npm": {"left-pad"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := sandbox.SpecFor("sesn_011CAbc", tt.env)
			tt.want.Name, tt.want.SessionID = sandbox.NameFor("sesn_011CAbc"), "sesn_011CAbc"
			require.Equal(t, tt.want, got)
		})
	}
}

func TestNameForIsDeterministicAndValidEverywhere(t *testing.T) {
	t.Parallel()
	a := sandbox.NameFor("sesn_011CAbcDEF")
	require.Equal(t, a, sandbox.NameFor("sesn_011CAbcDEF"))
	require.NotEqual(t, a, sandbox.NameFor("sesn_011CabcDEF"), "ids that differ only in case get different names")
	// An RFC 1123 label: what Kubernetes, Docker and the remote services all accept.
	require.Regexp(t, regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`), a)
}

func TestSpecHash(t *testing.T) {
	t.Parallel()
	limited := wire.EnvironmentConfig{Type: "cloud", Networking: &wire.Networking{Type: "limited", AllowedHosts: []string{"b", "a"}}}
	reordered := wire.EnvironmentConfig{Type: "cloud", Networking: &wire.Networking{Type: "limited", AllowedHosts: []string{"a", "b", "a"}}}
	base := sandbox.SpecFor("sesn_1", limited)
	require.Equal(t, base.Hash(), sandbox.SpecFor("sesn_1", reordered).Hash(), "the canonical spec, not its spelling")
	require.Equal(t, base.Hash(), sandbox.SpecFor("sesn_2", limited).Hash(), "sessions of one environment hash alike")
	require.Regexp(t, `^[0-9a-f]{32}$`, base.Hash())

	changed := map[string]func(*sandbox.Spec){
		"image":     func(s *sandbox.Spec) { s.Image = "python:3.13" },
		"resources": func(s *sandbox.Spec) { s.Resources.MemoryBytes = 1 << 30 },
		"network":   func(s *sandbox.Spec) { s.Network.Mode = sandbox.NetworkUnrestricted },
		"hosts":     func(s *sandbox.Spec) { s.Network.AllowedHosts = []string{"a"} },
		"mcp":       func(s *sandbox.Spec) { s.Network.AllowMCPServers = true },
		"mcp hosts": func(s *sandbox.Spec) { s.Network.MCPHosts = []string{"m"} },
		"egress":    func(s *sandbox.Spec) { s.Egress = sandbox.Egress{Mode: sandbox.EgressFull} },
		"egress hosts": func(s *sandbox.Spec) {
			s.Egress = sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{"a"}}
		},
		"packages": func(s *sandbox.Spec) { s.Packages = map[string][]string{"pip": {"numpy"}} },
		"env":      func(s *sandbox.Spec) { s.Env = map[string]string{"A": "1"} },
	}
	seen := map[string]string{base.Hash(): "base"}
	for name, change := range changed {
		s := sandbox.SpecFor("sesn_1", limited)
		change(&s)
		prev, dup := seen[s.Hash()]
		require.False(t, dup, "%s hashes like %s", name, prev)
		seen[s.Hash()] = name
	}
}

func TestSpecEnviron(t *testing.T) {
	t.Parallel()
	spec := sandbox.Spec{Env: map[string]string{"LANG": "de_DE.UTF-8", "TOKEN": "x"}}
	require.Equal(t, []string{"HOME=/w", "LANG=de_DE.UTF-8", "PATH=/bin", "TOKEN=x"},
		spec.Environ(map[string]string{"PATH": "/bin", "HOME": "/w", "LANG": "C.UTF-8"}), "sorted; the spec overrides the base")
	base := map[string]string{"PATH": "/bin"}
	spec.Environ(base)
	require.Equal(t, map[string]string{"PATH": "/bin"}, base, "the base is not changed")
}

func TestSpecCheckEnv(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env     map[string]string
		wantErr string
	}{
		{env: map[string]string{"OK_1": "v", "_x": ""}},
		{env: map[string]string{"1BAD": "v"}, wantErr: `invalid environment variable name "1BAD"`},
		{env: map[string]string{"A-B": "v"}, wantErr: `invalid environment variable name "A-B"`},
		{env: map[string]string{"A": "x\x00y"}, wantErr: "environment variable A contains a NUL byte"},
	}
	for _, tc := range cases {
		err := sandbox.Spec{Env: tc.env}.CheckEnv()
		if tc.wantErr == "" {
			require.NoError(t, err)
			continue
		}
		require.EqualError(t, err, tc.wantErr)
	}
}

func TestCheckRef(t *testing.T) {
	good := sandbox.NameFor("sesn_1")
	for _, tc := range []struct {
		name string
		ref  sandbox.Ref
		want error
	}{
		{"ours", sandbox.Ref{Provider: "docker", ExternalID: good}, nil},
		{"no provider recorded yet", sandbox.Ref{ExternalID: good}, nil},
		{"another provider's", sandbox.Ref{Provider: "local", ExternalID: good}, sandbox.ErrForeignRef},
		{"not a NameFor name", sandbox.Ref{Provider: "docker", ExternalID: "some-other-container"}, sandbox.ErrInvalidRef},
		{"upper-case hex", sandbox.Ref{Provider: "docker", ExternalID: strings.ToUpper(good)}, sandbox.ErrInvalidRef},
		{"a prefix of a name", sandbox.Ref{Provider: "docker", ExternalID: good[:10]}, sandbox.ErrInvalidRef},
		{"a name with more after it", sandbox.Ref{Provider: "docker", ExternalID: good + "/x"}, sandbox.ErrInvalidRef},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sandbox.CheckRef(tc.ref, "docker", "docker sandbox id")
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}
