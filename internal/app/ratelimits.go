package app

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/managed-agents/managed-agents/internal/sessions"
)

// RateLimitConfig is the per-key rate limits and the per-workspace quotas
// (docs/operations.md#rate-limits-and-quotas). Zero is no limit in every field. They hold
// across replicas: their state is in PostgreSQL.
type RateLimitConfig struct {
	// RequestsPerSecond is each API key's sustained request rate
	// (MANAGED_AGENT_RATE_LIMIT_RPS, a number such as 50 or 0.5), and Burst how many requests
	// it may make at once (MANAGED_AGENT_RATE_LIMIT_BURST).
	RequestsPerSecond float64
	Burst             int
	// StreamsPerKey caps each key's open SSE streams (MANAGED_AGENT_MAX_STREAMS_PER_KEY).
	StreamsPerKey int
	// WorkspaceRunningSessions caps each workspace's running sessions: a message that would
	// start one more turn is refused with 429 (MANAGED_AGENT_WORKSPACE_MAX_RUNNING_SESSIONS;
	// the API enforces it).
	WorkspaceRunningSessions int
	// WorkspaceSandboxes caps each workspace's sandboxes: a session's first tool call beyond
	// it ends the turn with session.error (MANAGED_AGENT_WORKSPACE_MAX_SANDBOXES; the workers
	// enforce it).
	WorkspaceSandboxes int
}

// DefaultRateLimits are the limits FromLookup starts from. They sit well above what the
// official SDK does in normal use and above the hosted service's own limits (API.md §11: 300
// creates and 1,200 reads a minute per organization, 5 and 20 a second), so a client written
// against the hosted service never meets them, while one runaway key cannot take the
// database for itself: 50 requests a second sustained, bursts of 100 (a page-through of a long
// log, a fan-out of session creates), and 100 open streams (one per watched session). The
// workspace quotas are off: how many sessions and sandboxes a deployment affords is its own
// decision.
var DefaultRateLimits = RateLimitConfig{RequestsPerSecond: 50, Burst: 100, StreamsPerKey: 100}

// DevRateLimits are dev's limits: no request rate, because a laptop server serves its own
// user's test suites, and the official SDK's two retries are used up at 50 requests a second.
// The burst is kept so that setting MANAGED_AGENT_RATE_LIMIT_RPS alone turns on a valid limit.
var DevRateLimits = RateLimitConfig{Burst: DefaultRateLimits.Burst, StreamsPerKey: DefaultRateLimits.StreamsPerKey}

// DevDefaults is the configuration dev starts from before the environment applies.
func DevDefaults() Config {
	return Config{Addr: "127.0.0.1:8080", LogFormat: "text", DataDir: "./.data", ControllerWorkspacePerNamespace: true,
		RateLimits: DevRateLimits}
}

// maxRequestsPerSecond keeps the limiter's interval (1/rate) above PostgreSQL's microsecond
// resolution, with room to spare.
const maxRequestsPerSecond = 100_000

// rateLimitVars are the variables of RateLimitConfig, in the order Validate reports them.
var rateLimitVars = []string{
	"MANAGED_AGENT_RATE_LIMIT_RPS", "MANAGED_AGENT_RATE_LIMIT_BURST", "MANAGED_AGENT_MAX_STREAMS_PER_KEY",
	"MANAGED_AGENT_WORKSPACE_MAX_RUNNING_SESSIONS", "MANAGED_AGENT_WORKSPACE_MAX_SANDBOXES",
}

