package sandbox

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// ErrNoBinding means the session has no sandbox yet (or its acquisition has not finished).
var ErrNoBinding = errors.New("session has no sandbox")

// Binding states: a binding is written pending, before Create, and made ready with the
// external id Create returned.
// The retention sweep marks a binding expired when it destroys the sandbox: the session's
// next acquisition fails with ErrGone, as for a sandbox that vanished.
const (
	BindingPending = "pending"
	BindingReady   = "ready"
	BindingExpired = "expired"
)

// Binding is what the database remembers of a session's sandbox.
type Binding struct {
	SessionID string
	// Ref.Provider is set from the start; Ref.ExternalID only once the binding is ready.
	Ref Ref
	// Name is the deterministic name Create is idempotent on.
	Name     string
	SpecHash string
	State    string
}

// BindingStore persists bindings; the turn engine implements it over PostgreSQL.
type BindingStore interface {
	// Binding returns the session's binding, or an error wrapping ErrNoBinding.
	Binding(ctx context.Context, sessionID string) (Binding, error)
	// InsertBinding writes b (pending) unless the session already has a binding, and returns
	// the binding that is stored either way; an error wrapping ErrQuota when a quota refuses
	// a new one.
	InsertBinding(ctx context.Context, b Binding) (Binding, error)
	// MarkReady records the external id of a pending binding and makes it ready.
	MarkReady(ctx context.Context, sessionID string, ref Ref) error
	// DeleteBinding removes the session's binding (no error if there is none).
	DeleteBinding(ctx context.Context, sessionID string) error
}

// ActivityStore is the optional capability of a BindingStore that records when a session
// last used its sandbox, the clock of the idle sweeps.
type ActivityStore interface {
	// TouchBinding records use now and clears the idle sweep's stopped mark; it returns the
	// binding's state and whether the sweep had stopped the sandbox (a cached client of it
	// is stale), or an error wrapping ErrNoBinding.
	TouchBinding(ctx context.Context, sessionID string) (state string, wasStopped bool, err error)
}

// DefaultTouchInterval is how often, at most, a Manager records a session's sandbox use.
const DefaultTouchInterval = time.Minute

// SpecSource returns the spec of a session's sandbox (SpecFor its environment).
type SpecSource interface {
	SandboxSpec(ctx context.Context, sessionID string) (Spec, error)
}

// DefaultCacheSize bounds the live clients a Manager keeps.
const DefaultCacheSize = 1024

// Manager owns the sandboxes of sessions (DESIGN §6): the first acquisition of a session
// makes one, every later run of the session reuses it, and a restarted worker attaches it
// again from the stored reference. A sandbox that is gone fails with ErrGone; it is never
// silently replaced. Live clients are kept in a bounded LRU cache that drops an entry on
// ErrGone or a transport error.
type Manager struct {
	registry *Registry
	bindings BindingStore
	specs    SpecSource
	logger   *slog.Logger
	activity ActivityStore // nil if the binding store records no activity
	ceiling  Ceiling
	every    time.Duration
	obs      Observer

	mu      sync.Mutex
	size    int
	order   *list.List               // most recently used first; values are *cached
	clients map[string]*list.Element // by session id
}

type cached struct {
	sessionID string
	sb        Sandbox
	touched   time.Time // guarded by Manager.mu
}

// ManagerOption configures a Manager.
type ManagerOption func(*Manager)

// WithCacheSize bounds the live clients kept (default DefaultCacheSize).
func WithCacheSize(n int) ManagerOption { return func(m *Manager) { m.size = n } }

// WithTouchInterval sets how often, at most, a session's use is recorded while its client
// is cached (default DefaultTouchInterval). It must be shorter than the idle-stop duration:
// a client used without a touch must not be one the sweep may have stopped.
func WithTouchInterval(d time.Duration) ManagerOption { return func(m *Manager) { m.every = d } }

// WithCeiling sets the deployment's network ceiling that every spec's Egress is resolved
// against (default: no network).
func WithCeiling(c Ceiling) ManagerOption { return func(m *Manager) { m.ceiling = c } }

// spec is the session's spec with its effective egress resolved, before anything hashes it.
func (m *Manager) spec(ctx context.Context, sessionID string) (Spec, error) {
	spec, err := m.specs.SandboxSpec(ctx, sessionID)
	if err != nil {
		return Spec{}, err
	}
	spec.Egress = m.ceiling.Resolve(spec.Network)
	return spec, nil
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) ManagerOption { return func(m *Manager) { m.logger = l } }

