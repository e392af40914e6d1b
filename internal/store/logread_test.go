//go:build integration

package store

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLogReadScansOnlyItsRange: a step's log reads (the turn's window, the conversation after
// its cached part) examine the rows they return and no others, however long the session and
// whichever plan PostgreSQL picks for the prepared statement. The plan is forced generic (what
// a pooled connection uses after five runs) and, in turn, kept from its bitmap and its plain
// index scans; with `from OR processed_at IS NULL` in one scan, the plain index scan read the
// whole session and filtered it row by row.
func TestLogReadScansOnlyItsRange(t *testing.T) {
	f := newFixture(t)
	sid := f.newSession(t)
	ctx := context.Background()
	const n = 3000
	// A long log: seq 10 is still queued, the turn starts at 2,990.
	_, err := f.st.pool.Exec(ctx, `INSERT INTO events (session_id, seq, id, type, body, processed_at, created_at)
		SELECT $1, g, 'sevt_plan' || g, 'agent.message', '{}'::jsonb, CASE WHEN g = 10 THEN NULL ELSE now() END, now()
		FROM generate_series(1, $2::int) g`, sid, n)
	require.NoError(t, err)
	_, err = f.st.pool.Exec(ctx, `UPDATE sessions SET last_seq = $2, turn_start_seq = $3 WHERE id = $1`, sid, n, n-10)
	require.NoError(t, err)
	_, err = f.st.pool.Exec(ctx, `ANALYZE events`)
	require.NoError(t, err)

	turn, err := f.st.CurrentTurn(ctx, sid)
	require.NoError(t, err)
	require.Equal(t, append([]int64{10}, seqRange(n-10, n)...), seqsOf(turn.Events), "the window and the queued event")
	since, err := f.st.ConversationSince(ctx, sid, n-5)
	require.NoError(t, err)
	require.Equal(t, append([]int64{10}, seqRange(n-4, n)...), seqsOf(since.Events), "after the cached part and the queued event")

	reads := []struct {
		name     string
		sql      string
		args     string
		returned int
	}{
		{"turn window", logReadSQL(turnFrom), fmt.Sprintf("('%s')", sid), 12},
		{"conversation since", logReadSQL(conversationSince), fmt.Sprintf("('%s', %d)", sid, n-5), 6},
	}
	plans := []struct{ name, set string }{
		{"generic plan", ``},
		{"generic plan without bitmap scans", `SET enable_bitmapscan = off`},
		{"generic plan without plain index scans", `SET enable_indexscan = off`},
	}
	for _, read := range reads {
		for _, plan := range plans {
			t.Run(read.name+", "+plan.name, func(t *testing.T) {
				pooled, err := f.st.pool.Acquire(ctx)
				require.NoError(t, err)
				// The settings stay with the connection: it must not go back to the pool.
				conn := pooled.Hijack()
				defer conn.Close(ctx) //nolint:errcheck
				for _, stmt := range []string{`SET plan_cache_mode = force_generic_plan`, plan.set, `PREPARE logread AS ` + read.sql} {
					if stmt != "" {
						_, err := conn.Exec(ctx, stmt)
						require.NoError(t, err, stmt)
					}
				}
				var out []byte
				require.NoError(t, conn.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE logread`+read.args).Scan(&out))
				var explained []struct{ Plan planNode }
				require.NoError(t, json.Unmarshal(out, &explained))
				examined := explained[0].Plan.eventRowsExamined()
				require.LessOrEqual(t, examined, float64(read.returned+5), "rows of events examined to return %d; plan: %s", read.returned, out)
			})
		}
	}
}

// planNode is the part of EXPLAIN's JSON that counts the rows a scan looked at.
type planNode struct {
	Relation       string     `json:"Relation Name"`
	ActualRows     float64    `json:"Actual Rows"`
	ActualLoops    float64    `json:"Actual Loops"`
	RemovedFilter  float64    `json:"Rows Removed by Filter"`
	RemovedRecheck float64    `json:"Rows Removed by Index Recheck"`
	Plans          []planNode `json:"Plans"`
}

// eventRowsExamined sums, over the scans of events in the plan, the rows they returned and
// those they read and dropped.
func (p planNode) eventRowsExamined() float64 {
	var n float64
	if p.Relation == "events" {
		n += p.ActualRows*p.ActualLoops + p.RemovedFilter + p.RemovedRecheck
	}
	for _, c := range p.Plans {
		n += c.eventRowsExamined()
	}
	return n
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}
