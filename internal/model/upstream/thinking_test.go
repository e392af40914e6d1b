package upstream_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model/upstream"
)

// Models of the catalog with each feature (internal/model/catalog, builtin.go).
const (
	budgetModel    = "claude-sonnet-4-5" // thinking enabled with budget_tokens; no effort, no fast mode
	adaptiveModel  = "claude-opus-4-7"   // adaptive only, effort
	deprecatedBoth = "claude-opus-4-6"   // adaptive, and budget_tokens still accepted
	fastModel      = "claude-opus-5-5"   // fast mode without a beta header
	fastBetaModel  = "claude-opus-5"     // fast mode behind fast-mode-2026-02-01
	plainModel     = "claude-3-5-haiku"  // no thinking at all
)

func enabled(budget int) obj { return obj{"type": "enabled", "budget_tokens": budget} }

var adaptive = obj{"type": "adaptive"}

func TestThinkingParameter(t *testing.T) {
	srv := upstream.Start(t)
	on := func(model string, thinking any, kv ...any) obj {
		return with(with(request(), "model", model, "max_tokens", 4000, "thinking", thinking), kv...)
	}
	refused := []struct {
		name string
		body obj
		want string
	}{
		{"a budget under 1024", on(budgetModel, enabled(1000)), "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"},
		{"a budget of max_tokens", on(budgetModel, enabled(4000)), "`max_tokens` must be greater than `thinking.budget_tokens`"},
		{"no budget", on(budgetModel, obj{"type": "enabled"}), "thinking.enabled.budget_tokens: Field required"},
		{"adaptive on a budget-only model", on(budgetModel, adaptive), "thinking.type.adaptive: adaptive thinking is not supported for model claude-sonnet-4-5"},
		{"budget_tokens on an adaptive-only model", on(adaptiveModel, enabled(2000)), "thinking type 'enabled' is not supported for model claude-opus-4-7"},
		{"thinking on a model without it", on(plainModel, enabled(2000)), "thinking: extended thinking is not supported by model claude-3-5-haiku"},
		{"an unknown type", on(budgetModel, obj{"type": "deep"}), "thinking: Input tag 'deep'"},
		{"a budget on adaptive", on(adaptiveModel, obj{"type": "adaptive", "budget_tokens": 2000}), "thinking.adaptive.budget_tokens: Extra inputs are not permitted"},
		{"a forced tool while thinking", on(budgetModel, enabled(2000), "tools", arr{tool("lookup")}, "tool_choice", obj{"type": "any"}),
			"Thinking may not be enabled when tool_choice forces tool use."},
		{"a temperature while thinking", on(budgetModel, enabled(2000), "temperature", 0.5), "`temperature` may only be set to 1 when thinking is enabled"},
		{"top_k while thinking", on(adaptiveModel, adaptive, "top_k", 5), "`top_k` must be unset when thinking is enabled"},
		{"a low top_p while thinking", on(budgetModel, enabled(2000), "top_p", 0.9), "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			post(t, srv, tt.body).refused(t, 400, "invalid_request_error", tt.want)
		})
	}
	accepted := []struct {
		name string
		body obj
	}{
		{"a budget", on(budgetModel, enabled(1024))},
		{"adaptive", on(adaptiveModel, adaptive)},
		{"the deprecated budget on Opus 4.6", on(deprecatedBoth, enabled(2000))},
		{"disabled", on(plainModel, obj{"type": "disabled"})},
		{"tool_choice auto while thinking", on(budgetModel, enabled(2000), "tools", arr{tool("lookup")}, "tool_choice", obj{"type": "auto"})},
		{"temperature 1 and top_p 0.95 while thinking", on(budgetModel, enabled(2000), "temperature", 1, "top_p", 0.95)},
		{"any temperature without thinking", with(request(), "temperature", 0, "top_k", 5, "top_p", 0.5)},
	}
	for _, tt := range accepted {
		t.Run(tt.name, func(t *testing.T) {
			post(t, srv, tt.body).ok(t)
		})
	}
}

