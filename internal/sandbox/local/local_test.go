package local_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
	"github.com/managed-agents/managed-agents/internal/tools"
	"github.com/managed-agents/managed-agents/internal/tools/toolstest"
)

// newSandbox creates a sandbox under a fresh provider root and destroys it after the test.
func newSandbox(t *testing.T, spec sandbox.Spec) (*local.Provider, sandbox.Ref, sandbox.Sandbox) {
	t.Helper()
	p := local.New(t.TempDir())
	if spec.Name == "" {
		spec.Name = "test"
	}
	ref, err := p.Create(t.Context(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Destroy(context.Background(), ref)) })
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	return p, ref, sb
}

func TestProviderContract(t *testing.T) {
	t.Parallel()
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider {
			// One root per test, whichever instance asks: a fresh provider is a restart.
			return local.New(rootOf(t))
		},
		Forged: []sandbox.Ref{
			{Provider: "local", ExternalID: "."},
			{Provider: "local", ExternalID: ".."},
			{Provider: "local", ExternalID: "../victim"},
			{Provider: "local", ExternalID: "/etc"},
			{Provider: "local", ExternalID: "sess-a/../../b"},
			{Provider: "local", ExternalID: "not-a-session-dir"},
		},
	})
}

var roots sync.Map // *testing.T → root directory

func rootOf(t *testing.T) string {
	dir, _ := roots.LoadOrStore(t, t.TempDir())
	return dir.(string)
}

func TestToolsSuite(t *testing.T) {
	t.Parallel()
	toolstest.Run(t, func(t *testing.T) sandbox.Sandbox {
		_, _, sb := newSandbox(t, sandbox.Spec{Name: "tools", SessionID: "sesn_conformance"})
		return sb
	})
}

func TestProviderLifecycle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	root := filepath.Join(t.TempDir(), "not", "yet")
	p := local.New(root)
	require.Equal(t, "local", p.Name())

	ref, err := p.Create(ctx, sandbox.Spec{Name: "sesn_01/../x", SessionID: "sesn_01/../x"})
	require.NoError(t, err)
	require.Equal(t, "local", ref.Provider)
	require.True(t, strings.HasPrefix(ref.ExternalID, "sess-sesn_01_x-"), ref.ExternalID)
	info, err := os.Stat(filepath.Join(root, ref.ExternalID))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "session directories are private")

	other, err := p.Create(ctx, sandbox.Spec{Name: "sesn_01/../y", SessionID: "sesn_01/../x"})
	require.NoError(t, err)
	require.NotEqual(t, ref.ExternalID, other.ExternalID, "every sandbox name gets its own directory")
	same, err := p.Create(ctx, sandbox.Spec{Name: "sesn_01/../x", SessionID: "sesn_01/../x"})
	require.NoError(t, err)
	require.Equal(t, ref, same, "a Create of a name already made adopts it")

	sb, err := p.Attach(ctx, ref)
	require.NoError(t, err)
	require.NoError(t, sb.WriteFile(ctx, "kept.txt", []byte("kept")))

	// A new provider on the same root (a restarted worker) finds the files again.
	again, err := local.New(root).Attach(ctx, ref)
	require.NoError(t, err)
	data, err := again.ReadFile(ctx, "kept.txt")
	require.NoError(t, err)
	require.Equal(t, "kept", string(data))
	_, err = p.Attach(ctx, other)
	require.NoError(t, err)
	_, err = again.ReadFile(ctx, "../"+other.ExternalID+"/work/kept.txt")
	require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace, "sessions never see each other")

	require.NoError(t, p.Destroy(ctx, ref))
	_, err = os.Stat(filepath.Join(root, ref.ExternalID))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = p.Attach(ctx, ref)
	require.ErrorIs(t, err, sandbox.ErrGone)
	_, err = again.ReadFile(ctx, "kept.txt")
	require.ErrorIs(t, err, sandbox.ErrGone, "a client kept past Destroy reports the sandbox gone")
	require.NoError(t, p.Destroy(ctx, ref), "destroying twice is not an error")

	_, err = p.Attach(ctx, other)
	require.NoError(t, err, "destroying one session leaves the others")
}

