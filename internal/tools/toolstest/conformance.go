// Package toolstest is the built-in tools suite every sandbox provider runs (river's
// driver-test pattern): file and exec semantics of sandbox.Sandbox, escape attempts, limits,
// and the built-in tools of internal/tools on top of them. A provider's test calls Run with a
// constructor of fresh sandboxes, so local, docker and kubernetes sandboxes are held to
// exactly the same behaviour. Run runs everything twice: on the sandbox as given (with its
// optional capabilities, such as sandbox.FileSearcher) and with the capabilities hidden, so
// the tools' fallbacks and their capability paths are proven to behave alike.
//
// The suite assumes a Linux sandbox with bash, coreutils (or busybox) and /proc, as every
// provider's image has. It only imports sandbox, tools and wire. The provider contract itself
// (create, attach, destroy) is sandbox/sandboxtest.
package toolstest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/tools"
)

// NewSandbox returns a fresh, empty sandbox for one test and arranges its teardown with
// t.Cleanup.
type NewSandbox func(t *testing.T) sandbox.Sandbox

// Run runs the whole suite, with and without the sandbox's optional capabilities. Subtests
// run in parallel, each on its own sandbox.
func Run(t *testing.T, newSandbox NewSandbox) {
	t.Helper()
	t.Run("WithCapabilities", func(t *testing.T) { t.Parallel(); run(t, newSandbox) })
	t.Run("WithoutCapabilities", func(t *testing.T) {
		t.Parallel()
		run(t, func(t *testing.T) sandbox.Sandbox { return HideCapabilities(newSandbox(t)) })
	})
}

// HideCapabilities returns sb with only the required Sandbox methods, so the tools take
// their fallback paths.
func HideCapabilities(sb sandbox.Sandbox) sandbox.Sandbox { return basic{sb} }

// basic embeds the interface, not the concrete type: only its three methods are promoted.
type basic struct{ sandbox.Sandbox }

func run(t *testing.T, newSandbox NewSandbox) {
	t.Run("Files", func(t *testing.T) { t.Parallel(); runFiles(t, newSandbox) })
	t.Run("Escapes", func(t *testing.T) { t.Parallel(); runEscapes(t, newSandbox) })
	t.Run("Exec", func(t *testing.T) { t.Parallel(); runExec(t, newSandbox) })
	t.Run("Bash", func(t *testing.T) { t.Parallel(); runBash(t, newSandbox) })
	t.Run("FileTools", func(t *testing.T) { t.Parallel(); runFileTools(t, newSandbox) })
	t.Run("Media", func(t *testing.T) { t.Parallel(); runMedia(t, newSandbox) })
	t.Run("SearchTools", func(t *testing.T) { t.Parallel(); runSearchTools(t, newSandbox) })
	t.Run("ToolErrors", func(t *testing.T) { t.Parallel(); runToolErrors(t, newSandbox) })
	t.Run("Once", func(t *testing.T) { t.Parallel(); runOnce(t, newSandbox) })
	t.Run("SearchRoundTrips", func(t *testing.T) { t.Parallel(); runSearchRoundTrips(t, newSandbox) })
}

// sh runs a command that must succeed and returns its output.
func sh(t *testing.T, sb sandbox.Sandbox, command string) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: command})
	require.NoError(t, err, "exec %q", command)
	require.Zero(t, res.ExitCode, "exec %q: %s", command, res.Output)
	return string(res.Output)
}

// tool runs a built-in tool with a JSON input.
func tool(t *testing.T, sb sandbox.Sandbox, name, input string) tools.Result {
	t.Helper()
	return tools.RunBuiltin(context.Background(), sb, name, []byte(input))
}

// toolOK runs a built-in tool that must succeed and returns its text.
func toolOK(t *testing.T, sb sandbox.Sandbox, name, input string) string {
	t.Helper()
	res := tool(t, sb, name, input)
	require.False(t, res.IsError, "%s %s: %s", name, input, res.Text)
	return res.Text
}

// toolErr runs a built-in tool that must fail and checks that its text contains want.
func toolErr(t *testing.T, sb sandbox.Sandbox, name, input, want string) {
	t.Helper()
	res := tool(t, sb, name, input)
	require.True(t, res.IsError, "%s %s should fail, got: %s", name, input, res.Text)
	require.Contains(t, res.Text, want, "%s %s", name, input)
}

func readFile(t *testing.T, sb sandbox.Sandbox, path string) string {
	t.Helper()
	data, err := sb.ReadFile(context.Background(), path)
	require.NoError(t, err, "read %q", path)
	return string(data)
}

func writeFile(t *testing.T, sb sandbox.Sandbox, path, content string) {
	t.Helper()
	require.NoError(t, sb.WriteFile(context.Background(), path, []byte(content)), "write %q", path)
}

// jsonObject builds a tool input from key, value pairs.
func jsonObject(kv ...any) string {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	data, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(data)
}

// lines splits command output into its non-empty lines.
func lines(out string) []string {
	return strings.FieldsFunc(out, func(r rune) bool { return r == '\n' })
}
