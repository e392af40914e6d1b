package local_test

import (
	"testing"

	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
)

// BenchmarkProvider is the shared provider benchmark on the host: the baseline the docker
// provider's numbers compare with.
func BenchmarkProvider(b *testing.B) {
	sandboxtest.Bench(b, local.New(b.TempDir()))
}
