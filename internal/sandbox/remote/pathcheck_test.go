package remote

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

func TestCleanRel(t *testing.T) {
	tests := []struct {
		in, want string
		outside  bool
		bad      bool
	}{
		{in: "", want: ""},
		{in: ".", want: ""},
		{in: "a/./b/", want: "a/b"},
		{in: "a/../b", want: "b"},
		{in: "a/..", want: ""},
		{in: "..", outside: true},
		{in: "../x", outside: true},
		{in: "a/../../x", outside: true},
		{in: "/etc/passwd", outside: true},
		{in: "a\x00b", bad: true},
	}
	for _, tt := range tests {
		got, err := CleanRel(tt.in)
		switch {
		case tt.outside:
			require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace, tt.in)
		case tt.bad:
			require.ErrorContains(t, err, "NUL", tt.in)
		default:
			require.NoError(t, err, tt.in)
			require.Equal(t, tt.want, got, tt.in)
		}
	}
}

func TestSplitVerdict(t *testing.T) {
	tests := []struct {
		name  string
		out   string
		words []string
		rest  string
		fails string
	}{
		{name: "ok and the output after it", out: "ma-n ok dir\nhello\n", words: []string{"ok", "dir"}, rest: "hello\n"},
		{name: "a refusal with details", out: "ma-n toolarge 123\n", words: []string{"toolarge", "123"}, rest: ""},
		{name: "another nonce is no verdict", out: "ma-x ok\n", fails: "no verdict"},
		{name: "a nonce alone is no verdict", out: "ma-n\n", fails: "no verdict"},
		{name: "no line is no verdict", out: "ma-n ok", fails: "no verdict"},
		{name: "the output in the error is cut", out: strings.Repeat("x", 500), fails: "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			words, rest, err := SplitVerdict("ma-n", []byte(tt.out))
			if tt.fails != "" {
				require.ErrorContains(t, err, tt.fails)
				require.Less(t, len(err.Error()), 300)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.words, words)
			require.Equal(t, tt.rest, string(rest))
		})
	}
}

func TestPathCheckError(t *testing.T) {
	c := PathCheck{MaxFileSize: 64, NoRoot: "the workspace directory is missing (MANAGED_AGENT_X_WORKSPACE)"}
	tests := []struct {
		words []string
		is    error
		text  string
	}{
		{[]string{"outside"}, sandbox.ErrOutsideWorkspace, `read "a/b": `},
		{[]string{"notexist"}, sandbox.ErrNotExist, `read "a/b": `},
		{[]string{"notdir"}, syscall.ENOTDIR, `read "a/b": not a directory`},
		{[]string{"isdir"}, syscall.EISDIR, `read "a/b": is a directory`},
		{[]string{"notfile"}, nil, `read "a/b": not a regular file`},
		{[]string{"toolarge", "100"}, nil, `read "a/b": file is too large (100 bytes, the limit is 64); read parts of it with bash`},
		{[]string{"noroot"}, nil, `read "a/b": the workspace directory is missing (MANAGED_AGENT_X_WORKSPACE)`},
		{[]string{"mkdir"}, nil, `read "a/b": cannot create its directory (a parent is a file?)`},
		{[]string{"invalid", "x"}, nil, `read "a/b": the path check failed (invalid x)`},
	}
	for _, tt := range tests {
		t.Run(tt.words[0], func(t *testing.T) {
			err := c.Error(tt.words, "read", "a/b")
			require.ErrorContains(t, err, tt.text)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
		})
	}
}

// TestPathPreamble runs the preamble in a real shell against a directory with a symbolic
// link out of it.
func TestPathPreamble(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	ws := filepath.Join(tmp, "ws")
	require.NoError(t, exec.Command("mkdir", "-p", filepath.Join(ws, "d"), filepath.Join(tmp, "out")).Run())
	require.NoError(t, exec.Command("ln", "-s", filepath.Join(tmp, "out"), filepath.Join(ws, "link")).Run())
	tests := []struct {
		name     string
		root     string
		rel      string
		makeRoot bool
		want     string
	}{
		{"a directory in the workspace", ws, "d", false, "ok " + ws + "/d"},
		{"a missing name in the workspace", ws, "d/new", false, "ok " + ws + "/d/new"},
		{"a symbolic link out of it", ws, "link/x", false, "outside"},
		{"a missing root", filepath.Join(tmp, "none"), "a", false, "noroot"},
		{"a missing root made", filepath.Join(tmp, "made"), "a", true, "ok " + tmp + "/made/a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := PathPreamble("ma-n", ShellQuote(tt.root), tt.rel, tt.makeRoot) + `ma_say ok "$ma_p"`
			out, err := exec.Command(bash, "-c", script).Output()
			require.NoError(t, err)
			words, _, err := SplitVerdict("ma-n", out)
			require.NoError(t, err)
			require.Equal(t, tt.want, strings.Join(words, " "))
		})
	}
}

func TestShellQuote(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	for _, s := range []string{"", "plain", "it's", `a "b" $c \d`, "'''"} {
		out, err := exec.Command(bash, "-c", "printf %s "+ShellQuote(s)).Output()
		require.NoError(t, err)
		require.Equal(t, s, string(out))
	}
}

// TestChecks runs the checks after the preamble in a real shell.
func TestChecks(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, exec.Command("mkdir", "-p", filepath.Join(ws, "d")).Run())
	require.NoError(t, exec.Command("bash", "-c", `printf 12345 > "$1"/f; mkfifo "$1"/fifo`, "x", ws).Run())
	tests := []struct {
		name, check, rel, ok, want string
	}{
		{"DirCheck enters a directory", DirCheck, "d", `ma_say ok "$(pwd)"`, "ok " + ws + "/d"},
		{"DirCheck refuses a missing one", DirCheck, "none", `ma_say ok`, "notexist"},
		{"DirCheck refuses a file", DirCheck, "f", `ma_say ok`, "notdir"},
		{"ReadCheck gives the size", ReadCheck(5), "f", `ma_say ok "$ma_n"`, "ok 5"},
		{"ReadCheck refuses a larger file", ReadCheck(4), "f", `ma_say ok`, "toolarge 5"},
		{"ReadCheck refuses a directory", ReadCheck(5), "d", `ma_say ok`, "isdir"},
		{"ReadCheck refuses a missing file", ReadCheck(5), "none", `ma_say ok`, "notexist"},
		{"ReadCheck refuses a FIFO", ReadCheck(5), "fifo", `ma_say ok`, "notfile"},
		{"WriteCheck makes the parent", WriteCheck, "new/dir/f", `[ -d "$ma_d" ] && ma_say ok "$ma_d"`, "ok " + ws + "/new/dir"},
		{"WriteCheck takes an existing file", WriteCheck, "f", `ma_say ok "$ma_d"`, "ok " + ws},
		{"WriteCheck refuses a directory", WriteCheck, "d", `ma_say ok`, "isdir"},
		{"WriteCheck refuses a FIFO", WriteCheck, "fifo", `ma_say ok`, "notfile"},
		{"WriteCheck refuses a file as a parent", WriteCheck, "f/x", `ma_say ok`, "mkdir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := PathPreamble("ma-n", ShellQuote(ws), tt.rel, false) + tt.check + tt.ok
			out, err := exec.Command(bash, "-c", script).Output()
			require.NoError(t, err)
			words, _, err := SplitVerdict("ma-n", out)
			require.NoError(t, err)
			require.Equal(t, tt.want, strings.Join(words, " "))
		})
	}
}
