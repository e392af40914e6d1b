package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// CreateSession resolves the agent snapshot, checks the environment and stores the session
// with its initial events, all in one transaction.
func (s *Service) CreateSession(ctx context.Context, workspaceID string, p wire.SessionCreateParams) (wire.Session, error) {
	return s.CreateSessionKeyed(ctx, workspaceID, "", p)
}

// CreateSessionKeyed is CreateSession made idempotent on key (a controller's resource UID, an
// API client's Idempotency-Key; empty means not keyed): the first attempt with a key creates
// the session, every later one with the same request returns it (as it is now), and one with a
// different request is a KindKeyReused error. Concurrent attempts create one session: the
// unique index on (workspace, key) decides, and the losers return the winner's session.
func (s *Service) CreateSessionKeyed(ctx context.Context, workspaceID, key string, p wire.SessionCreateParams) (wire.Session, error) {
	var hash string
	if key != "" {
		if err := checkIdempotencyKey(key); err != nil {
			return wire.Session{}, err
		}
		var err error
		if hash, err = requestHash(p); err != nil {
			return wire.Session{}, err
		}
		if sess, found, err := s.sessionForKey(ctx, workspaceID, key, hash); err != nil || found {
			return sess, err
		}
	}
	ref, err := parseSessionAgent(p.Agent)
	if err != nil {
		return wire.Session{}, err
	}
	if p.EnvironmentID == "" {
		return wire.Session{}, invalidf("environment_id: is required")
	}
	if p.Title != nil {
		if err := checkLen("title", *p.Title, 0, maxTitleLen); err != nil {
			return wire.Session{}, err
		}
	}
	if err := validateMetadata("metadata", p.Metadata); err != nil {
		return wire.Session{}, err
	}
	if err := checkUnsupportedSessionFields(p); err != nil {
		return wire.Session{}, err
	}
	initial, err := parseInitialEvents(p.InitialEvents)
	if err != nil {
		return wire.Session{}, err
	}
	var out wire.Session
	err = s.store.InTx(ctx, func(q *store.Queries) error {
		agent, err := s.loadSessionAgent(ctx, q, workspaceID, ref)
		if err != nil {
			return err
		}
		snap, err := buildSnapshot(agent, ref)
		if err != nil {
			return err
		}
		env, err := q.GetEnvironment(ctx, workspaceID, p.EnvironmentID, false)
		if err != nil {
			return notFoundAs(err, "environment %s not found", p.EnvironmentID)
		}
		if env.ArchivedAt != nil {
			return invalidf("environment_id: environment %s is archived", env.ID).withCode("environment_archived")
		}
		if err := checkSessionVaults(ctx, q, workspaceID, p.VaultIDs); err != nil {
			return err
		}
		rawSnap, err := json.Marshal(snap)
		if err != nil {
			return fmt.Errorf("encode agent snapshot: %w", err)
		}
		usage, err := json.Marshal(wire.ZeroUsage())
		if err != nil {
			return fmt.Errorf("encode usage: %w", err)
		}
		now := s.now()
		rec := store.SessionRecord{ID: ids.New(ids.Session), WorkspaceID: workspaceID, AgentID: agent.ID, AgentVersion: agent.Version,
			EnvironmentID: env.ID, Title: p.Title, Metadata: p.Metadata, Agent: rawSnap, Status: initialStatus(initial, s.runner != nil), Usage: usage,
			CreatedAt: now, UpdatedAt: now, VaultIDs: p.VaultIDs}
		if len(initial) > 0 {
			// The initial events start the session's first turn.
			if err := s.admitTurn(ctx, q, workspaceID, rec.ID, "the message would start another turn"); err != nil {
				return err
			}
		}
		if err := q.InsertSession(ctx, rec); err != nil {
			if errors.Is(err, store.ErrReferenced) {
				// The environment was deleted between the check and the insert.
				return notFoundf("environment %s not found", p.EnvironmentID)
			}
			return err
		}
		if key != "" {
			if err := q.SetSessionExternalKey(ctx, rec.ID, key, hash); err != nil {
				return err
			}
		}
		if _, err := q.AppendEvents(ctx, rec.ID, initial, now); err != nil {
			return err
		}
		out, err = s.sessionFromRecord(rec)
		return err
	})
	if errors.Is(err, store.ErrExternalKeyTaken) {
		// A concurrent attempt with the key committed first; ours rolled back.
		sess, found, err := s.sessionForKey(ctx, workspaceID, key, hash)
		if err == nil && !found {
			err = fmt.Errorf("session with external key %q: lost the insert but found no winner", key)
		}
		return sess, err
	}
	if err != nil {
		return wire.Session{}, err
	}
	if len(initial) > 0 {
		s.wake(ctx, out.ID, false)
	}
	return out, nil
}

