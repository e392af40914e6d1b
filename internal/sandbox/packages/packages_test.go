package packages

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		packages map[string][]string
		mode     Mode
		wantErr  string
	}{
		{name: "each manager's pinning syntax", packages: map[string][]string{
			"apt": {"jq=1.6-2.1"}, "cargo": {"hyperfine@1.18.0"}, "gem": {"rails:7.1.0"},
			"go": {"golang.org/x/tools/cmd/goimports@latest"}, "npm": {"@scope/pkg@^1.2.0"}, "pip": {"sqlalchemy[asyncio]>=2.0,<3"},
		}},
		{name: "user mode without apt", mode: User, packages: map[string][]string{
			"cargo": {"hyperfine@1.18.0"}, "gem": {"rails:7.1.0"}, "go": {"golang.org/x/tools/cmd/goimports@latest"}, "npm": {"left-pad"}, "pip": {"requests==2.32.0"},
		}},
		{name: "apt in user mode", mode: User, packages: map[string][]string{"apt": {"jq"}}, wantErr: "apt packages need root"},
		{name: "an option", packages: map[string][]string{"pip": {"--index-url=http://x"}}, wantErr: `pip package "--index-url=http://x"`},
		{name: "spaces", packages: map[string][]string{"npm": {"a b"}}, wantErr: `npm package "a b"`},
		{name: "a newline", packages: map[string][]string{"apt": {"a\nb"}}, wantErr: "must not hold spaces or control characters"},
		{name: "empty", packages: map[string][]string{"gem": {""}}, wantErr: `gem package ""`},
		{name: "unknown manager", packages: map[string][]string{"brew": {"x"}}, wantErr: `unknown package manager "brew"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Check(tt.packages, tt.mode)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestKeyCoversPackagesOnly(t *testing.T) {
	t.Parallel()
	a := Key(map[string][]string{"pip": {"a"}, "npm": {"b"}})
	require.Equal(t, a, Key(map[string][]string{"npm": {"b"}, "pip": {"a"}}))
	require.NotEqual(t, a, Key(map[string][]string{"pip": {"a", "b"}}))
	require.NotEqual(t, Key(map[string][]string{"pip": {"a b"}}), Key(map[string][]string{"pip": {"a", "b"}}))
}

// The command line a provider hands bash must give the installer exactly the specs, however
// many shell characters they hold: they reach the manager as "$@", never as code.
func TestShellQuoteCommandReachesTheInstallerVerbatim(t *testing.T) {
	t.Parallel()
	specs := []string{"a'b", `c"$(touch /tmp/x)"`, "d;e|f", "g>h", "`i`", `\j`}
	argv := Command(User, "npm", specs)
	// The installer's program check reports the manager before running anything: run the
	// script with a PATH that holds sh and nothing else, and read back the echoed specs.
	bin := t.TempDir()
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(sh, filepath.Join(bin, "sh")))
	cmd := exec.Command("/bin/bash", "-c", ShellQuote(argv))
	cmd.Env = []string{"PATH=" + bin}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 127, exit.ExitCode())
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Equal(t, "ma-install: npm "+strings.Join(specs, " "), lines[0])
	require.Equal(t, "ma-install: npm is not installed in the sandbox image, so npm packages cannot be installed", lines[1])
}

func TestUserEnv(t *testing.T) {
	t.Parallel()
	got := UserEnv([]string{"PATH=/usr/bin:/bin", "GEM_HOME=/usr/local/bundle", "NPM_CONFIG_PREFIX=/usr/local", "LANG=C.UTF-8", DirVar + "=/elsewhere"}, "/opt/p")
	require.Equal(t, []string{
		"LANG=C.UTF-8",
		"CARGO_INSTALL_ROOT=/opt/p",
		"GEM_HOME=/opt/p/gem",
		"GEM_PATH=/opt/p/gem:/usr/local/bundle",
		"GOBIN=/opt/p/bin",
		DirVar + "=/opt/p",
		"NODE_PATH=/opt/p/lib/node_modules",
		"NPM_CONFIG_PREFIX=/opt/p",
		"PATH=/opt/p/bin:/opt/p/gem/bin:/usr/bin:/bin",
		"PYTHONUSERBASE=/opt/p",
	}, got)

	bare := UserEnv(nil, "/d")
	require.Contains(t, bare, "PATH=/d/bin:/d/gem/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	require.Contains(t, bare, "GEM_PATH=/d/gem")
	require.Contains(t, bare, "NODE_PATH=/d/lib/node_modules")
}

func TestTailKeepsTheEnd(t *testing.T) {
	t.Parallel()
	var tail Tail
	for i := range 2000 {
		_, _ = tail.Write([]byte(strings.Repeat("x", 10) + " line " + string(rune('a'+i%26)) + "\n"))
	}
	_, _ = tail.Write([]byte("E: the reason\n"))
	got := tail.String()
	require.LessOrEqual(t, len(got), TailMax+8)
	require.True(t, strings.HasPrefix(got, "[...]\nxxxxxxxxxx line "), "cut at a line start")
	require.True(t, strings.HasSuffix(got, "E: the reason"))

	var short Tail
	_, _ = short.Write([]byte("all of it\n"))
	require.Equal(t, "all of it", short.String())
}
