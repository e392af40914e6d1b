package toolstest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func runFileTools(t *testing.T, newSandbox NewSandbox) {
	t.Run("ReadNumbersLines", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		writeFile(t, sb, "f.txt", "one\ntwo\nthree\nfour\n")
		tests := []struct {
			input string
			want  string
		}{
			{`{"file_path":"f.txt"}`, "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour"},
			{`{"file_path":"f.txt","view_range":[2,3]}`, "     2\ttwo\n     3\tthree"},
			{`{"file_path":"f.txt","view_range":[3,-1]}`, "     3\tthree\n     4\tfour"},
			{`{"file_path":"f.txt","view_range":[3,0]}`, "     3\tthree\n     4\tfour"},
			{`{"file_path":"f.txt","view_range":[4,99]}`, "     4\tfour"},
			{`{"file_path":"f.txt","view_range":[1,1]}`, "     1\tone"},
			{`{"file_path":"./f.txt","view_range":null}`, "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour"},
		}
		for _, tt := range tests {
			require.Equal(t, tt.want, toolOK(t, sb, "read", tt.input), tt.input)
		}
	})

	t.Run("ReadEdgeCases", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		writeFile(t, sb, "nonl.txt", "a\nb")
		require.Equal(t, "     1\ta\n     2\tb", toolOK(t, sb, "read", `{"file_path":"nonl.txt"}`))
		writeFile(t, sb, "empty.txt", "")
		require.Contains(t, toolOK(t, sb, "read", `{"file_path":"empty.txt"}`), "is empty")
		writeFile(t, sb, "blank.txt", "\n\n")
		require.Equal(t, "     1\t\n     2\t", toolOK(t, sb, "read", `{"file_path":"blank.txt"}`))
	})

	t.Run("ReadErrors", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		writeFile(t, sb, "f.txt", "one\ntwo\n")
		require.NoError(t, sb.WriteFile(t.Context(), "bin", []byte{0x7f, 'E', 'L', 'F', 0, 1}))
		sh(t, sb, "mkdir dir && ln -s /etc etc_link && ln -s /etc/passwd passwd_link")
		tests := []struct {
			input string
			want  string
		}{
			{`{"file_path":"missing.txt"}`, `"missing.txt" does not exist`},
			{`{"file_path":"dir"}`, "directory"},
			{`{"file_path":"bin"}`, "binary"},
			{`{"file_path":"../x"}`, "outside the workspace"},
			{`{"file_path":"/etc/passwd"}`, "outside the workspace"},
			{`{"file_path":"etc_link/passwd"}`, "outside the workspace"},
			{`{"file_path":"passwd_link"}`, "outside the workspace"},
			{`{"file_path":"f.txt","view_range":[0,1]}`, "start must be 1 or more"},
			{`{"file_path":"f.txt","view_range":[3,4]}`, "past the end of the file (2 lines)"},
			{`{"file_path":"f.txt","view_range":[2,1]}`, "end 1 is before start 2"},
			{`{"file_path":"f.txt","view_range":[1]}`, "view_range must be [start, end]"},
			{`{"file_path":"f.txt","view_range":"1-2"}`, "view_range"},
			{`{"file_path":""}`, "file_path is required"},
			{`{}`, "file_path is required"},
		}
		for _, tt := range tests {
			toolErr(t, sb, "read", tt.input, tt.want)
		}
	})

	t.Run("WriteThenRead", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		require.Equal(t, "Wrote 6 bytes to new/dir/f.txt.", toolOK(t, sb, "write", `{"file_path":"new/dir/f.txt","content":"a\nbcd\n"}`))
		require.Equal(t, "a\nbcd\n", readFile(t, sb, "new/dir/f.txt"))
		toolOK(t, sb, "write", `{"file_path":"new/dir/f.txt","content":""}`)
		require.Empty(t, readFile(t, sb, "new/dir/f.txt"))
		require.Equal(t, "ok\n", sh(t, sb, "test -f new/dir/f.txt && echo ok"))
	})

	t.Run("WriteErrors", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		outside := strings.TrimSpace(sh(t, sb, "d=$(mktemp -d /tmp/conformance-XXXXXX) && ln -s $d out_link && echo $d"))
		t.Cleanup(func() { sh(t, sb, "rm -rf "+outside) })
		sh(t, sb, "ln -s /etc etc_link && mkdir dir")
		tests := []struct {
			input string
			want  string
		}{
			{`{"file_path":"../escape.txt","content":"x"}`, "outside the workspace"},
			{`{"file_path":"/tmp/escape.txt","content":"x"}`, "outside the workspace"},
			{`{"file_path":"out_link/escape.txt","content":"x"}`, "outside the workspace"},
			{`{"file_path":"etc_link/escape.txt","content":"x"}`, "outside the workspace"},
			{`{"file_path":"dir","content":"x"}`, "directory"},
			{`{"file_path":"f.txt"}`, "content is required"},
			{`{"content":"x"}`, "file_path is required"},
			{`{"file_path":"f.txt","content":5}`, "content: expected a string"},
		}
		for _, tt := range tests {
			toolErr(t, sb, "write", tt.input, tt.want)
		}
		require.Equal(t, "0\n", sh(t, sb, "ls -A "+outside+" | wc -l | tr -d ' '"))
	})

	t.Run("Edit", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		const original = "alpha beta\ngamma beta\ndelta\n"
		tests := []struct {
			name, input, wantText, wantFile string
		}{
			{"unique match", `{"file_path":"f","old_string":"delta","new_string":"DELTA"}`,
				"Edited f: replaced 1 occurrence.", "alpha beta\ngamma beta\nDELTA\n"},
			{"replace all", `{"file_path":"f","old_string":"beta","new_string":"B","replace_all":true}`,
				"Edited f: replaced 2 occurrences.", "alpha B\ngamma B\ndelta\n"},
			{"context makes it unique", `{"file_path":"f","old_string":"gamma beta","new_string":"g"}`,
				"Edited f: replaced 1 occurrence.", "alpha beta\ng\ndelta\n"},
			{"delete", `{"file_path":"f","old_string":"alpha ","new_string":""}`,
				"Edited f: replaced 1 occurrence.", "beta\ngamma beta\ndelta\n"},
			{"multi-line", `{"file_path":"f","old_string":"beta\ngamma","new_string":"x"}`,
				"Edited f: replaced 1 occurrence.", "alpha x beta\ndelta\n"},
		}
		for _, tt := range tests {
			writeFile(t, sb, "f", original)
			require.Equal(t, tt.wantText, toolOK(t, sb, "edit", tt.input), tt.name)
			require.Equal(t, tt.wantFile, readFile(t, sb, "f"), tt.name)
		}
	})

	t.Run("EditErrorsChangeNothing", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		const original = "alpha beta\ngamma beta\n"
		writeFile(t, sb, "f", original)
		sh(t, sb, "ln -s /etc/passwd passwd_link")
		tests := []struct {
			input string
			want  string
		}{
			{`{"file_path":"f","old_string":"zeta","new_string":"x"}`, "old_string was not found in f"},
			{`{"file_path":"f","old_string":"beta","new_string":"x"}`, "old_string occurs 2 times in f"},
			{`{"file_path":"f","old_string":"beta","new_string":"beta"}`, "identical"},
			{`{"file_path":"f","old_string":"","new_string":"x"}`, "old_string must not be empty"},
			{`{"file_path":"f","new_string":"x"}`, "old_string is required"},
			{`{"file_path":"f","old_string":"x"}`, "new_string is required"},
			{`{"file_path":"missing","old_string":"a","new_string":"b"}`, `"missing" does not exist`},
			{`{"file_path":"passwd_link","old_string":"root","new_string":"toor"}`, "outside the workspace"},
			{`{"file_path":"f","old_string":"beta","new_string":"x","replace_all":"yes"}`, "replace_all: expected a boolean"},
		}
		for _, tt := range tests {
			toolErr(t, sb, "edit", tt.input, tt.want)
			require.Equal(t, original, readFile(t, sb, "f"), tt.input)
		}
	})
}