// sessionForKey returns the session created with key, if there is one and it was created by
// the same request.
func (s *Service) sessionForKey(ctx context.Context, workspaceID, key, hash string) (wire.Session, bool, error) {
	rec, stored, err := s.store.SessionByExternalKey(ctx, workspaceID, key)
	if errors.Is(err, store.ErrNotFound) {
		return wire.Session{}, false, nil
	}
	if err != nil {
		return wire.Session{}, false, err
	}
	if stored != hash {
		return wire.Session{}, false, errKeyReused("session create request", key)
	}
	sess, err := s.sessionFromRecord(rec)
	return sess, err == nil, err
}

// initialStatus: initial events start the session running (API.md §4.1) — when something
// will run them.
func initialStatus(initial []store.NewEvent, hasRunner bool) string {
	if len(initial) > 0 && hasRunner {
		return wire.SessionStatusRunning
	}
	return wire.SessionStatusIdle
}

// checkUnsupportedSessionFields refuses features this server does not provide yet rather
// than accepting and silently ignoring them.
func checkUnsupportedSessionFields(p wire.SessionCreateParams) error {
	if len(p.Resources) > 0 {
		return invalidf("resources: session resources are not supported by this server yet")
	}
	if !isJSONNull(p.Budget) {
		return invalidf("budget: budgets are not supported by this server yet").withCode("model_not_budgetable")
	}
	return nil
}

// parseSessionAgent accepts an agent id string, {type:"agent",id,version?} or
// {type:"agent_with_overrides",…}.
func parseSessionAgent(raw json.RawMessage) (wire.SessionAgentParam, error) {
	raw = bytes.TrimSpace(raw)
	if isJSONNull(raw) {
		return wire.SessionAgentParam{}, invalidf("agent: is required")
	}
	if raw[0] == '"' {
		var id string
		if err := json.Unmarshal(raw, &id); err != nil {
			return wire.SessionAgentParam{}, invalidf("agent: %v", err)
		}
		if id == "" {
			return wire.SessionAgentParam{}, invalidf("agent: must not be empty")
		}
		return wire.SessionAgentParam{Type: "agent", ID: id}, nil
	}
	var p wire.SessionAgentParam
	if err := wire.DecodeStrict(raw, &p); err != nil {
		return p, invalidf("agent: %v", err)
	}
	switch p.Type {
	case "agent":
		if p.Model.Set || p.System.Set || p.Tools.Set || p.MCPServers.Set || p.Skills.Set {
			return p, invalidf("agent: overrides need type agent_with_overrides")
		}
	case "agent_with_overrides":
	default:
		return p, invalidf("agent.type: must be agent or agent_with_overrides")
	}
	if p.ID == "" {
		return p, invalidf("agent.id: is required")
	}
	if p.Version != nil && *p.Version < 1 {
		return p, invalidf("agent.version: must be at least 1")
	}
	return p, nil
}

func (s *Service) loadSessionAgent(ctx context.Context, q *store.Queries, workspaceID string, ref wire.SessionAgentParam) (wire.Agent, error) {
	var version int64
	if ref.Version != nil {
		version = *ref.Version
	}
	rec, err := q.GetAgent(ctx, workspaceID, ref.ID, version, false)
	if err != nil {
		if version > 0 && errors.Is(err, store.ErrNotFound) {
			ok, existsErr := q.AgentExists(ctx, workspaceID, ref.ID)
			if existsErr != nil {
				return wire.Agent{}, existsErr
			}
			if ok {
				return wire.Agent{}, notFoundf("agent.version: %d not found", version)
			}
		}
		return wire.Agent{}, notFoundAs(err, "agent %s not found", ref.ID)
	}
	if rec.ArchivedAt != nil {
		return wire.Agent{}, invalidf("agent: agent %s is archived", rec.ID)
	}
	return agentFromRecord(rec)
}

