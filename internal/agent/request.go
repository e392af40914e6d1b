package agent

import (
	"fmt"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/catalog"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// thinkingBudgetShare is the part of max_tokens a manual thinking budget may use, on models
// that take budget_tokens rather than adaptive thinking: the rest is left for the answer and
// its tool calls.
const thinkingBudgetShare = 2

// minThinkingBudget is the smallest budget_tokens the API accepts
// (platform.claude.com/docs/en/build-with-claude/extended-thinking).
const minThinkingBudget = 1024

// request is the model request of one step: the agent's model with its limits and
// capabilities from the catalog, thinking on as the hosted service runs it, the agent's
// effort and speed where the model takes them, and prompt caching.
func (c *Core) request(in Input, m catalog.Model, msgs []model.Message, ts toolset) model.Request {
	req := model.Request{
		Model:     in.Agent.Model.ID,
		System:    systemPrompt(in),
		Messages:  msgs,
		Tools:     ts.offered,
		MaxTokens: m.MaxOutputTokens,
		// Every request of a session repeats the one before it and adds to its end, so the
		// client's breakpoints let each read what the last one wrote.
		Cache: true,
	}
	if c.maxTokens > 0 && c.maxTokens < req.MaxTokens {
		req.MaxTokens = c.maxTokens
	}
	switch m.Thinking {
	case catalog.ThinkingAdaptive:
		// Adaptive thinking decides per request how much to think and thinks between tool
		// calls (platform.claude.com/docs/en/build-with-claude/adaptive-thinking). The text is
		// omitted: clients are never shown it (agent.thinking has no content, API.md §17) and
		// the signature alone carries it back to the model.
		req.Thinking = &model.Thinking{Type: model.ThinkingAdaptive, Display: model.ThinkingDisplayOmitted}
	case catalog.ThinkingEnabled:
		// budget_tokens must be at least 1024 and below max_tokens.
		if budget := req.MaxTokens / thinkingBudgetShare; budget >= minThinkingBudget {
			req.Thinking = &model.Thinking{Type: model.ThinkingEnabled, BudgetTokens: budget}
		}
	}
	if e := in.Agent.Model.Effort; e != nil && e.Type != "" && m.Effort {
		// output_config.effort (platform.claude.com/docs/en/build-with-claude/effort).
		req.Effort = e.Type
	}
	if in.Agent.Model.Speed == "fast" && m.FastMode {
		// speed "fast" (platform.claude.com/docs/en/build-with-claude/fast-mode).
		req.Speed = "fast"
	}
	return req
}

// cutCall reports whether resp stopped at max_tokens inside a tool call.
func cutCall(resp model.Response) bool {
	n := len(resp.Content)
	return resp.StopReason == model.StopMaxTokens && n > 0 && resp.Content[n-1].Truncated
}

// cutCallText is the error result of a tool call cut short by stop: the model is told what
// happened and how to go on, and the call never runs.
func cutCallText(name, stop string, maxTokens int) string {
	switch stop {
	case model.StopContextWindow:
		return fmt.Sprintf("The call to %s was not run: the conversation filled the model's context window before the call's input was complete. "+
			"Send less in one call, or split the work into smaller steps.", name)
	case model.StopRefusal:
		return fmt.Sprintf("The call to %s was not run: the response was stopped before the call's input was complete.", name)
	}
	return fmt.Sprintf("The call to %s was not run: your response reached the output limit (max_tokens %d) "+
		"before the call's input was complete. Split the work into smaller steps: for example write a large "+
		"file in several parts (write the first part, then append with edit or bash), or send less in one call.",
		name, maxTokens)
}

// sumUsage adds the usage of two calls made for one request.
func sumUsage(a, b model.Usage) model.Usage {
	a.InputTokens += b.InputTokens
	a.OutputTokens += b.OutputTokens
	a.CacheCreationInputTokens += b.CacheCreationInputTokens
	a.CacheReadInputTokens += b.CacheReadInputTokens
	return a
}

// cutResult is the event that answers call, the tool call a max_tokens stop cut.
func cutResult(id string, call NewEvent, name, stop string, maxTokens int) (NewEvent, error) {
	tc := ToolCall{Event: wire.Event{ID: call.ID, Type: call.Type}, Name: name}
	if call.Type == wire.EventAgentMCPToolUse {
		// resultEvent answers an MCP call with agent.mcp_tool_result; the server's name is not
		// needed for that, only that it is one.
		tc.MCPServer = "-"
	}
	return resultEvent(id, tc, wire.NewTextContent(cutCallText(name, stop, maxTokens)), true)
}
