package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOverride(t *testing.T) {
	tests := []struct {
		name  string
		json  string
		id    string
		check func(t *testing.T, m Model)
	}{
		{
			name: "partial entry changes only what it sets",
			json: `[{"id": "claude-sonnet-4-5", "price": {"input": 2.5}, "fast_mode": true, "mid_conversation_system": true}]`,
			id:   "claude-sonnet-4-5-20250929",
			check: func(t *testing.T, m Model) {
				want, _ := Builtin().Lookup("claude-sonnet-4-5")
				want.Price.Input = 2.5
				want.FastMode = true
				want.MidConversationSystem = true
				require.Equal(t, want, m)
			},
		},
		{
			name: "an entry may name a known model by another spelling",
			json: `[{"id": "us.anthropic.claude-haiku-4-5-20251001-v1:0", "max_output_tokens": 32000}]`,
			id:   "claude-haiku-4-5",
			check: func(t *testing.T, m Model) {
				require.Equal(t, "claude-haiku-4-5", m.ID)
				require.Equal(t, 32000, m.MaxOutputTokens)
				require.Equal(t, 200_000, m.ContextWindow)
			},
		},
		{
			name: "a new model starts from the conservative defaults",
			json: `[{"id": "Claude-Private-1", "context_window": 500000, "thinking": "adaptive", "effort": true,
				"price": {"input": 1, "output": 2, "cache_write_5m": 1.25, "cache_write_1h": 2, "cache_read": 0.1}}]`,
			id: "claude-private-1-20270101",
			check: func(t *testing.T, m Model) {
				require.Equal(t, Model{
					ID: "claude-private-1", ContextWindow: 500_000, MaxOutputTokens: 8192, MinCacheableTokens: 4096,
					Thinking: ThinkingAdaptive, Effort: true,
					Price: Price{Input: 1, Output: 2, CacheWrite5m: 1.25, CacheWrite1h: 2, CacheRead: 0.1},
				}, m)
			},
		},
		{
			name: "thinking none clears it; a long-prompt tier can be set",
			json: `[{"id": "claude-opus-4-1", "thinking": "none", "long_prompt_threshold": 10,
				"long_prompt_price": {"output": 100}, "fast_price": {"input": 7}}]`,
			id: "claude-opus-4-1",
			check: func(t *testing.T, m Model) {
				require.Equal(t, ThinkingNone, m.Thinking)
				require.EqualValues(t, 10, m.LongPromptThreshold)
				require.Equal(t, Price{Output: 100}, m.LongPromptPrice)
				require.Equal(t, Price{Input: 7}, m.FastPrice)
			},
		},
		{
			name: "an empty array changes nothing",
			json: `[]`,
			id:   "claude-opus-5",
			check: func(t *testing.T, m Model) {
				want, _ := Builtin().Lookup("claude-opus-5")
				require.Equal(t, want, m)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, err := Builtin().Override([]byte(tt.json))
			require.NoError(t, err)
			m, ok := next.Lookup(tt.id)
			require.True(t, ok)
			tt.check(t, m)
		})
	}
}

func TestOverrideLeavesReceiver(t *testing.T) {
	before, _ := Builtin().Lookup("claude-opus-5")
	next, err := Builtin().Override([]byte(`[{"id": "claude-opus-5", "price": {"input": 99}}, {"id": "x-new"}]`))
	require.NoError(t, err)
	after, _ := Builtin().Lookup("claude-opus-5")
	require.Equal(t, before, after)
	_, ok := Builtin().Lookup("x-new")
	require.False(t, ok)
	m, _ := next.Lookup("claude-opus-5")
	require.InDelta(t, 99, m.Price.Input, 0)
}

func TestOverrideRejects(t *testing.T) {
	tests := []struct {
		name string
		json string
		want string // substring of the error
	}{
		{"not an array", `{"id": "a"}`, "JSON array"},
		{"bad JSON", `[{"id": "a",}]`, "JSON array"},
		{"unknown field", `[{"id": "claude-opus-5", "contextwindow": 5}]`, `entry 0 ("claude-opus-5"): json: unknown field "contextwindow"`},
		{"unknown price field", `[{"id": "a", "price": {"inptu": 1}}]`, `entry 0 ("a")`},
		{"missing id", `[{"context_window": 5}]`, "entry 0: id is required"},
		{"null entry", `[{"id": "a"}, null]`, "entry 1"},
		{"negative window", `[{"id": "a"}, {"id": "b", "context_window": -1}]`, `entry 1 ("b"): context_window -1: must not be negative`},
		{"zero output", `[{"id": "b", "max_output_tokens": 0}]`, "max_output_tokens: must be positive"},
		{"negative min cacheable", `[{"id": "b", "min_cacheable_tokens": -4}]`, "min_cacheable_tokens -4"},
		{"negative price", `[{"id": "claude-opus-5", "price": {"cache_read": -0.5}}]`, `entry 0 ("claude-opus-5"): price.cache_read -0.5: must not be negative`},
		{"negative long price", `[{"id": "b", "long_prompt_price": {"input": -1}}]`, "long_prompt_price.input"},
		{"negative fast price", `[{"id": "b", "fast_price": {"output": -1}}]`, "fast_price.output"},
		{"negative threshold", `[{"id": "b", "long_prompt_threshold": -1}]`, "long_prompt_threshold -1"},
		{"bad thinking", `[{"id": "b", "thinking": "budget"}]`, `entry 0 ("b"): thinking "budget"`},
		{"output above window", `[{"id": "claude-haiku-4-5", "max_output_tokens": 300000}]`, "above context_window"},
		{"wrong type", `[{"id": "b", "effort": "yes"}]`, `entry 0 ("b")`},
		{"same model twice", `[{"id": "claude-opus-5"}, {"id": "CLAUDE-OPUS-5"}]`, "also entry 0"},
		{"same model by two spellings", `[{"id": "claude-sonnet-4-5"}, {"id": "claude-sonnet-4-5-20250929"}]`, "also entry 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Builtin().Override([]byte(tt.json))
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}
