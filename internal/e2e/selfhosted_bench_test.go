//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/sessions"
)

// BenchmarkSelfHostedQueue runs 50 sessions of one self-hosted environment, each one turn with
// one bash call, served by 4 workers, and reports the claim latency (an item's creation to
// its acknowledgement) and the tool round trip through the queue (agent.tool_use to the
// worker's user.tool_result in the log), p50 and p99. Two kinds of worker: the official SDK's
// EnvironmentWorker, which serves one session at a time (it holds a session's item until the
// session has idled for MaxIdle), and managed-agents environment-worker with 16 sessions at
// once and the local sandbox provider.
//
//	go test -tags integration -run '^$' -bench SelfHostedQueue -benchtime=1x ./internal/e2e/
func BenchmarkSelfHostedQueue(b *testing.B) {
	b.Run("sdk-workers", func(b *testing.B) { benchSelfHostedQueue(b, false) })
	b.Run("environment-workers", func(b *testing.B) { benchSelfHostedQueue(b, true) })
}

func benchSelfHostedQueue(b *testing.B, dispatchers bool) {
	const sessionsN, workersN = 50, 4
	e := newRunningEnv(b, func(c *app.Config) { c.WorkLeaseTTL = 30 * time.Second })
	ctx := context.Background()
	agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "bench", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{builtinTools("always_allow")}})
	require.NoError(b, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "bench-queue",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
	require.NoError(b, err)
	p, err := e.api.Service.Authenticate(ctx, e.key)
	require.NoError(b, err)
	k, err := e.api.Service.CreateKey(ctx, "bench", sessions.KeyRequest{WorkspaceID: p.WorkspaceID, EnvironmentID: envr.ID})
	require.NoError(b, err)

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	idle := 2 * time.Second
	for i := range workersN {
		if dispatchers {
			d, err := app.NewEnvironmentWorker(app.Config{ServerURL: e.srv.URL, EnvironmentID: envr.ID, EnvironmentKey: k.Secret, Sandbox: "local",
				SandboxDir: b.TempDir(), EnvironmentWorkerConcurrency: 16, EnvironmentWorkerMaxIdle: idle, LogLevel: "error"})
			require.NoError(b, err)
			go func() { _ = d.Run(wctx) }()
			continue
		}
		client := anthropic.NewClient(option.WithBaseURL(e.srv.URL), option.WithAPIKey("unused"))
		w := environments.NewEnvironmentWorker(client, environments.EnvironmentWorkerOptions{EnvironmentID: envr.ID, EnvironmentKey: k.Secret,
			WorkerID: fmt.Sprintf("bench-%d", i), Workdir: b.TempDir(), MaxIdle: &idle, Logger: discardLogger()})
		go func() { _ = w.Run(wctx) }()
	}

	var claims, roundTrips []time.Duration
	b.ResetTimer()
	for range b.N {
		ids := make([]string, sessionsN)
		for i := range ids {
			sess, err := newSessionWith(ctx, e.client, agent.ID, envr.ID)
			require.NoError(b, err)
			ids[i] = sess.ID
		}
		var wg sync.WaitGroup
		errs := make(chan error, sessionsN)
		for _, id := range ids {
			wg.Go(func() {
				if _, err := e.client.Beta.Sessions.Events.Send(ctx, id, anthropic.BetaSessionEventSendParams{
					Events: []anthropic.BetaManagedAgentsEventParamsUnion{toolMessage("echo served")}}); err != nil {
					errs <- err
					return
				}
				errs <- waitIdle(ctx, e.client, id, 5*time.Minute)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(b, err)
		}
		b.StopTimer()
		for _, id := range ids {
			hist, err := e.client.Beta.Sessions.Events.List(ctx, id, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(100)})
			require.NoError(b, err)
			var use, result time.Time
			for _, ev := range hist.Data {
				switch ev.Type {
				case "agent.tool_use":
					use = ev.ProcessedAt
				case "user.tool_result":
					result = ev.ProcessedAt
				case "agent.message":
					require.Equal(b, "bash: served", messageOf(ev.RawJSON()), "session %s", id)
				}
			}
			require.False(b, use.IsZero() || result.IsZero(), "session %s: no call or no result", id)
			roundTrips = append(roundTrips, result.Sub(use))
		}
		page, err := e.client.Beta.Environments.Work.List(ctx, envr.ID, anthropic.BetaEnvironmentWorkListParams{Limit: anthropic.Int(100)})
		require.NoError(b, err)
		for _, w := range page.Data {
			created, _ := time.Parse(time.RFC3339Nano, w.CreatedAt)
			acked, err := time.Parse(time.RFC3339Nano, w.AcknowledgedAt)
			if err == nil {
				claims = append(claims, acked.Sub(created))
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	pct := func(ds []time.Duration, q float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	b.ReportMetric(float64(pct(claims, 0.5).Milliseconds()), "claim-p50-ms")
	b.ReportMetric(float64(pct(claims, 0.99).Milliseconds()), "claim-p99-ms")
	b.ReportMetric(float64(pct(roundTrips, 0.5).Milliseconds()), "tool-roundtrip-p50-ms")
	b.ReportMetric(float64(pct(roundTrips, 0.99).Milliseconds()), "tool-roundtrip-p99-ms")
	b.Logf("%d sessions, %d workers: %d claims, claim p50 %s p99 %s; tool round trip p50 %s p99 %s", sessionsN, workersN, len(claims),
		pct(claims, 0.5), pct(claims, 0.99), pct(roundTrips, 0.5), pct(roundTrips, 0.99))
}

// waitIdle polls the session until its turn is over (idle after having run).
func waitIdle(ctx context.Context, c anthropic.Client, id string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		hist, err := c.Beta.Sessions.Events.List(ctx, id, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(100)})
		if err != nil {
			return err
		}
		for _, ev := range hist.Data {
			if ev.Type == "session.status_idle" {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("session %s: no idle within %s", id, limit)
}

// messageOf is the text of an event's content blocks.
func messageOf(raw string) string {
	var body struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal([]byte(raw), &body)
	var b strings.Builder
	for _, c := range body.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}
