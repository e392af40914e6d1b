// Package turns is the worker-facing turn engine: Advance (the lifecycle of a session's
// turns, a pure function of the session row and the log applied in one transaction), the
// emitter the agent loop appends through, reschedule/exhaust/terminate, sandbox bindings,
// and the sweep that wakes sessions with work no run knows about.
//
// It imports store, wire and agent; never httpapi, sessions, Temporal or Kubernetes. The
// durable package drives it from Temporal activities.
package turns

import (
	"log/slog"
	"time"

	"github.com/managed-agents/managed-agents/internal/model/catalog"
	"github.com/managed-agents/managed-agents/internal/store"
)

// Service runs the bookkeeping of session turns for the worker.
type Service struct {
	store  *store.Store
	logger *slog.Logger
	obs    Observer
	now    func() time.Time
	// maxSandboxes is the quota on each workspace's sandboxes; 0 is none.
	maxSandboxes int
	// conv keeps conversations for model requests; nil keeps none.
	conv *conversations
	// agents keeps agent snapshots decoded.
	agents decodedAgents
	// models prices the usage of model requests (usage.list_cost).
	models *catalog.Table
}

// Observer records the turns Advance opens and closes, once their transaction commits
// (metrics). stopReason is a wire.Stop* type.
type Observer interface {
	TurnStarted()
	TurnFinished(stopReason string)
}

type nopObserver struct{}

func (nopObserver) TurnStarted()        {}
func (nopObserver) TurnFinished(string) {}

// Option configures New.
type Option func(*Service)

// WithObserver records opened and closed turns through o (default: nothing is recorded).
func WithObserver(o Observer) Option { return func(s *Service) { s.obs = o } }

// WithConversationCache bounds the conversations kept for model requests to maxBytes
// (default DefaultConversationCacheBytes); 0 keeps none, and every model request reads its
// session's whole log.
func WithConversationCache(maxBytes int) Option {
	return func(s *Service) { s.conv = newConversations(maxBytes) }
}

// WithModelCatalog prices usage.list_cost from models (default catalog.Builtin(); nil keeps it).
func WithModelCatalog(models *catalog.Table) Option {
	return func(s *Service) {
		if models != nil {
			s.models = models
		}
	}
}

// WithSandboxQuota caps each workspace's sandboxes at n (0, the default, is no cap): a
// session's first acquisition beyond it fails with sandbox.ErrQuota.
func WithSandboxQuota(n int) Option { return func(s *Service) { s.maxSandboxes = n } }

// New returns the turn engine over st.
func New(st *store.Store, logger *slog.Logger, opts ...Option) *Service {
	s := &Service{store: st, logger: logger, obs: nopObserver{}, conv: newConversations(DefaultConversationCacheBytes), models: catalog.Builtin(), now: func() time.Time {
		// Microseconds: what PostgreSQL keeps, so echoed and re-read timestamps agree.
		return time.Now().UTC().Truncate(time.Microsecond)
	}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Permanent reports whether err, from one of the engine's calls, can never heal by retrying
// (invalid data, a constraint, …: the store's classification), so the durable runner ends the
// turn instead of retrying the step.
func Permanent(err error) bool { return store.Permanent(err) }