// Observer records sandbox acquisitions (metrics): provider is a registry name, mode
// AcquiredCold (the acquisition created the sandbox) or AcquiredWarm (it attached one that
// existed: after a restart or once its client left the cache). A cached client is no
// acquisition.
type Observer interface {
	SandboxAcquired(provider, mode string, d time.Duration, err error)
}

// Modes of an acquisition an Observer sees.
const (
	AcquiredCold = "cold"
	AcquiredWarm = "warm"
)

type nopObserver struct{}

func (nopObserver) SandboxAcquired(string, string, time.Duration, error) {}

// WithObserver records acquisitions through o (default: nothing is recorded).
func WithObserver(o Observer) ManagerOption { return func(m *Manager) { m.obs = o } }

// NewManager returns a manager that creates with the registry's default provider and keeps
// bindings in bindings.
func NewManager(registry *Registry, bindings BindingStore, specs SpecSource, opts ...ManagerOption) *Manager {
	m := &Manager{registry: registry, bindings: bindings, specs: specs, logger: slog.Default(),
		size: DefaultCacheSize, order: list.New(), clients: map[string]*list.Element{}, every: DefaultTouchInterval, obs: nopObserver{}}
	m.activity, _ = bindings.(ActivityStore)
	for _, o := range opts {
		o(m)
	}
	if m.size <= 0 {
		m.size = DefaultCacheSize
	}
	return m
}

// Bound reports whether the session has a ready sandbox (a pending one still needs Acquire).
func (m *Manager) Bound(ctx context.Context, sessionID string) (bool, error) {
	if m.cachedClient(sessionID) != nil {
		return true, nil
	}
	b, err := m.bindings.Binding(ctx, sessionID)
	switch {
	case errors.Is(err, ErrNoBinding):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look up sandbox binding: %w", err)
	}
	// An expired binding is bound to a sandbox that is gone: the tool call finds that out.
	return b.State == BindingReady || b.State == BindingExpired, nil
}

// Acquire returns the session's sandbox, making it first if the session has none: a pending
// binding (provider, deterministic name, spec hash) is written before Create, so a create
// that times out or crashes is adopted by the retry (Create is idempotent on the name)
// instead of leaking a sandbox per attempt.
func (m *Manager) Acquire(ctx context.Context, sessionID string) (_ Sandbox, err error) {
	if sb, err := m.fresh(ctx, sessionID); sb != nil || err != nil {
		return sb, err
	}
	start, mode := time.Now(), AcquiredWarm
	var b Binding
	defer func() { m.observe(b, mode, start, err) }()
	b, err = m.bindings.Binding(ctx, sessionID)
	if errors.Is(err, ErrNoBinding) {
		mode = AcquiredCold // a refusal here (a quota) is of a cold acquisition too
		b, err = m.insertPending(ctx, sessionID)
	}
	if err != nil {
		return nil, fmt.Errorf("acquire sandbox: %w", err)
	}
	if b.State == BindingExpired {
		return nil, expiredError(b)
	}
	if b.State != BindingReady {
		mode = AcquiredCold
		if b, err = m.create(ctx, b); err != nil {
			return nil, fmt.Errorf("acquire sandbox: %w", err)
		}
	}
	return m.attach(ctx, b)
}

// observe records an acquisition of b's sandbox; before a binding names its provider, the
// acquisition is the default provider's.
func (m *Manager) observe(b Binding, mode string, start time.Time, err error) {
	provider := b.Ref.Provider
	if provider == "" {
		provider = m.registry.Default().Name()
	}
	m.obs.SandboxAcquired(provider, mode, time.Since(start), err)
}

// Sandbox returns the session's existing sandbox (ErrNoBinding if it has none ready).
func (m *Manager) Sandbox(ctx context.Context, sessionID string) (Sandbox, error) {
	if sb, err := m.fresh(ctx, sessionID); sb != nil || err != nil {
		return sb, err
	}
	b, err := m.bindings.Binding(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("look up sandbox binding: %w", err)
	}
	if b.State == BindingExpired {
		return nil, expiredError(b)
	}
	if b.State != BindingReady {
		return nil, fmt.Errorf("the session's sandbox is still being created: %w", ErrNoBinding)
	}
	start := time.Now()
	sb, err := m.attach(ctx, b)
	m.observe(b, AcquiredWarm, start, err)
	return sb, err
}

