// Package workqueue is the work queue of self-hosted environments (API.md §2.3,
// docs/self-hosted-environments.md): the items that hand a session's tool calls to a worker
// on the customer's machines, their leases, and the session tokens a claim issues.
//
// It is a sibling of package sessions, reached by the HTTP API for the queue's routes and by
// the worker (through an interface package durable declares) to offer a session's work. It
// imports store, wire and sessions (for the client-facing error and the principal), never
// the agent loop, Temporal or Kubernetes.
package workqueue

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Config holds the queue's lease rules.
type Config struct {
	// LeaseTTL is a heartbeat's lease when the worker asks for none (desired_ttl_seconds):
	// a worker that stops heartbeating loses its item this long after its last heartbeat.
	LeaseTTL time.Duration
	// MaxLeaseTTL caps what a worker may ask for.
	MaxLeaseTTL time.Duration
	// ClaimLease is how long a claim holds before its first heartbeat.
	ClaimLease time.Duration
}

// Defaults: the SDK's worker heartbeats every min(TTL/2, 30 s), so a 60 s lease survives one
// lost heartbeat and a dead worker's item is reclaimed within a minute.
const (
	DefaultLeaseTTL    = 60 * time.Second
	DefaultMaxLeaseTTL = 10 * time.Minute
	// defaultReclaim is reclaim_older_than_ms's documented default.
	defaultReclaim = 5 * time.Second
	maxBlock       = 999 * time.Millisecond
	maxWorkerIDLen = 256
)

// Service runs the work queues of every self-hosted environment.
type Service struct {
	store   *store.Store
	arrived *Arrivals
	cfg     Config
	logger  *slog.Logger
	now     func() time.Time
	// selfHosted caches SelfHosted.
	selfHosted selfHostedCache
}

// New makes the service. arrived wakes long polls when an item is queued (the handler of
// store.TopicWork); nil polls only once per block.
func New(st *store.Store, arrived *Arrivals, cfg Config, logger *slog.Logger) *Service {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.MaxLeaseTTL < cfg.LeaseTTL {
		cfg.MaxLeaseTTL = max(DefaultMaxLeaseTTL, cfg.LeaseTTL)
	}
	if cfg.ClaimLease <= 0 {
		cfg.ClaimLease = cfg.LeaseTTL
	}
	if arrived == nil {
		arrived = NewArrivals()
	}
	return &Service{store: st, arrived: arrived, cfg: cfg, logger: logger, now: time.Now}
}

// SetClock replaces the service's clock (tests).
func (s *Service) SetClock(now func() time.Time) { s.now = now }

func invalidf(format string, args ...any) error {
	return &sessions.Error{Kind: sessions.KindInvalid, Message: fmt.Sprintf(format, args...)}
}

func notFoundf(format string, args ...any) error {
	return &sessions.Error{Kind: sessions.KindNotFound, Message: fmt.Sprintf(format, args...)}
}

func conflictf(format string, args ...any) error {
	return &sessions.Error{Kind: sessions.KindConflict, Message: fmt.Sprintf(format, args...)}
}

func forbiddenf(format string, args ...any) error {
	return &sessions.Error{Kind: sessions.KindForbidden, Message: fmt.Sprintf(format, args...)}
}

// environment checks that the caller may use the queue of environment envID: it is a
// self-hosted environment of the caller's workspace, and a confined caller's own.
func (s *Service) environment(ctx context.Context, p sessions.Principal, envID string) error {
	if p.Scoped() && p.EnvironmentID != envID {
		return forbiddenf("this key is confined to environment %s", p.EnvironmentID)
	}
	env, err := s.store.GetEnvironment(ctx, p.WorkspaceID, envID, false)
	if errors.Is(err, store.ErrNotFound) {
		return notFoundf("environment %s not found", envID)
	}
	if err != nil {
		return err
	}
	var cfg struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(env.Config, &cfg); err != nil {
		return fmt.Errorf("decode config of environment %s: %w", envID, err)
	}
	if cfg.Type != "self_hosted" {
		return invalidf("environment %s is not self_hosted: it has no work queue", envID)
	}
	return nil
}