func runSearchTools(t *testing.T, newSandbox NewSandbox) {
	t.Run("Glob", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		for _, f := range []string{"a.go", "b.txt", "sub/c.go", "sub/deep/d.go", "sub/deep/e.md", "with space.go", ".hidden.go"} {
			writeFile(t, sb, f, "package x\n")
		}
		// The bash call also creates the tools' state directory; neither it nor .git is listed.
		toolOK(t, sb, "bash", `{"command":"mkdir -p .git && touch .git/config.go"}`)
		tests := []struct {
			input string
			want  string
		}{
			{`{"pattern":"**/*.go"}`, ".hidden.go\na.go\nsub/c.go\nsub/deep/d.go\nwith space.go"},
			{`{"pattern":"*.go"}`, ".hidden.go\na.go\nwith space.go"},
			{`{"pattern":"./*.txt"}`, "b.txt"},
			{`{"pattern":"sub/**"}`, "sub/c.go\nsub/deep/d.go\nsub/deep/e.md"},
			{`{"pattern":"**/*.{md,txt}"}`, "b.txt\nsub/deep/e.md"},
			{`{"pattern":"*.go","path":"sub"}`, "sub/c.go"},
			{`{"pattern":"**/*.go","path":"sub/deep"}`, "sub/deep/d.go"},
			{`{"pattern":"*.rs"}`, `No files match "*.rs" under the workspace root.`},
		}
		for _, tt := range tests {
			require.Equal(t, tt.want, toolOK(t, sb, "glob", tt.input), tt.input)
		}
	})

	t.Run("GlobCapsResults", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		sh(t, sb, "mkdir many && cd many && for i in $(seq 1 1100); do : > f$i.txt; done")
		out := toolOK(t, sb, "glob", `{"pattern":"**/*.txt"}`)
		got := lines(out)
		require.Len(t, got, 1001)
		require.Equal(t, "[showing the first 1000 of 1100 matches; narrow the pattern or path]", got[1000])
	})

	t.Run("GlobErrors", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		sh(t, sb, "ln -s /etc etc_link && touch plain")
		tests := []struct {
			input string
			want  string
		}{
			{`{"pattern":"[a-"}`, "not a valid glob pattern"},
			{`{"pattern":"/etc/*"}`, "must be relative to path"},
			{`{"pattern":"*","path":"../"}`, "outside the workspace"},
			{`{"pattern":"*","path":"/etc"}`, "outside the workspace"},
			{`{"pattern":"*","path":"etc_link"}`, "outside the workspace"},
			{`{"pattern":"*","path":"missing"}`, `"missing" does not exist`},
			{`{"pattern":"*","path":"plain"}`, "not a directory"},
			{`{"path":"."}`, "pattern is required"},
		}
		for _, tt := range tests {
			toolErr(t, sb, "glob", tt.input, tt.want)
		}
	})

	t.Run("Grep", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		writeFile(t, sb, "a.go", "package a\nfunc Alpha() {}\n")
		writeFile(t, sb, "sub/b.go", "package b\n// alpha lower\nfunc Beta() {}\n")
		require.NoError(t, sb.WriteFile(t.Context(), "sub/bin.dat", []byte("Alpha\x00binary")))
		writeFile(t, sb, "sub/long.txt", "Alpha "+strings.Repeat("z", 2000)+"\n")
		tests := []struct {
			input string
			want  string
		}{
			{`{"pattern":"func \\w+"}`, "a.go:2:func Alpha() {}\nsub/b.go:3:func Beta() {}"},
			{`{"pattern":"(?i)alpha","path":"sub/b.go"}`, "sub/b.go:2:// alpha lower"},
			{`{"pattern":"^package","path":"sub"}`, "sub/b.go:1:package b"},
			{`{"pattern":"nothing-matches"}`, `No matches for "nothing-matches" under the workspace root (3 files searched).`},
		}
		for _, tt := range tests {
			require.Equal(t, tt.want, toolOK(t, sb, "grep", tt.input), tt.input)
		}
		long := toolOK(t, sb, "grep", `{"pattern":"^Alpha","path":"sub"}`)
		require.True(t, strings.HasPrefix(long, "sub/long.txt:1:Alpha zzz"), long)
		require.True(t, strings.HasSuffix(long, " […]"), "long lines are shortened")
		require.Less(t, len(long), 600)
	})

	t.Run("GrepCapsMatches", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		sh(t, sb, "seq 1 1500 | sed 's/^/hit /' > hits.txt")
		got := lines(toolOK(t, sb, "grep", `{"pattern":"^hit"}`))
		require.Len(t, got, 1001)
		require.Equal(t, "hits.txt:1000:hit 1000", got[999])
		require.Equal(t, "[showing the first 1000 of 1500 matching lines; narrow the pattern or path]", got[1000])
	})

	t.Run("GrepErrors", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		sh(t, sb, "ln -s /etc etc_link && ln -s /etc/passwd passwd_link")
		tests := []struct {
			input string
			want  string
		}{
			{`{"pattern":"(unclosed"}`, "not a valid regular expression"},
			{`{"pattern":"root","path":"/etc"}`, "outside the workspace"},
			{`{"pattern":"root","path":"etc_link"}`, "outside the workspace"},
			{`{"pattern":"root","path":"passwd_link"}`, "outside the workspace"},
			{`{"pattern":"root","path":"../.."}`, "outside the workspace"},
			{`{"pattern":"root","path":"missing"}`, `"missing" does not exist`},
			{`{"pattern":""}`, "pattern is required"},
		}
		for _, tt := range tests {
			toolErr(t, sb, "grep", tt.input, tt.want)
		}
		// A symlink out of the workspace inside the searched tree is not followed either.
		require.Contains(t, toolOK(t, sb, "grep", `{"pattern":"root"}`), "No matches")
	})
}

