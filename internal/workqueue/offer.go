package workqueue

import (
	"context"
	"sync"

	"github.com/managed-agents/managed-agents/internal/store"
)

// selfHostedCache remembers which sessions run on self-hosted environments: a session's
// environment never changes, nor does an environment's config type. It forgets everything
// when it holds maxCached sessions, so a long-lived worker's memory stays bounded.
type selfHostedCache struct {
	mu sync.Mutex
	m  map[string]bool
}

const maxCached = 100_000

func (c *selfHostedCache) load(id string) (hosted, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hosted, ok = c.m[id]
	return hosted, ok
}

func (c *selfHostedCache) store(id string, hosted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[string]bool{}
	}
	c.m[id] = hosted
}

// SelfHosted reports whether the session's environment is self-hosted: its built-in sandbox
// calls are then the worker's, not the server's.
func (s *Service) SelfHosted(ctx context.Context, sessionID string) (bool, error) {
	if hosted, ok := s.selfHosted.load(sessionID); ok {
		return hosted, nil
	}
	t, err := s.store.SessionWorkTarget(ctx, sessionID)
	if err != nil {
		return false, err
	}
	hosted := t.ConfigType == "self_hosted"
	s.selfHosted.store(sessionID, hosted)
	return hosted, nil
}

// OfferSession makes sure a session of a self-hosted environment has a live work item, so a
// worker claims it and answers the calls waiting in its log. It reports whether a worker holds
// the item now (a lease that has not run out): the turn then keeps waiting for it. Called
// again while an item is live it queues nothing, so the turn may call it as often as it likes.
func (s *Service) OfferSession(ctx context.Context, sessionID string) (held bool, err error) {
	t, err := s.store.SessionWorkTarget(ctx, sessionID)
	if err != nil {
		return false, err
	}
	var created bool
	var w store.WorkItem
	now := s.now()
	err = s.store.InTx(ctx, func(q *store.Queries) error {
		w, created, err = q.OfferSessionWork(ctx, t.WorkspaceID, t.EnvironmentID, sessionID, now)
		return err
	})
	if err != nil {
		return false, err
	}
	if created {
		s.logger.InfoContext(ctx, "work queued", "work_id", w.ID, "session_id", sessionID, "environment_id", t.EnvironmentID)
	}
	return w.State == store.WorkActive && w.LeaseExpiresAt != nil && w.LeaseExpiresAt.After(now), nil
}