func TestEffortAndSpeed(t *testing.T) {
	srv := upstream.Start(t)
	beta := func(r *http.Request) { r.Header.Set("anthropic-beta", "other-2025-01-01, fast-mode-2026-02-01") }
	tests := []struct {
		name string
		body obj
		edit func(*http.Request)
		want string // "" accepted
	}{
		{"effort where supported", with(request(), "model", adaptiveModel, "output_config", obj{"effort": "xhigh"}), nil, ""},
		{"effort where not supported", with(request(), "model", budgetModel, "output_config", obj{"effort": "low"}), nil, "output_config.effort: effort is not supported for model claude-sonnet-4-5"},
		{"an unknown effort", with(request(), "model", adaptiveModel, "output_config", obj{"effort": "extreme"}), nil, "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh', 'max'"},
		{"an unknown output_config field", with(request(), "model", adaptiveModel, "output_config", obj{"effort": "low", "verbosity": 1}), nil, "output_config.verbosity: Extra inputs are not permitted"},
		{"fast on a fast-mode model", with(request(), "model", fastModel, "speed", "fast"), nil, ""},
		{"standard anywhere", with(request(), "speed", "standard"), nil, ""},
		{"fast elsewhere", with(request(), "speed", "fast"), nil, "speed: fast mode is not supported for model claude-sonnet-4-5"},
		{"an unknown speed", with(request(), "model", fastModel, "speed", "turbo"), nil, "speed: Input should be 'standard' or 'fast'"},
		{"fast in preview without its beta header", with(request(), "model", fastBetaModel, "speed", "fast"), nil, "requires the anthropic-beta header fast-mode-2026-02-01"},
		{"fast in preview with its beta header", with(request(), "model", fastBetaModel, "speed", "fast"), beta, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var edit []func(*http.Request)
			if tt.edit != nil {
				edit = append(edit, tt.edit)
			}
			resp := post(t, srv, tt.body, edit...)
			if tt.want == "" {
				resp.ok(t)
				return
			}
			resp.refused(t, 400, "invalid_request_error", tt.want)
		})
	}
	fast := post(t, srv, with(request(), "model", fastModel, "speed", "fast")).ok(t)
	require.Equal(t, "fast", fast.msg["usage"].(map[string]any)["speed"])
}

// thinkingTurn is a Script that thinks, then calls lookup.
func thinkingTurn(*upstream.Request) upstream.Reply {
	return upstream.Reply{Content: []upstream.Block{
		{Type: "thinking", Thinking: "The user wants the weather; I should look it up."},
		{Type: "redacted_thinking", Data: "secret"},
		{Type: "tool_use", ID: "toolu_w", Name: "lookup"},
	}}
}

func TestThinkingBlocksComeBackUnchanged(t *testing.T) {
	srv := upstream.Start(t, upstream.WithScript(thinkingTurn))
	first := post(t, srv, with(loop(user("Weather?")), "max_tokens", 4000, "thinking", enabled(2000))).ok(t)
	content := first.msg["content"].([]any)
	thinking := content[0].(map[string]any)
	redacted := content[1].(map[string]any)
	require.Equal(t, srv.Sign("The user wants the weather; I should look it up."), thinking["signature"])
	require.NotEqual(t, "secret", redacted["data"], "redacted thinking is sealed, not sent as the script wrote it")

	next := func(thinkingBlock, redactedBlock any) obj {
		return with(loop(user("Weather?"), assistant(arr{thinkingBlock, redactedBlock, toolUse("toolu_w", "lookup")}), user(arr{toolResult("toolu_w", "sunny")})),
			"max_tokens", 4000, "thinking", enabled(2000))
	}
	post(t, srv, next(thinking, redacted)).ok(t)

	tampered := with(thinking, "thinking", "The user wants the weather; I will make it up.")
	post(t, srv, next(tampered, redacted)).refused(t, 400, "invalid_request_error", "messages.1.content.0: Invalid `signature` in `thinking` block")
	forged := with(thinking, "signature", "c2lnbmF0dXJl")
	post(t, srv, next(forged, redacted)).refused(t, 400, "invalid_request_error", "messages.1.content.0: Invalid `signature` in `thinking` block")
	other := upstream.Start(t)
	foreign := with(thinking, "signature", other.Sign("The user wants the weather; I should look it up."))
	post(t, srv, next(foreign, redacted)).refused(t, 400, "invalid_request_error", "Invalid `signature`")
	post(t, srv, next(thinking, with(redacted, "data", "c2VjcmV0"))).refused(t, 400, "invalid_request_error", "messages.1.content.1: Invalid `data` in `redacted_thinking` block")

	// A signed block in an earlier, finished turn is checked as well, thinking on or off.
	earlier := request(user("Weather?"), assistant(arr{tampered, text("Sunny.")}), user("Thanks"))
	post(t, srv, earlier).refused(t, 400, "invalid_request_error", "messages.1.content.0: Invalid `signature`")
}

func TestToolLoopKeepsItsThinking(t *testing.T) {
	srv := upstream.Start(t)
	signed := obj{"type": "thinking", "thinking": "Look it up.", "signature": srv.Sign("Look it up.")}
	sealed := obj{"type": "redacted_thinking", "data": srv.Seal("x")}
	turn := func(thinking any, first ...any) obj {
		return with(loop(user("Weather?"), assistant(append(arr(first), toolUse("toolu_w", "lookup"))), user(arr{toolResult("toolu_w", "sunny")})),
			"model", deprecatedBoth, "max_tokens", 4000, "thinking", thinking)
	}
	const want = "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)."
	post(t, srv, turn(enabled(2000), text("Looking."))).refused(t, 400, "invalid_request_error", want)
	post(t, srv, turn(adaptive, text("Looking."))).refused(t, 400, "invalid_request_error", want)
	post(t, srv, turn(enabled(2000))).refused(t, 400, "invalid_request_error", "but found `tool_use`")
	post(t, srv, turn(enabled(2000), signed, text("Looking."))).ok(t)
	post(t, srv, turn(adaptive, sealed)).ok(t)
	post(t, srv, turn(obj{"type": "disabled"}, text("Looking."))).ok(t)
	// A finished loop needs no thinking: the rule is about the loop in progress.
	finished := with(loop(user("Weather?"), assistant(arr{toolUse("toolu_w", "lookup")}), user(arr{toolResult("toolu_w", "sunny")}), assistant("Sunny."), user("Thanks")),
		"model", deprecatedBoth, "max_tokens", 4000, "thinking", adaptive)
	post(t, srv, finished).ok(t)
}

