package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/anthropic"
	"github.com/managed-agents/managed-agents/internal/model/fake"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/stream"
	"github.com/managed-agents/managed-agents/internal/turns"
)

// NewModel builds the model client the configuration names (fake by default).
func NewModel(c Config) (model.Client, error) {
	switch c.Model {
	case "", "fake":
		if c.FakeWordDelay > 0 {
			return fake.New(fake.WithWordDelay(c.FakeWordDelay)), nil
		}
		return fake.New(), nil
	case "anthropic":
		opts := []anthropic.Option{}
		if c.AnthropicBaseURL != "" {
			opts = append(opts, anthropic.WithBaseURL(c.AnthropicBaseURL))
		}
		switch {
		case c.AnthropicAPIKey != "":
			opts = append(opts, anthropic.WithAPIKey(c.AnthropicAPIKey))
		case c.AnthropicAuthToken != "":
			opts = append(opts, anthropic.WithBearerToken(c.AnthropicAuthToken))
		default:
			return nil, errors.New("MANAGED_AGENT_MODEL=anthropic needs MANAGED_AGENT_ANTHROPIC_API_KEY or MANAGED_AGENT_ANTHROPIC_AUTH_TOKEN")
		}
		m, err := anthropic.New(opts...)
		if err != nil {
			return nil, fmt.Errorf("MANAGED_AGENT_ANTHROPIC_*: %w", err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("MANAGED_AGENT_MODEL=%q: must be fake or anthropic", c.Model)
}

// NewSandboxRegistry builds the deployment's sandbox providers: the one the configuration
// names (local by default) creates new sandboxes; teardown and attach reach a stored
// reference through the provider it names.
func NewSandboxRegistry(c Config) (*sandbox.Registry, error) {
	p, err := NewSandboxProvider(c)
	if err != nil {
		return nil, err
	}
	return sandbox.NewRegistry(p)
}

// NewSandboxProvider builds the sandbox provider the configuration names (local by default).
func NewSandboxProvider(c Config) (sandbox.Provider, error) {
	switch c.Sandbox {
	case "", "local":
		dir := c.SandboxDir
		if dir == "" {
			dir = filepath.Join(os.TempDir(), "managed-agents-sandboxes")
		}
		return local.New(dir), nil
	}
	return nil, fmt.Errorf("MANAGED_AGENT_SANDBOX=%q: only local is available in this build (docker and kubernetes arrive with their issues)", c.Sandbox)
}

// CheckSandboxGuard refuses a real model with the local sandbox unless explicitly allowed
// (DESIGN.md §2): the local sandbox is not a security boundary, and a real model's commands
// would run as this process's user on this machine.
func CheckSandboxGuard(c Config) error {
	realModel := c.Model != "" && c.Model != "fake"
	localSandbox := c.Sandbox == "" || c.Sandbox == "local"
	if realModel && localSandbox && !c.AllowUnsafeLocalSandbox {
		return errors.New("refusing to start: MANAGED_AGENT_MODEL=" + c.Model + " with the local sandbox would let a real model run " +
			"commands on this machine as this user (the local sandbox is not a security boundary). Use an isolating sandbox " +
			"(MANAGED_AGENT_SANDBOX=docker, when available), or set MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX=1 to accept the risk")
	}
	return nil
}

// Worker is a running Temporal worker for session workflows.
type Worker struct {
	w         worker.Worker
	stopSweep context.CancelFunc
	sweepDone chan struct{}
}

// sweepInterval is how often a worker re-wakes sessions whose wake-up may have been lost.
const sweepInterval = time.Minute

// StartWorker starts a worker that runs session turns with the configured model and sandbox.
func StartWorker(c Config, tc client.Client, st *store.Store, previews stream.Hub, logger *slog.Logger) (*Worker, error) {
	if err := CheckSandboxGuard(c); err != nil {
		return nil, err
	}
	m, err := NewModel(c)
	if err != nil {
		return nil, err
	}
	registry, err := NewSandboxRegistry(c)
	if err != nil {
		return nil, err
	}
	engine := turns.New(st, logger)
	acts := &durable.Activities{
		Turns:     engine,
		Core:      agent.NewCore(m, agent.WithLogger(logger)),
		Sandboxes: sandbox.NewManager(registry, engine.Sandboxes(), engine.Sandboxes(), sandbox.WithLogger(logger)),
		Previews:  previews,
		Logger:    logger,
	}
	w := durable.NewWorker(tc, c.TaskQueue, acts)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start Temporal worker: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &Worker{w: w, stopSweep: cancel, sweepDone: make(chan struct{})}
	runner := &durable.Runner{Client: tc, TaskQueue: c.TaskQueue, Retry: c.modelRetry(), Logger: logger}
	go out.sweep(ctx, engine, runner, logger)
	return out, nil
}

// sweep wakes sessions with work no run knows about, at start and then periodically, so
// events committed while Temporal was unreachable still run.
func (w *Worker) sweep(ctx context.Context, engine *turns.Service, runner turns.Waker, logger *slog.Logger) {
	defer close(w.sweepDone)
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		if n, err := engine.WakeStale(ctx, runner); err != nil && ctx.Err() == nil {
			logger.WarnContext(ctx, "sweep for sessions needing a run failed", "error", err)
		} else if n > 0 {
			logger.InfoContext(ctx, "woke sessions that may have had pending work", "sessions", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Stop stops the sweep and polling, and waits for running activities.
func (w *Worker) Stop() {
	w.stopSweep()
	<-w.sweepDone
	w.w.Stop()
}

// DialTemporal connects to the configured Temporal.
func DialTemporal(ctx context.Context, c Config, logger *slog.Logger) (client.Client, error) {
	if c.TemporalAddress == "" {
		return nil, errors.New("MANAGED_AGENT_TEMPORAL_ADDRESS is not set")
	}
	return durable.Dial(ctx, durable.Config{Address: c.TemporalAddress, Namespace: c.TemporalNamespace, TLS: c.TemporalTLS, APIKey: c.TemporalAPIKey}, logger)
}

func (c Config) modelRetry() durable.ModelRetry {
	if c.ModelRetry == (durable.ModelRetry{}) {
		return durable.DefaultModelRetry
	}
	return c.ModelRetry
}
