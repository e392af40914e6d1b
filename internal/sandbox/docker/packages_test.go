package docker

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckPackages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		packages map[string][]string
		wantErr  string
	}{
		{name: "each manager's pinning syntax", packages: map[string][]string{
			"apt": {"jq=1.6-2.1"}, "cargo": {"hyperfine@1.18.0"}, "gem": {"rails:7.1.0"},
			"go": {"golang.org/x/tools/cmd/goimports@latest"}, "npm": {"@scope/pkg@^1.2.0"}, "pip": {"sqlalchemy[asyncio]>=2.0,<3"},
		}},
		{name: "an option", packages: map[string][]string{"pip": {"--index-url=http://x"}}, wantErr: `pip package "--index-url=http://x"`},
		{name: "spaces", packages: map[string][]string{"npm": {"a b"}}, wantErr: `npm package "a b"`},
		{name: "a newline", packages: map[string][]string{"apt": {"a\nb"}}, wantErr: "without spaces"},
		{name: "empty", packages: map[string][]string{"gem": {""}}, wantErr: `gem package ""`},
		{name: "unknown manager", packages: map[string][]string{"brew": {"x"}}, wantErr: `unknown package manager "brew"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := checkPackages(tt.packages)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestEnvKeyCoversBaseAndPackagesOnly(t *testing.T) {
	t.Parallel()
	a := envKey("sha256:1", map[string][]string{"pip": {"a"}, "npm": {"b"}})
	require.Equal(t, a, envKey("sha256:1", map[string][]string{"npm": {"b"}, "pip": {"a"}}))
	require.NotEqual(t, a, envKey("sha256:2", map[string][]string{"pip": {"a"}, "npm": {"b"}}), "a rebuilt base")
	require.NotEqual(t, a, envKey("sha256:1", map[string][]string{"pip": {"a", "b"}}))
	require.NotEqual(t, envKey("x", map[string][]string{"pip": {"a b"}}), envKey("x", map[string][]string{"pip": {"a", "b"}}))
}

func TestOutputTailKeepsTheEnd(t *testing.T) {
	t.Parallel()
	var tail outputTail
	for i := range 2000 {
		_, _ = tail.Write([]byte(strings.Repeat("x", 10) + " line " + string(rune('a'+i%26)) + "\n"))
	}
	_, _ = tail.Write([]byte("E: the reason\n"))
	got := tail.String()
	require.LessOrEqual(t, len(got), installTailMax+8)
	require.True(t, strings.HasPrefix(got, "[...]\nxxxxxxxxxx line "), "cut at a line start")
	require.True(t, strings.HasSuffix(got, "E: the reason"))

	var short outputTail
	_, _ = short.Write([]byte("all of it\n"))
	require.Equal(t, "all of it", short.String())
}
