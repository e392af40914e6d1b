package loadtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	t.Parallel()
	require.Equal(t, Summary{}, Summarize(nil))

	// 1..100 ms, shuffled: the nearest rank of p is p ms.
	var samples []time.Duration
	for i := range 100 {
		samples = append(samples, time.Duration((i*37)%100+1)*time.Millisecond)
	}
	got := Summarize(samples)
	require.Equal(t, Summary{Count: 100, Mean: 50.5, P50: 50, P90: 90, P99: 99, Max: 100}, got)
	require.Equal(t, 38*time.Millisecond, samples[1], "Summarize sorts a copy, not the caller's slice")

	one := Summarize([]time.Duration{1500 * time.Microsecond})
	require.Equal(t, Summary{Count: 1, Mean: 1.5, P50: 1.5, P90: 1.5, P99: 1.5, Max: 1.5}, one)

	// Few samples: p99 of 10 is the largest, p50 the 5th.
	ten := Summarize([]time.Duration{10, 9, 8, 7, 6, 5, 4, 3, 2, 1})
	require.InDelta(t, 5e-6, ten.P50, 1e-12)
	require.InDelta(t, 9e-6, ten.P90, 1e-12)
	require.InDelta(t, 10e-6, ten.P99, 1e-12)
}

func TestParseScenarios(t *testing.T) {
	t.Parallel()
	got, err := ParseScenarios("plain, tool,tools3,confirm,custom")
	require.NoError(t, err)
	require.Equal(t, Scenarios, got)
	_, err = ParseScenarios("plain,bogus")
	require.ErrorContains(t, err, `scenario "bogus"`)
	for _, s := range Scenarios {
		require.NotEmpty(t, s.text(), s)
	}
	require.Len(t, Confirm.answer([]string{"sevt_1", "sevt_2"}), 2)
	require.Len(t, Custom.answer([]string{"sevt_1"}), 1)
	require.Empty(t, Tool.answer([]string{"sevt_1"}), "a tool turn never parks: a requires_action is an error")
}
