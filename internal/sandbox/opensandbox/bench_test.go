package opensandbox_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/opensandbox/opensandboxfake"
	"github.com/managed-agents/managed-agents/internal/tools"
)

// roundTrips runs one built-in tool call and returns the requests it cost at the fake.
func roundTrips(tb testing.TB, f *opensandboxfake.Server, sb sandbox.Sandbox, name, input string) int {
	tb.Helper()
	before := f.Total()
	res := tools.RunBuiltin(tb.Context(), sb, name, []byte(input))
	require.False(tb, res.IsError, "%s: %s", name, res.Text)
	return f.Total() - before
}

var toolCalls = []struct{ name, input string }{
	{"bash", `{"command":"echo hi"}`},
	{"read", `{"file_path":"tree/d7/f0042.txt"}`},
	{"write", `{"file_path":"new.txt","content":"hello\n"}`},
	{"edit", `{"file_path":"new.txt","old_string":"hello","new_string":"bye"}`},
	{"glob", `{"pattern":"**/*.txt","path":"tree"}`},
	{"grep", `{"pattern":"needle 42$","path":"tree"}`},
}

// fillTree writes 1,000 files (in 10 directories) with one command.
func fillTree(tb testing.TB, sb sandbox.Sandbox) {
	res, err := sb.Exec(tb.Context(), sandbox.ExecRequest{Command: `for d in $(seq -w 0 9); do mkdir -p tree/d$d; for i in $(seq -w 0 99); do printf 'line one\nneedle %s\n' "$i" > tree/d$d/f00$i.txt; done; done`})
	require.NoError(tb, err)
	require.Zero(tb, res.ExitCode, string(res.Output))
}

// TestRoundTripsPerToolCall counts the requests each built-in tool call costs, with grep and
// glob over 1,000 files: neither may cost a round trip per file.
func TestRoundTripsPerToolCall(t *testing.T) {
	f := startFake(t, opensandboxfake.Options{})
	p := newProvider(t, f, nil)
	sb, _ := newSandbox(t, p)
	fillTree(t, sb)
	var report []string
	for _, c := range toolCalls {
		n := roundTrips(t, f, sb, c.name, c.input)
		report = append(report, fmt.Sprintf("%s=%d", c.name, n))
		require.LessOrEqual(t, n, 4, c.name)
	}
	t.Log("round trips per tool call:", strings.Join(report, " "))
	res := tools.RunBuiltin(t.Context(), sb, "grep", []byte(`{"pattern":"needle","path":"tree"}`))
	require.Len(t, strings.Split(res.Text, "\n"), 1000, "the search saw every file")
	require.Contains(t, res.Text, "tree/d9/f0099.txt:2:needle 99")
}

// BenchmarkToolCall reports the round trips (requests at the fake) of each built-in tool call.
func BenchmarkToolCall(b *testing.B) {
	f := startFake(b, opensandboxfake.Options{})
	p := newProvider(b, f, nil)
	ref, err := p.Create(b.Context(), testSpec())
	require.NoError(b, err)
	b.Cleanup(func() { _ = p.Destroy(b.Context(), ref) })
	sb, err := p.Attach(b.Context(), ref)
	require.NoError(b, err)
	fillTree(b, sb)
	for _, c := range toolCalls {
		b.Run(c.name, func(b *testing.B) {
			total := 0
			for b.Loop() {
				if c.name == "edit" {
					b.StopTimer()
					require.NoError(b, sb.WriteFile(b.Context(), "new.txt", []byte("hello\n")))
					b.StartTimer()
				}
				total += roundTrips(b, f, sb, c.name, c.input)
			}
			b.ReportMetric(float64(total)/float64(b.N), "round-trips/op")
		})
	}
}