// item reads one item for a caller: a session token reaches only its own.
func (s *Service) item(ctx context.Context, q *store.Queries, p sessions.Principal, envID, workID string, forUpdate bool) (store.WorkItem, error) {
	if p.WorkID != "" && p.WorkID != workID {
		return store.WorkItem{}, forbiddenf("this session token is confined to work %s", p.WorkID)
	}
	w, err := q.GetWork(ctx, envID, workID, forUpdate)
	if errors.Is(err, store.ErrNotFound) {
		return store.WorkItem{}, notFoundf("work %s not found", workID)
	}
	return w, err
}

// change runs f on one item of the caller's, locked in a transaction, after the checks every
// change makes (environment(), item()).
func (s *Service) change(ctx context.Context, p sessions.Principal, envID, workID string, f func(q *store.Queries, w store.WorkItem) error) error {
	if err := s.environment(ctx, p, envID); err != nil {
		return err
	}
	return s.store.InTx(ctx, func(q *store.Queries) error {
		w, err := s.item(ctx, q, p, envID, workID, true)
		if err != nil {
			return err
		}
		return f(q, w)
	})
}

// PollOptions are a poll's parameters.
type PollOptions struct {
	// Block is how long to wait for an item (block_ms; zero answers at once).
	Block time.Duration
	// ReclaimOlderThan is reclaim_older_than_ms (nil: the default, 5 s).
	ReclaimOlderThan *time.Duration
	// WorkerID is Anthropic-Worker-ID.
	WorkerID string
}