// buildSnapshot applies overrides to the agent version: omitted inherits, null or [] clears,
// a value replaces. The snapshot keeps the base agent's id and version.
func buildSnapshot(a wire.Agent, ref wire.SessionAgentParam) (wire.SessionAgent, error) {
	snap := wire.SessionAgent{ID: a.ID, Type: "agent", Version: a.Version, Name: a.Name, Description: a.Description, System: a.System,
		Model: a.Model, Tools: a.Tools, MCPServers: a.MCPServers, Skills: a.Skills, Multiagent: a.Multiagent, ExecutionIdentity: a.ExecutionIdentity}
	if ref.Model.Set {
		if ref.Model.Null {
			return snap, invalidf("agent.model: cannot be null").withCode("agent_model_required")
		}
		m, err := resolveModel("agent.model", ref.Model.Value)
		if err != nil {
			return snap, err
		}
		// An override's effort is ignored and the agent's is not carried over (API.md §4.1).
		m.Effort = nil
		snap.Model = m
	}
	if ref.System.Set {
		snap.System = clearable(ref.System, nil)
		if snap.System != nil {
			if err := checkLen("agent.system", *snap.System, 0, maxSystemLen); err != nil {
				return snap, err
			}
		}
	}
	if ref.Tools.Set || ref.MCPServers.Set {
		rawTools, rawServers, err := toolsPatch(a.AgentConfig, ref.Tools, ref.MCPServers)
		if err != nil {
			return snap, err
		}
		if snap.Tools, snap.MCPServers, err = resolveTools(rawTools, rawServers); err != nil {
			return snap, &Error{Kind: KindInvalid, Message: "agent." + err.Error()}
		}
	}
	if ref.Skills.Set {
		skills, err := resolveSkills("agent.skills", ref.Skills.Value)
		if err != nil {
			return snap, err
		}
		snap.Skills = skills
	}
	if len(snap.Skills) > 0 && len(snap.Tools) == 0 {
		return snap, invalidf("agent.tools: skills need the read tool; tools cannot be cleared while the agent has skills")
	}
	if snap.Tools == nil {
		snap.Tools = []wire.Tool{}
	}
	if snap.MCPServers == nil {
		snap.MCPServers = []wire.MCPServer{}
	}
	if snap.Skills == nil {
		snap.Skills = []wire.Skill{}
	}
	return snap, nil
}

func (s *Service) sessionFromRecord(r store.SessionRecord) (wire.Session, error) {
	var snap wire.SessionAgent
	if err := json.Unmarshal(r.Agent, &snap); err != nil {
		return wire.Session{}, fmt.Errorf("decode session %s agent: %w", r.ID, err)
	}
	usage := wire.ZeroUsage()
	if len(r.Usage) > 0 {
		if err := json.Unmarshal(r.Usage, &usage); err != nil {
			return wire.Session{}, fmt.Errorf("decode session %s usage: %w", r.ID, err)
		}
	}
	vaultIDs := r.VaultIDs
	if vaultIDs == nil {
		vaultIDs = []string{}
	}
	end := s.now()
	if r.TerminatedAt != nil {
		end = *r.TerminatedAt // duration is frozen once terminated
	}
	return wire.Session{ID: r.ID, Type: "session", Status: r.Status, Title: r.Title, Agent: snap, EnvironmentID: r.EnvironmentID,
		Resources: []json.RawMessage{}, VaultIDs: vaultIDs, Metadata: r.Metadata, Budget: json.RawMessage("null"),
		OutcomeEvaluations: []json.RawMessage{},
		Stats:              wire.SessionStats{ActiveSeconds: r.ActiveSeconds, DurationSeconds: end.Sub(r.CreatedAt).Seconds()},
		Usage:              usage, CreatedAt: wire.Time(r.CreatedAt), UpdatedAt: wire.Time(r.UpdatedAt), ArchivedAt: wire.TimePtr(r.ArchivedAt)}, nil
}

// GetSession returns a session of the workspace.
func (s *Service) GetSession(ctx context.Context, workspaceID, id string) (wire.Session, error) {
	rec, err := s.store.GetSession(ctx, workspaceID, id, false)
	if err != nil {
		return wire.Session{}, notFoundAs(err, "session %s not found", id)
	}
	return s.sessionFromRecord(rec)
}

// ListSessions returns one page of sessions.
func (s *Service) ListSessions(ctx context.Context, workspaceID string, p SessionListParams) ([]wire.Session, bool, error) {
	recs, more, err := s.store.ListSessions(ctx, workspaceID, p)
	if err != nil {
		return nil, false, err
	}
	out := make([]wire.Session, len(recs))
	for i, r := range recs {
		if out[i], err = s.sessionFromRecord(r); err != nil {
			return nil, false, err
		}
	}
	return out, more, nil
}

