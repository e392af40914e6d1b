package childproc

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStartReportsTheExit(t *testing.T) {
	t.Parallel()
	exited, err := Start(exec.Command("sh", "-c", "exit 3"))
	require.NoError(t, err)
	var exit *exec.ExitError
	require.ErrorAs(t, <-exited, &exit)
	require.Equal(t, 3, exit.ExitCode())
}

func TestStartFailsForAMissingProgram(t *testing.T) {
	t.Parallel()
	_, err := Start(exec.Command("/nonexistent/program"))
	require.Error(t, err)
}

// The parent-death signal is set on the child as given (the thread rule itself is what the
// pgserver and durable crash tests exercise: a SIGKILLed dev leaves no child).
func TestStartKeepsSysProcAttr(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sh", "-c", "grep -q '^Pid' /proc/self/status")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	exited, err := Start(cmd)
	require.NoError(t, err)
	require.NoError(t, <-exited)
}