// rateLimitsFromLookup reads the variables over l, or over DefaultRateLimits when the caller
// set no limit at all; a value that does not parse is kept for Validate.
func (c *Config) rateLimitsFromLookup(get func(string) string) {
	if c.RateLimits == (RateLimitConfig{}) {
		c.RateLimits = DefaultRateLimits
	}
	l := &c.RateLimits
	if v := get("MANAGED_AGENT_RATE_LIMIT_RPS"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			c.unparsed["MANAGED_AGENT_RATE_LIMIT_RPS"] = fmt.Sprintf("MANAGED_AGENT_RATE_LIMIT_RPS=%q: must be a number of requests per second such as 50 or 0.5, or 0 for no limit", v)
		}
		l.RequestsPerSecond = f
	}
	for _, v := range []struct {
		name string
		dst  *int
	}{
		{"MANAGED_AGENT_RATE_LIMIT_BURST", &l.Burst},
		{"MANAGED_AGENT_MAX_STREAMS_PER_KEY", &l.StreamsPerKey},
		{"MANAGED_AGENT_WORKSPACE_MAX_RUNNING_SESSIONS", &l.WorkspaceRunningSessions},
		{"MANAGED_AGENT_WORKSPACE_MAX_SANDBOXES", &l.WorkspaceSandboxes},
	} {
		s := get(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			c.unparsed[v.name] = fmt.Sprintf("%s=%q: must be a whole number, or 0 for no limit", v.name, s)
		}
		*v.dst = n
	}
}

// validateRateLimits checks the limits; every problem names its variable.
// minRequestsPerSecond and maxBurstWindow keep the limiter's durations (1/rps and
// burst/rps) far from overflowing time.Duration.
const (
	minRequestsPerSecond = 0.001
	maxBurstWindow       = 24 * time.Hour
)

func (c Config) validateRateLimits() error {
	var errs []error
	for _, name := range rateLimitVars {
		if err := c.parsed(name); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	l := c.RateLimits
	if math.IsNaN(l.RequestsPerSecond) || l.RequestsPerSecond < 0 || l.RequestsPerSecond > maxRequestsPerSecond ||
		(l.RequestsPerSecond > 0 && l.RequestsPerSecond < minRequestsPerSecond) {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_RATE_LIMIT_RPS=%g: must be 0 (no limit) or from %g to %d", l.RequestsPerSecond, minRequestsPerSecond, maxRequestsPerSecond))
	} else if l.RequestsPerSecond > 0 && l.Burst < 1 {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_RATE_LIMIT_BURST=%d: must be at least 1 with a request limit (MANAGED_AGENT_RATE_LIMIT_RPS=%g)", l.Burst, l.RequestsPerSecond))
	} else if l.RequestsPerSecond > 0 && float64(l.Burst)/l.RequestsPerSecond > maxBurstWindow.Seconds() {
		// The bucket's depth is burst/rps seconds; past a day the arithmetic of the limiter
		// (durations in nanoseconds) would overflow, and no real limit needs it.
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_RATE_LIMIT_BURST=%d: at MANAGED_AGENT_RATE_LIMIT_RPS=%g it would take more than %s to refill; lower it", l.Burst, l.RequestsPerSecond, maxBurstWindow))
	}
	for _, v := range []struct {
		name string
		n    int
	}{
		{"MANAGED_AGENT_RATE_LIMIT_BURST", l.Burst},
		{"MANAGED_AGENT_MAX_STREAMS_PER_KEY", l.StreamsPerKey},
		{"MANAGED_AGENT_WORKSPACE_MAX_RUNNING_SESSIONS", l.WorkspaceRunningSessions},
		{"MANAGED_AGENT_WORKSPACE_MAX_SANDBOXES", l.WorkspaceSandboxes},
	} {
		if v.n < 0 {
			errs = append(errs, fmt.Errorf("%s=%d: must not be negative (0 is no limit)", v.name, v.n))
		}
	}
	return errors.Join(errs...)
}

// sessionLimits is what the API's sessions service enforces.
func (c Config) sessionLimits() sessions.Limits {
	l := c.RateLimits
	return sessions.Limits{RequestsPerSecond: l.RequestsPerSecond, Burst: l.Burst, StreamsPerKey: l.StreamsPerKey,
		RunningSessions: l.WorkspaceRunningSessions}
}
