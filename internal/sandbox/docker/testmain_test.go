package docker_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker/runnertest"
)

// TestMain builds the runner the containers run: the real managed-agents binary, static,
// as `make build` makes it.
func TestMain(m *testing.M) {
	bin, err := runnertest.Path()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	docker.UseRunner(bin)
	goleak.VerifyTestMain(m)
}
