package app

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/startstop"
)

func TestDockerPoolConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		pool     string
		timeout  string
		wantErr  []string
		wantPool int
		wantTime time.Duration
	}{
		{name: "unset is no pool and the provider's timeout"},
		{name: "set", pool: "3", timeout: "2m", wantPool: 3, wantTime: 2 * time.Minute},
		{name: "zero pool", pool: "0"},
		{name: "not a number", pool: "some", wantErr: []string{`MANAGED_AGENT_DOCKER_WARM_POOL="some": must be a whole number of containers from 0 (no pool) to 64`}},
		{name: "negative", pool: "-1", wantErr: []string{`MANAGED_AGENT_DOCKER_WARM_POOL="-1"`}},
		{name: "too large", pool: "65", wantErr: []string{`MANAGED_AGENT_DOCKER_WARM_POOL="65"`}},
		{name: "timeout not a duration", timeout: "5", wantErr: []string{`MANAGED_AGENT_DOCKER_PACKAGE_TIMEOUT="5": must be a duration from 1s to 9m`}},
		{name: "timeout beyond the activity", timeout: "20m", wantErr: []string{`MANAGED_AGENT_DOCKER_PACKAGE_TIMEOUT="20m"`}},
		{name: "both at once", pool: "x", timeout: "y", wantErr: []string{"MANAGED_AGENT_DOCKER_WARM_POOL", "MANAGED_AGENT_DOCKER_PACKAGE_TIMEOUT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := FromLookup(Config{Sandbox: "docker"}, func(name string) (string, bool) {
				switch name {
				case "MANAGED_AGENT_DOCKER_WARM_POOL":
					return tt.pool, tt.pool != ""
				case "MANAGED_AGENT_DOCKER_PACKAGE_TIMEOUT":
					return tt.timeout, tt.timeout != ""
				}
				return "", false
			})
			err := c.Validate()
			if len(tt.wantErr) == 0 {
				require.NoError(t, err)
				cfg, err := c.dockerConfig()
				require.NoError(t, err)
				require.Equal(t, tt.wantPool, cfg.WarmPool)
				require.Equal(t, tt.wantTime, cfg.PackageTimeout)
				return
			}
			for _, want := range tt.wantErr {
				require.ErrorContains(t, err, want)
			}
		})
	}
}

// The worker runs the docker provider's warm pool: the method it looks for must be the one
// the provider has (a signature drift would silently run no pool).
func TestWorkerRunsTheWarmPool(t *testing.T) {
	t.Parallel()
	reg, err := NewSandboxRegistry(Config{Sandbox: "docker", DockerWarmPool: "1"})
	require.NoError(t, err)
	require.NotEqual(t, startstop.Group{}, warmPool(reg, nil))

	reg, err = NewSandboxRegistry(Config{Sandbox: "local", SandboxDir: t.TempDir()})
	require.NoError(t, err)
	require.Equal(t, startstop.Group{}, warmPool(reg, nil), "local has no pool")
}
