//go:build integration

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
)

// rates are list prices in nano-dollars per token (a dollar per million tokens is 1000).
type rates struct{ input, output, cacheWrite5m, cacheRead int64 }

// opus5 is Claude Opus 5 on the pricing page (read 2026-12-07): $5 input, $25 output, $6.25
// 5-minute cache writes, $0.50 cache reads per million tokens. Written out here rather than
// read from the catalog, so a wrong table entry fails this test.
var opus5 = rates{input: 5000, output: 25_000, cacheWrite5m: 6250, cacheRead: 500}

// spansCost is the cost in nano-dollars of every span.model_request_end in evs at r.
func spansCost(t *testing.T, evs []anthropic.BetaManagedAgentsStreamSessionEventsUnion, r rates) (nano int64, requests int) {
	t.Helper()
	for _, ev := range evs {
		if ev.Type != "span.model_request_end" {
			continue
		}
		u := fieldsOf(t, ev)["model_usage"].(map[string]any)
		n := func(k string) int64 { return int64(u[k].(float64)) }
		nano += n("input_tokens")*r.input + n("output_tokens")*r.output +
			n("cache_creation_input_tokens")*r.cacheWrite5m + n("cache_read_input_tokens")*r.cacheRead
		requests++
	}
	return nano, requests
}

// wholeCents is the API's integer-cent string of nano-dollars, halves rounded up.
func wholeCents(nano int64) string { return strconv.FormatInt((nano+5_000_000)/10_000_000, 10) }

// listCosts are list_cost of the turn's session.usage and of the session read afterwards.
func (f *turnFixture) listCosts(evs []anthropic.BetaManagedAgentsStreamSessionEventsUnion) (event, session map[string]any) {
	f.t.Helper()
	event = fieldsOf(f.t, find(f.t, evs, "session.usage"))["usage"].(map[string]any)["list_cost"].(map[string]any)
	sess, err := f.e.client.Beta.Sessions.Get(context.Background(), f.sessionID, anthropic.BetaSessionGetParams{})
	require.NoError(f.t, err)
	session = objectOf(f.t, sess.RawJSON())["usage"].(map[string]any)["list_cost"].(map[string]any)
	return event, session
}

// The fake model's usage is deterministic (docs/fake-model.md), so the session's list_cost is
// the Opus 5 list price of exactly what its spans recorded, summed across turns, on the
// session.usage event and on GET session alike.
func TestListCostIsTheListPriceOfTheRecordedUsage(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t) // the agent runs claude-opus-5
	// About 10,000 input and output tokens a turn: cents, not fractions of one.
	long := strings.Repeat("forty characters of words, repeated.... ", 1000)

	var total int64
	for turn := 1; turn <= 2; turn++ {
		f.send(userMessage(long))
		evs := f.untilIdle()
		nano, requests := spansCost(t, evs, opus5)
		require.Equal(t, 1, requests)
		total += nano
		event, session := f.listCosts(evs)
		want := map[string]any{"amount": wholeCents(total), "currency": "USD"}
		require.Equal(t, want, event, "turn %d: %d nano-dollars", turn, total)
		require.Equal(t, event, session, "the session shows its latest session.usage")
		require.NotEqual(t, "0", event["amount"])
		t.Logf("turn %d: %d nano-dollars, list_cost %v cents", turn, total, event["amount"])
	}
}

// MANAGED_AGENT_MODEL_CATALOG reaches the worker: an override of Opus 5's prices is what the
// session is charged.
func TestListCostFollowsTheModelCatalogOverride(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "models.json")
	// $100 per million input tokens and $1000 per million output tokens; cache prices kept.
	require.NoError(t, os.WriteFile(path, []byte(`[{"id": "claude-opus-5", "price": {"input": 100, "output": 1000}}]`), 0o600))
	e := newRunningEnv(t, func(c *app.Config) { c.ModelCatalog = path })
	f := newTurnFixtureIn(t, e)
	f.send(userMessage("hello there"))
	evs := f.untilIdle()
	nano, requests := spansCost(t, evs, rates{input: 100_000, output: 1_000_000, cacheWrite5m: opus5.cacheWrite5m, cacheRead: opus5.cacheRead})
	require.Equal(t, 1, requests)
	event, session := f.listCosts(evs)
	require.Equal(t, map[string]any{"amount": wholeCents(nano), "currency": "USD"}, event)
	require.Equal(t, event, session)
	require.NotEqual(t, "0", event["amount"], "at these prices a short turn costs cents")
}
