//go:build integration

package docker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
)

// BenchmarkProvider is the shared provider benchmark on the local engine and image: cold
// acquisition (volume, container create and start, attach), acquisition from a warm pool of
// one (rename, claim record, attach), one `true` command and a 1 MB file write and read
// through the exec API.
func BenchmarkProvider(b *testing.B) {
	sandboxtest.Bench(b, newProvider(b, docker.Config{Deployment: testDeployment}))

	engine(b)
	p, err := docker.New(docker.Config{Image: image(), Deployment: testDeployment, WarmPool: 1})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.WarmPool(nil).Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.WarmPool(nil).Stop(); _ = p.Close() })
	sandboxtest.BenchWarm(b, p, func(spec sandbox.Spec) error {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if docker.PoolReady(p, spec) > 0 {
				return nil
			}
		}
		return fmt.Errorf("the warm pool did not refill within a minute")
	})
}