func (m *Manager) insertPending(ctx context.Context, sessionID string) (Binding, error) {
	spec, err := m.spec(ctx, sessionID)
	if err != nil {
		return Binding{}, fmt.Errorf("sandbox spec: %w", err)
	}
	p := m.registry.Default()
	return m.bindings.InsertBinding(ctx, Binding{
		SessionID: sessionID, Ref: Ref{Provider: p.Name()}, Name: spec.Name, SpecHash: spec.Hash(), State: BindingPending,
	})
}

// create runs the idempotent Create of a pending binding and marks it ready.
func (m *Manager) create(ctx context.Context, b Binding) (Binding, error) {
	p, err := m.registry.Provider(b.Ref.Provider)
	if err != nil {
		return Binding{}, err
	}
	spec, err := m.spec(ctx, b.SessionID)
	if err != nil {
		return Binding{}, fmt.Errorf("sandbox spec: %w", err)
	}
	if spec.Hash() != b.SpecHash {
		// The environment changed between attempts: the pending binding's name still
		// identifies what a lost attempt may have made, and that is what is adopted.
		m.logger.WarnContext(ctx, "environment changed while its sandbox was being created",
			"session_id", b.SessionID, "stored_spec_hash", b.SpecHash, "spec_hash", spec.Hash())
	}
	spec.Name = b.Name
	ref, err := p.Create(ctx, spec)
	if err != nil {
		return Binding{}, fmt.Errorf("create sandbox %s with %s: %w", b.Name, p.Name(), err)
	}
	if err := m.bindings.MarkReady(ctx, b.SessionID, ref); err != nil {
		return Binding{}, fmt.Errorf("mark sandbox binding ready: %w", err)
	}
	b.Ref, b.State = ref, BindingReady
	return b, nil
}

func expiredError(b Binding) error {
	return fmt.Errorf("the session's sandbox %s (%s) was destroyed after being idle longer than the retention: %w", b.Ref.ExternalID, b.Ref.Provider, ErrGone)
}

// fresh returns the session's cached client, recording its use at most once per touch
// interval; nil (and no error) when the client must be attached again: none is cached, the
// idle sweep stopped its sandbox (Attach starts it) or the retention sweep destroyed it.
func (m *Manager) fresh(ctx context.Context, sessionID string) (Sandbox, error) {
	c := m.cachedEntry(sessionID)
	if c == nil {
		return nil, nil
	}
	if m.activity == nil || !m.due(c) {
		return c.sb, nil
	}
	state, stopped, err := m.activity.TouchBinding(ctx, sessionID)
	switch {
	case errors.Is(err, ErrNoBinding):
		m.forget(sessionID, c)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("record sandbox activity: %w", err)
	case stopped || state != BindingReady:
		m.forget(sessionID, c)
		return nil, nil
	}
	m.mu.Lock()
	c.touched = time.Now()
	m.mu.Unlock()
	return c.sb, nil
}

func (m *Manager) due(c *cached) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Since(c.touched) >= m.every
}

func (m *Manager) attach(ctx context.Context, b Binding) (Sandbox, error) {
	// The touch comes first: it waits for an idle sweep stopping the sandbox right now, and
	// once it has run no sweep takes the sandbox for idle.
	if m.activity != nil {
		if _, _, err := m.activity.TouchBinding(ctx, b.SessionID); err != nil {
			return nil, fmt.Errorf("record sandbox activity: %w", err)
		}
	}
	sb, err := m.registry.Attach(ctx, b.Ref)
	if err != nil {
		if errors.Is(err, ErrGone) {
			return nil, fmt.Errorf("the session's sandbox %s (%s) no longer exists: %w", b.Ref.ExternalID, b.Ref.Provider, err)
		}
		return nil, fmt.Errorf("attach sandbox: %w", err)
	}
	return m.remember(b.SessionID, sb), nil
}

