package loadtest

import (
	"slices"
	"time"
)

// Summary is a distribution of durations in milliseconds, the way the report prints it.
type Summary struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Summarize sorts a copy of samples and reads the nearest-rank percentiles from it.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{
		Count: len(s),
		Mean:  ms(sum / time.Duration(len(s))),
		P50:   ms(percentile(s, 50)),
		P90:   ms(percentile(s, 90)),
		P99:   ms(percentile(s, 99)),
		Max:   ms(s[len(s)-1]),
	}
}

// percentile is the nearest-rank percentile p (0 < p ≤ 100) of sorted, which is not empty:
// the smallest sample that at least p % of the samples do not exceed.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
