//go:build integration

package docker_test

import (
	"testing"

	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
)

// BenchmarkProvider is the shared provider benchmark on the local engine and image: cold
// acquisition (volume, container create and start, attach), one `true` command and a 1 MB
// file write and read through the exec API.
func BenchmarkProvider(b *testing.B) {
	sandboxtest.Bench(b, newProvider(b, docker.Config{Deployment: testDeployment}))
}