// UpdateSession changes title, metadata or the session-local tools, and records what
// changed as a session.updated event.
func (s *Service) UpdateSession(ctx context.Context, workspaceID, id string, p wire.SessionUpdateParams) (wire.Session, error) {
	if !isJSONNull(p.Budget) {
		return wire.Session{}, invalidf("budget: budgets are not supported by this server yet")
	}
	if len(p.VaultIDs) > 0 {
		return wire.Session{}, invalidf("vault_ids: updating vault_ids is not yet supported")
	}
	var out wire.Session
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.GetSession(ctx, workspaceID, id, true)
		if err != nil {
			return notFoundAs(err, "session %s not found", id)
		}
		if rec.ArchivedAt != nil || rec.Status == wire.SessionStatusTerminated {
			return conflictf("session %s is %s and read-only", id, terminalWord(rec))
		}
		var changed wire.SessionUpdatedBody
		if p.Title.Set {
			var title *string
			if !p.Title.Null {
				if err := checkLen("title", p.Title.Value, 0, maxTitleLen); err != nil {
					return err
				}
				title = &p.Title.Value
			}
			if !equalPtr(title, rec.Title) {
				rec.Title = title
				changed.Title = wire.Nullable[string]{Set: true, Null: title == nil}
				if title != nil {
					changed.Title.Value = *title
				}
			}
		}
		if p.Metadata != nil {
			md, err := patchMetadata("metadata", rec.Metadata, p.Metadata, false)
			if err != nil {
				return err
			}
			if !equalMaps(md, rec.Metadata) {
				rec.Metadata = md
				changed.Metadata = wire.Metadata(md)
			}
		}
		if p.Agent != nil && (p.Agent.Tools.Set || p.Agent.MCPServers.Set) {
			snap, changedAgent, err := updateSnapshotTools(rec, *p.Agent)
			if err != nil {
				return err
			}
			if changedAgent {
				if rec.Agent, err = json.Marshal(snap); err != nil {
					return fmt.Errorf("encode agent snapshot: %w", err)
				}
				changed.Agent = &snap
			}
		}
		if changed.Changed() {
			now := s.now()
			rec.UpdatedAt = now
			if err := q.UpdateSession(ctx, rec); err != nil {
				return err
			}
			body, err := wire.EncodeBody(wire.EventSessionUpdated, changed)
			if err != nil {
				return err
			}
			if _, err := q.AppendEvents(ctx, rec.ID, []store.NewEvent{{Type: wire.EventSessionUpdated, Body: body, Processed: true}}, now); err != nil {
				return err
			}
		}
		out, err = s.sessionFromRecord(rec)
		return err
	})
	return out, err
}

func updateSnapshotTools(rec store.SessionRecord, p wire.SessionAgentUpdate) (wire.SessionAgent, bool, error) {
	var snap wire.SessionAgent
	if err := json.Unmarshal(rec.Agent, &snap); err != nil {
		return snap, false, fmt.Errorf("decode session agent: %w", err)
	}
	// Tools change what the next turn may do; the hosted service requires an idle session.
	if rec.Status != wire.SessionStatusIdle {
		return snap, false, invalidf("agent: the session's tools can only be updated while it is idle (it is %s); interrupt it and wait for idle", rec.Status)
	}
	rawTools, rawServers, err := toolsPatch(wire.AgentConfig{Tools: snap.Tools, MCPServers: snap.MCPServers}, p.Tools, p.MCPServers)
	if err != nil {
		return snap, false, err
	}
	before, err := json.Marshal(snap)
	if err != nil {
		return snap, false, fmt.Errorf("encode session agent: %w", err)
	}
	if snap.Tools, snap.MCPServers, err = resolveTools(rawTools, rawServers); err != nil {
		return snap, false, &Error{Kind: KindInvalid, Message: "agent." + err.Error()}
	}
	if len(snap.Skills) > 0 && len(snap.Tools) == 0 {
		return snap, false, invalidf("agent.tools: skills need the read tool; tools cannot be cleared while the agent has skills")
	}
	after, err := json.Marshal(snap)
	if err != nil {
		return snap, false, fmt.Errorf("encode session agent: %w", err)
	}
	return snap, !bytes.Equal(before, after), nil
}

// ArchiveSession makes an idle session read-only and terminated; no event is appended
// (API.md §17). Archiving twice keeps the first archived_at.
func (s *Service) ArchiveSession(ctx context.Context, workspaceID, id string) (wire.Session, error) {
	var out wire.Session
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.GetSession(ctx, workspaceID, id, true)
		if err != nil {
			return notFoundAs(err, "session %s not found", id)
		}
		if busy(rec.Status) {
			return invalidf(`Session %s cannot be archived while its status is "running". Only pending or idle sessions may be archived.`, id)
		}
		if rec.ArchivedAt == nil {
			now := s.now()
			rec.ArchivedAt, rec.UpdatedAt, rec.Status = &now, now, wire.SessionStatusTerminated
			if rec.TerminatedAt == nil {
				rec.TerminatedAt = &now
			}
			if err := q.UpdateSession(ctx, rec); err != nil {
				return err
			}
			// A self-hosted worker holding the session's work stops with it.
			if err := q.StopSessionWork(ctx, id, true, now); err != nil {
				return err
			}
		}
		out, err = s.sessionFromRecord(rec)
		return err
	})
	return out, err
}

