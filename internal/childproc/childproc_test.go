package childproc

import (
	"os/exec"
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
