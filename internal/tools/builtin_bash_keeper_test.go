package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/tools"
)

// A sandbox without stdbuf (busybox-style images often lack it) cannot run the output keeper
// of recorded bash calls: the output is then recorded uncapped, never lost.
func TestRecordedBashWithoutStdbufKeepsItsOutput(t *testing.T) {
	bin := t.TempDir()
	for _, dir := range []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.Name() == "stdbuf" {
				continue
			}
			_ = os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(bin, e.Name())) // first dir wins
		}
	}
	t.Setenv("PATH", bin) // the local provider gives commands the server's PATH
	ctx := context.Background()
	p := local.New(t.TempDir())
	ref, err := p.Create(ctx, sandbox.Spec{Name: "no-stdbuf", SessionID: "no-stdbuf"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
	sb, err := p.Attach(ctx, ref)
	require.NoError(t, err)

	res := tools.RunBuiltinOnce(ctx, sb, "sevt_nostdbuf", "bash", json.RawMessage(`{"command":"command -v stdbuf || echo hello from a sandbox without stdbuf"}`))
	require.False(t, res.IsError, res.Text)
	require.Equal(t, "hello from a sandbox without stdbuf", res.Text)
	again := tools.RunBuiltinOnce(ctx, sb, "sevt_nostdbuf", "bash", json.RawMessage(`{"command":"command -v stdbuf || echo hello from a sandbox without stdbuf"}`))
	require.Equal(t, res, again, "the replay returns the recorded result")
}