// DeleteSession removes a session that is not running, with its events, and waits until it
// is gone: BeginDelete, then, for a session with a sandbox, the teardown that finishes the
// delete. If the teardown fails the session stays archived and the delete can be retried.
// Live streams end with session.deleted.
func (s *Service) DeleteSession(ctx context.Context, workspaceID, id string) error {
	finished, err := s.BeginDelete(ctx, workspaceID, id)
	if err != nil || finished {
		return err
	}
	if err := s.runner.Teardown(ctx, id); err != nil {
		return fmt.Errorf("tear down the sandbox of session %s: %w", id, err)
	}
	gone, err := s.SessionDeleted(ctx, workspaceID, id)
	if err != nil {
		return err
	}
	if !gone {
		return conflictf("session %s still exists after its sandbox was torn down; retry the delete", id)
	}
	return nil
}

// BeginDelete starts deleting a session that is not running and returns without waiting for a
// workflow, so a controller's finalizer can call it and come back later (SessionDeleted says
// when the delete is finished). A session without a sandbox is removed at once (finished is
// true). A session with one is fenced — archived, in the same transaction that checks it is
// not running, so no turn can start — and its teardown is started; the teardown destroys the
// sandbox, unbinds it and then removes the session (turns.FinishDelete): the foreign key from
// binding to session makes PostgreSQL refuse the delete in any other order. Calling it again
// while the teardown runs joins that teardown.
func (s *Service) BeginDelete(ctx context.Context, workspaceID, id string) (finished bool, err error) {
	err = s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.GetSession(ctx, workspaceID, id, true)
		if err != nil {
			return notFoundAs(err, "session %s not found", id)
		}
		if busy(rec.Status) {
			return errDeleteRunning()
		}
		if _, err := q.GetBinding(ctx, id); errors.Is(err, store.ErrNotFound) {
			finished = true
			return q.DeleteSession(ctx, id)
		} else if err != nil {
			return err
		}
		if s.runner == nil {
			return conflictf("session %s has a sandbox and no worker is configured to tear it down", id)
		}
		if rec.ArchivedAt == nil {
			now := s.now()
			rec.ArchivedAt, rec.UpdatedAt, rec.Status = &now, now, wire.SessionStatusTerminated
			if rec.TerminatedAt == nil {
				rec.TerminatedAt = &now
			}
			if err := q.StopSessionWork(ctx, id, true, now); err != nil {
				return err
			}
			return q.UpdateSession(ctx, rec)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if finished {
		if s.runner != nil {
			// A run waiting for a signal must notice the session is gone; like a wake-up, this
			// does not hold the caller.
			s.Wakes().forget(s.runner, id)
		}
		return true, nil
	}
	if err := s.runner.StartTeardown(ctx, id); err != nil {
		return false, fmt.Errorf("start the teardown of session %s: %w", id, err)
	}
	return false, nil
}

// SessionDeleted reports whether the session is gone from the workspace: a delete begun by
// BeginDelete has finished (or the session never existed there).
func (s *Service) SessionDeleted(ctx context.Context, workspaceID, id string) (bool, error) {
	_, err := s.store.GetSession(ctx, workspaceID, id, false)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, nil
}

// busy: a turn is in progress (running, or rescheduled and about to retry).
func busy(status string) bool {
	return status == wire.SessionStatusRunning || status == wire.SessionStatusRescheduling
}

func errDeleteRunning() *Error {
	return invalidf("Cannot delete session while it is running. Send an interrupt event or wait for the session to complete.")
}

func terminalWord(r store.SessionRecord) string {
	if r.ArchivedAt != nil {
		return "archived"
	}
	return "terminated"
}

func equalPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// SessionEnvironmentID returns the environment of a session of the workspace: what confines
// an environment key's reach to that environment's sessions.
func (s *Service) SessionEnvironmentID(ctx context.Context, workspaceID, id string) (string, error) {
	rec, err := s.store.GetSession(ctx, workspaceID, id, false)
	if err != nil {
		return "", notFoundAs(err, "session %s not found", id)
	}
	return rec.EnvironmentID, nil
}
