package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// CreateAgent validates and stores a new agent at version 1.
func (s *Service) CreateAgent(ctx context.Context, workspaceID string, p wire.AgentCreateParams) (wire.Agent, error) {
	cfg, err := resolveAgentCreate(p)
	if err != nil {
		return wire.Agent{}, err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return wire.Agent{}, fmt.Errorf("encode agent config: %w", err)
	}
	id, now := ids.New(ids.Agent), s.now()
	if err := s.store.InsertAgent(ctx, id, workspaceID, raw, now); err != nil {
		return wire.Agent{}, err
	}
	return wire.Agent{ID: id, Type: "agent", AgentConfig: cfg, Version: 1, CreatedAt: wire.Time(now), UpdatedAt: wire.Time(now)}, nil
}

func resolveAgentCreate(p wire.AgentCreateParams) (wire.AgentConfig, error) {
	if err := checkLen("name", p.Name, 1, maxNameLen); err != nil {
		return wire.AgentConfig{}, err
	}
	if p.Model == nil {
		return wire.AgentConfig{}, invalidf("model: is required")
	}
	model, err := resolveModel("model", *p.Model)
	if err != nil {
		return wire.AgentConfig{}, err
	}
	cfg := wire.AgentConfig{Name: p.Name, Model: model, Description: p.Description, System: p.System, Metadata: wire.Metadata(p.Metadata)}
	if cfg.Tools, cfg.MCPServers, err = resolveTools(p.Tools, p.MCPServers); err != nil {
		return wire.AgentConfig{}, err
	}
	if cfg.Skills, err = resolveSkills("skills", p.Skills); err != nil {
		return wire.AgentConfig{}, err
	}
	if cfg.ExecutionIdentity, err = resolveExecutionIdentity(p.ExecutionIdentity); err != nil {
		return wire.AgentConfig{}, err
	}
	if err := checkMultiagent(p.Multiagent); err != nil {
		return wire.AgentConfig{}, err
	}
	if err := checkAgentText(cfg); err != nil {
		return wire.AgentConfig{}, err
	}
	if err := validateMetadata("metadata", cfg.Metadata); err != nil {
		return wire.AgentConfig{}, err
	}
	cfg.Normalize()
	return cfg, nil
}

func checkAgentText(cfg wire.AgentConfig) error {
	if cfg.Description != nil {
		if err := checkLen("description", *cfg.Description, 0, maxDescriptionLen); err != nil {
			return err
		}
	}
	if cfg.System != nil {
		if err := checkLen("system", *cfg.System, 0, maxSystemLen); err != nil {
			return err
		}
	}
	return nil
}

// checkMultiagent refuses multiagent rosters: threads are not built yet, and accepting a
// configuration the server would silently ignore is worse than a clear 400.
func checkMultiagent(raw json.RawMessage) error {
	if isJSONNull(raw) {
		return nil
	}
	return invalidf("multiagent: multiagent sessions are not supported by this server yet; omit the field or send null")
}

// resolveTools validates tools and MCP servers together (each toolset must name a declared
// server and each server must be used).
func resolveTools(rawTools, rawServers json.RawMessage) ([]wire.Tool, []wire.MCPServer, error) {
	if isJSONNull(rawTools) {
		rawTools = nil
	}
	if isJSONNull(rawServers) {
		rawServers = nil
	}
	t, srv, err := toolconfig.ParseAndResolve(rawTools, rawServers)
	if err != nil {
		return nil, nil, invalidf("%s", err.Error())
	}
	return t, srv, nil
}

// GetAgent returns an agent at its latest version, or at version when version > 0.
func (s *Service) GetAgent(ctx context.Context, workspaceID, id string, version int64) (wire.Agent, error) {
	rec, err := s.store.GetAgent(ctx, workspaceID, id, version, false)
	if err != nil {
		if version > 0 && errors.Is(err, store.ErrNotFound) {
			ok, existsErr := s.store.AgentExists(ctx, workspaceID, id)
			if existsErr != nil {
				return wire.Agent{}, existsErr
			}
			if ok {
				return wire.Agent{}, notFoundf("Agent version not found.")
			}
		}
		return wire.Agent{}, notFoundAs(err, "agent %s not found", id)
	}
	return agentFromRecord(rec)
}

