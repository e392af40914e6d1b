//go:build integration

package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestContainerImage builds the image as the README says (`make docker-build`) and runs it as
// a user would: it knows its version, `serve` without a database says what to set (and does
// not suggest `dev`, which needs PostgreSQL binaries the image does not have), and `dev` gets as
// far as looking for PostgreSQL (it can create its data directory in the image's /data).
func TestContainerImage(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker CLI on this machine")
	}
	const img = "managed-agents:e2e-image-test"
	build := exec.Command("make", "docker-build", "IMG="+img)
	build.Dir = "../.."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "make docker-build:\n%s", out)
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", img).Run() })

	run := func(args ...string) (string, error) {
		out, err := exec.Command("docker", append([]string{"run", "--rm", "--network", "none", img}, args...)...).CombinedOutput()
		return string(out), err
	}
	out2, err := run("version")
	require.NoError(t, err, out2)
	require.Regexp(t, `^managed-agents version \S+\n$`, out2)
	require.NotContains(t, out2, "version dev", "make stamps the version")

	out2, err = run("serve")
	require.Error(t, err)
	require.Contains(t, out2, "MANAGED_AGENT_DATABASE_URL is not set")
	require.NotContains(t, out2, "managed-agents dev", "dev cannot work in the image")

	out2, err = run("dev")
	require.Error(t, err)
	require.NotContains(t, strings.ToLower(out2), "permission denied", "the image has a writable data directory")
	require.Contains(t, out2, "PostgreSQL server binaries")
	require.Contains(t, out2, "MANAGED_AGENT_DATABASE_URL")
}
