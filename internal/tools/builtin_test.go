package tools_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/tools"
)

// memSandbox is an in-memory sandbox: files in a map, Exec answered by a function. It lets the
// tools' own logic be tested without processes; the tools suite (tools/toolstest) covers real providers.
type memSandbox struct {
	mu       sync.Mutex
	files    map[string]string
	exec     func(req sandbox.ExecRequest) (sandbox.ExecResult, error)
	execs    []sandbox.ExecRequest
	writeErr error
}

func newMem(files map[string]string) *memSandbox {
	if files == nil {
		files = map[string]string{}
	}
	return &memSandbox{files: files}
}

func (m *memSandbox) Exec(_ context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	m.mu.Lock()
	m.execs = append(m.execs, req)
	m.mu.Unlock()
	if m.exec == nil {
		return sandbox.ExecResult{}, nil
	}
	return m.exec(req)
}

func (m *memSandbox) ReadFile(_ context.Context, path string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if strings.HasPrefix(path, "/") || strings.HasPrefix(path, "..") {
		return nil, fmt.Errorf("read %q: %w", path, sandbox.ErrOutsideWorkspace)
	}
	data, ok := m.files[path]
	if !ok {
		return nil, fmt.Errorf("read %q: %w", path, sandbox.ErrNotExist)
	}
	return []byte(data), nil
}

func (m *memSandbox) WriteFile(_ context.Context, path string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.writeErr != nil {
		return m.writeErr
	}
	m.files[path] = string(data)
	return nil
}

func (m *memSandbox) file(path string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.files[path]
}

func run(sb sandbox.Sandbox, name, input string) tools.Result {
	return tools.RunBuiltin(context.Background(), sb, name, []byte(input))
}

func TestRunBuiltinRejectsBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, tool, input, want string
	}{
		{"unknown tool", "python", `{}`, `unknown built-in tool "python" (expected one of bash, read, write, edit, glob, grep, web_fetch, web_search)`},
		{"malformed", "write", `{"file_path":`, "invalid input for write: malformed JSON: unexpected end of input"},
		{"not an object", "glob", `["*"]`, "invalid input for glob: expected a JSON object"},
		{"unknown field", "edit", `{"file_path":"f","old_string":"a","new_string":"b","path":"x"}`, `invalid input for edit: unknown field "path"`},
		{"wrong type", "grep", `{"pattern":["x"]}`, "invalid input for grep: pattern: expected a string"},
		{"fraction", "bash", `{"command":"x","timeout_ms":1.5}`, "invalid input for bash: timeout_ms: expected a number"},
		{"NUL in command", "bash", `{"command":"echo \u0000"}`, "command contains a NUL byte"},
		{"three numbers", "read", `{"file_path":"f","view_range":[1,2,3]}`, "view_range must be [start, end] (got 3 numbers)"},
		{"missing pattern", "grep", `{"path":"x"}`, "invalid input for grep: pattern is required"},
		{"bad regexp", "grep", `{"pattern":"a**"}`, "not a valid regular expression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sb := newMem(nil)
			res := run(sb, tt.tool, tt.input)
			require.True(t, res.IsError, res.Text)
			require.Contains(t, res.Text, tt.want)
			require.Empty(t, sb.execs, "rejected input runs nothing")
			require.Empty(t, sb.files, "rejected input writes nothing")
		})
	}
}

func TestRunBuiltinWithoutSandbox(t *testing.T) {
	t.Parallel()
	res := tools.RunBuiltin(t.Context(), nil, "read", []byte(`{"file_path":"x"}`))
	require.True(t, res.IsError)
	require.Contains(t, res.Text, "needs a sandbox")
	res = tools.RunBuiltin(t.Context(), nil, "web_search", []byte(`{"query":"x"}`))
	require.True(t, res.IsError)
	require.Contains(t, res.Text, "not implemented on this server")
}

func TestNeedsSandbox(t *testing.T) {
	t.Parallel()
	for _, name := range toolconfig.BuiltInNames() {
		want := name != "web_fetch" && name != "web_search"
		require.Equal(t, want, tools.NeedsSandbox(name), name)
	}
	require.False(t, tools.NeedsSandbox("my_custom_tool"))
}

func TestBashRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		input       string
		wantTimeout time.Duration
	}{
		{`{"command":"ls"}`, tools.DefaultBashTimeout},
		{`{"command":"ls","timeout_ms":0}`, tools.DefaultBashTimeout},
		{`{"command":"ls","timeout_ms":1500}`, 1500 * time.Millisecond},
		{`{"command":"ls","timeout_ms":600000}`, tools.MaxBashTimeout},
		{`{"command":"ls","timeout_ms":99999999999}`, tools.MaxBashTimeout},
	}
	for _, tt := range tests {
		sb := newMem(nil)
		res := run(sb, "bash", tt.input)
		require.False(t, res.IsError, res.Text)
		require.Len(t, sb.execs, 1)
		req := sb.execs[0]
		require.Equal(t, tt.wantTimeout, req.Timeout, tt.input)
		require.Positive(t, req.MaxOutput, "the tool sets its own cap so every provider behaves alike")
		require.Empty(t, req.Dir, "the script restores the working directory itself")
		require.True(t, strings.HasSuffix(req.Command, "eval 'ls'\n"), req.Command)
	}
}

func TestBashResultText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		res     sandbox.ExecResult
		want    string
		wantErr bool
	}{
		{"plain", sandbox.ExecResult{Output: []byte("a\nb\n")}, "a\nb", false},
		{"empty", sandbox.ExecResult{}, "(no output)", false},
		{"exit code", sandbox.ExecResult{ExitCode: 2, Output: []byte("bad\n")}, "bad\n[exit code 2]", false},
		{"exit code alone", sandbox.ExecResult{ExitCode: 1}, "[exit code 1]", false},
		{"invalid utf-8", sandbox.ExecResult{Output: []byte("a\xffb")}, "a\uFFFDb", false},
		{"NUL bytes are binary output", sandbox.ExecResult{Output: []byte("a\x00b\x00")},
			"a\uFFFDb\uFFFD\n[binary output: 4 bytes, 2 of them NUL; NUL bytes and invalid UTF-8 are shown as \uFFFD; pipe through `xxd` or `base64` to see the bytes]", false},
		{"a character cut by the cap is not binary", sandbox.ExecResult{Output: []byte("a\xe2\x82"), Truncated: true},
			"a\n[output truncated: the command wrote more than 1048576 bytes]", false},
		{"truncated", sandbox.ExecResult{Output: []byte("aaa"), Truncated: true},
			"aaa\n[output truncated: the command wrote more than 1048576 bytes]", false},
		{"timed out", sandbox.ExecResult{Output: []byte("partial\n"), TimedOut: true, ExitCode: 137},
			"The command timed out after 2m0s and was killed, with every process it started. Output before the timeout:\npartial", true},
		{"timed out silently", sandbox.ExecResult{TimedOut: true, ExitCode: 137},
			"The command timed out after 2m0s and was killed, with every process it started.", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sb := newMem(nil)
			sb.exec = func(sandbox.ExecRequest) (sandbox.ExecResult, error) { return tt.res, nil }
			res := run(sb, "bash", `{"command":"x"}`)
			require.Equal(t, tools.Result{Text: tt.want, IsError: tt.wantErr}, res)
		})
	}
}

func TestBashSandboxFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("attach: %w", sandbox.ErrGone), "the session's sandbox no longer exists"},
		{fmt.Errorf("command canceled: %w", context.Canceled), "bash was canceled"},
		{errors.New("docker daemon unreachable"), "bash: docker daemon unreachable"},
	}
	for _, tt := range tests {
		sb := newMem(nil)
		sb.exec = func(sandbox.ExecRequest) (sandbox.ExecResult, error) { return sandbox.ExecResult{}, tt.err }
		res := run(sb, "bash", `{"command":"x"}`)
		require.True(t, res.IsError)
		require.Contains(t, res.Text, tt.want)
	}
}

func TestBashRestart(t *testing.T) {
	t.Parallel()
	sb := newMem(map[string]string{".managed-agents/bash/cwd": "/somewhere"})
	res := run(sb, "bash", `{"restart":true}`)
	require.False(t, res.IsError, res.Text)
	require.Empty(t, sb.file(".managed-agents/bash/cwd"))
	require.Empty(t, sb.execs, "a bare restart runs nothing")

	sb.writeErr = errors.New("disk full")
	res = run(sb, "bash", `{"restart":true,"command":"ls"}`)
	require.True(t, res.IsError)
	require.Contains(t, res.Text, "disk full")
	require.Empty(t, sb.execs)
}