func agentFromRecord(rec store.AgentRecord) (wire.Agent, error) {
	var cfg wire.AgentConfig
	if err := json.Unmarshal(rec.Config, &cfg); err != nil {
		return wire.Agent{}, fmt.Errorf("decode agent %s v%d: %w", rec.ID, rec.Version, err)
	}
	cfg.Normalize()
	return wire.Agent{ID: rec.ID, Type: "agent", AgentConfig: cfg, Version: rec.Version,
		CreatedAt: wire.Time(rec.CreatedAt), UpdatedAt: wire.Time(rec.VersionCreatedAt), ArchivedAt: wire.TimePtr(rec.ArchivedAt)}, nil
}

// UpdateAgent applies an update and writes a new version only when something changed.
func (s *Service) UpdateAgent(ctx context.Context, workspaceID, id string, p wire.AgentUpdateParams) (wire.Agent, error) {
	// Versions start at 1, so a smaller one is malformed rather than stale.
	if p.Version != nil && *p.Version < 1 {
		return wire.Agent{}, invalidf("version: must be an integer of at least 1")
	}
	var out wire.Agent
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.GetAgent(ctx, workspaceID, id, 0, true)
		if err != nil {
			return notFoundAs(err, "agent %s not found", id)
		}
		if rec.ArchivedAt != nil {
			return invalidf("Cannot modify archived agent")
		}
		if p.Version != nil && *p.Version != rec.LatestVersion {
			return &Error{Kind: KindStaleVersion, Message: "Concurrent modification detected. Please fetch the latest version and retry."}
		}
		cur, err := agentFromRecord(rec)
		if err != nil {
			return err
		}
		next, err := applyAgentUpdate(cur.AgentConfig, p)
		if err != nil {
			return err
		}
		oldJSON, err := json.Marshal(cur.AgentConfig)
		if err != nil {
			return fmt.Errorf("encode agent config: %w", err)
		}
		newJSON, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("encode agent config: %w", err)
		}
		if bytes.Equal(oldJSON, newJSON) {
			out = cur
			return nil
		}
		now := s.now()
		if err := q.InsertAgentVersion(ctx, id, rec.LatestVersion+1, newJSON, now); err != nil {
			return err
		}
		out = wire.Agent{ID: id, Type: "agent", AgentConfig: next, Version: rec.LatestVersion + 1,
			CreatedAt: wire.Time(rec.CreatedAt), UpdatedAt: wire.Time(now)}
		return nil
	})
	return out, err
}

// applyAgentUpdate: omitted keeps, null clears where allowed, lists replace, metadata patches.
func applyAgentUpdate(cur wire.AgentConfig, p wire.AgentUpdateParams) (wire.AgentConfig, error) {
	next := cur
	if p.Name.Set {
		if p.Name.Null {
			return next, invalidf("name: cannot be cleared")
		}
		if err := checkLen("name", p.Name.Value, 1, maxNameLen); err != nil {
			return next, err
		}
		next.Name = p.Name.Value
	}
	if p.Model.Set {
		if p.Model.Null {
			return next, invalidf("model: cannot be cleared")
		}
		m, err := resolveModel("model", p.Model.Value)
		if err != nil {
			return next, err
		}
		// Effort survives an update that keeps the model id (API.md §3.1).
		if m.Effort == nil && m.ID == cur.Model.ID {
			m.Effort = cur.Model.Effort
		}
		next.Model = m
	}
	next.Description = clearable(p.Description, cur.Description)
	next.System = clearable(p.System, cur.System)
	if p.Tools.Set || p.MCPServers.Set {
		rawTools, rawServers, err := toolsPatch(cur, p.Tools, p.MCPServers)
		if err != nil {
			return next, err
		}
		if next.Tools, next.MCPServers, err = resolveTools(rawTools, rawServers); err != nil {
			return next, err
		}
	}
	if p.Skills.Set {
		skills, err := resolveSkills("skills", p.Skills.Value)
		if err != nil {
			return next, err
		}
		next.Skills = skills
	}
	if p.Multiagent.Set {
		if err := checkMultiagent(p.Multiagent.Value); err != nil {
			return next, err
		}
	}
	if p.ExecutionIdentity.Set {
		var in *wire.ExecutionIdentity
		if !p.ExecutionIdentity.Null {
			in = &p.ExecutionIdentity.Value
		}
		ei, err := resolveExecutionIdentity(in)
		if err != nil {
			return next, err
		}
		next.ExecutionIdentity = ei
	}
	if p.Metadata != nil {
		md, err := patchMetadata("metadata", cur.Metadata, p.Metadata, false)
		if err != nil {
			return next, err
		}
		next.Metadata = md
	}
	if err := checkAgentText(next); err != nil {
		return next, err
	}
	next.Normalize()
	return next, nil
}

