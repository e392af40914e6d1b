package workqueue

import (
	"context"
	"sync"

	"github.com/managed-agents/managed-agents/internal/store"
)

// selfHostedCache remembers which sessions run on self-hosted environments: a session's
// environment never changes, nor does an environment's config type.
type selfHostedCache struct{ m sync.Map }

// SelfHosted reports whether the session's environment is self-hosted: its built-in sandbox
// calls are then the worker's, not the server's.
func (s *Service) SelfHosted(ctx context.Context, sessionID string) (bool, error) {
	if v, ok := s.selfHosted.m.Load(sessionID); ok {
		return v.(bool), nil
	}
	t, err := s.store.SessionWorkTarget(ctx, sessionID)
	if err != nil {
		return false, err
	}
	hosted := t.ConfigType == "self_hosted"
	s.selfHosted.m.Store(sessionID, hosted)
	return hosted, nil
}

// OfferSession makes sure a session of a self-hosted environment has a live work item, so a
// worker claims it and answers the calls waiting in its log. It reports whether it queued a
// new one. Called again while an item is live it does nothing, so the turn may call it as
// often as it likes.
func (s *Service) OfferSession(ctx context.Context, sessionID string) (bool, error) {
	t, err := s.store.SessionWorkTarget(ctx, sessionID)
	if err != nil {
		return false, err
	}
	var created bool
	var w store.WorkItem
	err = s.store.InTx(ctx, func(q *store.Queries) error {
		w, created, err = q.OfferSessionWork(ctx, t.WorkspaceID, t.EnvironmentID, sessionID, s.now())
		return err
	})
	if err != nil {
		return false, err
	}
	if created {
		s.logger.InfoContext(ctx, "work queued", "work_id", w.ID, "session_id", sessionID, "environment_id", t.EnvironmentID)
	}
	return created, nil
}