func TestEditWriteFailureIsReported(t *testing.T) {
	t.Parallel()
	sb := newMem(map[string]string{"f": "abc"})
	sb.writeErr = errors.New("read-only file system")
	res := run(sb, "edit", `{"file_path":"f","old_string":"b","new_string":"x"}`)
	require.True(t, res.IsError)
	require.Equal(t, "edit: read-only file system", res.Text)
	require.Equal(t, "abc", sb.file("f"))
}

func TestLongResultsAreCutAndSpilled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		output   string
		wantCut  bool
		writeErr error
		wantNote string
	}{
		{"at the limit", strings.Repeat("a", tools.MaxResultChars), false, nil, ""},
		// Characters, not bytes: 60k two-byte runes are 120k bytes and still fit.
		{"multi-byte under the limit", strings.Repeat("é", 60_000), false, nil, ""},
		{"one over", strings.Repeat("a", tools.MaxResultChars+1), true, nil, "the full output is in .managed-agents/outputs/"},
		{"multi-byte over", strings.Repeat("日本", 75_000), true, nil, "the full output is in .managed-agents/outputs/"},
		{"spill fails", strings.Repeat("a", 200_000), true, errors.New("disk full"), "the full output could not be saved: disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sb := newMem(nil)
			sb.writeErr = tt.writeErr
			sb.exec = func(sandbox.ExecRequest) (sandbox.ExecResult, error) {
				return sandbox.ExecResult{Output: []byte(tt.output)}, nil
			}
			res := run(sb, "bash", `{"command":"x"}`)
			require.False(t, res.IsError)
			require.True(t, utf8.ValidString(res.Text))
			if !tt.wantCut {
				require.Equal(t, tt.output, res.Text)
				return
			}
			require.LessOrEqual(t, utf8.RuneCountInString(res.Text), tools.MaxResultChars)
			require.Contains(t, res.Text, fmt.Sprintf("[output truncated: showing the first %d of %d characters; ",
				firstCut(res.Text), utf8.RuneCountInString(tt.output)))
			require.Contains(t, res.Text, tt.wantNote)
			require.True(t, strings.HasPrefix(tt.output, res.Text[:strings.Index(res.Text, "\n\n[output truncated")]))
			if tt.writeErr == nil {
				// The spill file, and the keepers' count set past the point where the next
				// bash call prunes (spill files count toward the sandbox's budget).
				require.Len(t, sb.files, 2)
				require.Equal(t, fmt.Sprintf("%d\n", tools.MaxStoredOutput/2+1), sb.file(tools.StateDir+"/unpruned"))
				for path, content := range sb.files {
					if path == tools.StateDir+"/unpruned" {
						continue
					}
					require.Contains(t, res.Text, path)
					require.Equal(t, tt.output, content)
				}
			}
		})
	}
}

// firstCut returns how many characters precede the truncation marker.
func firstCut(text string) int {
	return utf8.RuneCountInString(text[:strings.Index(text, "\n\n[output truncated")])
}

func TestSpillOfTheSameOutputReusesItsFile(t *testing.T) {
	t.Parallel()
	sb := newMem(nil)
	out := strings.Repeat("z", 150_000)
	sb.exec = func(sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: []byte(out)}, nil
	}
	first := run(sb, "bash", `{"command":"x"}`)
	second := run(sb, "bash", `{"command":"x"}`)
	require.Equal(t, first, second)
	require.Len(t, sb.files, 2, "one spill file, and the keepers' count")
}

func TestGlobListingCutNotes(t *testing.T) {
	t.Parallel()
	sb := newMem(nil)
	sb.exec = func(req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		// A listing cut in the middle of its last name.
		return sandbox.ExecResult{Output: []byte("./b.go\x00./a.go\x00./c.g"), Truncated: true}, nil
	}
	res := run(sb, "glob", `{"pattern":"*.go","path":"src"}`)
	require.False(t, res.IsError, res.Text)
	require.Equal(t, "src/a.go\nsrc/b.go\n[the directory has too many files to list them all; some were not considered — narrow path]", res.Text)
	require.Equal(t, "src", sb.execs[0].Dir, "the provider confines the search directory")
}

func TestGrepSkipsUnreadableFiles(t *testing.T) {
	t.Parallel()
	sb := newMem(map[string]string{"a.txt": "needle\n", "bin": "needle\x00"})
	sb.exec = func(sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: []byte("./a.txt\x00./bin\x00./vanished\x00")}, nil
	}
	res := run(sb, "grep", `{"pattern":"needle"}`)
	require.Equal(t, tools.Result{Text: "a.txt:1:needle"}, res)
}
