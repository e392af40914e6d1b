package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Sandboxes is what sandbox.Manager stores bindings through and reads specs from: the
// sandbox_bindings table and the session's environment.
type Sandboxes struct {
	store *store.Store
	// maxSandboxes is the workspace quota InsertBinding enforces; 0 is none.
	maxSandboxes int
}

var (
	_ sandbox.BindingStore = Sandboxes{}
	_ sandbox.SpecSource   = Sandboxes{}
)

// Sandboxes returns the binding store and spec source of the sandbox manager.
func (s *Service) Sandboxes() Sandboxes {
	return Sandboxes{store: s.store, maxSandboxes: s.maxSandboxes}
}

// Binding implements sandbox.BindingStore.
func (b Sandboxes) Binding(ctx context.Context, sessionID string) (sandbox.Binding, error) {
	rec, err := b.store.GetBinding(ctx, sessionID)
	if err != nil {
		return sandbox.Binding{}, notFoundAsNoBinding(err)
	}
	return bindingOf(rec), nil
}

// InsertBinding implements sandbox.BindingStore: if a concurrent or earlier attempt already
// wrote the session's binding, that one is returned. A session deleted meanwhile is
// ErrSessionGone; a workspace at its sandbox quota, sandbox.ErrQuota.
func (b Sandboxes) InsertBinding(ctx context.Context, nb sandbox.Binding) (sandbox.Binding, error) {
	err := b.store.InsertBindingWithin(ctx, store.Binding{
		SessionID: nb.SessionID, Provider: nb.Ref.Provider, Name: nb.Name, ExternalID: nb.Ref.ExternalID,
		SpecHash: nb.SpecHash, State: nb.State,
	}, b.maxSandboxes)
	var quota *store.QuotaError
	switch {
	case err == nil:
		return nb, nil
	case errors.As(err, &quota):
		return sandbox.Binding{}, fmt.Errorf("%w: %s (MANAGED_AGENT_WORKSPACE_MAX_SANDBOXES): a sandbox is freed when a session that has one is deleted",
			sandbox.ErrQuota, quota.Error())
	case errors.Is(err, store.ErrDuplicate):
		return b.Binding(ctx, nb.SessionID)
	case errors.Is(err, store.ErrReferenced):
		return sandbox.Binding{}, ErrSessionGone
	}
	return sandbox.Binding{}, err
}

// MarkReady implements sandbox.BindingStore. A binding removed meanwhile (the session is
// being deleted) is ErrSessionGone.
func (b Sandboxes) MarkReady(ctx context.Context, sessionID string, ref sandbox.Ref) error {
	err := b.store.MarkBindingReady(ctx, sessionID, ref.ExternalID)
	if errors.Is(err, store.ErrNotFound) {
		return ErrSessionGone
	}
	return err
}

// DeleteBinding implements sandbox.BindingStore.
func (b Sandboxes) DeleteBinding(ctx context.Context, sessionID string) error {
	return b.store.DeleteBinding(ctx, sessionID)
}

// SandboxSpec implements sandbox.SpecSource: the spec of the session's environment as it is
// now, with the hosts of the agent's MCP servers (which allow_mcp_servers lets the sandbox
// reach) from the session's agent snapshot.
func (b Sandboxes) SandboxSpec(ctx context.Context, sessionID string) (sandbox.Spec, error) {
	sess, err := b.session(ctx, sessionID)
	if err != nil {
		return sandbox.Spec{}, err
	}
	env, err := b.environmentOf(ctx, sess)
	if err != nil {
		return sandbox.Spec{}, err
	}
	spec := sandbox.SpecFor(sessionID, env)
	// Only the URLs: the snapshot was validated when the session was made.
	var agent struct {
		MCPServers []struct {
			URL string `json:"url"`
		} `json:"mcp_servers"`
	}
	if len(sess.Agent) > 0 {
		if err := json.Unmarshal(sess.Agent, &agent); err != nil {
			return sandbox.Spec{}, fmt.Errorf("decode the agent of session %s: %w", sessionID, err)
		}
	}
	urls := make([]string, 0, len(agent.MCPServers))
	for _, s := range agent.MCPServers {
		urls = append(urls, s.URL)
	}
	spec.SetMCPServers(urls)
	return spec, nil
}

// Environment returns the resolved config of the session's environment.
func (b Sandboxes) Environment(ctx context.Context, sessionID string) (wire.EnvironmentConfig, error) {
	sess, err := b.session(ctx, sessionID)
	if err != nil {
		return wire.EnvironmentConfig{}, err
	}
	return b.environmentOf(ctx, sess)
}

func (b Sandboxes) session(ctx context.Context, sessionID string) (store.SessionRecord, error) {
	sess, err := b.store.GetSessionByID(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return store.SessionRecord{}, ErrSessionGone
	}
	return sess, err
}

func (b Sandboxes) environmentOf(ctx context.Context, sess store.SessionRecord) (wire.EnvironmentConfig, error) {
	rec, err := b.store.GetEnvironment(ctx, sess.WorkspaceID, sess.EnvironmentID, false)
	if err != nil {
		return wire.EnvironmentConfig{}, fmt.Errorf("the environment of session %s: %w", sess.ID, err)
	}
	var cfg wire.EnvironmentConfig
	if err := json.Unmarshal(rec.Config, &cfg); err != nil {
		return wire.EnvironmentConfig{}, fmt.Errorf("decode the config of environment %s: %w", rec.ID, err)
	}
	return cfg, nil
}

var (
	_ sandbox.ActivityStore = Sandboxes{}
	_ sandbox.SweepStore    = Sandboxes{}
)

// TouchBinding implements sandbox.ActivityStore.
func (b Sandboxes) TouchBinding(ctx context.Context, sessionID string) (string, bool, error) {
	state, stopped, err := b.store.TouchBinding(ctx, sessionID)
	if err != nil {
		return "", false, notFoundAsNoBinding(err)
	}
	return state, stopped, nil
}

// idleBatch bounds one idle sweep; a larger backlog is picked up by the next sweep.
const idleBatch = 500

// SweepIdle implements sandbox.SweepStore: each binding in its own transaction that holds
// the row while fn stops or destroys the sandbox, so a session acquiring it meanwhile waits
// and then starts it again (or finds it expired).
func (b Sandboxes) SweepIdle(ctx context.Context, idle time.Duration, expire bool, fn func(context.Context, sandbox.Binding) error) (int, error) {
	ids, err := b.store.IdleBindings(ctx, idle, expire, idleBatch)
	if err != nil {
		return 0, err
	}
	done := 0
	var errs []error
	for _, id := range ids {
		err := b.store.InTx(ctx, func(q *store.Queries) error {
			rec, ok, err := q.LockIdleBinding(ctx, id, idle, expire)
			if err != nil || !ok {
				return err
			}
			if err := fn(ctx, bindingOf(rec)); err != nil {
				return err
			}
			mark := q.MarkBindingStopped
			if expire {
				mark = q.MarkBindingExpired
			}
			if err := mark(ctx, id); err != nil {
				return err
			}
			done++
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep the idle sandbox of session %s: %w", id, err))
		}
	}
	return done, errors.Join(errs...)
}

// BindingsOf implements sandbox.SweepStore.
func (b Sandboxes) BindingsOf(ctx context.Context, sessionIDs []string) (map[string]sandbox.AgedBinding, error) {
	recs, err := b.store.BindingsOf(ctx, sessionIDs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]sandbox.AgedBinding, len(recs))
	for id, r := range recs {
		out[id] = sandbox.AgedBinding{Binding: bindingOf(r.Binding), Since: r.Since}
	}
	return out, nil
}
