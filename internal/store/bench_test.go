//go:build integration

package store

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// benchBody is the size of a short text message event.
var benchBody = json.RawMessage(`{"content":[{"type":"text","text":"The quick brown fox jumps over the lazy dog."}]}`)

func benchEvents(n int) []NewEvent {
	evs := make([]NewEvent, n)
	for i := range evs {
		evs[i] = NewEvent{Type: "agent.message", Body: benchBody, Processed: true}
	}
	return evs
}

// appendInTx appends like the service does: in its own transaction.
func appendInTx(b *testing.B, st *Store, sessionID string, evs []NewEvent) {
	err := st.InTx(b.Context(), func(q *Queries) error {
		_, err := q.AppendEvents(b.Context(), sessionID, evs, time.Now())
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

func reportEventRate(b *testing.B, events int) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkAppendEvents(b *testing.B) {
	f := newFixture(b)
	for _, batch := range []int{1, 10} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			sid := f.newSession(b)
			evs := benchEvents(batch)
			for b.Loop() {
				appendInTx(b, f.st, sid, evs)
			}
			reportEventRate(b, b.N*batch)
		})
	}
}

// Appends to different sessions contend only on the events table, not on a session row.
func BenchmarkAppendEventsParallel(b *testing.B) {
	const sessions = 8
	f := newFixtureOn(b, openStore(b, withPoolSize(migratedURL(b), 2*sessions)))
	sids := make([]string, sessions)
	for i := range sids {
		sids[i] = f.newSession(b)
	}
	b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
		// One goroutine per session whatever GOMAXPROCS is.
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((sessions + procs - 1) / procs)
		var next atomic.Int64
		evs := benchEvents(1)
		b.RunParallel(func(pb *testing.PB) {
			sid := sids[next.Add(1)%sessions]
			for pb.Next() {
				appendInTx(b, f.st, sid, evs)
			}
		})
		reportEventRate(b, b.N)
	})
}

// BenchmarkListEvents reads pages of one long log twice: before the table has statistics
// (the planner guesses the session is small and sorts its whole log for the first page) and
// after ANALYZE (what autovacuum converges to: the index walk stops after one page).
func BenchmarkListEvents(b *testing.B) {
	const logSize, pageSize, chunk = 10_000, 100, 500
	f := newFixture(b)
	sid := f.newSession(b)
	for range logSize / chunk {
		appendInTx(b, f.st, sid, benchEvents(chunk))
	}
	require.Equal(b, logSize, countEvents(b, f.st, sid))
	cases := []struct {
		name string
		p    EventListParams
	}{
		{"first_page", EventListParams{}},
		{"deep_page", EventListParams{AfterSeq: logSize - 10*pageSize}},
		{"first_page_desc", EventListParams{Desc: true}},
		{"types_filter", EventListParams{Types: []string{"agent.message"}, AfterSeq: logSize / 2}},
	}
	for _, stats := range []string{"none", "analyzed"} {
		if stats == "analyzed" {
			_, err := f.st.Pool().Exec(b.Context(), `ANALYZE events`)
			require.NoError(b, err)
		}
		for _, tc := range cases {
			b.Run("stats="+stats+"/"+tc.name, func(b *testing.B) {
				p := tc.p
				p.Limit = pageSize
				for b.Loop() {
					page, _, err := f.st.ListEvents(b.Context(), sid, p)
					if err != nil {
						b.Fatal(err)
					}
					if len(page) != pageSize {
						b.Fatalf("page has %d events, want %d", len(page), pageSize)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/page")
			})
		}
	}
}
