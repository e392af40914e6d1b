package toolstest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/tools"
)

func runBash(t *testing.T, newSandbox NewSandbox) {
	t.Run("OutputAndExitCode", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		require.Equal(t, "hello", toolOK(t, sb, "bash", `{"command":"echo hello"}`))
		require.Equal(t, "(no output)", toolOK(t, sb, "bash", `{"command":"true"}`))
		// A failing command is a normal result: the model reads the status and reacts.
		require.Equal(t, "oops\n[exit code 4]", toolOK(t, sb, "bash", `{"command":"echo oops >&2; exit 4"}`))
		require.Equal(t, "[exit code 1]", toolOK(t, sb, "bash", `{"command":"false"}`))
	})

	t.Run("QuotingSurvives", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		cmd := `printf '%s|' "it's" 'a "quote"' $'tab\there' '$HOME'; echo`
		require.Equal(t, "it's|a \"quote\"|tab\there|$HOME|", toolOK(t, sb, "bash", jsonObject("command", cmd)))
		require.Equal(t, "x\ny", toolOK(t, sb, "bash", `{"command":"cat <<'EOF'\nx\ny\nEOF"}`))
	})

	t.Run("SyntaxErrorIsAResult", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		out := toolOK(t, sb, "bash", `{"command":"if then"}`)
		require.Contains(t, out, "syntax error")
		require.Contains(t, out, "[exit code 2]")
	})

	t.Run("WorkingDirectoryPersists", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		root := toolOK(t, sb, "bash", `{"command":"pwd"}`)
		toolOK(t, sb, "bash", `{"command":"mkdir -p sub/deeper && cd sub"}`)
		require.Equal(t, root+"/sub", toolOK(t, sb, "bash", `{"command":"pwd"}`))
		// Saved however the command ends: through exit, and through a failure.
		require.Equal(t, "[exit code 3]", toolOK(t, sb, "bash", `{"command":"cd deeper; exit 3"}`))
		require.Equal(t, root+"/sub/deeper", toolOK(t, sb, "bash", `{"command":"pwd"}`))
		toolOK(t, sb, "bash", `{"command":"cd ~"}`)
		require.Equal(t, root, toolOK(t, sb, "bash", `{"command":"pwd"}`), "cd with HOME goes to the workspace")
	})

	t.Run("RestartResetsTheWorkingDirectory", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		root := toolOK(t, sb, "bash", `{"command":"pwd"}`)
		toolOK(t, sb, "bash", `{"command":"mkdir a && cd a"}`)
		require.Contains(t, toolOK(t, sb, "bash", `{"restart":true}`), "restarted")
		require.Equal(t, root, toolOK(t, sb, "bash", `{"command":"pwd"}`))
		toolOK(t, sb, "bash", `{"command":"cd a"}`)
		require.Equal(t, root, toolOK(t, sb, "bash", `{"restart":true,"command":"pwd"}`))
	})

	t.Run("VanishedWorkingDirectoryFallsBackToTheRoot", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		root := toolOK(t, sb, "bash", `{"command":"pwd"}`)
		toolOK(t, sb, "bash", `{"command":"mkdir gone && cd gone"}`)
		toolOK(t, sb, "bash", `{"command":"rmdir ../gone"}`)
		out := toolOK(t, sb, "bash", `{"command":"pwd"}`)
		require.Contains(t, out, "no longer exists")
		require.True(t, strings.HasSuffix(out, "\n"+root), "got %q", out)
		require.Equal(t, root, toolOK(t, sb, "bash", `{"command":"pwd"}`))
	})

	t.Run("TimeoutIsAnErrorAndKillsTheTree", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		res := tool(t, sb, "bash", jsonObject("command", recordGroup+
			"sleep 100 & echo $! >> pids; sleep 100 & echo $! >> pids; echo begun; wait", "timeout_ms", 1500))
		require.True(t, res.IsError, res.Text)
		require.Contains(t, res.Text, "timed out after 1.5s")
		require.Contains(t, res.Text, "begun")
		requireNoSurvivors(t, sb)
	})

	t.Run("HugeOutputIsCutAndSpilled", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		const size = 250_000
		res := tool(t, sb, "bash", jsonObject("command", fmt.Sprintf("printf '%%%ds' | tr ' ' x", size)))
		require.False(t, res.IsError, res.Text)
		require.LessOrEqual(t, len([]rune(res.Text)), tools.MaxResultChars)
		require.True(t, strings.HasPrefix(res.Text, strings.Repeat("x", 1000)))
		require.Contains(t, res.Text, fmt.Sprintf("of %d characters", size))
		path := spillPath(t, res.Text)
		require.Equal(t, strings.Repeat("x", size), readFile(t, sb, path))
		// The model can page through the spilled file with read.
		require.Contains(t, toolOK(t, sb, "read", fmt.Sprintf(`{"file_path":%q,"view_range":[1,1]}`, path)), "     1\txxx")
	})

	t.Run("OutputOverTheExecCapIsMarked", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		res := tool(t, sb, "bash", `{"command":"yes | head -c 3000000; echo finished > end.txt"}`)
		require.False(t, res.IsError, res.Text)
		require.Contains(t, res.Text, "output truncated")
		path := spillPath(t, res.Text)
		full := readFile(t, sb, path)
		require.Contains(t, full, "[output truncated: the command wrote more than")
		require.Equal(t, "finished\n", readFile(t, sb, "end.txt"))
	})
}

// spillPath extracts the spill file a cut result names.
func spillPath(t *testing.T, text string) string {
	t.Helper()
	_, after, ok := strings.Cut(text, " is in ") // "the full output is in", or "the full text of this result is in" for a cut output
	require.True(t, ok, "the result names no spill file: %s", text[max(0, len(text)-300):])
	path, _, ok := strings.Cut(after, ";")
	require.True(t, ok)
	require.True(t, strings.HasPrefix(path, tools.StateDir+"/"), path)
	return path
}
