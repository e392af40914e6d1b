//go:build integration

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeBlocks returns the fenced code blocks of the README section with the given heading, in
// order, as the README shows them.
func readmeBlocks(t *testing.T, heading string) []string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(raw)
	start := strings.Index(text, "\n## "+heading+"\n")
	require.NotEqual(t, -1, start, "README has a section %q", heading)
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```[a-z]*\n(.*?)```").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// TestReadmeQuickstarts runs both quickstarts exactly as the README shows them, twice each,
// against `managed-agents dev` (the README's `make run`): the curl block must print exactly the
// log the README says it prints, and the Go program must see `echo: hello`. Only the key and the
// address are given from outside, through the variables the README names (KEY, API).
func TestReadmeQuickstarts(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"jq", "curl", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the curl quickstart needs %s (apt-get install %s)", tool, tool)
		}
	}
	bin := managedAgentsBinary(t)
	dataDir := filepath.Join(reachableTempDir(t), "data")
	addr := freeAddr(t)
	startDev(t, bin, dataDir, addr)
	key, err := os.ReadFile(filepath.Join(dataDir, "api-key"))
	require.NoError(t, err)
	env := append(os.Environ(), "KEY="+strings.TrimSpace(string(key)), "API=http://"+addr)

	t.Run("curl", func(t *testing.T) {
		blocks := readmeBlocks(t, "Quickstart with curl")
		require.Len(t, blocks, 2, "the script and what it prints")
		// The first line tells a user to paste their key; the test has set KEY already.
		script := regexp.MustCompile(`(?m)^export KEY=.*\n`).ReplaceAllString(blocks[0], "")
		for run := range 2 {
			dir := t.TempDir()
			cmd := exec.Command("bash", "-c", script)
			cmd.Dir, cmd.Env = dir, env
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "run %d:\n%s", run+1, out)
			require.Equal(t, blocks[1], string(out), "run %d prints what the README shows", run+1)
			streamed, err := os.ReadFile(filepath.Join(dir, "stream.log"))
			require.NoError(t, err)
			require.Contains(t, string(streamed), "event: agent.message\n", "run %d: stream.log has the SSE frames", run+1)
		}
	})

	t.Run("go", func(t *testing.T) {
		exe := buildReadmeGoQuickstart(t)
		for run := range 2 {
			cmd := exec.Command(exe)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "run %d:\n%s", run+1, out)
			require.Contains(t, string(out), "agent.message\n   echo: hello\n", "run %d", run+1)
			require.True(t, strings.HasSuffix(string(out), "session.status_idle\n"), "run %d ends idle:\n%s", run+1, out)
		}
	})
}

// buildReadmeGoQuickstart compiles the README's Go SDK quickstart as it is and returns the
// executable, which reads KEY and API.
func buildReadmeGoQuickstart(t *testing.T) string {
	t.Helper()
	blocks := readmeBlocks(t, "Quickstart with the Go SDK")
	require.Len(t, blocks, 1)
	// Inside this module, so the SDK version is the one go.mod pins (the README's go get).
	dir, err := os.MkdirTemp(".", "quickstart-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(blocks[0]), 0o644))
	exe := filepath.Join(t.TempDir(), "quickstart")
	build := exec.Command("go", "build", "-o", exe, "./"+dir)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "the Go quickstart compiles:\n%s", out)
	return exe
}
