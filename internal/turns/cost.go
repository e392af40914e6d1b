package turns

import (
	"encoding/json"

	"github.com/managed-agents/managed-agents/internal/model/catalog"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// usd is the only currency of list prices.
const usd = "USD"

// baseUsage is what a turn window keeps as the session's usage before the turn: the wire
// usage, plus its list cost exactly. The wire shows list_cost in whole cents; carrying that
// rounded figure from turn to turn would drop every turn's fraction of a cent, so a session
// of many cheap turns would never cost anything. The window is the worker's own column,
// never shown to a client, so the exact figure can ride along with the usage there.
type baseUsage struct {
	wire.Usage
	// ListCostNanoUSD is the exact list cost in nano-dollars (catalog.Cents); absent from
	// windows written before it was kept.
	ListCostNanoUSD *int64 `json:"list_cost_nano_usd,omitempty"`
}

// decodeBaseUsage reads a turn window's base usage (empty: zero) and its exact list cost. A
// window written before the cost was kept has its tokens priced at m as one lump: the best
// that can be done without the requests, and exact but for a long-prompt tier.
func decodeBaseUsage(raw json.RawMessage, m catalog.Model) (wire.Usage, catalog.Cents, error) {
	b := baseUsage{Usage: wire.ZeroUsage()}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &b); err != nil {
			return wire.Usage{}, catalog.Cents{}, err
		}
	}
	if b.ListCostNanoUSD != nil {
		return b.Usage, catalog.NanoDollars(*b.ListCostNanoUSD), nil
	}
	return b.Usage, m.Cost(catalog.Usage{
		InputTokens:        b.InputTokens,
		OutputTokens:       b.OutputTokens,
		CacheWrite5mTokens: b.CacheCreation.Ephemeral5mInputTokens,
		CacheWrite1hTokens: b.CacheCreation.Ephemeral1hInputTokens,
		CacheReadTokens:    b.CacheReadInputTokens,
	}), nil
}

// encodeBaseUsage is the window's base usage: u with its exact list cost.
func encodeBaseUsage(u wire.Usage, cost catalog.Cents) (json.RawMessage, error) {
	n := cost.NanoDollars()
	return wire.EncodeBody("usage", baseUsage{Usage: u, ListCostNanoUSD: &n})
}

// requestsCost is the list cost at m of every model request whose span.model_request_end is
// in spans, each request priced on its own (a long-prompt tier applies per request).
func requestsCost(m catalog.Model, spans []wire.Event) (catalog.Cents, error) {
	var total catalog.Cents
	for _, ev := range spans {
		if ev.Type != wire.EventSpanModelRequestEnd {
			continue
		}
		b, err := wire.DecodeBody[wire.SpanModelRequestEndBody](ev)
		if err != nil {
			return catalog.Cents{}, err
		}
		total = total.Add(m.Cost(requestUsage(b.ModelUsage)))
	}
	return total, nil
}

// requestUsage is one request's usage as the price list splits it. Our requests ask for the
// 5-minute cache lifetime, so every cache write is priced as one (session usage counts them
// as ephemeral_5m too).
func requestUsage(u wire.ModelUsage) catalog.Usage {
	return catalog.Usage{
		InputTokens:        u.InputTokens,
		OutputTokens:       u.OutputTokens,
		CacheWrite5mTokens: u.CacheCreationInputTokens,
		CacheReadTokens:    u.CacheReadInputTokens,
		Fast:               u.Speed != nil && *u.Speed == "fast",
	}
}

// wireCost is an exact cost as the API shows it: whole cents, in dollars' currency.
func wireCost(c catalog.Cents) wire.Cost { return wire.Cost{Amount: c.String(), Currency: usd} }

// sessionModel is the catalog entry that prices a session's requests: its agent's model
// (a conservative, unpriced default for a model the catalog does not know).
func (s *Service) sessionModel(a wire.SessionAgent) catalog.Model {
	return s.models.Resolve(a.Model.ID)
}
