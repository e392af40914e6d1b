package toolstest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// runSearchRoundTrips checks that grep and glob over many files cost one call when the
// sandbox is a FileSearcher, and one per file without it (why the capability exists).
func runSearchRoundTrips(t *testing.T, newSandbox NewSandbox) {
	sb := newSandbox(t)
	for i := range 30 {
		writeFile(t, sb, fmt.Sprintf("dir/f%02d.txt", i), "needle\n")
	}
	c := &counting{Sandbox: sb}
	var counted sandbox.Sandbox = c
	fs, capable := sb.(sandbox.FileSearcher)
	if capable {
		counted = countingSearcher{counting: c, fs: fs}
	}
	require.Contains(t, toolOK(t, counted, "grep", `{"pattern":"needle","path":"dir"}`), "dir/f29.txt:1:needle")
	require.Contains(t, toolOK(t, counted, "glob", `{"pattern":"**/*.txt"}`), "dir/f29.txt")
	if capable {
		require.Equal(t, int64(2), c.searches.Load(), "one call each")
		require.Zero(t, c.calls.Load(), "no Exec or ReadFile besides")
	} else {
		require.GreaterOrEqual(t, c.calls.Load(), int64(30), "the fallback reads file by file")
	}
}

// counting counts the calls that reach a sandbox.
type counting struct {
	sandbox.Sandbox
	calls, searches atomic.Int64
}

func (c *counting) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	c.calls.Add(1)
	return c.Sandbox.Exec(ctx, req)
}

func (c *counting) ReadFile(ctx context.Context, path string) ([]byte, error) {
	c.calls.Add(1)
	return c.Sandbox.ReadFile(ctx, path)
}

type countingSearcher struct {
	*counting
	fs sandbox.FileSearcher
}

func (c countingSearcher) FindFiles(ctx context.Context, req sandbox.FindRequest) (sandbox.FindResult, error) {
	c.searches.Add(1)
	return c.fs.FindFiles(ctx, req)
}

func (c countingSearcher) GrepFiles(ctx context.Context, req sandbox.GrepRequest) (sandbox.GrepResult, error) {
	c.searches.Add(1)
	return c.fs.GrepFiles(ctx, req)
}
