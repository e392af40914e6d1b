package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/credentials"
	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/fake"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/daytona"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/sandbox/e2b"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/sandbox/opensandbox"
	"github.com/managed-agents/managed-agents/internal/startstop"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/stream"
	"github.com/managed-agents/managed-agents/internal/tracing"
	"github.com/managed-agents/managed-agents/internal/turns"
	"github.com/managed-agents/managed-agents/internal/workqueue"
)

// NewModel builds the model client the configuration names (fake by default).
func NewModel(c Config) (model.Client, error) {
	if err := c.validateModel(); err != nil {
		return nil, err
	}
	if c.Model != "anthropic" {
		if c.FakeWordDelay > 0 {
			return fake.New(fake.WithWordDelay(c.FakeWordDelay)), nil
		}
		return fake.New(), nil
	}
	return c.newClaude() // modelprovider.go: the Anthropic API, a gateway, Bedrock, Vertex AI or Foundry
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

// sandboxProvider is one value of MANAGED_AGENT_SANDBOX. New providers add a row; Validate
// and the error message list the rows.
type sandboxProvider struct {
	name string
	new  func(Config) (sandbox.Provider, error)
	// isolating is false for a provider whose commands run unconfined on this machine: the
	// guard refuses a real model on it.
	isolating bool
	// settings are the variables a remote provider reads (into Config.ProviderSettings), and
	// check validates them without reaching the provider (Validate calls it).
	settings []string
	check    func(map[string]string) error
	// remote marks a provider whose sandboxes live at a service (not on this machine or in
	// this cluster): SandboxBindings may name it.
	remote bool
}

// sandboxProviders is set in init: the kubernetes row builds the remote providers it
// attaches through from this same table.
var sandboxProviders []sandboxProvider

func init() {
	sandboxProviders = []sandboxProvider{
		{name: "local", isolating: false, new: func(c Config) (sandbox.Provider, error) {
			dir := c.SandboxDir
			if dir == "" {
				dir = filepath.Join(os.TempDir(), "managed-agents-sandboxes")
			}
			return local.New(dir), nil
		}},
		{name: "docker", isolating: true, new: func(c Config) (sandbox.Provider, error) {
			cfg, err := c.dockerConfig()
			if err != nil {
				return nil, err
			}
			return docker.New(cfg)
		}},
		{name: kubernetes.Name, isolating: true, new: newKubernetesProvider},
		{name: opensandbox.Name, isolating: true, remote: true, settings: opensandbox.Settings, check: opensandbox.Check,
			new: func(c Config) (sandbox.Provider, error) {
				cfg, err := opensandbox.ConfigFrom(c.ProviderSettings)
				if err != nil {
					return nil, err
				}
				return opensandbox.New(cfg)
			}},
		{name: daytona.Name, isolating: true, remote: true, settings: daytona.Settings, check: daytona.Check,
			new: func(c Config) (sandbox.Provider, error) {
				cfg, err := daytona.ConfigFrom(c.ProviderSettings)
				if err != nil {
					return nil, err
				}
				return daytona.New(cfg)
			}},
		{name: e2b.NameE2B, isolating: true, remote: true, settings: e2b.Settings, check: e2b.Check,
			new: func(c Config) (sandbox.Provider, error) { return newE2B(e2b.ConfigFrom(c.ProviderSettings)) }},
		{name: e2b.NameCube, isolating: true, remote: true, settings: e2b.CubeSettings, check: e2b.CubeCheck,
			new: func(c Config) (sandbox.Provider, error) { return newE2B(e2b.CubeConfigFrom(c.ProviderSettings)) }},
	}
}

// newE2B builds the e2b or cubesandbox provider from its parsed settings.
func newE2B(cfg e2b.Config, err error) (sandbox.Provider, error) {
	if err != nil {
		return nil, err
	}
	return e2b.New(cfg)
}

// remoteProviders parses a comma-separated list of remote provider names (variable name,
// value v) and, if build, builds each one's client; without build it only validates. Every
// problem names the variable.
func (c Config) remoteProviders(name, v string, build bool) (map[string]sandbox.Provider, error) {
	out := map[string]sandbox.Provider{}
	var errs []error
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		var row *sandboxProvider
		var remotes []string
		for i, p := range sandboxProviders {
			if p.remote {
				remotes = append(remotes, p.name)
				if p.name == n {
					row = &sandboxProviders[i]
				}
			}
		}
		if row == nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a remote sandbox provider (the remote ones: %s)", name, n, orDefault(strings.Join(remotes, ", "), "none")))
			continue
		}
		if row.check != nil {
			if err := row.check(c.ProviderSettings); err != nil {
				errs = append(errs, fmt.Errorf("%s names %s: %w", name, n, err))
				continue
			}
		}
		if build {
			p, err := row.new(c)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s names %s: %w", name, n, err))
				continue
			}
			out[n] = p
		}
	}
	return out, errors.Join(errs...)
}

