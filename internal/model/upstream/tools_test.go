package upstream_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model/upstream"
)

// loop is a request with the tool lookup and these messages.
func loop(messages ...any) obj {
	return with(request(messages...), "tools", arr{tool("lookup")})
}

func TestToolRules(t *testing.T) {
	srv := upstream.Start(t)
	call := assistant(arr{text("Looking."), toolUse("toolu_a", "lookup")})
	tests := []struct {
		name string
		body obj
		want string
	}{
		{"a tool name with a space", with(request(), "tools", arr{tool("look up")}), "tools.0.custom.name: String should match pattern"},
		{"a tool name over 64 characters", with(request(), "tools", arr{tool(tokens(17))}), "tools.0.custom.name: String should match pattern"},
		{"two tools of one name", with(request(), "tools", arr{tool("lookup"), tool("lookup")}), "tools: Tool names must be unique."},
		{"a tool without input_schema", with(request(), "tools", arr{without(tool("lookup"), "input_schema")}), "tools.0.custom.input_schema: Field required"},
		{"a tool whose schema is not an object", with(request(), "tools", arr{with(tool("lookup"), "input_schema", obj{"type": "string"})}), "tools.0.custom.input_schema.type: Input should be 'object'"},
		{"an unknown tool field", with(request(), "tools", arr{with(tool("lookup"), "parameters", obj{})}), "tools.0.custom.parameters: Extra inputs are not permitted"},
		{"a server tool", with(request(), "tools", arr{obj{"type": "web_search_20250305", "name": "web_search"}}), "tool type 'web_search_20250305' is not supported"},
		{"tool blocks without tools", request(user("Hi"), call, user(arr{toolResult("toolu_a", "sunny")})), "Requests which include `tool_use` or `tool_result` blocks must define tools."},
		{"a call of a tool not defined", loop(user("Hi"), assistant(arr{toolUse("toolu_a", "fetch")}), user(arr{toolResult("toolu_a", "x")})),
			"messages.1.content.0: tool_use.name: tool 'fetch' is not among the request's tools"},
		{"a call whose input is not an object", loop(user("Hi"), assistant(arr{with(toolUse("toolu_a", "lookup"), "input", "x")}), user(arr{toolResult("toolu_a", "x")})),
			"messages.1.content.0.tool_use.input: Input should be a valid dictionary"},
		{"two calls of one id", loop(user("Hi"), assistant(arr{toolUse("toolu_a", "lookup"), toolUse("toolu_a", "lookup")}), user(arr{toolResult("toolu_a", "x")})),
			"messages.1.content.1: `tool_use` ids must be unique"},
		{"an id reused in a later turn", loop(user("Hi"), call, user(arr{toolResult("toolu_a", "x")}), call, user(arr{toolResult("toolu_a", "x")})),
			"messages.3.content.1: `tool_use` ids must be unique"},
		{"a call answered by text", loop(user("Hi"), call, user("go on")),
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_a. Each `tool_use` block must have a corresponding `tool_result` block in the next message."},
		{"a call as the last message", loop(user("Hi"), call), "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_a"},
		{"a result after text", loop(user("Hi"), call, user(arr{text("Here:"), toolResult("toolu_a", "x")})),
			"`tool_use` ids were found without `tool_result` blocks immediately after: toolu_a"},
		{"one of two calls answered", loop(user("Hi"), assistant(arr{toolUse("toolu_a", "lookup"), toolUse("toolu_b", "lookup")}), user(arr{toolResult("toolu_b", "x")})),
			"immediately after: toolu_a."},
		{"a result for no call", loop(user("Hi"), call, user(arr{toolResult("toolu_a", "x"), toolResult("toolu_z", "y")})),
			"messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_z. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."},
		{"two results for one call", loop(user("Hi"), call, user(arr{toolResult("toolu_a", "x"), toolResult("toolu_a", "y")})),
			"messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_a"},
		{"a result answering an older turn", loop(user("Hi"), call, user(arr{toolResult("toolu_a", "x")}), assistant("Done."), user(arr{toolResult("toolu_a", "x")})),
			"messages.4.content.0: unexpected `tool_use_id`"},
		{"a result of a block type tool results cannot hold", loop(user("Hi"), call, user(arr{toolResult("toolu_a", arr{toolUse("toolu_q", "lookup")})})),
			"messages.2.content.0.tool_result.content.0: Input tag 'tool_use' found"},
		{"a tool_choice naming an unknown tool", with(loop(user("Hi")), "tool_choice", obj{"type": "tool", "name": "fetch"}), "tool_choice.tool.name: tool 'fetch' is not among the request's tools"},
		{"a tool_choice of an unknown type", with(loop(user("Hi")), "tool_choice", obj{"type": "some"}), "tool_choice: Input tag 'some'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			post(t, srv, tt.body).refused(t, 400, "invalid_request_error", tt.want)
		})
	}
}

func TestToolLoopsAccepted(t *testing.T) {
	srv := upstream.Start(t)
	call := assistant(arr{text("Looking."), toolUse("toolu_a", "lookup"), toolUse("toolu_b", "lookup")})
	tests := []struct {
		name string
		body obj
	}{
		{"results then text", loop(user("Hi"), call, user(arr{toolResult("toolu_b", "x"), toolResult("toolu_a", arr{text("y")}), text("and?")}))},
		{"a result with is_error and no content", loop(user("Hi"), call, user(arr{with(toolResult("toolu_a", nil), "is_error", true), toolResult("toolu_b", "")}))},
		{"a finished loop, then another", loop(user("Hi"), call, user(arr{toolResult("toolu_a", "x"), toolResult("toolu_b", "y")}), assistant("Sunny."), user("Thanks"))},
		{"a forced tool", with(loop(user("Hi")), "tool_choice", obj{"type": "tool", "name": "lookup"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			post(t, srv, tt.body).ok(t)
		})
	}
}

func TestScriptedToolUse(t *testing.T) {
	srv := upstream.Start(t, upstream.WithScript(func(*upstream.Request) upstream.Reply {
		return upstream.Reply{Content: []upstream.Block{{Type: "tool_use", Name: "lookup", Input: json.RawMessage(`{"q": 1}`)}}}
	}))
	resp := post(t, srv, loop(user("Hi"))).ok(t)
	require.Equal(t, "tool_use", resp.msg["stop_reason"])
	block := resp.msg["content"].([]any)[0].(map[string]any)
	require.Regexp(t, `^toolu_[0-9a-f]+$`, block["id"], "the server names a call the script left unnamed")
	require.Equal(t, map[string]any{"q": float64(1)}, block["input"])
}
