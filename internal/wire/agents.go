package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// AgentCreateParams is the body of POST /v1/agents (API.md §3.1).
type AgentCreateParams struct {
	Name              string             `json:"name"`
	Model             *ModelParam        `json:"model"`
	Description       *string            `json:"description"`
	System            *string            `json:"system"`
	Tools             json.RawMessage    `json:"tools"`
	MCPServers        json.RawMessage    `json:"mcp_servers"`
	Skills            []SkillParam       `json:"skills"`
	Multiagent        json.RawMessage    `json:"multiagent"`
	ExecutionIdentity *ExecutionIdentity `json:"execution_identity"`
	Metadata          MetadataParam      `json:"metadata"`
}

// MetadataParam is metadata as sent on create: every value must be a string. Plain
// encoding/json would store a null value as "", silently inventing a value.
type MetadataParam map[string]string

// UnmarshalJSON rejects null and non-string values, naming the key.
func (m *MetadataParam) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*m = nil
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("metadata: %w", ErrNotObject)
	}
	out := make(MetadataParam, len(raw))
	for k, v := range raw {
		var s *string
		if err := json.Unmarshal(v, &s); err != nil || s == nil {
			return fmt.Errorf("metadata.%s: must be a string", k)
		}
		out[k] = *s
	}
	*m = out
	return nil
}

// AgentUpdateParams is the body of POST /v1/agents/{id}: omitted fields are kept, null clears
// where clearing is allowed, lists replace, metadata patches.
type AgentUpdateParams struct {
	Version           *int64                      `json:"version"`
	Name              Nullable[string]            `json:"name"`
	Model             Nullable[ModelParam]        `json:"model"`
	Description       Nullable[string]            `json:"description"`
	System            Nullable[string]            `json:"system"`
	Tools             Nullable[json.RawMessage]   `json:"tools"`
	MCPServers        Nullable[json.RawMessage]   `json:"mcp_servers"`
	Skills            Nullable[[]SkillParam]      `json:"skills"`
	Multiagent        Nullable[json.RawMessage]   `json:"multiagent"`
	ExecutionIdentity Nullable[ExecutionIdentity] `json:"execution_identity"`
	Metadata          MetadataPatch               `json:"metadata"`
}

// ModelParam is the model as sent: a bare id string or {id, effort?, speed?, inference_geo?}.
type ModelParam struct {
	ID           string  `json:"id"`
	Effort       *Effort `json:"effort,omitempty"`
	Speed        string  `json:"speed,omitempty"`
	InferenceGeo *string `json:"inference_geo,omitempty"`
}

// UnmarshalJSON accepts both spellings.
func (m *ModelParam) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*m = ModelParam{}
		return json.Unmarshal(b, &m.ID)
	}
	type plain ModelParam
	var p plain
	if err := DecodeStrict(b, &p); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	*m = ModelParam(p)
	return nil
}

// Effort is the reasoning effort; requests may send "high" or {"type":"high"}, responses
// always use the object form.
type Effort struct {
	Type string `json:"type"`
}

// UnmarshalJSON accepts both spellings.
func (e *Effort) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &e.Type)
	}
	type plain Effort
	var p plain
	if err := DecodeStrict(b, &p); err != nil {
		return fmt.Errorf("effort: %w", err)
	}
	*e = Effort(p)
	return nil
}

// Model is the resolved model echoed in responses.
type Model struct {
	ID           string  `json:"id"`
	Effort       *Effort `json:"effort,omitempty"`
	Speed        string  `json:"speed"`
	InferenceGeo *string `json:"inference_geo,omitempty"`
}

// SkillParam references a skill; version defaults to the latest.
type SkillParam struct {
	Type    string  `json:"type"`
	SkillID string  `json:"skill_id"`
	Version *string `json:"version"`
}

// Skill is the resolved skill reference.
type Skill struct {
	Type    string `json:"type"`
	SkillID string `json:"skill_id"`
	Version string `json:"version"`
}

// ExecutionIdentity is the principal runs of the agent carry.
type ExecutionIdentity struct {
	Type    string `json:"type"`
	RoleARN string `json:"role_arn,omitempty"`
}

// UnmarshalJSON rejects unknown fields.
func (e *ExecutionIdentity) UnmarshalJSON(b []byte) error {
	type plain ExecutionIdentity
	var p plain
	if err := DecodeStrict(b, &p); err != nil {
		return fmt.Errorf("execution_identity: %w", err)
	}
	*e = ExecutionIdentity(p)
	return nil
}

// AgentConfig is everything one agent version fixes. It is stored whole per version and is
// the base of a session's agent snapshot.
type AgentConfig struct {
	Name              string            `json:"name"`
	Description       *string           `json:"description"`
	System            *string           `json:"system"`
	Model             Model             `json:"model"`
	Tools             []Tool            `json:"tools"`
	MCPServers        []MCPServer       `json:"mcp_servers"`
	Skills            []Skill           `json:"skills"`
	Multiagent        json.RawMessage   `json:"multiagent"`
	ExecutionIdentity ExecutionIdentity `json:"execution_identity"`
	Metadata          Metadata          `json:"metadata"`
}

// Normalize makes every list non-nil and multiagent an explicit null so the echo always has
// every key.
func (c *AgentConfig) Normalize() {
	if c.Tools == nil {
		c.Tools = []Tool{}
	}
	if c.MCPServers == nil {
		c.MCPServers = []MCPServer{}
	}
	if c.Skills == nil {
		c.Skills = []Skill{}
	}
	if len(c.Multiagent) == 0 {
		c.Multiagent = json.RawMessage("null")
	}
	if c.Metadata == nil {
		c.Metadata = Metadata{}
	}
}

// Agent is the agent resource (one version of it).
type Agent struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	AgentConfig
	Version    int64 `json:"version"`
	CreatedAt  Time  `json:"created_at"`
	UpdatedAt  Time  `json:"updated_at"`
	ArchivedAt *Time `json:"archived_at"`
}

// ErrNotObject is returned when a JSON value that must be an object is not.
var ErrNotObject = errors.New("must be a JSON object")
