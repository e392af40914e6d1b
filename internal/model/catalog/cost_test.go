package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCost(t *testing.T) {
	sonnet, _ := Builtin().Lookup("claude-sonnet-4-5")
	haiku55, _ := Builtin().Lookup("claude-haiku-5-5")
	opus5, _ := Builtin().Lookup("claude-opus-5")
	tests := []struct {
		name  string
		model Model
		usage Usage
		nano  int64  // exact cost in nano-dollars
		shown string // whole cents as the API shows them
	}{
		{"nothing", sonnet, Usage{}, 0, "0"},
		// $3/MTok in, $15/MTok out: 1M in + 1M out is $18.
		{"a million each way", sonnet, Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}, 18_000_000_000, "1800"},
		// 1 token in is 3000 nano-dollars: far below a cent but not zero.
		{"one token", sonnet, Usage{InputTokens: 1}, 3000, "0"},
		// Each kind at its own price: 100 in ($3) + 10 out ($15) + 1000 5m writes ($3.75)
		// + 1000 1h writes ($6) + 10000 reads ($0.30) per MTok.
		{"every kind", sonnet, Usage{InputTokens: 100, OutputTokens: 10, CacheWrite5mTokens: 1000, CacheWrite1hTokens: 1000, CacheReadTokens: 10_000},
			100*3000 + 10*15000 + 1000*3750 + 1000*6000 + 10_000*300, "1"},
		// Just over half a cent rounds up for display (5e6 nano-dollars is half a cent).
		{"just over half a cent", sonnet, Usage{OutputTokens: 333, InputTokens: 2}, 333*15000 + 2*3000, "1"},
		{"just under half a cent", sonnet, Usage{OutputTokens: 333}, 333 * 15000, "0"},
		// Haiku 5.5 at $0.125/MTok 5m writes: fractional prices stay exact.
		{"fractional price", haiku55, Usage{CacheWrite5mTokens: 8, CacheReadTokens: 1}, 8*125 + 10, "0"},
		// Over 100k prompt tokens the whole request, output included, moves to the long tier.
		{"long prompt tier", haiku55, Usage{InputTokens: 60_000, CacheReadTokens: 40_001, OutputTokens: 1000},
			60_000*500 + 40_001*50 + 1000*2500, "3"},
		{"at the threshold stays", haiku55, Usage{InputTokens: 60_000, CacheReadTokens: 40_000, OutputTokens: 1000},
			60_000*100 + 40_000*10 + 1000*500, "1"},
		// Fast mode doubles every Opus 5 rate, cache reads included; without Fast, standard.
		{"fast", opus5, Usage{InputTokens: 1000, CacheReadTokens: 1000, OutputTokens: 100, Fast: true},
			1000*10_000 + 1000*1000 + 100*50_000, "2"},
		{"standard", opus5, Usage{InputTokens: 1000, CacheReadTokens: 1000, OutputTokens: 100},
			1000*5000 + 1000*500 + 100*25_000, "1"},
		// A model with no documented premium prices a fast request at standard rates.
		{"fast without a premium", sonnet, Usage{InputTokens: 1, Fast: true}, 3000, "0"},
		{"negative counts cost nothing", sonnet, Usage{InputTokens: -5}, 0, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.model.Cost(tt.usage)
			require.Equal(t, tt.nano, c.NanoDollars())
			require.Equal(t, tt.shown, c.String())
		})
	}
}

// Many calls each far below a cent add up to whole cents: nothing is rounded per call.
func TestCostAccumulates(t *testing.T) {
	haiku, _ := Builtin().Lookup("claude-3-haiku")
	var total Cents
	for range 10_000 {
		// 100 input tokens at $0.25/MTok = $0.000025 = 0.0025 cents each.
		c := haiku.Cost(Usage{InputTokens: 100})
		require.Equal(t, "0", c.String())
		total = total.Add(c)
	}
	require.Equal(t, int64(250_000_000), total.NanoDollars())
	require.Equal(t, "25", total.String())
	require.InDelta(t, 25.0, total.Float(), 1e-9)
}

func TestWholeCents(t *testing.T) {
	tests := []struct {
		nano int64
		want int64
	}{
		{0, 0}, {4_999_999, 0}, {5_000_000, 1}, {14_999_999, 1}, {15_000_000, 2},
		{-4_999_999, 0}, {-5_000_000, -1}, {1_234_567_890_123, 123_457},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, NanoDollars(tt.nano).WholeCents(), tt.nano)
	}
}
