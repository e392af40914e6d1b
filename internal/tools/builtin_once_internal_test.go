package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// scriptedSandbox keeps files in a map and answers Exec by the kind of script: the bash
// wrapper, the probe, or anything else. It tests the worker's side of the call records; the
// tools suite (tools/toolstest) runs the scripts on real sandboxes.
type scriptedSandbox struct {
	mu    sync.Mutex
	files map[string]string
	// wrapper, probe and other answer Exec; a nil one fails the test if called.
	wrapper, probe, other func(s *scriptedSandbox) (sandbox.ExecResult, error)
	// readErr and writeErr, if set, may fail a ReadFile or WriteFile of a path.
	readErr, writeErr func(path string) error
	wrappers, probes  int
	t                 *testing.T
}

func newScripted(t *testing.T) *scriptedSandbox {
	return &scriptedSandbox{t: t, files: map[string]string{}}
}

func (s *scriptedSandbox) Exec(_ context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	s.mu.Lock()
	var answer func(*scriptedSandbox) (sandbox.ExecResult, error)
	switch {
	case strings.Contains(req.Command, "trap __ma_finish EXIT"):
		s.wrappers++
		answer = s.wrapper
	case strings.Contains(req.Command, "echo finished"):
		s.probes++
		answer = s.probe
	default:
		answer = s.other
	}
	s.mu.Unlock()
	if answer == nil {
		s.t.Errorf("unexpected command:\n%s", req.Command)
		return sandbox.ExecResult{}, errors.New("unexpected command")
	}
	return answer(s)
}

func (s *scriptedSandbox) ReadFile(_ context.Context, path string) ([]byte, error) {
	if s.readErr != nil {
		if err := s.readErr(path); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.files[path]
	if !ok {
		return nil, fmt.Errorf("read %q: %w", path, sandbox.ErrNotExist)
	}
	return []byte(data), nil
}

func (s *scriptedSandbox) WriteFile(_ context.Context, path string, data []byte) error {
	if s.writeErr != nil {
		if err := s.writeErr(path); err != nil {
			return err
		}
	}
	s.set(path, string(data))
	return nil
}

func (s *scriptedSandbox) set(path, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = content
}

func (s *scriptedSandbox) file(path string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.files[path]
	return data, ok
}

const testCall = callsDir + "/sevt_1"

func recPath(name string) string { return callDir(testCall).file(name) }

func answer(out string) func(*scriptedSandbox) (sandbox.ExecResult, error) {
	return func(*scriptedSandbox) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: []byte(out)}, nil
	}
}

func runOnce(sb sandbox.Sandbox, name, input string) Result {
	return RunBuiltinOnce(context.Background(), sb, "sevt_1", name, []byte(input))
}

func TestReadBashExit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		record string
		want   bashExit
		ok     bool
	}{
		{"exit 0\n", bashExit{status: 0}, true},
		{"exit 3\n", bashExit{status: 3}, true},
		{"timeout 137\n", bashExit{status: 137, timedOut: true}, true},
		{"exit 0 1234\n", bashExit{status: 0, dropped: 1234, counted: true}, true},
		{"timeout 137 0\n", bashExit{status: 137, timedOut: true, counted: true}, true},
		{"exit 0 -1\n", bashExit{}, false},
		{"exit 0 x\n", bashExit{}, false},
		// Caught while being written, or not ours: not a record.
		{"", bashExit{}, false},
		{"exit 3", bashExit{}, false},
		{"exit\n", bashExit{}, false},
		{"exit x\n", bashExit{}, false},
		{"done 1\n", bashExit{}, false},
		{"exit 1\nexit 2\n", bashExit{}, false},
	}
	for _, tt := range tests {
		sb := newScripted(t)
		sb.set(recPath(recExit), tt.record)
		got, ok := readBashExit(context.Background(), sb, callDir(testCall))
		require.Equal(t, tt.ok, ok, "%q", tt.record)
		require.Equal(t, tt.want, got, "%q", tt.record)
		if ok {
			require.Equal(t, tt.record, got.String(), "records round-trip")
		}
	}
}

func TestBashOnceReplaysRecordsWithoutRunning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, exit, output string
		want               Result
	}{
		{"exit status", "exit 2\n", "boom\n", Result{Text: "boom\n[exit code 2]"}},
		{"no output", "exit 0\n", "", Result{Text: "(no output)"}},
		{"timeout", "timeout 137\n", "partial\n", Result{
			Text: "The command timed out after 2m0s and was killed, with every process it started. Output before the timeout:\npartial", IsError: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sb := newScripted(t) // no Exec is answered
			sb.set(recPath(recExit), tt.exit)
			sb.set(recPath(recOutput), tt.output)
			require.Equal(t, tt.want, runOnce(sb, "bash", `{"command":"echo x >> counter"}`))
			require.Zero(t, sb.wrappers)
		})
	}
}

