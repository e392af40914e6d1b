package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLookupSpellings(t *testing.T) {
	tests := []struct {
		id   string
		want string // canonical id; "" when the id must not be found
	}{
		{"claude-sonnet-4-5", "claude-sonnet-4-5"},
		{"CLAUDE-Sonnet-4-5 ", "claude-sonnet-4-5"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"claude-haiku-4-5-20251001", "claude-haiku-4-5"},
		{"claude-opus-4-5-20251101", "claude-opus-4-5"},
		{"claude-opus-4-20250514", "claude-opus-4-0"},
		{"claude-sonnet-4-20250514", "claude-sonnet-4-0"},
		{"claude-opus-4-0", "claude-opus-4-0"},
		{"claude-3-7-sonnet-latest", "claude-3-7-sonnet"},
		{"claude-3-7-sonnet-20250219", "claude-3-7-sonnet"},
		{"claude-3-5-haiku-latest", "claude-3-5-haiku"},
		{"claude-3-haiku-20240307", "claude-3-haiku"},
		{"claude-opus-5", "claude-opus-5"},
		{"claude-opus-5-5", "claude-opus-5-5"},
		{"claude-opus-4-6[1m]", "claude-opus-4-6"},
		// Amazon Bedrock: model ids, versions, region and global inference profiles, ARNs.
		{"anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"},
		{"eu.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"},
		{"global.anthropic.claude-opus-4-6-v1", "claude-opus-4-6"},
		{"apac.anthropic.claude-3-haiku-20240307-v1:0", "claude-3-haiku"},
		{"anthropic.claude-opus-4-20250514-v1:0", "claude-opus-4-0"},
		{"anthropic.claude-haiku-5-5", "claude-haiku-5-5"},
		{"arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-6", "claude-sonnet-4-6"},
		// Google Vertex AI.
		{"claude-sonnet-4-5@20250929", "claude-sonnet-4-5"},
		{"claude-opus-4@20250514", "claude-opus-4-0"},
		{"claude-3-5-haiku@20241022", "claude-3-5-haiku"},
		{"claude-opus-4-6@default", "claude-opus-4-6"},
		// Unknown ids and near misses stay unknown rather than landing on a neighbour.
		{"claude-sonnet-9", ""},
		{"gpt-4o", ""},
		{"claude-opus", ""},
		{"claude-opus-4-55", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			m, ok := Builtin().Lookup(tt.id)
			if tt.want == "" {
				require.False(t, ok, "found %q", m.ID)
				return
			}
			require.True(t, ok)
			require.Equal(t, tt.want, m.ID)
		})
	}
}

func TestBuiltinEntries(t *testing.T) {
	tests := []struct {
		id   string
		want Model
	}{
		{"claude-opus-5", Model{
			ID: "claude-opus-5", MidConversationSystem: true, ContextWindow: 1_000_000, MaxOutputTokens: 128_000, MinCacheableTokens: 512,
			Thinking: ThinkingAdaptive, Effort: true, FastMode: true,
			Price:     Price{Input: 5, Output: 25, CacheWrite5m: 6.25, CacheWrite1h: 10, CacheRead: 0.5},
			FastPrice: Price{Input: 10, Output: 50, CacheWrite5m: 12.5, CacheWrite1h: 20, CacheRead: 1},
		}},
		{"claude-sonnet-4-5", Model{
			ID: "claude-sonnet-4-5", ContextWindow: 200_000, MaxOutputTokens: 64_000, MinCacheableTokens: 1024,
			Thinking: ThinkingEnabled,
			Price:    Price{Input: 3, Output: 15, CacheWrite5m: 3.75, CacheWrite1h: 6, CacheRead: 0.3},
		}},
		{"claude-haiku-4-5", Model{
			ID: "claude-haiku-4-5", ContextWindow: 200_000, MaxOutputTokens: 64_000, MinCacheableTokens: 4096,
			Thinking: ThinkingEnabled,
			Price:    Price{Input: 1, Output: 5, CacheWrite5m: 1.25, CacheWrite1h: 2, CacheRead: 0.1},
		}},
		{"claude-3-haiku", Model{
			ID: "claude-3-haiku", ContextWindow: 200_000, MaxOutputTokens: 4096, MinCacheableTokens: 2048,
			Price: Price{Input: 0.25, Output: 1.25, CacheWrite5m: 0.3, CacheWrite1h: 0.5, CacheRead: 0.03},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			m, ok := Builtin().Lookup(tt.id)
			require.True(t, ok)
			require.Equal(t, tt.want, m)
		})
	}
}

// Every built-in entry is internally consistent, so a typo in the table fails here.
func TestBuiltinSane(t *testing.T) {
	ids := Builtin().IDs()
	require.GreaterOrEqual(t, len(ids), 20)
	for _, id := range ids {
		m, ok := Builtin().Lookup(id)
		require.True(t, ok, id)
		require.Equal(t, id, m.ID)
		require.Positive(t, m.ContextWindow, id)
		require.Positive(t, m.MaxOutputTokens, id)
		require.LessOrEqual(t, m.MaxOutputTokens, m.ContextWindow, id)
		require.Positive(t, m.MinCacheableTokens, id)
		require.True(t, m.Thinking.valid(), id)
		p := m.Price
		require.Positive(t, p.Input, id)
		require.Greater(t, p.Output, p.Input, id)
		require.Greater(t, p.CacheWrite5m, p.Input, id)
		require.Greater(t, p.CacheWrite1h, p.CacheWrite5m, id)
		require.Less(t, p.CacheRead, p.Input, id)
		if m.FastPrice != (Price{}) {
			require.True(t, m.FastMode, "%s: a fast price without fast mode", id)
			require.Greater(t, m.FastPrice.Input, p.Input, id)
		}
		if m.Thinking == ThinkingNone {
			require.False(t, m.Effort, "%s: effort without thinking", id)
		}
	}
}

func TestResolve(t *testing.T) {
	known := Builtin().Resolve("claude-sonnet-4-5-20250929")
	require.Equal(t, "claude-sonnet-4-5", known.ID)

	unknown := Builtin().Resolve("claude-future-9")
	require.Equal(t, Model{
		ID:                 "claude-future-9",
		ContextWindow:      200_000,
		MaxOutputTokens:    8192,
		MinCacheableTokens: 4096,
	}, unknown)
	require.True(t, unknown.Cost(Usage{InputTokens: 1_000_000}).IsZero(), "an unknown model's price is not guessed")
}