// defaultSandbox is the provider an empty MANAGED_AGENT_SANDBOX means.
const defaultSandbox = "local"

// lookupSandbox finds the row of the configured provider.
func (c Config) lookupSandbox() (sandboxProvider, bool) {
	name := orDefault(c.Sandbox, defaultSandbox)
	for _, p := range sandboxProviders {
		if p.name == name {
			return p, true
		}
	}
	return sandboxProvider{}, false
}

// NewSandboxProvider builds the sandbox provider the configuration names (local by default).
func NewSandboxProvider(c Config) (sandbox.Provider, error) {
	p, ok := c.lookupSandbox()
	if !ok {
		return nil, c.validateSandbox()
	}
	return p.new(c)
}

// CheckSandboxGuard refuses a real model with the local sandbox unless explicitly allowed
// (DESIGN.md §2): the local sandbox is not a security boundary, and a real model's commands
// would run as this process's user on this machine.
func CheckSandboxGuard(c Config) error {
	realModel := c.Model != "" && c.Model != "fake"
	// An unknown provider is Validate's to report, not the guard's.
	p, known := c.lookupSandbox()
	if realModel && known && !p.isolating && !c.AllowUnsafeLocalSandbox {
		return errors.New("refusing to start: MANAGED_AGENT_MODEL=" + c.Model + " with the local sandbox would let a real model run " +
			"commands on this machine as this user (the local sandbox is not a security boundary). Use an isolating sandbox " +
			"(MANAGED_AGENT_SANDBOX=docker), or set MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX=1 to accept the risk")
	}
	return nil
}

// Worker is the worker role: a Temporal worker that runs session turns with the configured
// model and sandbox, and the sweep that re-wakes sessions whose wake-up may have been lost.
// It needs the store, Temporal and a place for previews; it runs no migrations, serves no
// HTTP and holds one LISTEN connection, for interrupts (turns.Interrupts).
type Worker struct {
	// Credentials resolves the MCP credentials of sessions from their vaults (the MCP
	// toolset's bearer tokens).
	Credentials *credentials.Resolver

	services startstop.Group
}