func TestBashOnceRecordsWhatTheShellDidNot(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		res        sandbox.ExecResult
		wantRecord string
		want       Result
	}{
		{"shell replaced or killed", sandbox.ExecResult{ExitCode: 143}, "exit 143\n", Result{Text: "out\n[exit code 143]"}},
		{"killed at the timeout", sandbox.ExecResult{ExitCode: 137, TimedOut: true}, "timeout 137\n", Result{
			Text: "The command timed out after 2m0s and was killed, with every process it started. Output before the timeout:\nout", IsError: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sb := newScripted(t)
			sb.wrapper = func(s *scriptedSandbox) (sandbox.ExecResult, error) {
				s.set(recPath(recStarted), "1 2 3\n")
				s.set(recPath(recOutput), "out\n")
				return tt.res, nil
			}
			require.Equal(t, tt.want, runOnce(sb, "bash", `{"command":"x"}`))
			rec, _ := sb.file(recPath(recExit))
			require.Equal(t, tt.wantRecord, rec)
			require.JSONEq(t, `{"tool":"bash","input":{"command":"x"}}`, mustFile(t, sb, recPath(recRequest)))
			// The retry answers the same from the records.
			require.Equal(t, tt.want, runOnce(sb, "bash", `{"command":"x"}`))
			require.Equal(t, 1, sb.wrappers)
		})
	}
}

func mustFile(t *testing.T, sb *scriptedSandbox, path string) string {
	t.Helper()
	data, ok := sb.file(path)
	require.True(t, ok, "%s is missing", path)
	return data
}

// A retry that finds the call claimed by another run waits on it and never starts the command.
func TestBashOnceAwaitsTheRunThatHoldsTheCall(t *testing.T) {
	t.Parallel()
	finish := func(s *scriptedSandbox) {
		s.set(recPath(recOutput), "done\n")
		s.set(recPath(recExit), "exit 0\n")
	}
	tests := []struct {
		name string
		// probe answers the nth probe (from 1).
		probe    func(s *scriptedSandbox, n int) (sandbox.ExecResult, error)
		want     string
		wantErr  bool
		wantRuns int
	}{
		{
			name: "finishes while waited for",
			probe: func(s *scriptedSandbox, n int) (sandbox.ExecResult, error) {
				if n == 3 {
					finish(s)
				}
				return sandbox.ExecResult{Output: []byte("running\n")}, nil
			},
			want: "done",
		},
		{
			name: "claim not filled in yet",
			probe: func(s *scriptedSandbox, n int) (sandbox.ExecResult, error) {
				if n == 2 {
					finish(s)
				}
				return sandbox.ExecResult{Output: []byte("starting\n")}, nil
			},
			want: "done",
		},
		{
			name: "ends just as it is found gone",
			probe: func(s *scriptedSandbox, _ int) (sandbox.ExecResult, error) {
				finish(s)
				return sandbox.ExecResult{Output: []byte("gone\n")}, nil
			},
			want: "done",
		},
		{
			name: "died unrecorded",
			probe: func(s *scriptedSandbox, _ int) (sandbox.ExecResult, error) {
				s.set(recPath(recOutput), "half\n")
				return sandbox.ExecResult{Output: []byte("gone\n")}, nil
			},
			want:    "The command was interrupted by a worker failure before its result was recorded, so it may have partially run. It was not run again: check what it did before running it again. Output recorded before the interruption:\nhalf",
			wantErr: true,
		},
		{
			name: "outlived its timeout",
			probe: func(*scriptedSandbox, int) (sandbox.ExecResult, error) {
				return sandbox.ExecResult{Output: []byte("killed\n")}, nil
			},
			want:    "The command was interrupted by a worker failure before its result was recorded, so it may have partially run. It was not run again: check what it did before running it again. It was still running past its timeout of 2m0s and was killed.",
			wantErr: true,
		},
		{
			name: "the sandbox fails",
			probe: func(*scriptedSandbox, int) (sandbox.ExecResult, error) {
				return sandbox.ExecResult{}, fmt.Errorf("attach: %w", sandbox.ErrGone)
			},
			want:    "bash: the session's sandbox no longer exists",
			wantErr: true,
		},
		{
			name: "the probe answers nonsense",
			probe: func(*scriptedSandbox, int) (sandbox.ExecResult, error) {
				return sandbox.ExecResult{Output: []byte("bash: kill: command not found\n"), ExitCode: 127}, nil
			},
			want:    `bash: check on the running command: unexpected answer "bash: kill: command not found\n" (exit code 127)`,
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sb := newScripted(t)
			sb.set(recPath(recStarted), "1 2 3\n")
			sb.wrapper = answer(bashBusy)
			sb.probe = func(s *scriptedSandbox) (sandbox.ExecResult, error) { return tt.probe(s, s.probes) }
			require.Equal(t, Result{Text: tt.want, IsError: tt.wantErr}, runOnce(sb, "bash", `{"command":"x"}`))
			require.Equal(t, 1, sb.wrappers, "the command is never started again")
		})
	}
}

