package app

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandboxtoken"
)

func TestSandboxdSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(good, []byte("0123456789abcdef0123\n"), 0o600))
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("abc\n"), 0o600))
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	tests := []struct {
		name      string
		env       map[string]string
		wantToken string
		wantErr   string
	}{
		{"token", map[string]string{"MANAGED_AGENT_SANDBOXD_TOKEN": "0123456789abcdef"}, "0123456789abcdef", ""},
		{"token file, newline dropped", map[string]string{"MANAGED_AGENT_SANDBOXD_TOKEN_FILE": good}, "0123456789abcdef0123", ""},
		{"none", nil, "", "MANAGED_AGENT_SANDBOXD_TOKEN or MANAGED_AGENT_SANDBOXD_TOKEN_FILE is required"},
		{"both", map[string]string{"MANAGED_AGENT_SANDBOXD_TOKEN": "0123456789abcdef", "MANAGED_AGENT_SANDBOXD_TOKEN_FILE": good}, "", "set one of them"},
		{"short", map[string]string{"MANAGED_AGENT_SANDBOXD_TOKEN": "abc"}, "", "at least 16 bytes"},
		{"short file", map[string]string{"MANAGED_AGENT_SANDBOXD_TOKEN_FILE": short}, "", "at least 16 bytes"},
		{"missing file", map[string]string{"MANAGED_AGENT_SANDBOXD_TOKEN_FILE": filepath.Join(dir, "nope")}, "", "MANAGED_AGENT_SANDBOXD_TOKEN_FILE="},
		{"a key file and a subject: the token derived for the subject", map[string]string{"MANAGED_AGENT_SANDBOXD_TOKEN_FILE": good, "MANAGED_AGENT_SANDBOXD_TOKEN_SUBJECT": "pod-uid-1"},
			sandboxtoken.Derive("0123456789abcdef0123", "pod-uid-1"), ""},
		{"a subject without a key", map[string]string{"MANAGED_AGENT_SANDBOXD_TOKEN_SUBJECT": "pod-uid-1"}, "", "MANAGED_AGENT_SANDBOXD_TOKEN or MANAGED_AGENT_SANDBOXD_TOKEN_FILE is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := FromLookup(Config{}, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			token, err := c.sandboxdToken()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.NotContains(t, err.Error(), "0123456789abcdef", "the token is never in a message")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantToken, token)
		})
	}

	for _, tt := range []struct{ dir, wantErr string }{
		{dir, ""},
		{"relative/dir", "must be an absolute path"},
		{filepath.Join(dir, "missing"), "no such file"},
		{file, "not a directory"},
	} {
		_, err := Config{SandboxdWorkspace: tt.dir}.sandboxdWorkspace()
		if tt.wantErr == "" {
			require.NoError(t, err)
		} else {
			require.ErrorContains(t, err, "MANAGED_AGENT_SANDBOXD_WORKSPACE=")
			require.ErrorContains(t, err, tt.wantErr)
		}
	}
	require.ErrorContains(t, Config{SandboxdAddr: "nope"}.Validate(), "MANAGED_AGENT_SANDBOXD_ADDR")
}

func TestSandboxdCommandEnvDropsOurVariables(t *testing.T) {
	t.Parallel()
	env := commandEnv([]string{"PATH=/bin", "MANAGED_AGENT_SANDBOXD_TOKEN=secret", "MANAGED_AGENT_LOG_LEVEL=debug", "LANG=C"}, "/workspace")
	require.Equal(t, []string{"PATH=/bin", "LANG=C", "HOME=/workspace"}, env)
	require.Equal(t, []string{"HOME=/home/u"}, commandEnv([]string{"HOME=/home/u"}, "/workspace"))
}

func TestSandboxdPackagesDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	tests := []struct {
		name, dir, want, wantErr string
	}{
		{name: "unset", dir: ""},
		{name: "a directory", dir: dir, want: dir},
		{name: "relative", dir: "pkgs", wantErr: "must be an absolute path"},
		{name: "missing", dir: filepath.Join(dir, "nope"), wantErr: "not an existing directory"},
		{name: "a file", dir: file, wantErr: "not an existing directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Config{SandboxdPackagesDir: tt.dir}.sandboxdPackagesDir()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, "MANAGED_AGENT_SANDBOXD_PACKAGES_DIR")
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
