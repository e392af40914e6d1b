package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Stopper is the optional capability of a provider whose sandboxes can be stopped with their
// workspace kept and started again by Attach (docker). The idle sweep stops only sandboxes
// of providers that have it; a local work directory costs nothing while idle.
type Stopper interface {
	Stop(ctx context.Context, ref Ref) error
}

// Resource is a sandbox a provider lists: its reference and the session its labels name.
type Resource struct {
	Ref       Ref
	SessionID string
	Created   time.Time
}

// Lister is the optional capability of a provider that can list the sandboxes it made for
// this deployment, so the orphan sweep can remove those no binding accounts for.
type Lister interface {
	List(ctx context.Context) ([]Resource, error)
}

// SweepStore is what the sweeps read and mark bindings through.
type SweepStore interface {
	// SweepIdle calls fn for each ready binding last active longer than idle ago (only those
	// not yet stopped unless expire), each under a lock a concurrent touch waits for, and
	// when fn succeeds marks the binding stopped (expire false) or expired (expire true). It
	// returns how many it marked and the errors of those it could not.
	SweepIdle(ctx context.Context, idle time.Duration, expire bool, fn func(context.Context, Binding) error) (int, error)
	// BindingsOf returns the bindings of those sessions that have one, with how long ago
	// each last changed state.
	BindingsOf(ctx context.Context, sessionIDs []string) (map[string]AgedBinding, error)
}

// AgedBinding is a binding with how long ago its state last changed.
type AgedBinding struct {
	Binding
	Since time.Duration
}

// DefaultOrphanGrace is how long a sandbox may exist while its binding is still pending (or
// missing) before the orphan sweep removes it: longer than any create takes.
const DefaultOrphanGrace = 10 * time.Minute

// Sweeper stops sandboxes idle longer than IdleStop, destroys those idle longer than
// Retention (their binding becomes expired, so the session's next tool call fails with
// ErrGone) and removes the provider resources no binding accounts for. Zero durations turn
// the idle clocks off. The caller runs one Sweeper at a time across workers.
type Sweeper struct {
	Registry  *Registry
	Store     SweepStore
	IdleStop  time.Duration
	Retention time.Duration
	// OrphanGrace defaults to DefaultOrphanGrace.
	OrphanGrace time.Duration
	Logger      *slog.Logger
}

// SweepResult counts what one sweep did.
type SweepResult struct {
	Stopped, Destroyed, Orphans int
}

// Sweep runs the retention, idle-stop and orphan sweeps once; an error in one does not keep
// the others from running.
func (s *Sweeper) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	var errs []error
	logger := s.logger()
	if s.Retention > 0 {
		n, err := s.Store.SweepIdle(ctx, s.Retention, true, func(ctx context.Context, b Binding) error {
			err := s.Registry.Destroy(ctx, b.Ref)
			if errors.Is(err, ErrUnknownProvider) {
				// Nothing here can destroy it; expiring the binding keeps every later sweep from
				// failing on it again.
				logger.WarnContext(ctx, "a sandbox idle longer than the retention belongs to a provider this deployment does not run: left as it is",
					"session_id", b.SessionID, "sandbox", b.Ref.ExternalID, "provider", b.Ref.Provider)
				return nil
			}
			if err != nil && !errors.Is(err, ErrGone) {
				return err
			}
			logger.InfoContext(ctx, "destroyed a sandbox idle longer than the retention", "session_id", b.SessionID,
				"sandbox", b.Ref.ExternalID, "provider", b.Ref.Provider, "retention", s.Retention)
			return nil
		})
		res.Destroyed = n
		errs = append(errs, err)
	}
	if s.IdleStop > 0 {
		n, err := s.Store.SweepIdle(ctx, s.IdleStop, false, func(ctx context.Context, b Binding) error {
			p, err := s.Registry.Provider(b.Ref.Provider)
			if errors.Is(err, ErrUnknownProvider) {
				return nil // nothing here can stop it; marked stopped, it is not tried again
			}
			if err != nil {
				return err
			}
			if st, ok := p.(Stopper); ok {
				// One already gone is found by the next acquisition, as for any vanished sandbox.
				if err := st.Stop(ctx, b.Ref); err != nil && !errors.Is(err, ErrGone) {
					return err
				}
			}
			return nil
		})
		res.Stopped = n
		errs = append(errs, err)
	}
	n, err := s.sweepOrphans(ctx)
	res.Orphans = n
	errs = append(errs, err)
	return res, errors.Join(errs...)
}

// sweepOrphans removes, for every provider that can list its sandboxes, those older than the
// grace whose session has no binding, whose binding names another sandbox or was expired,
// or whose binding stayed pending longer than the grace. Resources without a session label
// (a warm pool's, not yet claimed) are not its business.
func (s *Sweeper) sweepOrphans(ctx context.Context) (int, error) {
	grace := s.OrphanGrace
	if grace <= 0 {
		grace = DefaultOrphanGrace
	}
	removed := 0
	var errs []error
	for _, p := range s.Registry.Providers() {
		l, ok := p.(Lister)
		if !ok {
			continue
		}
		resources, err := l.List(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s sandboxes: %w", p.Name(), err))
			continue
		}
		ids := make([]string, 0, len(resources))
		for _, r := range resources {
			if r.SessionID != "" {
				ids = append(ids, r.SessionID)
			}
		}
		bindings, err := s.Store.BindingsOf(ctx, ids)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range resources {
			reason := orphaned(r, bindings, grace)
			if reason == "" {
				continue
			}
			if err := p.Destroy(ctx, r.Ref); err != nil && !errors.Is(err, ErrGone) {
				errs = append(errs, fmt.Errorf("remove orphaned sandbox %s: %w", r.Ref.ExternalID, err))
				continue
			}
			removed++
			s.logger().InfoContext(ctx, "removed an orphaned sandbox", "sandbox", r.Ref.ExternalID, "provider", p.Name(),
				"session_id", r.SessionID, "reason", reason)
		}
	}
	return removed, errors.Join(errs...)
}

// orphaned says why r is an orphan, or "" if a binding accounts for it (or it is too young
// to tell: its binding may be being written or made ready right now).
func orphaned(r Resource, bindings map[string]AgedBinding, grace time.Duration) string {
	if r.SessionID == "" || time.Since(r.Created) < grace {
		return ""
	}
	b, ok := bindings[r.SessionID]
	switch {
	case !ok:
		return "its session has no sandbox binding (the session was deleted)"
	case b.State == BindingPending && b.Since >= grace:
		return fmt.Sprintf("its binding has been pending for %s", b.Since.Round(time.Second))
	case b.State == BindingPending:
		return ""
	case b.State == BindingExpired:
		return "its binding expired"
	case b.Ref.ExternalID != r.Ref.ExternalID || b.Ref.Provider != r.Ref.Provider:
		return fmt.Sprintf("its session is bound to another sandbox (%s)", b.Ref.ExternalID)
	}
	return ""
}

func (s *Sweeper) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}
