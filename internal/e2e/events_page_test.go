//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"
)

// pageByteBound is the API's byte bound on an events page (httpapi.maxEventsPageBytes).
const pageByteBound = 4 << 20

// bigLog fills session sid with sizes[i]-byte user messages and returns the ids of its
// events in log order.
func bigLog(t testing.TB, e *env, sid string, sizes []int) []string {
	t.Helper()
	var ids []string
	for i, n := range sizes {
		text := fmt.Sprintf("%03d", i) + strings.Repeat("x", n-3)
		res, err := e.client.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage(text)}})
		require.NoError(t, err)
		ids = append(ids, res.Data[0].ID)
	}
	return ids
}

// A page is bounded by bytes as well as by count: with multi-MB messages, limit=1000 comes
// back in pages of a few events, each with a next_page while events remain, and walking
// next_page to the end sees every event once, in order, through raw HTTP and the SDK.
func TestEventsPageByteBound(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	const mb = 1 << 20
	sizes := []int{3 * mb, 10, 3 * mb, 3 * mb, 20, 30, 5 * mb, 3 * mb, 40}
	sid := f.newSession(t, anthropic.BetaSessionNewParams{}).ID
	want := bigLog(t, f.env, sid, sizes)

	// Raw HTTP: every page but the last stops short of the limit once past the bound.
	var got []string
	pages := 0
	cursor := ""
	for {
		path := "/v1/sessions/" + sid + "/events?limit=1000"
		if cursor != "" {
			path += "&page=" + url.QueryEscape(cursor)
		}
		resp, body := f.raw(http.MethodGet, path, "")
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		var page struct {
			Data     []json.RawMessage `json:"data"`
			NextPage string            `json:"next_page"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &page))
		require.NotEmpty(t, page.Data, "every page makes progress")
		last := len(page.Data[len(page.Data)-1])
		require.LessOrEqual(t, len(body), pageByteBound+last+1024, "a page passes the bound by at most its last event")
		for _, raw := range page.Data {
			var ev struct{ ID string }
			require.NoError(t, json.Unmarshal(raw, &ev))
			got = append(got, ev.ID)
		}
		pages++
		if page.NextPage == "" {
			break
		}
		require.Less(t, len(page.Data), 1000)
		cursor = page.NextPage
	}
	require.Equal(t, want, got)
	require.Equal(t, 3, pages, "3 MB, small, 3 MB | 3 MB, small, small, 5 MB | 3 MB, small")

	// The official SDK's auto-pager follows the same cursors.
	var walked []string
	iter := f.client.Beta.Sessions.Events.ListAutoPaging(context.Background(), sid, anthropic.BetaSessionEventListParams{Limit: param.NewOpt(int64(1000))})
	for iter.Next() {
		walked = append(walked, iter.Current().ID)
	}
	require.NoError(t, iter.Err())
	require.Equal(t, want, walked)
}

// BenchmarkEventsListMemory measures the server's peak heap growth while it answers
// GET /v1/sessions/{id}/events?limit=1000 on a session of four 21 MB messages (86 MB of
// log, the case), one request and four at once. The API runs in process, so the
// heap measured is the server's (the client discards the body through a small buffer).
//
//	go test -tags integration -run '^$' -bench EventsListMemory -benchtime=3x ./internal/e2e/
func BenchmarkEventsListMemory(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	ag, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "list-memory", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}})
	require.NoError(b, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "list-memory"})
	require.NoError(b, err)
	sess, err := e.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(ag.ID)}, EnvironmentID: envr.ID})
	require.NoError(b, err)
	sid := sess.ID
	bigLog(b, e, sid, []int{21 << 20, 21 << 20, 21 << 20, 21 << 20})
	for _, concurrent := range []int{1, 4} {
		b.Run(fmt.Sprintf("concurrent=%d", concurrent), func(b *testing.B) {
			var peak uint64
			for b.Loop() {
				peak = max(peak, peakHeapGrowth(func() {
					var wg sync.WaitGroup
					for range concurrent {
						wg.Go(func() { readAllPages(b, e, sid) })
					}
					wg.Wait()
				}))
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}

// readAllPages walks the events list with limit=1000 to its end, discarding bodies.
func readAllPages(b testing.TB, e *env, sid string) {
	cursor := ""
	for {
		u := e.srv.URL + "/v1/sessions/" + sid + "/events?limit=1000"
		if cursor != "" {
			u += "&page=" + url.QueryEscape(cursor)
		}
		req, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(b, err)
		req.Header.Set("x-api-key", e.key)
		req.Header.Set("anthropic-beta", "managed-agents-2026-04-01")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		// Only the cursor is kept: find it in the body's tail without holding the body.
		tail := &tailWriter{max: 4096}
		_, err = io.Copy(tail, resp.Body)
		require.NoError(b, err)
		require.NoError(b, resp.Body.Close())
		require.Equal(b, http.StatusOK, resp.StatusCode)
		i := strings.LastIndex(string(tail.b), `"next_page":"`)
		if i < 0 {
			return
		}
		rest := string(tail.b[i+len(`"next_page":"`):])
		cursor = rest[:strings.IndexByte(rest, '"')]
	}
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	b   []byte
	max int
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = append(w.b[:0], w.b[len(w.b)-w.max:]...)
	}
	return len(p), nil
}

// peakHeapGrowth runs fn and returns the largest growth of the live-and-unswept heap over
// its value before fn, sampled every millisecond.
func peakHeapGrowth(fn func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := read(); v > base {
				peak = max(peak, v-base)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	fn()
	close(done)
	wg.Wait()
	return peak
}