func TestBashOnceExecFailures(t *testing.T) {
	t.Parallel()
	broken := func(*scriptedSandbox) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{}, errors.New("connection reset")
	}

	// Nothing started: the failure is the result, and a retry may run the command.
	sb := newScripted(t)
	sb.wrapper = broken
	require.Equal(t, Result{Text: "bash: connection reset", IsError: true}, runOnce(sb, "bash", `{"command":"x"}`))

	// The command started before the connection failed: the records decide.
	sb = newScripted(t)
	sb.wrapper = func(s *scriptedSandbox) (sandbox.ExecResult, error) {
		s.set(recPath(recStarted), "1 2 3\n")
		s.set(recPath(recOutput), "done\n")
		s.set(recPath(recExit), "exit 0\n")
		return broken(s)
	}
	require.Equal(t, Result{Text: "done"}, runOnce(sb, "bash", `{"command":"x"}`))

	// The wrapper could not claim the call: nothing ran.
	sb = newScripted(t)
	sb.wrapper = answer(bashNoRecord + "/w/.managed-agents/calls/sevt_1 is not writable\n")
	require.Equal(t, Result{Text: "bash: the command was not run: /w/.managed-agents/calls/sevt_1 is not writable", IsError: true},
		runOnce(sb, "bash", `{"command":"x"}`))

	// Without its call directory the wrapper is not started.
	sb = newScripted(t)
	sb.writeErr = func(string) error { return errors.New("read-only file system") }
	require.Equal(t, Result{Text: "bash: read-only file system", IsError: true}, runOnce(sb, "bash", `{"command":"x"}`))
	require.Zero(t, sb.wrappers)
}

func TestBashOnceReadsAnOversizedOutputRecordWithHead(t *testing.T) {
	t.Parallel()
	sb := newScripted(t)
	sb.set(recPath(recExit), "exit 0\n")
	sb.readErr = func(path string) error {
		if path == recPath(recOutput) {
			return errors.New("file is too large")
		}
		return nil
	}
	big := strings.Repeat("y", bashMaxOutput+1)
	sb.other = func(*scriptedSandbox) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: []byte(big)}, nil
	}
	res := runOnce(sb, "bash", `{"command":"x"}`)
	require.False(t, res.IsError)
	full := mustFile(t, sb, spillFileOf(t, res.Text))
	require.True(t, full == big[:bashMaxOutput]+fmt.Sprintf("\n[output truncated: the command wrote more than %d bytes]", bashMaxOutput),
		"the result holds the first bashMaxOutput bytes and says it was cut")
}

// spillFileOf extracts the spill file a cut result names.
func spillFileOf(t *testing.T, text string) string {
	t.Helper()
	_, after, ok := strings.Cut(text, " is in ") // "the full output is in", or "the full text of this result is in" for a cut output
	require.True(t, ok)
	path, _, ok := strings.Cut(after, ";")
	require.True(t, ok)
	return path
}

func TestBashOnceBareRestartKeepsNoRecord(t *testing.T) {
	t.Parallel()
	sb := newScripted(t)
	sb.set(bashCwdFile, "/somewhere")
	res := runOnce(sb, "bash", `{"restart":true}`)
	require.False(t, res.IsError, res.Text)
	require.Empty(t, mustFile(t, sb, bashCwdFile))
	_, ok := sb.file(recPath(recRequest))
	require.False(t, ok)
}

// The worker dies after the edit reached the file but before its result was recorded: the
// retry recognises the edit by its intent and does not apply it again.
func TestEditOnceRecognisesAnEditAlreadyInTheFile(t *testing.T) {
	t.Parallel()
	sb := newScripted(t)
	sb.set("f", "a\n")
	sb.writeErr = func(path string) error {
		if path == recPath(recResult) {
			return errors.New("worker killed")
		}
		return nil
	}
	input := `{"file_path":"f","old_string":"a","new_string":"aa"}`
	want := Result{Text: "Edited f: replaced 1 occurrence."}
	require.Equal(t, want, runOnce(sb, "edit", input))
	_, recorded := sb.file(recPath(recResult))
	require.False(t, recorded)

	sb.writeErr = nil
	require.Equal(t, want, runOnce(sb, "edit", input))
	require.Equal(t, "aa\n", mustFile(t, sb, "f"))
	require.JSONEq(t, `{"text":"Edited f: replaced 1 occurrence."}`, mustFile(t, sb, recPath(recResult)))
}

