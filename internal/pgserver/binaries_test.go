package pgserver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFindBinaries(t *testing.T) {
	tests := []struct {
		name     string
		versions map[string][]string // version dir under the lib root -> executables in its bin
		want     string              // version dir expected; "" for the not-found error
	}{
		{name: "nothing installed", want: ""},
		{name: "one version", versions: map[string][]string{"15": {"initdb", "postgres", "pg_ctl"}}, want: "15"},
		{
			name:     "newest by number, not by string",
			versions: map[string][]string{"9.6": {"initdb", "postgres"}, "15": {"initdb", "postgres"}, "13": {"initdb", "postgres"}},
			want:     "15",
		},
		{
			name:     "a client-only newer version is skipped",
			versions: map[string][]string{"16": {"psql"}, "15": {"initdb", "postgres"}},
			want:     "15",
		},
		{name: "initdb without postgres", versions: map[string][]string{"15": {"initdb"}}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for version, bins := range tt.versions {
				dir := filepath.Join(root, version, "bin")
				require.NoError(t, os.MkdirAll(dir, 0o755))
				for _, bin := range bins {
					require.NoError(t, os.WriteFile(filepath.Join(dir, bin), []byte("#!/bin/sh\n"), 0o755))
				}
			}
			t.Setenv("PATH", t.TempDir())
			oldRoot := libRoot
			libRoot = root
			t.Cleanup(func() { libRoot = oldRoot })

			dir, err := FindBinaries()
			if tt.want == "" {
				require.ErrorIs(t, err, ErrBinariesNotFound)
				require.ErrorContains(t, err, "apt-get install postgresql")
				require.ErrorContains(t, err, "MANAGED_AGENT_DATABASE_URL")
				require.ErrorContains(t, err, root+"/*/bin")
				return
			}
			require.NoError(t, err)
			require.Equal(t, filepath.Join(root, tt.want, "bin"), dir)
		})
	}
}

func TestFindBinariesPrefersPath(t *testing.T) {
	onPath := t.TempDir()
	for _, bin := range []string{"initdb", "postgres"} {
		require.NoError(t, os.WriteFile(filepath.Join(onPath, bin), []byte("#!/bin/sh\n"), 0o755))
	}
	t.Setenv("PATH", onPath)
	oldRoot := libRoot
	libRoot = t.TempDir()
	t.Cleanup(func() { libRoot = oldRoot })

	dir, err := FindBinaries()
	require.NoError(t, err)
	require.Equal(t, onPath, dir)
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int // sign only
	}{
		{"15", "15", 0},
		{"15", "9.6", 1},
		{"9.6", "10", -1},
		{"9.6", "9.5", 1},
		{"16", "16.1", -1},
	}
	for _, tt := range tests {
		got := compareVersions(tt.a, tt.b)
		switch {
		case tt.want == 0:
			require.Zero(t, got, "%s vs %s", tt.a, tt.b)
		case tt.want > 0:
			require.Positive(t, got, "%s vs %s", tt.a, tt.b)
		default:
			require.Negative(t, got, "%s vs %s", tt.a, tt.b)
		}
	}
}

func TestHasCluster(t *testing.T) {
	tests := []struct {
		name    string
		files   []string // created inside the directory; nil with missing=true means no directory
		missing bool
		want    bool
		wantErr string
	}{
		{name: "missing directory", missing: true, want: false},
		{name: "empty directory", want: false},
		{name: "cluster", files: []string{"PG_VERSION", "postgresql.conf"}, want: true},
		{name: "someone else's files", files: []string{"notes.txt"}, wantErr: "not empty and holds no PostgreSQL cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if !tt.missing {
				require.NoError(t, os.Mkdir(dir, 0o700))
			}
			for _, f := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o600))
			}
			got, err := hasCluster(dir)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