// Teardown destroys the session's sandbox through the provider its binding names and
// removes the binding. A pending binding's sandbox may exist without its id being known:
// Create by the same name adopts it (or makes a bare one) so it can be destroyed. A binding
// of a provider this deployment does not run is removed with a warning: there is nothing
// here to destroy it with.
func (m *Manager) Teardown(ctx context.Context, sessionID string) error {
	b, err := m.bindings.Binding(ctx, sessionID)
	if errors.Is(err, ErrNoBinding) {
		m.forget(sessionID, nil)
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up sandbox binding: %w", err)
	}
	m.forget(sessionID, nil)
	p, err := m.registry.Provider(b.Ref.Provider)
	if errors.Is(err, ErrUnknownProvider) {
		// Made under a provider this deployment no longer runs (MANAGED_AGENT_SANDBOX
		// changed): nothing here can reach that sandbox, so there is nothing to tear down,
		// and failing would keep the session's delete from ever finishing. The binding goes,
		// so nothing retries; that provider's orphan sweep removes the sandbox if it is
		// configured again.
		m.logger.WarnContext(ctx, "the session's sandbox belongs to a provider this deployment does not run: it is left as it is and the binding removed",
			"session_id", sessionID, "provider", b.Ref.Provider, "sandbox", cmp.Or(b.Ref.ExternalID, b.Name), "error", err)
		if err := m.bindings.DeleteBinding(ctx, sessionID); err != nil {
			return fmt.Errorf("remove sandbox binding: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("tear down the sandbox of session %s: %w", sessionID, err)
	}
	ref := b.Ref
	if b.State == BindingExpired {
		// The retention sweep destroyed the sandbox already.
		if err := m.bindings.DeleteBinding(ctx, sessionID); err != nil {
			return fmt.Errorf("remove sandbox binding: %w", err)
		}
		return nil
	}
	if b.State != BindingReady {
		// The session's own spec, so a provider that needs an image or template accepts it;
		// a bare spec only if the environment cannot be read any more.
		spec, err := m.spec(ctx, sessionID)
		if err != nil {
			spec = Spec{Name: b.Name, SessionID: sessionID}
		}
		spec.Name, spec.SessionID = b.Name, sessionID
		ref, err = p.Create(ctx, spec)
		switch {
		case errors.Is(err, ErrSetup):
			// A setup fails before any of the sandbox exists: there is nothing to destroy,
			// and failing here would keep the session's delete from ever finishing.
			if err := m.bindings.DeleteBinding(ctx, sessionID); err != nil {
				return fmt.Errorf("remove sandbox binding: %w", err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("adopt pending sandbox %s to destroy it: %w", b.Name, err)
		}
	}
	// A sandbox that is already gone (removed behind our back) is as destroyed as it gets: the
	// binding goes too, so the session's delete can finish.
	if err := p.Destroy(ctx, ref); err != nil && !errors.Is(err, ErrGone) {
		return fmt.Errorf("destroy sandbox %s: %w", ref.ExternalID, err)
	}
	if err := m.bindings.DeleteBinding(ctx, sessionID); err != nil {
		return fmt.Errorf("remove sandbox binding: %w", err)
	}
	return nil
}

func (m *Manager) cachedClient(sessionID string) Sandbox {
	if c := m.cachedEntry(sessionID); c != nil {
		return c.sb
	}
	return nil
}

func (m *Manager) cachedEntry(sessionID string) *cached {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.clients[sessionID]; ok {
		m.order.MoveToFront(e)
		return e.Value.(*cached)
	}
	return nil
}

// remember caches sb as the session's client, evicting the least recently used beyond the
// bound, and returns the client callers use: it drops itself from the cache when the
// sandbox reports it is gone or unreachable.
func (m *Manager) remember(sessionID string, sb Sandbox) Sandbox {
	c := &cached{sessionID: sessionID, touched: time.Now()}
	c.sb = track(sb, func(err error) {
		if evicts(err) {
			m.forget(sessionID, c)
		}
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.clients[sessionID]; ok {
		m.order.Remove(e)
	}
	m.clients[sessionID] = m.order.PushFront(c)
	for m.order.Len() > m.size {
		oldest := m.order.Back()
		m.order.Remove(oldest)
		delete(m.clients, oldest.Value.(*cached).sessionID)
	}
	return c.sb
}

// forget drops the session's cached client; only if it is still c when c is given (a newer
// client of the same session stays).
func (m *Manager) forget(sessionID string, c *cached) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.clients[sessionID]; ok && (c == nil || e.Value.(*cached) == c) {
		m.order.Remove(e)
		delete(m.clients, sessionID)
	}
}

// CachedClients is how many live clients the manager holds (for tests and metrics).
func (m *Manager) CachedClients() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.order.Len()
}

// evicts tells the errors after which a cached client must not be trusted again.
func evicts(err error) bool {
	var netErr net.Error
	return errors.Is(err, ErrGone) || errors.Is(err, ErrUnavailable) || errors.As(err, &netErr)
}