// The worker dies after recording the intent but before the file was written: the retry
// finds the file as it was and edits it.
func TestEditOnceAppliesAnEditThatNeverReachedTheFile(t *testing.T) {
	t.Parallel()
	sb := newScripted(t)
	sb.set("f", "a\n")
	sb.writeErr = func(path string) error {
		if path == "f" {
			return errors.New("worker killed")
		}
		return nil
	}
	input := `{"file_path":"f","old_string":"a","new_string":"aa"}`
	require.True(t, runOnce(sb, "edit", input).IsError)
	require.Equal(t, "a\n", mustFile(t, sb, "f"))

	sb.writeErr = nil
	require.Equal(t, Result{Text: "Edited f: replaced 1 occurrence."}, runOnce(sb, "edit", input))
	require.Equal(t, "aa\n", mustFile(t, sb, "f"))
}

// A file in neither state of the intent after waiting was changed by someone else: the edit
// is not applied on top of it.
func TestEditOnceRefusesAFileThatChangedUnderIt(t *testing.T) {
	t.Parallel()
	sb := newScripted(t)
	sb.set("f", "a\n")
	sb.set(recPath(recIntent), fmt.Sprintf(`{"before":%q,"after":%q,"text":"x"}`, digest([]byte("b\n")), digest([]byte("bb\n"))))
	res := runOnce(sb, "edit", `{"file_path":"f","old_string":"a","new_string":"aa"}`)
	require.True(t, res.IsError)
	require.Contains(t, res.Text, "changed while an earlier attempt of this call was editing it")
	require.Equal(t, "a\n", mustFile(t, sb, "f"))
}

func TestWriteOnceReplaysItsRecord(t *testing.T) {
	t.Parallel()
	sb := newScripted(t)
	input := `{"file_path":"f","content":"one"}`
	want := Result{Text: "Wrote 3 bytes to f."}
	require.Equal(t, want, runOnce(sb, "write", input))
	sb.set("f", "changed by a later call")
	require.Equal(t, want, runOnce(sb, "write", input))
	require.Equal(t, "changed by a later call", mustFile(t, sb, "f"))
}

func TestRunBuiltinOnceRejectsBadCallIDs(t *testing.T) {
	t.Parallel()
	inputs := map[string]string{
		"bash":  `{"command":"x"}`,
		"write": `{"file_path":"f","content":"x"}`,
		"edit":  `{"file_path":"f","old_string":"a","new_string":"b"}`,
	}
	for _, id := range []string{"", ".", "..", "../x", "a/b", `a\b`, "a.b", "sevt 1", "sevt_\x00", strings.Repeat("a", maxCallIDLen+1)} {
		for name, input := range inputs {
			sb := newScripted(t)
			res := RunBuiltinOnce(context.Background(), sb, id, name, []byte(input))
			require.True(t, res.IsError, "%s %q", name, id)
			require.Contains(t, res.Text, "cannot record the call", "%s %q", name, id)
			require.Empty(t, sb.files, "%s %q wrote nothing", name, id)
		}
	}
	// The longest allowed id works.
	sb := newScripted(t)
	res := RunBuiltinOnce(context.Background(), sb, strings.Repeat("a", maxCallIDLen), "write", []byte(inputs["write"]))
	require.False(t, res.IsError, res.Text)
}

// Tools without side effects keep no records and need no call id.
func TestRunBuiltinOnceRunsReadOnlyToolsAsIs(t *testing.T) {
	t.Parallel()
	sb := newScripted(t)
	sb.set("f", "hello\n")
	sb.other = answer("./f\x00")
	for _, tc := range []struct{ name, input string }{
		{"read", `{"file_path":"f"}`},
		{"glob", `{"pattern":"*"}`},
		{"grep", `{"pattern":"hello"}`},
	} {
		want := RunBuiltin(context.Background(), sb, tc.name, []byte(tc.input))
		require.False(t, want.IsError, want.Text)
		require.Equal(t, want, RunBuiltinOnce(context.Background(), sb, "", tc.name, []byte(tc.input)), tc.name)
	}
	require.Equal(t, map[string]string{"f": "hello\n"}, sb.files)
}
