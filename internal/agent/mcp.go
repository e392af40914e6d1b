package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"

	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// MCPTool is one tool an MCP server listed.
type MCPTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// MCPServerTools is what one of the agent's MCP servers listed when the turn first needed
// its tools. The listing is stored with the turn, so every step of the turn (and a step
// retried after a crash) offers the model the same tools.
type MCPServerTools struct {
	Server string    `json:"server"`
	Tools  []MCPTool `json:"tools"`
}

// MCPCaller calls the tools of a session's MCP servers. callID is the agent.mcp_tool_use
// event id: the caller must let a call reach its server at most once however often it is
// asked with the same id, because a step retried after a worker died asks again when the
// result was not committed. A tool that fails is a result with IsError; an error is returned
// only when ctx is cancelled (then no result is recorded).
type MCPCaller interface {
	CallMCP(ctx context.Context, callID, server, tool string, input json.RawMessage) (ToolResult, error)
}

// Names the model sees for MCP tools.
//
// An MCP tool is offered as mcp__<server>__<tool> when both parts are plain: letters and
// digits, with single '_' or '-' between them (no leading, trailing or doubled separators),
// and the whole name fits the model's 64-character limit. Such a name splits back
// unambiguously at its second "__", so two plain names never collide, and no built-in (bash,
// read, …) starts with "mcp". Any other pair — a server name with spaces or dots, a long tool
// name — is offered as mcpx_<readable part>_<12 hex digits of a hash of server and tool>,
// which is stable and, for distinct pairs, distinct with overwhelming probability. The name
// depends on the server and tool names only, so the projection of an old call gives the name
// it was offered under. A custom tool with the same name wins; the MCP tool is then not
// offered (the configuration cannot forbid it: custom names are the client's).
const (
	mcpPrefix       = "mcp__"
	mcpHashedPrefix = "mcpx_"
	maxModelToolLen = 64
	mcpHashLen      = 12
)

var plainPart = regexp.MustCompile(`^[A-Za-z0-9]+([_-][A-Za-z0-9]+)*$`)

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// MCPToolName is the name the model sees for tool of server.
func MCPToolName(server, tool string) string {
	plain := mcpPrefix + server + "__" + tool
	if plainPart.MatchString(server) && plainPart.MatchString(tool) && len(plain) <= maxModelToolLen {
		return plain
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	suffix := "_" + hex.EncodeToString(sum[:])[:mcpHashLen]
	readable := unsafeChars.ReplaceAllString(server+"__"+tool, "_")
	if room := maxModelToolLen - len(mcpHashedPrefix) - len(suffix); len(readable) > room {
		readable = readable[:room]
	}
	return mcpHashedPrefix + strings.Trim(readable, "_") + suffix
}

// mcpRef is the server and tool behind an offered MCP tool name.
type mcpRef struct {
	server, tool string
}

// MCPServersToList is the agent's MCP servers whose toolset can offer a tool. A toolset with
// default_config.enabled false and no enabled configs entry offers nothing, so its server is
// not contacted at all.
func MCPServersToList(a wire.SessionAgent) []wire.MCPServer {
	eff := toolconfig.NewEffective(a.Tools)
	var out []wire.MCPServer
	for _, s := range a.MCPServers {
		if eff.MCPOffersAny(s.Name) {
			out = append(out, s)
		}
	}
	return out
}
