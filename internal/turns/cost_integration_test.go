//go:build integration

package turns

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/model/catalog"
	"github.com/managed-agents/managed-agents/internal/pgtest"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// newModelEngine is newEngine with a session whose agent runs modelID, priced from models.
func newModelEngine(t testing.TB, modelID string, opts ...Option) engine {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.Migrate(ctx, logger))
	ws, err := st.CreateWorkspace(ctx, "costs")
	require.NoError(t, err)
	agentID, envID, sessionID := ids.New(ids.Agent), ids.New(ids.Environment), ids.New(ids.Session)
	now := time.Now()
	require.NoError(t, st.InsertAgent(ctx, agentID, ws, json.RawMessage(`{"name":"a","model":"m"}`), now))
	require.NoError(t, st.InsertEnvironment(ctx, store.EnvironmentRecord{
		ID: envID, WorkspaceID: ws, Name: "env", Config: json.RawMessage(`{}`), Scope: "workspace", CreatedAt: now}))
	usage, err := json.Marshal(wire.ZeroUsage())
	require.NoError(t, err)
	snapshot, err := json.Marshal(wire.SessionAgent{Name: "helper", Model: wire.Model{ID: modelID, Speed: "standard"}})
	require.NoError(t, err)
	require.NoError(t, st.InsertSession(ctx, store.SessionRecord{
		ID: sessionID, WorkspaceID: ws, AgentID: agentID, AgentVersion: 1, EnvironmentID: envID,
		Agent: snapshot, Status: wire.SessionStatusIdle, Usage: usage, CreatedAt: now}))
	return engine{st: st, svc: New(st, logger, opts...), session: sessionID}
}

// listCosts are the list_cost of the turn's session.usage and of the session row after it.
func (e engine) listCosts(t testing.TB, turn Turn) (event, row wire.Cost) {
	t.Helper()
	u, err := wire.DecodeBody[wire.SessionUsageBody](lastOfType(t, turn.History, wire.EventSessionUsage))
	require.NoError(t, err)
	rec, err := e.st.GetSessionByID(context.Background(), e.session)
	require.NoError(t, err)
	var stored wire.Usage
	require.NoError(t, json.Unmarshal(rec.Usage, &stored))
	require.Equal(t, u.Usage, stored, "the session's usage is the latest session.usage's")
	return u.Usage.ListCost, stored.ListCost
}

// Turns each costing a fraction of a cent add up exactly: Claude 3 Haiku's $0.25 per million
// input tokens and $1.25 per million output make a turn of 30,000 input tokens and 1 output
// token cost 0.7500125 cents. Rounded per turn, three turns would show 3 cents; kept exact,
// they cost 2.25 cents, shown as 2.
func TestListCostAccumulatesExactlyAcrossTurns(t *testing.T) {
	t.Parallel()
	e := newModelEngine(t, "claude-3-haiku-20240307")
	want := []string{"1", "2", "2", "3"} // 0.75, 1.50, 2.25, 3.00 cents (plus 1.25e-5 each)
	for i, w := range want {
		event, row := e.listCosts(t, e.turn(t, 30_000, 0))
		require.Equal(t, wire.Cost{Amount: w, Currency: "USD"}, event, "turn %d", i+1)
		require.Equal(t, event, row)
	}
}

// The price comes from the catalog the engine was given: an override re-prices the model.
func TestListCostUsesTheEnginesCatalog(t *testing.T) {
	t.Parallel()
	models, err := catalog.Builtin().Override([]byte(`[{"id": "claude-opus-5", "price": {"input": 1000, "output": 0}}]`))
	require.NoError(t, err)
	e := newModelEngine(t, "claude-opus-5", WithModelCatalog(models))
	// 1,500 input tokens at $1000/MTok: $1.50.
	event, row := e.listCosts(t, e.turn(t, 1500, 0))
	require.Equal(t, wire.Cost{Amount: "150", Currency: "USD"}, event)
	require.Equal(t, event, row)
}

// A session on a model the catalog does not know is not priced (list_cost stays 0) but still
// counts its tokens.
func TestListCostOfAnUnknownModelIsZero(t *testing.T) {
	t.Parallel()
	e := newModelEngine(t, "somebody-elses-model")
	turn := e.turn(t, 5_000_000, 0)
	event, _ := e.listCosts(t, turn)
	require.Equal(t, wire.Cost{Amount: "0", Currency: "USD"}, event)
	u, err := wire.DecodeBody[wire.SessionUsageBody](lastOfType(t, turn.History, wire.EventSessionUsage))
	require.NoError(t, err)
	require.EqualValues(t, 5_000_000, u.Usage.InputTokens)
}
