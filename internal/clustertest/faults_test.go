//go:build cluster

package clustertest

import (
	"context"
	"crypto/md5"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"
)

// TestPodKillsDuringTurns deletes the API, worker, controller and PostgreSQL pods in turn
// while sessions run tool-heavy turns in sandbox pods. Every turn must end once with
// end_turn, the log must hold no event twice, and every tool call must have run exactly once
// (each appends its own line to a file in the sandbox). The same invariant as the crash test
// (internal/e2e), on the real cluster: the client reaches the API by its Service's ClusterIP,
// as a client in the cluster would, so a killed API pod is a dropped connection it retries.
func TestPodKillsDuringTurns(t *testing.T) {
	r := &release{ns: "faults", name: "ft"}
	helm(t, append([]string{"install", r.name, chart, "--namespace", r.ns, "--create-namespace",
		"--wait", "--timeout", "6m"}, imageValues(t)...)...)
	t.Cleanup(func() { uninstall(t, r) })
	key, err := decodeBase64(kubectl(t, "-n", r.ns, "get", "secret", r.fullname(), "-o", "jsonpath={.data.api-key}"))
	require.NoError(t, err)
	ip := strings.TrimSpace(kubectl(t, "-n", r.ns, "get", "svc", r.fullname(), "-o", "jsonpath={.spec.clusterIP}"))
	client := anthropic.NewClient(option.WithBaseURL("http://"+ip+":8080"), option.WithAPIKey(key),
		option.WithMaxRetries(10), option.WithRequestTimeout(30*time.Second))
	ctx := context.Background()

	agent, err := client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "faults", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{}}}})
	require.NoError(t, err)
	env, err := client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "faults"})
	require.NoError(t, err)

	// Each session runs turns until every role has been killed and at least minTurns ran.
	const sessions, minTurns, calls = 3, 3, 4
	var ids []string
	for range sessions {
		s, err := client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
			Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(agent.ID)}, EnvironmentID: env.ID})
		require.NoError(t, err)
		ids = append(ids, s.ID)
	}

	logs := followLogs(t, r.ns, "app.kubernetes.io/instance="+r.name+",app.kubernetes.io/component in (api,worker)")

	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	killed := make(chan struct{})
	turnsRun := make([]int, sessions)
	for si, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for turn := 0; ; turn++ {
				select {
				case <-killed:
					if turn >= minTurns {
						return
					}
				default:
				}
				var lines []string
				for call := range calls {
					lines = append(lines, fmt.Sprintf(`/tool bash {"command":"sleep 1; echo s%d-t%d-c%d >> effects.txt"}`, si, turn, call))
				}
				if err := sendAndAwaitTurn(client, id, strings.Join(lines, "\n"), 5*time.Minute); err != nil {
					errs <- fmt.Errorf("session %s turn %d: %w", id, turn, err)
					return
				}
				turnsRun[si] = turn + 1
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// One kill per role, a few seconds apart, while the turns run.
	for _, role := range []string{"api", "worker", "controller", "postgresql"} {
		select {
		case <-done:
			require.FailNow(t, "the turns ended before every role was killed; make them longer")
		case <-time.After(6 * time.Second):
		}
		begin := time.Now()
		kubectl(t, "-n", r.ns, "delete", "pod", "-l", "app.kubernetes.io/instance="+r.name+",app.kubernetes.io/component="+role, "--wait=false")
		eventually(t, 4*time.Minute, role+" is back", func() (bool, string) {
			out, err := tryRun(tools.kubectl, "-n", r.ns, "get", "pods", "-l", "app.kubernetes.io/instance="+r.name+",app.kubernetes.io/component="+role,
				"-o", "jsonpath={range .items[*]}{.metadata.deletionTimestamp}|{.status.conditions[?(@.type==\"Ready\")].status} {end}")
			// Back means: every pod of the role is Ready and none is terminating (the old one is gone).
			fields := strings.Fields(out)
			for _, f := range fields {
				if f != "|True" {
					return false, out
				}
			}
			return err == nil && len(fields) > 0, out
		})
		t.Logf("figure: %s pod deleted during running turns: a replacement Ready after %s", role, time.Since(begin).Round(time.Second))
	}
	close(killed)
	select {
	case <-done:
	case <-time.After(15 * time.Minute):
		require.FailNow(t, "the turns did not finish")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Logf("the logs of every api and worker pod of the run:\n%s", logs())
		}
		require.NoError(t, err)
	}

	for si, id := range ids {
		evs := allEvents(t, client, id)
		seen := map[string]bool{}
		idle := 0
		for _, ev := range evs {
			require.False(t, seen[ev.ID], "event %s is in the log once", ev.ID)
			seen[ev.ID] = true
			if ev.Type == "session.status_idle" {
				idle++
			}
		}
		require.Equal(t, turnsRun[si], idle, "session %s: one idle per turn", id)

		// The file the tool calls appended to, summed by one more tool call (the fake model's
		// answer shortens long tool output, so the sandbox sends a digest, not the lines).
		text := sayAndRead(t, client, id, `/tool bash {"command":"echo lines=$(wc -l < effects.txt) sum=$(LC_ALL=C sort effects.txt | md5sum | cut -c1-32)"}`)
		var want []string
		for turn := range turnsRun[si] {
			for call := range calls {
				want = append(want, fmt.Sprintf("s%d-t%d-c%d", si, turn, call))
			}
		}
		sort.Strings(want)
		wantText := fmt.Sprintf("lines=%d sum=%x", len(want), md5.Sum([]byte(strings.Join(want, "\n")+"\n")))
		require.Contains(t, text, wantText, "every tool call of session %s ran exactly once", id)
	}
}

