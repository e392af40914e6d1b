package turns

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model/catalog"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func modelOf(t *testing.T, id string) catalog.Model {
	t.Helper()
	m, ok := catalog.Builtin().Lookup(id)
	require.True(t, ok, id)
	return m
}

// spanEnd is a span.model_request_end reporting u.
func spanEnd(t *testing.T, u wire.ModelUsage) wire.Event {
	t.Helper()
	raw, err := wire.EncodeBody(wire.EventSpanModelRequestEnd, wire.SpanModelRequestEndBody{ModelUsage: u})
	require.NoError(t, err)
	return wire.Event{ID: "sevt_x", Type: wire.EventSpanModelRequestEnd, Body: raw}
}

func TestRequestsCost(t *testing.T) {
	fast := "fast"
	standard := "standard"
	message, err := wire.EncodeBody(wire.EventAgentMessage, wire.AgentMessageBody{Content: wire.NewTextBlocks("hi")})
	require.NoError(t, err)
	tests := []struct {
		name  string
		model string
		spans []wire.ModelUsage
		nano  int64
	}{
		{"none", "claude-opus-5", nil, 0},
		// Opus 5: $5 in, $25 out, $6.25 5m writes, $0.50 reads per MTok; a cache write is
		// priced as a 5-minute one.
		{"every kind", "claude-opus-5", []wire.ModelUsage{{InputTokens: 10, OutputTokens: 2, CacheCreationInputTokens: 100, CacheReadInputTokens: 1000}},
			10*5000 + 2*25_000 + 100*6250 + 1000*500},
		{"summed over requests", "claude-opus-5", []wire.ModelUsage{{InputTokens: 10}, {InputTokens: 20, OutputTokens: 1}},
			30*5000 + 25_000},
		// Fast mode doubles Opus 5's rates for the request that ran fast only.
		{"fast request", "claude-opus-5", []wire.ModelUsage{{InputTokens: 10, Speed: &fast}, {InputTokens: 10, Speed: &standard}},
			10*10_000 + 10*5000},
		// Haiku 5.5's long-prompt tier is decided per request: two 60k-token prompts stay
		// in the low tier, although their sum is over 100k.
		{"tier per request", "claude-haiku-5-5", []wire.ModelUsage{{InputTokens: 60_000}, {InputTokens: 60_000}},
			120_000 * 100},
		{"long request", "claude-haiku-5-5", []wire.ModelUsage{{InputTokens: 60_000, CacheReadInputTokens: 60_000}},
			60_000*500 + 60_000*50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := []wire.Event{{Type: wire.EventAgentMessage, Body: message}}
			for _, u := range tt.spans {
				evs = append(evs, spanEnd(t, u))
			}
			got, err := requestsCost(modelOf(t, tt.model), evs)
			require.NoError(t, err)
			require.Equal(t, tt.nano, got.NanoDollars())
		})
	}

	_, err = requestsCost(modelOf(t, "claude-opus-5"), []wire.Event{{ID: "sevt_bad", Type: wire.EventSpanModelRequestEnd, Body: json.RawMessage(`{"model_usage":1}`)}})
	require.ErrorContains(t, err, "sevt_bad")
}

// The window keeps the cost exactly across turns: fractions of a cent are not lost.
func TestBaseUsageKeepsTheExactCost(t *testing.T) {
	opus := modelOf(t, "claude-opus-5")
	u := wire.ZeroUsage()
	u.InputTokens = 7
	u.ListCost = wireCost(catalog.NanoDollars(4_999_999))
	raw, err := encodeBaseUsage(u, catalog.NanoDollars(4_999_999))
	require.NoError(t, err)

	got, cost, err := decodeBaseUsage(raw, opus)
	require.NoError(t, err)
	require.Equal(t, u, got)
	require.Equal(t, int64(4_999_999), cost.NanoDollars(), "not the whole cents of list_cost")
	require.Equal(t, "0", got.ListCost.Amount)
	require.Equal(t, "USD", got.ListCost.Currency)
}

func TestBaseUsageOfAnOlderWindow(t *testing.T) {
	opus := modelOf(t, "claude-opus-5")
	// No window yet: zero usage, zero cost.
	got, cost, err := decodeBaseUsage(nil, opus)
	require.NoError(t, err)
	require.Equal(t, wire.ZeroUsage(), got)
	require.True(t, cost.IsZero())

	// A window written before costs were kept: its tokens are priced as one lump.
	raw := json.RawMessage(`{"input_tokens":1000,"output_tokens":100,"cache_read_input_tokens":10,
		"cache_creation":{"ephemeral_5m_input_tokens":20,"ephemeral_1h_input_tokens":30},
		"list_cost":{"amount":"0","currency":"USD"}}`)
	got, cost, err = decodeBaseUsage(raw, opus)
	require.NoError(t, err)
	require.EqualValues(t, 1000, got.InputTokens)
	require.Equal(t, int64(1000*5000+100*25_000+10*500+20*6250+30*10_000), cost.NanoDollars())

	_, _, err = decodeBaseUsage(json.RawMessage(`{"input_tokens":"x"}`), opus)
	require.Error(t, err)
}

func TestSessionModelPricesTheAgentsModel(t *testing.T) {
	s := New(nil, nil)
	require.Equal(t, "claude-opus-5", s.sessionModel(wire.SessionAgent{Model: wire.Model{ID: "claude-opus-5"}}).ID)
	unknown := s.sessionModel(wire.SessionAgent{Model: wire.Model{ID: "my-model"}})
	require.Equal(t, "my-model", unknown.ID)
	require.True(t, unknown.Cost(catalog.Usage{InputTokens: 1_000_000}).IsZero())

	priced, err := catalog.Builtin().Override([]byte(`[{"id": "my-model", "price": {"input": 2}}]`))
	require.NoError(t, err)
	s = New(nil, nil, WithModelCatalog(priced), WithModelCatalog(nil))
	require.Equal(t, int64(2000), s.sessionModel(wire.SessionAgent{Model: wire.Model{ID: "my-model"}}).Cost(catalog.Usage{InputTokens: 1}).NanoDollars())
}