// clearable applies "omit to keep, null or empty to clear" to an optional text field.
func clearable(p wire.Nullable[string], cur *string) *string {
	if !p.Set {
		return cur
	}
	if p.Null || p.Value == "" {
		return nil
	}
	v := p.Value
	return &v
}

// toolsPatch returns the raw tools and servers to resolve: the new value where one was
// given, the current one re-encoded otherwise, so the pair is always validated together.
func toolsPatch(cur wire.AgentConfig, t, srv wire.Nullable[json.RawMessage]) (json.RawMessage, json.RawMessage, error) {
	pick := func(n wire.Nullable[json.RawMessage], current any) (json.RawMessage, error) {
		if n.Set {
			if n.Null {
				return nil, nil
			}
			return n.Value, nil
		}
		b, err := json.Marshal(current)
		if err != nil {
			return nil, fmt.Errorf("encode current tools: %w", err)
		}
		return b, nil
	}
	rawTools, err := pick(t, cur.Tools)
	if err != nil {
		return nil, nil, err
	}
	rawServers, err := pick(srv, cur.MCPServers)
	if err != nil {
		return nil, nil, err
	}
	return rawTools, rawServers, nil
}

// ArchiveAgent archives an agent; archiving twice keeps the first archived_at.
func (s *Service) ArchiveAgent(ctx context.Context, workspaceID, id string) (wire.Agent, error) {
	var out wire.Agent
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		if _, err := q.GetAgent(ctx, workspaceID, id, 0, true); err != nil {
			return notFoundAs(err, "agent %s not found", id)
		}
		if err := q.ArchiveAgent(ctx, id, s.now()); err != nil {
			return err
		}
		rec, err := q.GetAgent(ctx, workspaceID, id, 0, false)
		if err != nil {
			return err
		}
		out, err = agentFromRecord(rec)
		return err
	})
	return out, err
}

// ListAgents returns one page of agents at their latest versions.
func (s *Service) ListAgents(ctx context.Context, workspaceID string, p ListParams) ([]wire.Agent, bool, error) {
	recs, more, err := s.store.ListAgents(ctx, workspaceID, p)
	if err != nil {
		return nil, false, err
	}
	return agentsFromRecords(recs, more)
}

// ListAgentVersions returns an agent's versions newest first, continuing below after.
func (s *Service) ListAgentVersions(ctx context.Context, workspaceID, id string, after int64, limit int) ([]wire.Agent, bool, error) {
	ok, err := s.store.AgentExists(ctx, workspaceID, id)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, false, notFoundf("agent %s not found", id)
	}
	recs, more, err := s.store.ListAgentVersions(ctx, workspaceID, id, after, limit)
	if err != nil {
		return nil, false, err
	}
	return agentsFromRecords(recs, more)
}

func agentsFromRecords(recs []store.AgentRecord, more bool) ([]wire.Agent, bool, error) {
	out := make([]wire.Agent, len(recs))
	for i, r := range recs {
		a, err := agentFromRecord(r)
		if err != nil {
			return nil, false, err
		}
		out[i] = a
	}
	return out, more, nil
}
