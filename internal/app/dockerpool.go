package app

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
)

// maxWarmPool bounds MANAGED_AGENT_DOCKER_WARM_POOL: each pooled container holds memory
// and pids on the engine for every warm environment.
const maxWarmPool = 64

// dockerPoolConfig parses the warm pool size and the package install timeout into cfg.
func (c Config) dockerPoolConfig(cfg *docker.Config) error {
	var errs []error
	if c.DockerWarmPool != "" {
		n, err := strconv.Atoi(c.DockerWarmPool)
		if err != nil || n < 0 || n > maxWarmPool {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_DOCKER_WARM_POOL=%q: must be a whole number of containers from 0 (no pool) to %d, such as 2", c.DockerWarmPool, maxWarmPool))
		}
		cfg.WarmPool = n
	}
	if c.DockerPackageTimeout != "" {
		d, err := time.ParseDuration(c.DockerPackageTimeout)
		if err != nil || d < time.Second || d > 9*time.Minute {
			// The acquisition that installs runs in an activity of at most 10 minutes.
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_DOCKER_PACKAGE_TIMEOUT=%q: must be a duration from 1s to 9m, such as 5m", c.DockerPackageTimeout))
		}
		cfg.PackageTimeout = d
	}
	return errors.Join(errs...)
}