// Poll claims the environment's next item for a worker, waiting up to opts.Block for one;
// nil when there is none. The claim issues a session token, returned once in the item's
// secret.
func (s *Service) Poll(ctx context.Context, p sessions.Principal, envID string, opts PollOptions) (*wire.Work, error) {
	if p.WorkID != "" {
		return nil, forbiddenf("a session token cannot poll: use the environment key")
	}
	if opts.Block < 0 || opts.Block > maxBlock {
		return nil, invalidf("block_ms: must be between 1 and 999")
	}
	reclaim := defaultReclaim
	if opts.ReclaimOlderThan != nil {
		if *opts.ReclaimOlderThan < 0 {
			return nil, invalidf("reclaim_older_than_ms: must not be negative")
		}
		reclaim = *opts.ReclaimOlderThan
	}
	if len(opts.WorkerID) > maxWorkerIDLen {
		return nil, invalidf("Anthropic-Worker-ID: at most %d characters", maxWorkerIDLen)
	}
	if err := s.environment(ctx, p, envID); err != nil {
		return nil, err
	}
	if opts.WorkerID != "" {
		if err := s.store.RecordPoller(ctx, envID, opts.WorkerID, s.now()); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(opts.Block)
	for {
		// Watch before looking, so an item queued in between wakes this poll.
		arrived, stop := s.arrived.Watch(envID)
		token := sessions.NewSessionToken()
		w, ok, err := s.store.ClaimWork(ctx, store.Claim{EnvironmentID: envID, WorkerID: opts.WorkerID, Token: token, KeyID: p.KeyID,
			ReclaimOlderThan: reclaim, Lease: s.cfg.ClaimLease, Now: s.now()})
		if err != nil || ok {
			stop()
			if err != nil {
				return nil, err
			}
			out := workJSON(w)
			secret := encodeSecret(token)
			out.Secret = &secret
			s.logger.InfoContext(ctx, "work claimed", "work_id", w.ID, "environment_id", envID, "session_id", w.SessionID,
				"worker_id", opts.WorkerID, "claims", w.Claims)
			return &out, nil
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			stop()
			return nil, nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-arrived:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// encodeSecret is the item's secret as the SDK's workers read it: base64url JSON carrying the
// session token.
func encodeSecret(token string) string {
	raw, _ := json.Marshal(map[string]string{"sessions_token": token}) // a map of strings always marshals
	return base64.RawURLEncoding.EncodeToString(raw)
}

// Ack confirms a claim.
func (s *Service) Ack(ctx context.Context, p sessions.Principal, envID, workID string) (wire.Work, error) {
	var out store.WorkItem
	err := s.change(ctx, p, envID, workID, func(q *store.Queries, w store.WorkItem) error {
		if w.State != store.WorkStarting && w.State != store.WorkActive {
			return conflictf("work %s is %s; only a claimed item can be acknowledged", workID, w.State)
		}
		out = w
		if w.AcknowledgedAt != nil {
			return nil
		}
		now := s.now()
		out.AcknowledgedAt = &now
		return q.SaveWork(ctx, out, false)
	})
	if err != nil {
		return wire.Work{}, err
	}
	return workJSON(out), nil
}

// HeartbeatOptions are a heartbeat's parameters.
type HeartbeatOptions struct {
	// Expected is expected_last_heartbeat (nil: not compared).
	Expected *string
	// DesiredTTL is desired_ttl_seconds (zero: the default lease).
	DesiredTTL time.Duration
}

// Heartbeat extends a claimed item's lease if the caller holds its current version. An item
// asked to stop answers lease_extended false (its worker then stops it); a stale version is
// a 412 carrying the lease as it is.
func (s *Service) Heartbeat(ctx context.Context, p sessions.Principal, envID, workID string, opts HeartbeatOptions) (wire.WorkHeartbeat, error) {
	if opts.DesiredTTL < 0 {
		return wire.WorkHeartbeat{}, invalidf("desired_ttl_seconds: must be positive")
	}
	var out wire.WorkHeartbeat
	err := s.change(ctx, p, envID, workID, func(q *store.Queries, w store.WorkItem) error {
		current := leaseState(w)
		if w.State == store.WorkStopping || w.State == store.WorkStopped {
			// Not compared (the SDK's contract): whoever holds it must stop.
			out = current
			return nil
		}
		held := store.NoHeartbeat
		if w.LastHeartbeat != nil {
			held = *w.LastHeartbeat
		}
		if w.State == store.WorkQueued || (opts.Expected != nil && *opts.Expected != held) {
			return &sessions.Error{Kind: sessions.KindPrecondition, Code: "heartbeat_precondition_failed",
				Message: fmt.Sprintf("work %s: expected_last_heartbeat does not match the lease (another worker may hold it)", workID), CurrentState: current}
		}
		ttl := s.cfg.LeaseTTL
		if opts.DesiredTTL > 0 {
			ttl = min(max(opts.DesiredTTL, time.Second), s.cfg.MaxLeaseTTL)
		}
		now := s.now()
		version := now.UTC().Format(time.RFC3339Nano)
		if version == held {
			version = now.Add(time.Microsecond).UTC().Format(time.RFC3339Nano)
		}
		expires := now.Add(ttl)
		w.State, w.LastHeartbeat, w.LatestHeartbeatAt, w.LeaseExpiresAt = store.WorkActive, &version, &now, &expires
		if w.StartedAt == nil {
			w.StartedAt = &now
		}
		if err := q.SaveWork(ctx, w, false); err != nil {
			return err
		}
		out = wire.WorkHeartbeat{LastHeartbeat: &version, LeaseExtended: true, State: w.State, TTLSeconds: int64(ttl / time.Second)}
		return nil
	})
	if err != nil {
		return wire.WorkHeartbeat{}, err
	}
	out.Type = "work_heartbeat"
	return out, nil
}

func leaseState(w store.WorkItem) wire.WorkHeartbeat {
	return wire.WorkHeartbeat{LastHeartbeat: w.LastHeartbeat, LeaseExtended: false, State: w.State}
}

// Stop asks an item to stop: at once when forced or still queued (its token stops working),
// else it becomes stopping and its worker learns so from its next heartbeat. A stopped item
// is a 409, which the SDK's workers read as "already stopped".
func (s *Service) Stop(ctx context.Context, p sessions.Principal, envID, workID string, force bool) error {
	return s.change(ctx, p, envID, workID, func(q *store.Queries, w store.WorkItem) error {
		if w.State == store.WorkStopped {
			return conflictf("work %s is already stopped", workID)
		}
		now := s.now()
		if w.StopRequestedAt == nil {
			w.StopRequestedAt = &now
		}
		if force || w.State == store.WorkQueued {
			w.State, w.StoppedAt = store.WorkStopped, &now
			s.logger.InfoContext(ctx, "work stopped", "work_id", w.ID, "session_id", w.SessionID, "force", force)
			return q.SaveWork(ctx, w, true)
		}
		w.State = store.WorkStopping
		return q.SaveWork(ctx, w, false)
	})
}

// Get returns one item (without its secret).
func (s *Service) Get(ctx context.Context, p sessions.Principal, envID, workID string) (wire.Work, error) {
	if err := s.environment(ctx, p, envID); err != nil {
		return wire.Work{}, err
	}
	w, err := s.item(ctx, s.store.Queries, p, envID, workID, false)
	if err != nil {
		return wire.Work{}, err
	}
	return workJSON(w), nil
}

// UpdateMetadata patches an item's metadata (a null or empty value deletes a key).
func (s *Service) UpdateMetadata(ctx context.Context, p sessions.Principal, envID, workID string, patch wire.MetadataPatch) (wire.Work, error) {
	if p.WorkID != "" {
		return wire.Work{}, forbiddenf("a session token cannot change a work item's metadata")
	}
	var out store.WorkItem
	err := s.change(ctx, p, envID, workID, func(q *store.Queries, w store.WorkItem) error {
		var err error
		if w.Metadata, err = sessions.PatchMetadata("metadata", w.Metadata, patch, true); err != nil {
			return err
		}
		out = w
		return q.SaveWork(ctx, w, false)
	})
	if err != nil {
		return wire.Work{}, err
	}
	return workJSON(out), nil
}

// List returns a page of the environment's items.
func (s *Service) List(ctx context.Context, p sessions.Principal, envID string, lp sessions.ListParams) ([]wire.Work, bool, error) {
	if p.WorkID != "" {
		return nil, false, forbiddenf("a session token cannot list work: use the environment key")
	}
	if err := s.environment(ctx, p, envID); err != nil {
		return nil, false, err
	}
	items, more, err := s.store.ListWork(ctx, envID, lp)
	if err != nil {
		return nil, false, err
	}
	out := make([]wire.Work, len(items))
	for i, w := range items {
		out[i] = workJSON(w)
	}
	return out, more, nil
}

// Stats reads the environment queue's figures.
func (s *Service) Stats(ctx context.Context, p sessions.Principal, envID string) (wire.WorkQueueStats, error) {
	if p.WorkID != "" {
		return wire.WorkQueueStats{}, forbiddenf("a session token cannot read queue statistics")
	}
	if err := s.environment(ctx, p, envID); err != nil {
		return wire.WorkQueueStats{}, err
	}
	st, err := s.store.WorkQueueStats(ctx, envID, s.now())
	if err != nil {
		return wire.WorkQueueStats{}, err
	}
	return wire.WorkQueueStats{Type: "work_queue_stats", Depth: st.Depth, Pending: st.Pending,
		OldestQueuedAt: timePtr(st.OldestQueuedAt), WorkersPolling: st.WorkersPolling}, nil
}

func timePtr(t *time.Time) *wire.Time {
	if t == nil {
		return nil
	}
	w := wire.Time(*t)
	return &w
}

func workJSON(w store.WorkItem) wire.Work {
	md := w.Metadata
	if md == nil {
		md = map[string]string{}
	}
	data := wire.WorkData{Type: w.Kind, ID: w.SessionID}
	if w.Kind == store.WorkKindHealthcheck {
		data.ID = w.ID
	}
	return wire.Work{ID: w.ID, Type: "work", AcknowledgedAt: timePtr(w.AcknowledgedAt), CreatedAt: wire.Time(w.CreatedAt), Data: data,
		EnvironmentID: w.EnvironmentID, LatestHeartbeatAt: timePtr(w.LatestHeartbeatAt), Metadata: md, StartedAt: timePtr(w.StartedAt),
		State: w.State, StopRequestedAt: timePtr(w.StopRequestedAt), StoppedAt: timePtr(w.StoppedAt)}
}