// sendAndAwaitTurn sends a message and polls the log until the turn it starts is over. Polls,
// not a stream: the API pod may be killed while the turn runs.
func sendAndAwaitTurn(c anthropic.Client, id, text string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	// An Idempotency-Key, so that the SDK's retry of a send whose answer a killed API pod never
	// gave does not add the message twice (the API keeps the first answer for the key).
	key := option.WithHeader("Idempotency-Key", fmt.Sprintf("%s-%d", id, time.Now().UnixNano()))
	sent, err := c.Beta.Sessions.Events.Send(ctx, id, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: text}}}}}}}, key)
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	msgID := sent.Data[0].ID
	var lastErr error
	for {
		var evs []anthropic.BetaManagedAgentsSessionEventUnion
		iter := c.Beta.Sessions.Events.ListAutoPaging(ctx, id, anthropic.BetaSessionEventListParams{Limit: param.NewOpt(int64(1000))})
		for iter.Next() {
			evs = append(evs, iter.Current())
		}
		if iter.Err() != nil {
			lastErr = iter.Err()
		} else {
			after := false
			for _, ev := range evs {
				after = after || ev.ID == msgID
				if after && ev.Type == "session.status_idle" {
					if ev.StopReason.Type != "end_turn" {
						return fmt.Errorf("the turn ended with %s", ev.StopReason.Type)
					}
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the turn of %s did not finish: %w (last list error: %v; events listed: %d)", msgID, ctx.Err(), lastErr, len(evs))
		case <-time.After(time.Second):
		}
	}
}

func allEvents(t testing.TB, c anthropic.Client, id string) []anthropic.BetaManagedAgentsSessionEventUnion {
	t.Helper()
	var evs []anthropic.BetaManagedAgentsSessionEventUnion
	iter := c.Beta.Sessions.Events.ListAutoPaging(context.Background(), id, anthropic.BetaSessionEventListParams{Limit: param.NewOpt(int64(1000))})
	for iter.Next() {
		evs = append(evs, iter.Current())
	}
	require.NoError(t, iter.Err())
	return evs
}

// sayAndRead runs one more turn and returns its last agent.message's text.
func sayAndRead(t testing.TB, c anthropic.Client, id, text string) string {
	t.Helper()
	require.NoError(t, sendAndAwaitTurn(c, id, text, 3*time.Minute))
	evs := allEvents(t, c, id)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == "agent.message" {
			var b strings.Builder
			for _, blk := range evs[i].AsAgentMessage().Content {
				b.WriteString(blk.Text)
			}
			return b.String()
		}
	}
	require.FailNow(t, "no agent.message")
	return ""
}

// followLogs streams the logs of every pod matching selector, those that appear later too,
// until the test ends, so that a failure can show the logs of pods the test has killed.
func followLogs(t testing.TB, ns, selector string) func() string {
	var mu sync.Mutex
	var buf strings.Builder
	seen := map[string]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			// Running ones only: `logs -f` of a pod whose container has not started ends at once.
			out, _ := tryRun(tools.kubectl, "-n", ns, "get", "pods", "-l", selector, "--field-selector=status.phase=Running",
				"-o", "jsonpath={.items[*].metadata.name}")
			for _, pod := range strings.Fields(out) {
				if seen[pod] {
					continue
				}
				seen[pod] = true
				cmd := exec.CommandContext(ctx, tools.kubectl, "-n", ns, "logs", "-f", pod)
				w := &lockedWriter{mu: &mu, b: &buf, prefix: pod + " "}
				cmd.Stdout, cmd.Stderr = w, w
				_ = cmd.Start()
				go func() { _ = cmd.Wait() }()
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
}

type lockedWriter struct {
	mu     *sync.Mutex
	b      *strings.Builder
	prefix string
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line != "" {
			w.b.WriteString(w.prefix + line)
		}
	}
	return len(p), nil
}
