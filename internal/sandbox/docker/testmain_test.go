package docker_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
)

// TestMain builds the runner the containers run: the real managed-agents binary, static,
// as `make build` makes it.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ma-runner-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin := filepath.Join(dir, "managed-agents")
	build := exec.Command("go", "build", "-o", bin, "../../..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the runner: %v\n%s", err, out)
		os.Exit(1)
	}
	docker.UseRunner(bin)
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}