func TestRefsThatDoNotNameASessionDirectoryAreRefused(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	p := local.New(filepath.Join(root, "sandboxes"))
	victim := filepath.Join(root, "victim")
	require.NoError(t, os.Mkdir(victim, 0o700))

	for _, ref := range []sandbox.Ref{
		{Provider: "local", ExternalID: ""},
		{Provider: "local", ExternalID: "."},
		{Provider: "local", ExternalID: ".."},
		{Provider: "local", ExternalID: "../victim"},
		{Provider: "local", ExternalID: victim},
		{Provider: "local", ExternalID: "a/b"},
		{Provider: "docker", ExternalID: "sess-x"},
	} {
		_, err := p.Attach(t.Context(), ref)
		require.Error(t, err, "attach %+v", ref)
		require.NotErrorIs(t, err, sandbox.ErrGone, "attach %+v", ref)
		require.Error(t, p.Destroy(t.Context(), ref), "destroy %+v", ref)
	}
	require.DirExists(t, victim)
}

func TestDestroyRemovesReadOnlyTrees(t *testing.T) {
	t.Parallel()
	p := local.New(t.TempDir())
	ref, err := p.Create(t.Context(), sandbox.Spec{Name: "t"})
	require.NoError(t, err)
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "mkdir -p ro/sub && touch ro/sub/f && chmod -R a-w ro && chmod a-rx ro/sub"})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, string(res.Output))
	require.NoError(t, p.Destroy(t.Context(), ref))
	_, err = p.Attach(t.Context(), ref)
	require.ErrorIs(t, err, sandbox.ErrGone)
}

func TestEnvironmentIsClearedAndDeclared(t *testing.T) {
	t.Parallel()
	spec := sandbox.Spec{SessionID: "s", Env: map[string]string{"DECLARED": "yes it is", "LANG": "C"}}
	p, ref, sb := newSandbox(t, spec)
	work, err := p.Workspace(ref)
	require.NoError(t, err)

	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "env"})
	require.NoError(t, err)
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Output)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	// bash itself adds PWD, SHLVL and _.
	names := slices.Sorted(maps.Keys(env))
	require.Equal(t, []string{"DECLARED", "HOME", "LANG", "PATH", "PWD", "SHLVL", "_"}, names)
	require.Equal(t, "yes it is", env["DECLARED"])
	require.Equal(t, "C", env["LANG"], "declared variables override the defaults")
	require.Equal(t, work, env["HOME"])
	require.Equal(t, os.Getenv("PATH"), env["PATH"])

	// The declared environment survives a restart: it is stored with the sandbox.
	again, err := local.New(filepath.Dir(filepath.Dir(work))).Attach(t.Context(), ref)
	require.NoError(t, err)
	res, err = again.Exec(t.Context(), sandbox.ExecRequest{Command: `echo "$DECLARED"`})
	require.NoError(t, err)
	require.Equal(t, "yes it is\n", string(res.Output))
}

func TestCreateRejectsBadEnvironment(t *testing.T) {
	t.Parallel()
	p := local.New(t.TempDir())
	for _, env := range []map[string]string{
		{"": "x"},
		{"A=B": "x"},
		{"1A": "x"},
		{"A B": "x"},
		{"OK": "nul\x00byte"},
	} {
		_, err := p.Create(t.Context(), sandbox.Spec{Name: "t", Env: env})
		require.Error(t, err, "%q", env)
	}
}

func TestAbsolutePathsInsideTheWorkspaceAreAccepted(t *testing.T) {
	t.Parallel()
	p, ref, sb := newSandbox(t, sandbox.Spec{})
	work, err := p.Workspace(ref)
	require.NoError(t, err)
	require.NoError(t, sb.WriteFile(t.Context(), filepath.Join(work, "sub", "a.txt"), []byte("abs")))
	data, err := sb.ReadFile(t.Context(), "sub/a.txt")
	require.NoError(t, err)
	require.Equal(t, "abs", string(data))

	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "pwd", Dir: filepath.Join(work, "sub")})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(work, "sub")+"\n", string(res.Output))

	// A sibling whose name starts like the workspace is still outside.
	_, err = sb.ReadFile(t.Context(), work+"-other/a.txt")
	require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace)
	_, err = sb.ReadFile(t.Context(), filepath.Join(filepath.Dir(work), "spec.json"))
	require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace)
}

func TestNothingOutlivesACallInItsProcessGroup(t *testing.T) {
	t.Parallel()
	_, _, sb := newSandbox(t, sandbox.Spec{})
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "sleep 100 & echo $!"})
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Output)))
	require.NoError(t, err)
	requireGone(t, pid)
}