func TestAdaptiveTurnWithoutThinking(t *testing.T) {
	// Adaptive thinking may skip thinking; the call the server made without any may come
	// back without any.
	srv := upstream.Start(t, upstream.WithScript(func(r *upstream.Request) upstream.Reply {
		if len(r.Messages) == 1 {
			return upstream.Reply{Content: []upstream.Block{{Type: "tool_use", ID: "toolu_quick", Name: "lookup"}}}
		}
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "Sunny."}}}
	}))
	body := with(loop(user("Weather?")), "model", adaptiveModel, "thinking", adaptive)
	post(t, srv, body).ok(t)
	second := with(loop(user("Weather?"), assistant(arr{toolUse("toolu_quick", "lookup")}), user(arr{toolResult("toolu_quick", "sunny")})),
		"model", adaptiveModel, "thinking", adaptive)
	post(t, srv, second).ok(t)
}

// recorder is a testing.TB that keeps what the server reports of a broken Script.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestScriptMistakesAreReported(t *testing.T) {
	tests := []struct {
		name  string
		reply upstream.Reply
		want  string
	}{
		{"thinking when it is off", upstream.Reply{Content: []upstream.Block{{Type: "thinking", Thinking: "hm"}}}, "thinking block to a request without thinking on"},
		{"a call of an unknown tool", upstream.Reply{Content: []upstream.Block{{Type: "tool_use", Name: "fetch"}}}, `calls tool "fetch"`},
		{"a block the API does not generate", upstream.Reply{Content: []upstream.Block{{Type: "image"}}}, `has type "image"`},
		{"tool_use without a call", upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "x"}}, StopReason: "tool_use"}, "without a tool_use block"},
		{"an unknown stop reason", upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "x"}}, StopReason: "done"}, `stop_reason "done"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			srv := upstream.Start(rec, upstream.WithScript(func(*upstream.Request) upstream.Reply { return tt.reply }))
			post(t, srv, loop(user("Hi"))).refused(t, 500, "api_error", "upstream test server")
			require.Len(t, rec.errors, 1)
			require.Contains(t, rec.errors[0], tt.want)
		})
	}
}

func TestOmittedThinking(t *testing.T) {
	Tokens := upstream.Tokens
	srv := upstream.Start(t, upstream.WithScript(thinkingTurn))
	const full = "The user wants the weather; I should look it up."
	first := func(model string, thinking obj) map[string]any {
		resp := post(t, srv, with(loop(user("Weather?")), "model", model, "max_tokens", 4000, "thinking", thinking)).ok(t)
		require.Equal(t, Tokens(full)+Tokens("secret")+Tokens("lookup")+Tokens("{}"), resp.usage(t)["output_tokens"], "omitted thinking is billed whole")
		return resp.msg["content"].([]any)[0].(map[string]any)
	}
	omitted := first(budgetModel, obj{"type": "enabled", "budget_tokens": 2000, "display": "omitted"})
	require.Equal(t, "", omitted["thinking"])
	require.NotEmpty(t, omitted["signature"])
	require.Equal(t, "", first(adaptiveModel, adaptive)["thinking"], "the adaptive-only models omit by default")
	require.Equal(t, full, first(adaptiveModel, obj{"type": "adaptive", "display": "summarized"})["thinking"])
	summarized := first(budgetModel, enabled(2000))
	require.Equal(t, full, summarized["thinking"])

	next := func(block any) obj {
		return with(loop(user("Weather?"), assistant(arr{block, toolUse("toolu_w", "lookup")}), user(arr{toolResult("toolu_w", "sunny")})),
			"model", budgetModel, "max_tokens", 4000, "thinking", enabled(2000))
	}
	post(t, srv, next(omitted)).ok(t)
	post(t, srv, next(with(omitted, "thinking", full))).refused(t, 400, "invalid_request_error", "Invalid `signature` in `thinking` block")
	post(t, srv, next(with(summarized, "thinking", ""))).refused(t, 400, "invalid_request_error", "Invalid `signature` in `thinking` block")

	post(t, srv, with(request(), "max_tokens", 4000, "thinking", obj{"type": "enabled", "budget_tokens": 2000, "display": "hidden"})).
		refused(t, 400, "invalid_request_error", "thinking.enabled.display: Input should be 'summarized' or 'omitted'")
}
