package wire

import "encoding/json"

// SessionCreateParams is the body of POST /v1/sessions (API.md §4.1).
type SessionCreateParams struct {
	Agent         json.RawMessage   `json:"agent"`
	EnvironmentID string            `json:"environment_id"`
	Title         *string           `json:"title"`
	Metadata      MetadataParam     `json:"metadata"`
	Resources     []json.RawMessage `json:"resources"`
	VaultIDs      []string          `json:"vault_ids"`
	InitialEvents []json.RawMessage `json:"initial_events"`
	Budget        json.RawMessage   `json:"budget"`
}

// SessionAgentParam is the object form of the session's agent: a pinned version or a version
// with overrides. A bare string is the agent id at its latest version.
type SessionAgentParam struct {
	Type       string                    `json:"type"`
	ID         string                    `json:"id"`
	Version    *int64                    `json:"version"`
	Model      Nullable[ModelParam]      `json:"model"`
	System     Nullable[string]          `json:"system"`
	Tools      Nullable[json.RawMessage] `json:"tools"`
	MCPServers Nullable[json.RawMessage] `json:"mcp_servers"`
	Skills     Nullable[[]SkillParam]    `json:"skills"`
}

// SessionUpdateParams is the body of POST /v1/sessions/{id}.
type SessionUpdateParams struct {
	Title    Nullable[string]    `json:"title"`
	Metadata MetadataPatch       `json:"metadata"`
	Agent    *SessionAgentUpdate `json:"agent"`
	Budget   json.RawMessage     `json:"budget"`
	VaultIDs json.RawMessage     `json:"vault_ids"`
}

// SessionAgentUpdate replaces the session-local tools and MCP servers.
type SessionAgentUpdate struct {
	Tools      Nullable[json.RawMessage] `json:"tools"`
	MCPServers Nullable[json.RawMessage] `json:"mcp_servers"`
}

// UnmarshalJSON rejects unknown fields.
func (a *SessionAgentUpdate) UnmarshalJSON(b []byte) error {
	type plain SessionAgentUpdate
	var p plain
	if err := DecodeStrict(b, &p); err != nil {
		return prefixErr("agent", err)
	}
	*a = SessionAgentUpdate(p)
	return nil
}

// SessionAgent is the immutable agent snapshot a session runs with: the agent version plus
// any overrides, keeping the base agent's id and version.
type SessionAgent struct {
	ID                string            `json:"id"`
	Type              string            `json:"type"`
	Version           int64             `json:"version"`
	Name              string            `json:"name"`
	Description       *string           `json:"description"`
	System            *string           `json:"system"`
	Model             Model             `json:"model"`
	Tools             []Tool            `json:"tools"`
	MCPServers        []MCPServer       `json:"mcp_servers"`
	Skills            []Skill           `json:"skills"`
	Multiagent        json.RawMessage   `json:"multiagent"`
	ExecutionIdentity ExecutionIdentity `json:"execution_identity"`
}

// Session is the session resource (API.md §4.2, §17).
type Session struct {
	ID                 string            `json:"id"`
	Type               string            `json:"type"`
	Status             string            `json:"status"`
	Title              *string           `json:"title"`
	Agent              SessionAgent      `json:"agent"`
	EnvironmentID      string            `json:"environment_id"`
	Resources          []json.RawMessage `json:"resources"`
	VaultIDs           []string          `json:"vault_ids"`
	Metadata           Metadata          `json:"metadata"`
	Budget             json.RawMessage   `json:"budget"`
	OutcomeEvaluations []json.RawMessage `json:"outcome_evaluations"`
	Stats              SessionStats      `json:"stats"`
	Usage              Usage             `json:"usage"`
	DeploymentID       *string           `json:"deployment_id"`
	CreatedAt          Time              `json:"created_at"`
	UpdatedAt          Time              `json:"updated_at"`
	ArchivedAt         *Time             `json:"archived_at"`
}

// SessionStats are the time counters of a session.
type SessionStats struct {
	ActiveSeconds   float64 `json:"active_seconds"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// Usage is the cumulative token usage of a session.
type Usage struct {
	InputTokens          int64         `json:"input_tokens"`
	OutputTokens         int64         `json:"output_tokens"`
	CacheReadInputTokens int64         `json:"cache_read_input_tokens"`
	CacheCreation        CacheCreation `json:"cache_creation"`
	ActiveSeconds        float64       `json:"active_seconds"`
	ListCost             Cost          `json:"list_cost"`
	ServerToolUse        ServerToolUse `json:"server_tool_use"`
}

// CacheCreation splits cache-write tokens by lifetime.
type CacheCreation struct {
	Ephemeral5mInputTokens int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
}

// Cost is an amount of money in integer cents, as a string.
type Cost struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// ServerToolUse counts server-side tool requests.
type ServerToolUse struct {
	WebSearchRequests int64 `json:"web_search_requests"`
	WebFetchRequests  int64 `json:"web_fetch_requests"`
}

// ZeroUsage is the usage of a session that has not run yet: zeros, with list_cost and
// server_tool_use as objects (API.md §17), not null.
func ZeroUsage() Usage {
	return Usage{ListCost: Cost{Amount: "0", Currency: "USD"}}
}

// Session statuses (API.md §8.1).
const (
	SessionStatusIdle         = "idle"
	SessionStatusRunning      = "running"
	SessionStatusRescheduling = "rescheduling"
	SessionStatusTerminated   = "terminated"
)