// NewWorker builds a worker over st. previews receives the model's preview frames (the
// worker only publishes); nil sends none. Start runs it.
func NewWorker(c Config, tc client.Client, st *store.Store, previews stream.Hub, logger *slog.Logger) (*Worker, error) {
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
	ceiling, err := c.Network.ceiling()
	if err != nil {
		return nil, err
	}
	c.Network.warn(c.Sandbox, ceiling, logger)
	cacheBytes, err := c.conversationCacheBytes()
	if err != nil {
		return nil, err
	}
	models, err := c.modelCatalog()
	if err != nil {
		return nil, err
	}
	vaultKeys, err := c.vaultKeys()
	if err != nil {
		return nil, err
	}
	// Token endpoints are reached under the same address rule as MCP servers.
	tokenClient := credentials.NewHTTPClient(c.mcpTransport())
	vaults := credentials.New(st, vaultKeys, credentials.Options{Logger: logger, HTTPClient: tokenClient})
	web, closeWeb, err := c.AgentWebTools()
	if err != nil {
		return nil, err
	}
	engine := turns.New(st, logger, append(c.turnsOptions(), turns.WithSandboxQuota(c.RateLimits.WorkspaceSandboxes),
		turns.WithConversationCache(cacheBytes), turns.WithModelCatalog(models))...)
	interrupts := turns.NewInterrupts()
	listener := store.NewListener(st.Pool(), logger, c.listenerOptions()...)
	if err := listener.Listen(store.TopicInterrupts, interrupts); err != nil {
		closeWeb()
		return nil, err
	}
	acts := &durable.Activities{
		Turns: engine,
		Core: agent.NewCore(c.observedModel(tracing.Model(m, c.Tracing.Provider)), agent.WithLogger(logger), agent.WithWebTools(web),
			agent.WithCatalog(models), agent.WithMaxTokens(c.ModelMaxTokens)),
		Sandboxes: sandbox.NewManager(registry, engine.Sandboxes(), engine.Sandboxes(), append([]sandbox.ManagerOption{sandbox.WithLogger(logger),
			sandbox.WithTouchInterval(c.touchInterval()), sandbox.WithCeiling(ceiling)}, c.sandboxOptions()...)...),
		Previews:   previews,
		MCP:        c.mcpConnector(vaultTokens{vaults}, engine, logger),
		Logger:     logger,
		Tracer:     c.Tracing.Provider,
		Observer:   c.durableObserver(),
		Interrupts: interrupts,
		// The worker only offers work; polls are the API's.
		Work:          workqueue.New(st, nil, workqueue.Config{LeaseTTL: c.WorkLeaseTTL}, logger),
		WorkerTimeout: c.SelfHostedToolTimeout,
	}
	runner := &durable.Runner{Client: tc, TaskQueue: c.TaskQueue, Retry: c.modelRetry(), Logger: logger, Tracer: c.Tracing.Provider}
	return &Worker{Credentials: vaults, services: startstop.Group{
		onStop(closeWeb),
		listener,
		// Before the steps, so it stops after them: no acquisition claims from a pool being emptied.
		warmPool(registry, logger),
		&temporalWorker{w: durable.NewWorker(tc, durable.WorkerOptions{TaskQueue: c.TaskQueue, StopTimeout: c.WorkerStopTimeout, Observer: c.durableObserver()}, acts)},
		&Sweep{Engine: engine, Waker: durable.Signaller{Runner: runner}, Interval: sweepInterval, Logger: logger},
		&SandboxSweep{Store: st, Interval: sweepInterval, Logger: logger, Sweeper: &sandbox.Sweeper{
			Registry: registry, Store: engine.Sandboxes(), IdleStop: c.SandboxIdleStop, Retention: c.SandboxRetention, Logger: logger,
		}},
	}}, nil
}

// onStop is a service whose Stop runs fn once: releasing what a part holds after every
// service started after it has stopped.
type onStop func()

func (f onStop) Start(context.Context) error { return nil }

func (f onStop) Stop() { f() }

// warmPool is the default provider's warm pool (docker's, when it keeps one), or nothing.
func warmPool(r *sandbox.Registry, logger *slog.Logger) startstop.Service {
	if p, ok := r.Default().(interface {
		WarmPool(*slog.Logger) startstop.Service
	}); ok {
		return p.WarmPool(logger)
	}
	return startstop.Group{}
}

// touchInterval is how often a worker records a cached sandbox's use: at most a minute, and
// well inside the idle-stop clock so the sweep never stops a sandbox a cached client uses.
func (c Config) touchInterval() time.Duration {
	if c.SandboxIdleStop > 0 {
		return min(sandbox.DefaultTouchInterval, c.SandboxIdleStop/2)
	}
	return sandbox.DefaultTouchInterval
}

// sandboxSweepLock is the advisory lock that lets one worker at a time sweep sandboxes.
const sandboxSweepLock = "managed_agents.sandbox_sweep"

// SandboxSweep stops and destroys idle sandboxes and removes orphaned ones (sandbox.Sweeper),
// at start and then every Interval, in one worker of the deployment at a time: the others
// find the advisory lock taken and skip that round.
type SandboxSweep struct {
	Store    *store.Store
	Sweeper  *sandbox.Sweeper
	Interval time.Duration
	Logger   *slog.Logger
	loop     startstop.Loop
}

// Start starts sweeping.
func (s *SandboxSweep) Start(ctx context.Context) error {
	s.loop.Start(ctx, s.run)
	return nil
}

// Stop stops sweeping and waits for a sweep in progress; it may be called more than once.
func (s *SandboxSweep) Stop() { s.loop.Stop() }

