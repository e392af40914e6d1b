package sessions

import (
	"context"
	"fmt"
	"time"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/store"
)

// Limits are the per-key rate limits and the per-workspace quota on running sessions that the
// service enforces (docs/operations.md#rate-limits-and-quotas). They hold across API replicas:
// their state is in PostgreSQL. A zero field is no limit and costs nothing: no statement runs
// for it.
type Limits struct {
	// RequestsPerSecond is the sustained request rate of each API key; Burst is how many
	// requests a key may make at once (at least 1).
	RequestsPerSecond float64
	Burst             int
	// StreamsPerKey caps the SSE streams each API key holds open at once.
	StreamsPerKey int
	// RunningSessions caps each workspace's active sessions: a message that would start a
	// turn beyond it is refused, and so is an answer that would resume a parked one.
	RunningSessions int
}

// WithLimits sets the rate limits and quotas; without it nothing is limited.
func WithLimits(l Limits) Option { return func(s *Service) { s.limits = l } }

// quotaRetryAfter is what a refusal for a held resource (a stream slot, a running session)
// tells the client to wait. When one frees is unknown: streams and turns last seconds to
// hours, so asking sooner mostly repeats the refusal.
const quotaRetryAfter = 5 * time.Second

// AdmitRequest counts one request of the key against its rate limit: a KindRateLimited error
// with RetryAfter when the key is over it. One statement, after authentication (the limit is
// per key); none at all without a request limit.
func (s *Service) AdmitRequest(ctx context.Context, p Principal) error {
	rps := s.limits.RequestsPerSecond
	if rps <= 0 || p.KeyID == "" {
		return nil
	}
	burst := max(1, s.limits.Burst)
	d, err := s.store.TakeRequest(ctx, p.KeyID, time.Duration(float64(time.Second)/rps), burst)
	if err != nil {
		return err
	}
	if d.Allowed {
		return nil
	}
	return &Error{Kind: KindRateLimited, RetryAfter: d.RetryAfter,
		Message: fmt.Sprintf("rate limit exceeded: this API key may make %g requests per second, in bursts of up to %d; retry after the retry-after header", rps, burst)}
}

// StreamLease is an open stream's slot in its key's stream cap. A nil lease (no cap) does
// nothing.
type StreamLease struct {
	store *store.Store
	keyID string
	id    string
	ttl   time.Duration
}

// AcquireStream takes a stream slot of the key for ttl, or fails with KindRateLimited when
// the key already holds its cap of open streams. The stream renews the lease (Renew) more
// often than ttl and releases it when it ends; the lease of a process that dies lapses after
// ttl. Without a cap it returns a nil lease and touches nothing.
func (s *Service) AcquireStream(ctx context.Context, p Principal, ttl time.Duration) (*StreamLease, error) {
	if s.limits.StreamsPerKey <= 0 || p.KeyID == "" {
		return nil, nil
	}
	l := &StreamLease{store: s.store, keyID: p.KeyID, id: ids.New("lease_"), ttl: ttl}
	ok, err := s.store.AcquireStreamLease(ctx, l.keyID, l.id, s.limits.StreamsPerKey, ttl)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &Error{Kind: KindRateLimited, RetryAfter: quotaRetryAfter,
			Message: fmt.Sprintf("too many open streams: this API key may hold %d event streams at once; close one, or retry later", s.limits.StreamsPerKey)}
	}
	return l, nil
}

// Renew moves the lease's expiry ttl from now.
func (l *StreamLease) Renew(ctx context.Context) error {
	if l == nil {
		return nil
	}
	return l.store.RenewStreamLease(ctx, l.keyID, l.id, l.ttl)
}

// Release frees the slot.
func (l *StreamLease) Release(ctx context.Context) error {
	if l == nil {
		return nil
	}
	return l.store.ReleaseStreamLease(ctx, l.id)
}

// admitTurn refuses, under the workspace quota on running sessions, a turn of sessionID that
// would make one active session too many: a new turn, or a parked one that an answer resumes
// (what says which, for the message). q is the transaction that would start it, so nothing it
// wrote survives a refusal. A session that is already active adds nothing.
func (s *Service) admitTurn(ctx context.Context, q *store.Queries, workspaceID, sessionID, what string) error {
	limit := s.limits.RunningSessions
	if limit <= 0 {
		return nil
	}
	others, self, err := q.ActiveSessions(ctx, workspaceID, sessionID)
	if err != nil {
		return err
	}
	if self || others < limit {
		return nil
	}
	return &Error{Kind: KindRateLimited, RetryAfter: quotaRetryAfter, Code: "running_sessions_quota",
		Message: fmt.Sprintf("this workspace already has %d running sessions, its limit: %s; nothing was written, send it again once a session is idle", others, what)}
}