func TestDetachedProcessDoesNotHoldTheCall(t *testing.T) {
	t.Parallel()
	_, _, sb := newSandbox(t, sandbox.Spec{})
	// setsid leaves the process group, so the group kill misses it, and it keeps the output
	// pipe open: Exec must stop waiting for the output anyway.
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "setsid sleep 100 & echo $!", Timeout: time.Minute})
	require.NoError(t, err)
	require.False(t, res.TimedOut)
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Output)))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
}

func TestDefaultLimits(t *testing.T) {
	t.Parallel()
	p := local.New(t.TempDir(), local.WithDefaultTimeout(time.Second), local.WithDefaultMaxOutput(5))
	ref, err := p.Create(t.Context(), sandbox.Spec{Name: "t"})
	require.NoError(t, err)
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo 0123456789; sleep 100"})
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.True(t, res.Truncated)
	require.Equal(t, "01234", string(res.Output))
	require.Equal(t, 128+int(syscall.SIGKILL), res.ExitCode)
}

func TestCanceledContextRunsNothing(t *testing.T) {
	t.Parallel()
	_, _, sb := newSandbox(t, sandbox.Spec{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "touch ran"})
	require.ErrorIs(t, err, context.Canceled)
	_, err = sb.ReadFile(t.Context(), "ran")
	require.ErrorIs(t, err, sandbox.ErrNotExist)
}

// requireGone waits until pid is gone or a zombie (its parent may not reap it).
func requireGone(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		_, rest, _ := strings.Cut(string(data), ") ")
		return strings.HasPrefix(rest, "Z") || strings.HasPrefix(rest, "X")
	}, 15*time.Second, 50*time.Millisecond, "process %d survived its call", pid)
}

func TestAbsolutePathsPrintedByPwdUnderASymlinkedRoot(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(base, "real"), 0o700))
	require.NoError(t, os.Symlink("real", filepath.Join(base, "link")))
	p := local.New(filepath.Join(base, "link"))
	ref, err := p.Create(t.Context(), sandbox.Spec{Name: "t"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Destroy(context.Background(), ref)) })
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)

	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo hi > f.txt && pwd"})
	require.NoError(t, err)
	pwd := strings.TrimSpace(string(res.Output))
	require.Contains(t, pwd, "/real/", "bash reports the resolved path")
	data, err := sb.ReadFile(t.Context(), pwd+"/f.txt")
	require.NoError(t, err)
	require.Equal(t, "hi\n", string(data))
}

// TestNoBashSaysWhatWorks: the chart's default worker image has no shell, so the local
// provider's bash fails there; the model (and the user reading the session) must be told why
// and what to change, not just "executable file not found". The file tools still work.
func TestNoBashSaysWhatWorks(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // a PATH with no bash on it, like the FROM-scratch image
	_, _, sb := newSandbox(t, sandbox.Spec{})

	_, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo hi"})
	require.ErrorIs(t, err, local.ErrNoBash)

	tests := []struct {
		name, tool, input string
		isError           bool
		contains          []string
	}{
		{name: "bash says what works", tool: "bash", input: `{"command":"echo hi"}`, isError: true,
			contains: []string{"bash is not available", "worker's own container", "kubernetes or docker sandbox provider", "docs/kubernetes.md"}},
		{name: "one-shot bash too", tool: "bash", input: `{"command":"ls","restart":true}`, isError: true,
			contains: []string{"bash is not available"}},
		{name: "write needs no shell", tool: "write", input: `{"file_path":"a.txt","content":"hello\n"}`},
		{name: "read needs no shell", tool: "read", input: `{"file_path":"a.txt"}`, contains: []string{"hello"}},
		{name: "grep needs no shell", tool: "grep", input: `{"pattern":"hel+o"}`, contains: []string{"a.txt"}},
	}
	for _, tt := range tests {
		res := tools.RunBuiltin(t.Context(), sb, tt.tool, json.RawMessage(tt.input))
		require.Equal(t, tt.isError, res.IsError, "%s: %s", tt.name, res.Text)
		require.NotContains(t, res.Text, "executable file not found", tt.name)
		for _, want := range tt.contains {
			require.Contains(t, res.Text, want, tt.name)
		}
	}
}