// Once runs one sweep unless another worker is sweeping; ran says whether it did.
func (s *SandboxSweep) Once(ctx context.Context) (res sandbox.SweepResult, ran bool, err error) {
	ran, err = s.Store.WithTryLock(ctx, sandboxSweepLock, func(ctx context.Context) error {
		var err error
		res, err = s.Sweeper.Sweep(ctx)
		return err
	})
	return res, ran, err
}

func (s *SandboxSweep) run(ctx context.Context) {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		res, _, err := s.Once(ctx)
		if err != nil && ctx.Err() == nil {
			s.Logger.WarnContext(ctx, "sandbox sweep failed", "error", err)
		}
		if res != (sandbox.SweepResult{}) {
			s.Logger.InfoContext(ctx, "swept sandboxes", "stopped", res.Stopped, "destroyed", res.Destroyed, "orphans", res.Orphans)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Start starts polling the task queue, then the sweep.
func (w *Worker) Start(ctx context.Context) error { return w.services.Start(ctx) }

// Stop stops the sweep and polling, and waits for running activities; it may be called more
// than once.
func (w *Worker) Stop() { w.services.Stop() }

// temporalWorker makes a Temporal worker a startstop.Service: the SDK's worker must not be
// stopped twice or started again.
type temporalWorker struct {
	w        worker.Worker
	mu       sync.Mutex
	started  bool
	stopOnce sync.Once
}

func (t *temporalWorker) Start(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started {
		return nil
	}
	if err := t.w.Start(); err != nil {
		return fmt.Errorf("start Temporal worker: %w", err)
	}
	t.started = true
	return nil
}

func (t *temporalWorker) Stop() {
	t.mu.Lock()
	started := t.started
	t.mu.Unlock()
	if started {
		t.stopOnce.Do(t.w.Stop)
	}
}

// sweepInterval is how often a worker re-wakes sessions whose wake-up may have been lost.
const sweepInterval = time.Minute

// Sweep wakes sessions with work no run knows about, at start and then every Interval, so
// events committed while Temporal was unreachable (or whose wake-up was lost) still run.
type Sweep struct {
	Engine   *turns.Service
	Waker    turns.Waker
	Interval time.Duration
	Logger   *slog.Logger
	loop     startstop.Loop
}

// firstSweepTimeout bounds the sweep Start runs itself: Temporal down must not hold the
// worker's start (the loop tries again at the next interval).
const firstSweepTimeout = 10 * time.Second

// Start sweeps once, then starts sweeping every Interval. The first sweep runs before Start
// returns, so it only sees what was committed before the worker started: run in the
// background it raced the API's own wake-ups of new messages, and a session it woke took
// its turn under the sweep's trace instead of the request's.
func (s *Sweep) Start(ctx context.Context) error {
	first, cancel := context.WithTimeout(ctx, firstSweepTimeout)
	s.sweep(first)
	cancel()
	s.loop.Start(ctx, s.run)
	return nil
}

func (s *Sweep) sweep(ctx context.Context) {
	if n, err := s.Engine.WakeStale(ctx, s.Waker); err != nil && !errors.Is(ctx.Err(), context.Canceled) {
		s.Logger.WarnContext(ctx, "sweep for sessions needing a run failed", "error", err)
	} else if n > 0 {
		s.Logger.InfoContext(ctx, "woke sessions that may have had pending work", "sessions", n)
	}
}

// Stop stops sweeping and waits for a sweep in progress; it may be called more than once.
func (s *Sweep) Stop() { s.loop.Stop() }

func (s *Sweep) run(ctx context.Context) {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.sweep(ctx)
	}
}

// DialTemporal connects to the configured Temporal.
func DialTemporal(ctx context.Context, c Config, logger *slog.Logger) (client.Client, error) {
	if c.TemporalAddress == "" {
		return nil, errors.New("MANAGED_AGENT_TEMPORAL_ADDRESS is not set")
	}
	return durable.Dial(ctx, durable.Config{Address: c.TemporalAddress, Namespace: c.TemporalNamespace, TLS: c.TemporalTLS, APIKey: c.TemporalAPIKey, Compression: c.TemporalCompression}, logger)
}

func (c Config) modelRetry() durable.ModelRetry {
	if c.ModelRetry == (durable.ModelRetry{}) {
		return durable.DefaultModelRetry
	}
	return c.ModelRetry
}