func runToolErrors(t *testing.T, newSandbox NewSandbox) {
	sb := newSandbox(t)
	tests := []struct {
		name, input, want string
	}{
		{"nope", `{}`, `unknown built-in tool "nope"`},
		{"bash", `{"command":`, "invalid input for bash: malformed JSON"},
		{"bash", `[]`, "invalid input for bash"},
		{"bash", `"echo"`, "invalid input for bash"},
		{"bash", `{"command":1}`, "command: expected a string"},
		{"bash", `{"command":"true","colour":"red"}`, `unknown field "colour"`},
		{"bash", `{}`, "command is required"},
		{"bash", `{"command":"  "}`, "command is required"},
		{"bash", `{"command":"true","timeout_ms":-5}`, "timeout_ms must be positive"},
		{"bash", `{"command":"true","timeout_ms":"10"}`, "timeout_ms: expected a number"},
		{"bash", `{"command":"true","restart":"yes"}`, "restart: expected a boolean"},
		{"bash", `{"command":"true"} {}`, "unexpected data after the JSON value"},
		{"read", ``, "file_path is required"},
		{"read", `null`, "file_path is required"},
		{"web_fetch", `{"url":"https://example.com"}`, "web_fetch tool is not implemented on this server"},
		{"web_search", `{"query":"x"}`, "web_search tool is not implemented on this server"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s", tt.name, tt.input), func(t *testing.T) {
			toolErr(t, sb, tt.name, tt.input, tt.want)
		})
	}
}
