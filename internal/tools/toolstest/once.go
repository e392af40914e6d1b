package toolstest

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/tools"
)

// runOnce checks tools.RunBuiltinOnce: a call id takes effect at most once, whatever happens
// to the worker that runs it. Side effects are counted in the sandbox (`echo x >> counter`).
func runOnce(t *testing.T, newSandbox NewSandbox) {
	t.Run("BashRetryAfterCompletionReplays", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		tests := []struct {
			name, input, want string
		}{
			{"exit status", jsonObject("command", "echo x >> counter; echo out; exit 3"), "out\n[exit code 3]"},
			// The shell is replaced, so it never records its status: the worker does.
			{"shell replaced", jsonObject("command", "echo x >> counter; exec echo replaced"), "replaced"},
			{"restart", jsonObject("command", "echo x >> counter; mkdir -p sub && cd sub; echo here", "restart", true), "here"},
		}
		for i, tt := range tests {
			id := fmt.Sprintf("sevt_replay%d", i)
			first := toolOnce(t, sb, id, "bash", tt.input)
			require.Equal(t, tools.Result{Text: tt.want}, first, tt.name)
			require.Equal(t, first, toolOnce(t, sb, id, "bash", tt.input), tt.name)
			require.Equal(t, i+1, counter(t, sb), "%s: the retry ran nothing", tt.name)
		}
		// The restart ran with the call, not with its replay: the directory the command left
		// stays.
		require.True(t, strings.HasSuffix(toolOK(t, sb, "bash", `{"command":"pwd"}`), "/sub"))
		// Another call id is another call.
		toolOK(t, sb, "bash", `{"restart":true}`)
		toolOnce(t, sb, "sevt_other", "bash", tests[0].input)
		require.Equal(t, len(tests)+1, counter(t, sb))
	})

	t.Run("BashTimeoutIsReplayed", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		input := jsonObject("command", "echo x >> counter; echo begun; sleep 100", "timeout_ms", 1000)
		first := toolOnce(t, sb, "sevt_slow", "bash", input)
		require.True(t, first.IsError, first.Text)
		require.Contains(t, first.Text, "timed out after 1s")
		require.Contains(t, first.Text, "begun")
		require.Equal(t, first, toolOnce(t, sb, "sevt_slow", "bash", input))
		require.Equal(t, 1, counter(t, sb))
	})

	t.Run("BashRetryWaitsForARunThatOutlivedItsWorker", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		input := jsonObject("command", "echo x >> counter; until [ -e go ]; do sleep 0.02; done; echo finished")
		orphaned := &orphaning{Sandbox: sb}
		t.Cleanup(orphaned.wait)

		// The first worker dies once the command has started; the command runs on.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go cancelWhenFileExists(ctx, cancel, sb, "counter")
		first := tools.RunBuiltinOnce(ctx, orphaned, "sevt_orphan", "bash", []byte(input))
		require.True(t, first.IsError, first.Text)
		require.Contains(t, first.Text, "canceled")

		// The retry finds the call started and waits for it; release the command only once
		// the retry is checking on it.
		watched := &execWatcher{Sandbox: sb, after: 2, reached: make(chan struct{})}
		retried := make(chan tools.Result, 1)
		go func() {
			retried <- tools.RunBuiltinOnce(context.Background(), watched, "sevt_orphan", "bash", []byte(input))
		}()
		<-watched.reached
		writeFile(t, sb, "go", "")
		require.Equal(t, tools.Result{Text: "finished"}, <-retried)
		require.Equal(t, 1, counter(t, sb))
		require.Equal(t, tools.Result{Text: "finished"}, toolOnce(t, sb, "sevt_orphan", "bash", input))
	})

	t.Run("BashRunThatDiedIsInterrupted", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		// begun is written before counter, which is what the worker's death waits for.
		input := jsonObject("command", "echo begun; echo x >> counter; sleep 100")
		// The worker dies while the command runs and the command dies with it.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go cancelWhenFileExists(ctx, cancel, sb, "counter")
		first := tools.RunBuiltinOnce(ctx, sb, "sevt_died", "bash", []byte(input))
		require.True(t, first.IsError, first.Text)
		require.Contains(t, first.Text, "canceled")

		for range 2 {
			res := toolOnce(t, sb, "sevt_died", "bash", input)
			require.True(t, res.IsError, res.Text)
			require.Contains(t, res.Text, "interrupted by a worker failure")
			require.Contains(t, res.Text, "may have partially run")
			require.Contains(t, res.Text, "Output recorded before the interruption:\nbegun")
		}
		require.Equal(t, 1, counter(t, sb), "an interrupted call is never run again")
	})

	t.Run("BashConcurrentRetriesRunOnce", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		input := jsonObject("command", "echo x >> counter; sleep 0.3; echo done")
		results := concurrently(4, func() tools.Result { return toolOnce(t, sb, "sevt_race", "bash", input) })
		for _, res := range results {
			require.Equal(t, tools.Result{Text: "done"}, res)
		}
		require.Equal(t, 1, counter(t, sb))
	})

	t.Run("BashHugeOutputReplaysAndStaysHidden", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		input := jsonObject("command", "echo x >> counter; yes needle | head -c 3000000")
		first := toolOnce(t, sb, "sevt_big", "bash", input)
		require.False(t, first.IsError)
		// The output is cut at the exec cap, then spilled.
		full := readFile(t, sb, spillPath(t, first.Text))
		require.Contains(t, full[len(full)-200:], "[output truncated: the command wrote more than")
		require.True(t, reflect.DeepEqual(first, toolOnce(t, sb, "sevt_big", "bash", input)), "the replay differs")
		require.Equal(t, 1, counter(t, sb))
		// Neither the records nor the spilled output show up in searches.
		require.Equal(t, "counter", toolOK(t, sb, "glob", `{"pattern":"**"}`))
		require.Contains(t, toolOK(t, sb, "grep", `{"pattern":"needle"}`), "No matches")
	})

	// A command that prints without end leaves at most tools.MaxStoredOutput on disk, is
	// not stopped for it, and its result says exactly how it was cut and what the spill
	// file holds; the replay is the same result.
	t.Run("BashOutputIsCappedOnDisk", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name, input string
			timedOut    bool
		}{
			{"ends by itself", jsonObject("command", "echo x >> counter; timeout 1 yes; echo finished > end.txt"), false},
			{"killed at its timeout", jsonObject("command", "echo x >> counter; echo finished > end.txt; yes", "timeout_ms", 1000), true},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				sb := newSandbox(t)
				first := toolOnce(t, sb, "sevt_yes", "bash", tc.input)
				require.Equal(t, tc.timedOut, first.IsError, first.Text[:200])
				require.Equal(t, "finished\n", readFile(t, sb, "end.txt"), "the command ran on past the cap")
				stored := sh(t, sb, "wc -c < "+tools.StateDir+"/calls/sevt_yes/output")
				require.Equal(t, fmt.Sprint(tools.MaxStoredOutput), strings.TrimSpace(stored))
				total := sh(t, sb, "du -sk "+tools.StateDir+" | cut -f1")
				require.Less(t, atoi(t, strings.TrimSpace(total)), (tools.MaxStoredOutput+1<<20)/1024+512, "the sandbox's state holds the capped record and the 1 MB spill file, not the output")

				// The spill file holds the result's text: the first 1 MB of output and the note.
				path := spillPath(t, first.Text)
				require.Contains(t, first.Text, "holds only the first 1048576 bytes of the command's output")
				full := readFile(t, sb, path)
				head, note, ok := strings.Cut(full, "\n[output truncated: the command wrote ")
				require.True(t, ok, full[len(full)-300:])
				require.Equal(t, strings.Repeat("y\n", 1<<19-1)+"y", head[len(head)-(1<<20-1):])
				require.Contains(t, note, fmt.Sprintf(" bytes; the first 1048576 are shown, and only the first %d were kept, the rest was discarded]", tools.MaxStoredOutput))
				written, _, _ := strings.Cut(note, " ")
				if !tc.timedOut {
					// The shell ended normally and waited for the count: the total is exact.
					require.Greater(t, atoi(t, written), tools.MaxStoredOutput)
				}
				require.True(t, reflect.DeepEqual(first, toolOnce(t, sb, "sevt_yes", "bash", tc.input)), "the replay differs")
				require.Equal(t, 1, counter(t, sb))
			})
		}
	})

	// The keeper counts what it dropped without wc when head read to the end (less than the
	// cap kept); at the cap and past it wc counts: the exit record's count is exact either way.
	t.Run("BashDroppedCountIsExactAroundTheCap", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		for i, tc := range []struct{ size, dropped int }{
			{0, 0}, {1, 0}, {tools.MaxStoredOutput - 1, 0}, {tools.MaxStoredOutput, 0}, {tools.MaxStoredOutput + 1, 1}, {tools.MaxStoredOutput + 4097, 4097},
		} {
			id := fmt.Sprintf("sevt_cap%d", i)
			res := toolOnce(t, sb, id, "bash", jsonObject("command", "yes | head -c "+strconv.Itoa(tc.size)))
			require.False(t, res.IsError, res.Text)
			dir := tools.StateDir + "/calls/" + id
			require.Equal(t, fmt.Sprintf("exit 0 %d\n", tc.dropped), sh(t, sb, "cat "+dir+"/exit"), "size %d", tc.size)
			require.Equal(t, fmt.Sprint(min(tc.size, tools.MaxStoredOutput)), strings.TrimSpace(sh(t, sb, "wc -c < "+dir+"/output")), "size %d", tc.size)
		}
	})

	// The records of many large calls stay within tools.MaxStateOutput: the oldest outputs
	// are deleted, their replays say so, and nothing runs again. Outputs under the cap are
	// pruned as those over it are, also those that prune only every other call (under the
	// half of the cap that a call's keeper waits for before it prunes).
	t.Run("BashRecordsStayUnderTheSandboxBudget", func(t *testing.T) {
		t.Parallel()
		for _, size := range []int{tools.MaxStoredOutput + 1, tools.MaxStoredOutput * 3 / 4, tools.MaxStoredOutput * 3 / 8} {
			t.Run(fmt.Sprint(size), func(t *testing.T) {
				t.Parallel()
				recordsStayUnderBudget(t, newSandbox(t), size)
			})
		}
	})

	t.Run("WriteReplays", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		input := `{"file_path":"f.txt","content":"first"}`
		first := toolOnce(t, sb, "sevt_write", "write", input)
		require.Equal(t, tools.Result{Text: "Wrote 5 bytes to f.txt."}, first)
		toolOnce(t, sb, "sevt_later", "write", `{"file_path":"f.txt","content":"later"}`)
		require.Equal(t, first, toolOnce(t, sb, "sevt_write", "write", input))
		require.Equal(t, "later", readFile(t, sb, "f.txt"), "the replay wrote nothing")
	})

	t.Run("EditReplays", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		writeFile(t, sb, "f.txt", "a\n")
		// new_string contains old_string: an edit applied twice would show.
		input := `{"file_path":"f.txt","old_string":"a","new_string":"aa"}`
		first := toolOnce(t, sb, "sevt_edit", "edit", input)
		require.Equal(t, tools.Result{Text: "Edited f.txt: replaced 1 occurrence."}, first)
		require.Equal(t, first, toolOnce(t, sb, "sevt_edit", "edit", input))
		require.Equal(t, "aa\n", readFile(t, sb, "f.txt"))
		// A failed edit changed nothing and is simply answered again.
		failed := `{"file_path":"f.txt","old_string":"zzz","new_string":"y"}`
		require.Contains(t, toolOnce(t, sb, "sevt_failed", "edit", failed).Text, "old_string was not found")
		require.Contains(t, toolOnce(t, sb, "sevt_failed", "edit", failed).Text, "old_string was not found")
	})

	t.Run("ConcurrentEditRetriesApplyOnce", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		writeFile(t, sb, "f.txt", strings.Repeat("line a\n", 20_000))
		input := `{"file_path":"f.txt","old_string":"a","new_string":"aa","replace_all":true}`
		results := concurrently(4, func() tools.Result { return toolOnce(t, sb, "sevt_edits", "edit", input) })
		for _, res := range results {
			require.Equal(t, tools.Result{Text: "Edited f.txt: replaced 20000 occurrences."}, res)
		}
		require.Equal(t, strings.Repeat("line aa\n", 20_000), readFile(t, sb, "f.txt"))
	})

	t.Run("BadCallIDRunsNothing", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		for _, id := range []string{"", "../x", "a/b", ".", "sevt x", strings.Repeat("a", 129)} {
			res := toolOnce(t, sb, id, "bash", `{"command":"echo x >> counter"}`)
			require.True(t, res.IsError, "%q: %s", id, res.Text)
			require.Contains(t, res.Text, "cannot record the call", id)
		}
		require.Equal(t, "no\n", sh(t, sb, "test -e counter && echo yes || echo no"))
	})
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err, s)
	return n
}

