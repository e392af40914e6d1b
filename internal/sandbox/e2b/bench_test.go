package e2b_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/e2b/e2bfake"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
	"github.com/managed-agents/managed-agents/internal/tools"
)

// toolCalls are the built-in tool calls whose round trips are counted, over a workspace of
// 1,000 files.
var toolCalls = []struct{ name, tool, input string }{
	{"bash", "bash", `{"command":"echo hi"}`},
	{"read", "read", `{"file_path":"src/f0500.txt"}`},
	{"write", "write", `{"file_path":"out/new.txt","content":"new\n"}`},
	{"edit", "edit", `{"file_path":"src/f0001.txt","old_string":"needle 1","new_string":"pin 1"}`},
	{"glob", "glob", `{"pattern":"**/*.txt"}`},
	{"grep", "grep", `{"pattern":"needle 99\\b","path":"src"}`},
}

// fill writes n files under src with one command (tar from the fake's side is not needed).
func fill(t testing.TB, sb sandbox.Sandbox, n int) {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{
		Command: fmt.Sprintf(`mkdir -p src && for i in $(seq 0 %d); do printf 'line one\nneedle %%d\n' $i > src/f$(printf %%04d $i).txt; done`, n-1),
	})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, "%s", res.Output)
}

// roundTrips runs each tool call once and counts the requests the fake got for it.
func roundTrips(t testing.TB, f *e2bfake.Fake, sb sandbox.Sandbox) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, c := range toolCalls {
		before := f.Total()
		res := tools.RunBuiltin(context.Background(), sb, c.tool, []byte(c.input))
		require.False(t, res.IsError, "%s: %s", c.name, res.Text)
		out[c.name] = f.Total() - before
		if c.name == "grep" {
			require.Equal(t, "src/f0099.txt:2:needle 99", strings.TrimSpace(res.Text))
		}
		if c.name == "glob" {
			require.Len(t, strings.Split(strings.TrimSpace(res.Text), "\n"), 1001, "1,000 files and the new one (capped at 1,000 plus the note)")
		}
	}
	return out
}

// TestRoundTripsPerToolCall reports (and bounds) the requests each built-in tool call costs:
// grep and glob over 1,000 files are one command each.
func TestRoundTripsPerToolCall(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f)
	_, sb := newSandbox(t, p, session("sesn_trips"))
	fill(t, sb, 1000)
	got := roundTrips(t, f, sb)
	t.Logf("round trips per tool call over 1,000 files: %v", got)
	require.Equal(t, map[string]int{"bash": 1, "read": 1, "write": 2, "edit": 3, "glob": 1, "grep": 1}, got)
}

// BenchmarkToolCalls reports the round trips of each tool call (trips/op) and its time
// through the fake, over 1,000 files.
func BenchmarkToolCalls(b *testing.B) {
	f := newFake(b, e2bfake.Options{})
	p := newProvider(b, f)
	_, sb := newSandbox(b, p, session("sesn_bench"))
	fill(b, sb, 1000)
	for _, c := range toolCalls {
		b.Run(c.name, func(b *testing.B) {
			trips := 0
			for b.Loop() {
				before := f.Total()
				res := tools.RunBuiltin(context.Background(), sb, c.tool, []byte(c.input))
				if res.IsError && c.name != "edit" {
					b.Fatalf("%s: %s", c.name, res.Text)
				}
				trips += f.Total() - before
			}
			b.ReportMetric(float64(trips)/float64(b.N), "trips/op")
		})
	}
}

// BenchmarkProvider is the shared provider benchmark through the fake.
func BenchmarkProvider(b *testing.B) {
	f := newFake(b, e2bfake.Options{})
	sandboxtest.Bench(b, newProvider(b, f))
}
