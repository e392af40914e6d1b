package catalog

import (
	"math"
	"strconv"
)

// Usage is the token accounting of one model request, split the way the price list splits it.
// Cache writes are split by lifetime because the 1-hour lifetime costs more than the 5-minute one.
type Usage struct {
	InputTokens        int64
	OutputTokens       int64
	CacheWrite5mTokens int64
	CacheWrite1hTokens int64
	CacheReadTokens    int64
	// Fast says the request was served at speed "fast" (the response's usage.speed).
	Fast bool
}

// PromptTokens is every token of the request's prompt: uncached input, cache writes and cache
// reads. Long-prompt price tiers are decided on this sum.
func (u Usage) PromptTokens() int64 {
	return u.InputTokens + u.CacheWrite5mTokens + u.CacheWrite1hTokens + u.CacheReadTokens
}

// Cents is an amount of US money kept exactly, in nano-dollars (1e-9 USD; 1 cent is 1e7).
//
// Why not whole cents: one small request (a few hundred tokens of a cheap model) costs a
// fraction of a cent, so rounding each request to cents would price a long session of them
// at zero. Every documented list price has at most three decimals of a dollar per million
// tokens ($0.125/MTok is 125 nano-dollars per token), so nano-dollars hold every
// per-token price, and every sum of them, without error. An int64 of nano-dollars overflows
// only past nine billion dollars. Round only when showing the amount ([Cents.String]).
type Cents struct{ nano int64 }

// NanoDollars makes an amount from nano-dollars (what [Cents.NanoDollars] returns; for storage).
func NanoDollars(n int64) Cents { return Cents{nano: n} }

// NanoDollars is the exact amount in nano-dollars.
func (c Cents) NanoDollars() int64 { return c.nano }

// Add is the exact sum of two amounts.
func (c Cents) Add(o Cents) Cents { return Cents{nano: c.nano + o.nano} }

// IsZero reports whether the amount is exactly zero.
func (c Cents) IsZero() bool { return c.nano == 0 }

// nanoPerCent is how many nano-dollars make one cent.
const nanoPerCent = 10_000_000

// WholeCents is the amount rounded to the nearest cent, halves away from zero: the API's
// integer-cent display.
func (c Cents) WholeCents() int64 {
	q, r := c.nano/nanoPerCent, c.nano%nanoPerCent
	switch {
	case r >= nanoPerCent/2:
		q++
	case r <= -nanoPerCent/2:
		q--
	}
	return q
}

// String is the integer number of cents as the API shows it in list_cost.amount ("0", "12").
func (c Cents) String() string { return strconv.FormatInt(c.WholeCents(), 10) }

// Float is the amount in cents, fractions kept, for logs and metrics (not for summing).
func (c Cents) Float() float64 { return float64(c.nano) / nanoPerCent }

// Cost is the list price of one request's usage on this model.
//
// Price it per request and sum the results: a model with a long-prompt tier
// (Model.LongPromptThreshold) bills a whole request at the tier's rates when that request's
// prompt is over the threshold, which a sum of many requests' usage cannot tell.
func (m Model) Cost(u Usage) Cents {
	p := m.Price
	switch {
	case u.Fast && m.FastPrice != (Price{}):
		p = m.FastPrice
	case m.LongPromptThreshold > 0 && u.PromptTokens() > m.LongPromptThreshold:
		p = m.LongPromptPrice
	}
	return Cents{nano: tokensCost(u.InputTokens, p.Input) +
		tokensCost(u.OutputTokens, p.Output) +
		tokensCost(u.CacheWrite5mTokens, p.CacheWrite5m) +
		tokensCost(u.CacheWrite1hTokens, p.CacheWrite1h) +
		tokensCost(u.CacheReadTokens, p.CacheRead)}
}

// tokensCost is the cost in nano-dollars of n tokens at dollarsPerMTok: a dollar per million
// tokens is a thousand nano-dollars per token. The product is rounded once, per request and
// price, to a whole nano-dollar (a ten-millionth of a cent), which is exact for every price
// with at most three decimals (all documented ones) and negligible for an override with more.
func tokensCost(n int64, dollarsPerMTok float64) int64 {
	if n <= 0 || dollarsPerMTok <= 0 {
		return 0
	}
	return int64(math.Round(float64(n) * dollarsPerMTok * 1000))
}