// toolOnce runs a built-in tool under a call id.
func toolOnce(t *testing.T, sb sandbox.Sandbox, callID, name, input string) tools.Result {
	t.Helper()
	return tools.RunBuiltinOnce(context.Background(), sb, callID, name, []byte(input))
}

// counter is how many times the test commands ran: each appends a line to the file counter.
func counter(t *testing.T, sb sandbox.Sandbox) int {
	t.Helper()
	return len(lines(readFile(t, sb, "counter")))
}

// concurrently calls f n times at once and returns the results.
func concurrently(n int, f func() tools.Result) []tools.Result {
	results := make([]tools.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i] = f() })
	}
	wg.Wait()
	return results
}

// cancelWhenFileExists cancels once path exists and is not empty: the worker "dies" at a
// known point of the command.
func cancelWhenFileExists(ctx context.Context, cancel context.CancelFunc, sb sandbox.Sandbox, path string) {
	for ctx.Err() == nil {
		if data, err := sb.ReadFile(ctx, path); err == nil && len(data) > 0 {
			cancel()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// orphaning is a sandbox seen from a worker that dies during a call: Exec gives up when ctx
// ends, but the command runs on, as it does when the worker process is killed.
type orphaning struct {
	sandbox.Sandbox
	running sync.WaitGroup
}

func (o *orphaning) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	type outcome struct {
		res sandbox.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	o.running.Go(func() {
		res, err := o.Sandbox.Exec(context.WithoutCancel(ctx), req)
		done <- outcome{res, err}
	})
	select {
	case out := <-done:
		return out.res, out.err
	case <-ctx.Done():
		return sandbox.ExecResult{}, fmt.Errorf("worker died: %w", ctx.Err())
	}
}

// wait waits for the commands the dead worker left behind.
func (o *orphaning) wait() { o.running.Wait() }

// execWatcher closes reached when Exec is called for the after-th time.
type execWatcher struct {
	sandbox.Sandbox
	after   int32
	calls   atomic.Int32
	reached chan struct{}
}

func (w *execWatcher) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if w.calls.Add(1) == w.after {
		close(w.reached)
	}
	return w.Sandbox.Exec(ctx, req)
}

// recordsStayUnderBudget runs more calls of size bytes of output than the budget holds.
func recordsStayUnderBudget(t *testing.T, sb sandbox.Sandbox, size int) {
	n := tools.MaxStateOutput/size + 8
	input := jsonObject("command", "echo x >> counter; yes | head -c "+strconv.Itoa(size))
	var first, last tools.Result
	for i := range n {
		res := toolOnce(t, sb, fmt.Sprintf("sevt_big%02d", i), "bash", input)
		require.False(t, res.IsError, res.Text[:200])
		if i == 0 {
			first = res
		}
		last = res
	}
	total := sh(t, sb, "du -sk "+tools.StateDir+" | cut -f1")
	require.LessOrEqual(t, atoi(t, strings.TrimSpace(total)), (tools.MaxStateOutput+2*tools.MaxStoredOutput)/1024,
		"the records hold the budget and at most what was kept since the last prune (under half the cap) and the latest call beyond it")
	require.Contains(t, first.Text, "y\ny\n")
	old := toolOnce(t, sb, "sevt_big00", "bash", input)
	require.False(t, old.IsError, old.Text)
	require.Contains(t, old.Text, fmt.Sprintf("bytes of output recorded for this call were deleted later, to keep the sandbox's records under %d bytes]", tools.MaxStateOutput))
	require.True(t, reflect.DeepEqual(last, toolOnce(t, sb, fmt.Sprintf("sevt_big%02d", n-1), "bash", input)), "the latest call replays")
	require.Equal(t, n, counter(t, sb), "no call ran again")
}
