package toolstest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// survivorsScript prints every live (not zombie) process whose id is listed in the file pids
// or whose process group is the one in the file pgid — `pgrep -g` without needing procps.
const survivorsScript = `read -r pg < pgid
ids=" $(tr '\n' ' ' < pids)"
for f in /proc/[0-9]*/stat; do
	read -r pid comm st ppid grp rest < "$f" 2>/dev/null || continue
	case $st in Z|X) continue ;; esac
	case "$ids " in *" $pid "*) echo "$pid $comm $st group=$grp"; continue ;; esac
	if [ "$grp" = "$pg" ]; then echo "$pid $comm $st group=$grp"; fi
done`

// recordGroup is a script prefix that writes the command's process group id to the file pgid.
const recordGroup = `read -r _ _ _ _ grp _ < /proc/$$/stat && echo $grp > pgid && : > pids
`

func runExec(t *testing.T, newSandbox NewSandbox) {
	ctx := context.Background()

	t.Run("ExitCodeAndInterleavedOutput", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo out; echo err >&2; echo more; exit 3"})
		require.NoError(t, err)
		require.Equal(t, 3, res.ExitCode)
		require.Equal(t, "out\nerr\nmore\n", string(res.Output))
		require.False(t, res.Truncated)
		require.False(t, res.TimedOut)
	})

	t.Run("KilledBySignalReportsShellStatus", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "kill -TERM $$"})
		require.NoError(t, err)
		require.Equal(t, 128+15, res.ExitCode)
	})

	t.Run("RunsInTheWorkspaceOrDir", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		sh(t, sb, "mkdir -p sub/deeper && touch marker")
		require.Equal(t, "marker\nsub\n", sh(t, sb, "ls"))
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "ls; pwd", Dir: "sub"})
		require.NoError(t, err)
		out := lines(string(res.Output))
		require.Len(t, out, 2)
		require.Equal(t, "deeper", out[0])
		require.True(t, strings.HasSuffix(out[1], "/sub"), "pwd = %q", out[1])
	})

	t.Run("StdinIsEmpty", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		require.Equal(t, "eof\n", sh(t, sb, "read -r line || echo eof"))
	})

	t.Run("OutputIsCappedWhileTheCommandRunsOn", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{
			// 4 MiB in small writes: a child blocked on a full pipe would never write done.
			Command:   "yes 0123456789abcdef | head -c 4194304; echo done > done.txt",
			MaxOutput: 1000,
		})
		require.NoError(t, err)
		require.False(t, res.TimedOut)
		require.Zero(t, res.ExitCode)
		require.True(t, res.Truncated)
		require.Len(t, res.Output, 1000)
		require.True(t, strings.HasPrefix(string(res.Output), "0123456789abcdef\n"))
		require.Equal(t, "done\n", readFile(t, sb, "done.txt"))
	})

	t.Run("OutputExactlyAtTheCapIsNotTruncated", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "printf 0123456789", MaxOutput: 10})
		require.NoError(t, err)
		require.False(t, res.Truncated)
		require.Equal(t, "0123456789", string(res.Output))
	})

	t.Run("TimeoutKillsTheWholeProcessTree", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{
			Command: recordGroup + `sleep 100 & echo $! >> pids
sleep 100 & echo $! >> pids
bash -c 'sleep 100 & echo $! >> pids; wait' &
echo $! >> pids
while [ "$(wc -l < pids)" -lt 4 ]; do sleep 0.05; done
echo started
wait`,
			Timeout: 3 * time.Second,
		})
		require.NoError(t, err)
		require.True(t, res.TimedOut)
		require.NotZero(t, res.ExitCode)
		require.Equal(t, "started\n", string(res.Output))
		require.Len(t, lines(readFile(t, sb, "pids")), 4)
		requireNoSurvivors(t, sb)
	})

	t.Run("CancelKillsTheWholeProcessTree", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			// Cancel once the command has recorded its processes.
			for cctx.Err() == nil {
				if data, err := sb.ReadFile(cctx, "ready"); err == nil && len(data) > 0 {
					cancel()
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		_, err := sb.Exec(cctx, sandbox.ExecRequest{
			Command: recordGroup + `sleep 100 & echo $! >> pids
sleep 100 & echo $! >> pids
echo yes > ready
wait`,
		})
		require.ErrorIs(t, err, context.Canceled)
		requireNoSurvivors(t, sb)
	})

	t.Run("BackgroundProcessDoesNotHoldTheCall", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{
			Command: "sleep 100 & echo started",
			Timeout: time.Minute,
		})
		require.NoError(t, err)
		require.False(t, res.TimedOut, "the call must end when its command does")
		require.Equal(t, "started\n", string(res.Output))
	})
}

// requireNoSurvivors waits until no process the command recorded is alive. Killed processes
// take a moment to be torn down after SIGKILL, hence the wait; its bound is generous and not
// a measure of speed.
func requireNoSurvivors(t *testing.T, sb sandbox.Sandbox) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: survivorsScript})
		if !assert.NoError(c, err) {
			return
		}
		assert.Empty(c, strings.TrimSpace(string(res.Output)), "processes still alive")
	}, 15*time.Second, 100*time.Millisecond)
}
