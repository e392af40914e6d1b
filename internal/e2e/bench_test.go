//go:build integration

package e2e

// Full-stack benchmarks: the API over httptest, PostgreSQL, the Temporal dev server and a
// worker with the fake model and the local sandbox, all driven through the official SDK.
//
//	go test -tags integration -run '^$' -bench 'Turn|Concurrent' -benchtime=40x ./internal/e2e/
//	go test -tags integration -run '^$' -bench 'CommitToSSE|StepCosts' ./internal/e2e/
//
// A fixed count (-benchtime=Nx) keeps the turn benchmarks to about a minute and logs their
// breakdown once. Each turn benchmark also measures the same turn in process
// (agent.Runtime over a memory log, no database, no Temporal) and reads the Temporal
// histories of its sessions to split every turn's latency into workflow tasks, activity
// queueing and activity execution.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/model/fake"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/turns"
	"github.com/managed-agents/managed-agents/internal/wire"
)

const (
	plainText   = "hello there"
	oneToolText = `/tool bash {"command":"true"}`
	// turnsPerSession bounds a session's log: every step re-reads the whole log, so one
	// session running hundreds of turns would measure history size, not overhead.
	turnsPerSession = 10
	// inProcessRuns is how often the in-process baseline runs per benchmark.
	inProcessRuns = 200
)

// benchFixture is a running env with an agent and an environment to start sessions from.
type benchFixture struct {
	e       *env
	c       anthropic.Client
	agentID string
	envID   string
}

func newBenchFixture(b *testing.B, tools ...anthropic.BetaAgentNewParamsToolUnion) *benchFixture {
	b.Helper()
	e := newRunningEnv(b)
	ctx := context.Background()
	// Concurrent sessions post and stream at once: keep their connections alive instead of
	// paying a TCP handshake per request (the default keeps two idle per host).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	c := e.clientFor(e.key, option.WithHTTPClient(&http.Client{Transport: tr}))
	agent, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "bench", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}, Tools: tools})
	require.NoError(b, err)
	envr, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "bench"})
	require.NoError(b, err)
	return &benchFixture{e: e, c: c, agentID: agent.ID, envID: envr.ID}
}

// benchSession is a session with an SDK stream opened before anything was sent.
type benchSession struct {
	id      string
	stream  *sdkStream
	close   func()
	windows []turnSample // the timed turns, for the history breakdown
}

// newSession creates a session, opens its stream and runs one untimed turn, so the session's
// workflow is already waiting for its next signal when timing starts.
func (f *benchFixture) newSession(ctx context.Context, warmText string) (*benchSession, error) {
	sess, err := newSessionWith(ctx, f.c, f.agentID, f.envID)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	st := f.c.Beta.Sessions.Events.StreamEvents(sctx, sess.ID, anthropic.BetaSessionEventStreamParams{})
	s := &benchSession{id: sess.ID, stream: st, close: func() { cancel(); _ = st.Close() }}
	if err := st.Err(); err != nil {
		s.close()
		return nil, fmt.Errorf("open stream: %w", err)
	}
	if _, err := s.turn(ctx, f.c, warmText); err != nil {
		s.close()
		return nil, fmt.Errorf("warm-up turn: %w", err)
	}
	return s, nil
}

func newSessionWith(ctx context.Context, c anthropic.Client, agentID, envID string) (*anthropic.BetaManagedAgentsSession, error) {
	sess, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(agentID)},
		EnvironmentID: envID,
	})
	if err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	return sess, nil
}

// turnSample is one turn as the client saw it.
type turnSample struct {
	start, end time.Time
	// post is the POST events round trip alone.
	post time.Duration
	// rounds counts model calls (span.model_request_end) and tool calls (agent.tool_result).
	rounds int
}

func (t turnSample) total() time.Duration { return t.end.Sub(t.start) }

// turn posts a user message and reads the stream up to the turn's session.status_idle.
func (s *benchSession) turn(ctx context.Context, c anthropic.Client, text string) (turnSample, error) {
	out := turnSample{start: time.Now()}
	_, err := c.Beta.Sessions.Events.Send(ctx, s.id, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage(text)}})
	if err != nil {
		return turnSample{}, fmt.Errorf("send: %w", err)
	}
	out.post = time.Since(out.start)
	// A lost frame must fail the benchmark, not hang it: closing the stream ends Next.
	guard := time.AfterFunc(streamDeadline, s.close)
	defer guard.Stop()
	for s.stream.Next() {
		ev := s.stream.Current()
		switch ev.Type {
		case "span.model_request_end", "agent.tool_result":
			out.rounds++
		case "session.status_idle":
			out.end = time.Now()
			if ev.StopReason.Type != "end_turn" {
				return turnSample{}, fmt.Errorf("turn stopped with %q", ev.StopReason.Type)
			}
			return out, nil
		}
	}
	return turnSample{}, fmt.Errorf("stream ended before idle: %w", s.stream.Err())
}

func BenchmarkPlainTurn(b *testing.B) {
	benchTurn(b, plainText)
}

func BenchmarkOneToolTurn(b *testing.B) {
	benchTurn(b, oneToolText, builtinTools("always_allow"))
}

// benchTurn times POST events → session.status_idle for one kind of turn, sequentially, on
// sessions that each run at most turnsPerSession timed turns.
func benchTurn(b *testing.B, text string, tools ...anthropic.BetaAgentNewParamsToolUnion) {
	f := newBenchFixture(b, tools...)
	ctx := context.Background()
	var base inProcess
	b.Run("turn", func(b *testing.B) {
		var (
			samples  []turnSample
			sessions []*benchSession
			cur      *benchSession
		)
		defer func() {
			for _, s := range sessions {
				s.close()
			}
		}()
		for i := range b.N {
			if i%turnsPerSession == 0 {
				b.StopTimer()
				var err error
				cur, err = f.newSession(ctx, text)
				require.NoError(b, err)
				sessions = append(sessions, cur)
				b.StartTimer()
			}
			s, err := cur.turn(ctx, f.c, text)
			require.NoError(b, err)
			samples = append(samples, s)
			cur.windows = append(cur.windows, s)
		}
		b.StopTimer()
		if base.p50 == 0 {
			base = measureInProcess(b, f, sessions[0].id, text)
		}
		reportTurns(b, samples, base)
		reportBreakdown(b, sharedTemporal(b), sessions)
	})
}

// inProcess is the same turn run by agent.Runtime over a memory log.
type inProcess struct {
	p50, p99 time.Duration
}

// measureInProcess runs text as a whole turn in process with the session's own agent snapshot,
// the fake model and a local sandbox: the cost of the rounds themselves.
func measureInProcess(b *testing.B, f *benchFixture, sessionID, text string) inProcess {
	b.Helper()
	ctx := context.Background()
	turn, err := turns.New(f.e.api.Store, discardLogger()).LoadTurn(ctx, sessionID)
	require.NoError(b, err)
	p := local.New(b.TempDir())
	ref, err := p.Create(ctx, sandbox.Spec{Name: sandbox.NameFor("sesn_inprocess"), SessionID: "sesn_inprocess"})
	require.NoError(b, err)
	sb, err := p.Attach(ctx, ref)
	require.NoError(b, err)
	body, err := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}})
	require.NoError(b, err)
	rt := agent.NewRuntime(agent.NewCore(fake.New()))
	samples := make([]time.Duration, 0, inProcessRuns)
	for range inProcessRuns {
		l := agent.NewMemoryLog()
		l.Append(wire.EventUserMessage, body, true)
		start := time.Now()
		out, err := rt.Run(ctx, agent.Input{Agent: turn.Agent, History: l.Events(), Emitter: l,
			Sandbox: agent.SandboxFunc(func(context.Context) (sandbox.Sandbox, error) { return sb, nil })})
		samples = append(samples, time.Since(start))
		require.NoError(b, err)
		require.Equal(b, agent.StopEndTurn, out.StopReason)
	}
	return inProcess{p50: percentile(samples, 50), p99: percentile(samples, 99)}
}

func reportTurns(b *testing.B, samples []turnSample, base inProcess) {
	totals := make([]time.Duration, len(samples))
	posts := make([]time.Duration, len(samples))
	for i, s := range samples {
		totals[i], posts[i] = s.total(), s.post
	}
	rounds := samples[0].rounds
	p50, p99 := percentile(totals, 50), percentile(totals, 99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(percentile(posts, 50)), "post-p50-ms")
	b.ReportMetric(float64(rounds), "rounds/turn")
	b.ReportMetric(ms(base.p50), "inproc-p50-ms")
	b.ReportMetric(ms(p50-base.p50)/float64(rounds), "overhead/round-p50-ms")
	// The in-process turn barely varies, so the p99 overhead subtracts its median too.
	b.ReportMetric(ms(p99-base.p50)/float64(rounds), "overhead/round-p99-ms")
	b.ReportMetric(float64(p50)/float64(base.p50), "x-inproc")
	if b.N > 1 {
		b.Logf("%d turns of %d rounds: POST→idle p50 %v p99 %v (POST alone p50 %v); in process p50 %v p99 %v",
			len(samples), rounds, p50, p99, percentile(posts, 50), base.p50, base.p99)
	}
}

// ---- where the time goes ----------------------------------------------------------------------

// span is a stretch of a workflow's history: a workflow task or an activity waiting for a
// worker (queue) or running (run). A local activity runs inside a workflow task and leaves
// only a marker, at the task's completion: a span of no length with phase "local".
type span struct {
	kind     string // "wft" or the activity type
	phase    string // "queue", "run" or "local"
	from, to time.Time
}

// localActivityType reads the activity type from a local activity's marker.
func localActivityType(attrs *historypb.MarkerRecordedEventAttributes) string {
	var data struct{ ActivityType string }
	if p := attrs.GetDetails()["data"].GetPayloads(); len(p) > 0 && json.Unmarshal(p[0].GetData(), &data) == nil && data.ActivityType != "" {
		return data.ActivityType
	}
	return attrs.GetMarkerName()
}

// historySpans reads a session workflow's current run and returns its workflow task and
// activity spans, from the server's event timestamps.
func historySpans(ctx context.Context, tc client.Client, sessionID string) ([]span, error) {
	it := tc.GetWorkflowHistory(ctx, durable.WorkflowID(sessionID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	type sched struct {
		kind    string
		at      time.Time
		started time.Time
	}
	open := map[int64]*sched{}
	var out []span
	closeSpan := func(schedID int64, at time.Time) {
		s := open[schedID]
		if s == nil || s.started.IsZero() {
			return
		}
		out = append(out, span{s.kind, "queue", s.at, s.started}, span{s.kind, "run", s.started, at})
		delete(open, schedID)
	}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read workflow history: %w", err)
		}
		at := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			open[ev.GetEventId()] = &sched{kind: "wft", at: at}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			if s := open[ev.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()]; s != nil {
				s.started = at
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			closeSpan(ev.GetWorkflowTaskCompletedEventAttributes().GetScheduledEventId(), at)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			open[ev.GetEventId()] = &sched{kind: ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName(), at: at}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if s := open[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; s != nil {
				s.started = at
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			closeSpan(ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId(), at)
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			out = append(out, span{localActivityType(ev.GetMarkerRecordedEventAttributes()), "local", at, at})
		}
	}
	return out, nil
}

// breakdown sums, per turn, how much of [start, end] each kind of span covers; what no span
// covers is "other": the POST until the signal's workflow task is scheduled, history writes
// between tasks, and SSE delivery after the idle is committed.
type breakdown struct {
	turns  int
	byKey  map[string]time.Duration // "wft queue", "Advance run", ...
	counts map[string]int           // spans that overlap a turn, per "kind"
	other  time.Duration
}

func (bd *breakdown) add(turn turnSample, spans []span) {
	bd.turns++
	window := turn.total()
	var covered time.Duration
	for _, s := range spans {
		if s.phase == "local" {
			if !s.from.Before(turn.start) && !s.from.After(turn.end) {
				bd.counts[s.kind+" (local)"]++
			}
			continue
		}
		from, to := maxTime(s.from, turn.start), minTime(s.to, turn.end)
		if !to.After(from) {
			continue
		}
		d := to.Sub(from)
		bd.byKey[s.kind+" "+s.phase] += d
		covered += d
		if s.phase == "run" {
			bd.counts[s.kind]++
		}
	}
	bd.other += window - covered
}

func reportBreakdown(b *testing.B, tc client.Client, sessions []*benchSession) {
	ctx := context.Background()
	bd := &breakdown{byKey: map[string]time.Duration{}, counts: map[string]int{}}
	var (
		slowest      turnSample
		slowestSpans []span
	)
	for _, s := range sessions {
		spans, err := historySpans(ctx, tc, s.id)
		require.NoError(b, err)
		for _, w := range s.windows {
			bd.add(w, spans)
			if w.total() > slowest.total() {
				slowest, slowestSpans = w, spans
			}
		}
	}
	if bd.turns < 2 {
		return // the framework's first single-iteration probe
	}
	per := func(d time.Duration) float64 { return ms(d) / float64(bd.turns) }
	var wftQueue, wftRun, actQueue, actRun time.Duration
	keys := make([]string, 0, len(bd.byKey))
	for k, d := range bd.byKey {
		keys = append(keys, k)
		kind, phase, _ := strings.Cut(k, " ")
		switch {
		case kind == "wft" && phase == "queue":
			wftQueue += d
		case kind == "wft":
			wftRun += d
		case phase == "queue":
			actQueue += d
		default:
			actRun += d
		}
	}
	slices.Sort(keys)
	b.ReportMetric(per(wftQueue+wftRun), "wft-ms/turn")
	b.ReportMetric(per(actQueue), "act-queue-ms/turn")
	b.ReportMetric(per(actRun), "act-run-ms/turn")
	b.ReportMetric(per(bd.other), "other-ms/turn")
	var lines []string
	for _, k := range keys {
		kind, _, _ := strings.Cut(k, " ")
		n := float64(bd.counts[kind]) / float64(bd.turns)
		lines = append(lines, fmt.Sprintf("  %-22s %6.2f ms/turn (%.1f per turn on the critical path)", k, per(bd.byKey[k]), n))
	}
	lines = append(lines, fmt.Sprintf("  %-22s %6.2f ms/turn (POST until the first workflow task, gaps between tasks, SSE delivery)", "other", per(bd.other)))
	var locals []string
	for kind, n := range bd.counts {
		if strings.HasSuffix(kind, " (local)") {
			locals = append(locals, fmt.Sprintf("  %-22s %.1f per turn, inside \"wft run\"", kind, float64(n)/float64(bd.turns)))
		}
	}
	slices.Sort(locals)
	lines = append(lines, locals...)
	b.Logf("where a turn's time goes (mean over %d turns, from Temporal history timestamps):\n%s", bd.turns, strings.Join(lines, "\n"))
	b.Logf("slowest turn, %v: %s", slowest.total(), timeline(slowest, slowestSpans))
}

// timeline lists the spans of one turn as "kind phase duration" in order.
func timeline(turn turnSample, spans []span) string {
	var parts []string
	for _, s := range spans {
		switch {
		case s.phase == "local" && !s.from.Before(turn.start) && !s.from.After(turn.end):
			parts = append(parts, s.kind+" local")
		case s.to.After(turn.start) && s.from.Before(turn.end):
			parts = append(parts, fmt.Sprintf("%s %s %.1fms", s.kind, s.phase, ms(s.to.Sub(s.from))))
		}
	}
	return strings.Join(parts, ", ")
}

// ---- concurrency ------------------------------------------------------------------------------

// BenchmarkConcurrentSessions runs one-tool turns on N sessions at once; an op is one turn on
// every session (N turns). rounds/s counts model calls and tool calls across all sessions.
func BenchmarkConcurrentSessions(b *testing.B) {
	f := newBenchFixture(b, builtinTools("always_allow"))
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) { benchConcurrent(b, f, n) })
	}
}

func benchConcurrent(b *testing.B, f *benchFixture, n int) {
	ctx := context.Background()
	// Every session runs at most turnsPerSession timed turns; all are made (and warmed)
	// before the clock starts.
	pools, err := sessionPools(ctx, f, n, (b.N+turnsPerSession-1)/turnsPerSession)
	defer func() {
		for _, p := range pools {
			for _, s := range p {
				s.close()
			}
		}
	}()
	require.NoError(b, err)

	var (
		rounds  atomic.Int64
		samples = make([][]time.Duration, n)
		errs    = make([]error, n)
		wg      sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for w := range n {
		wg.Go(func() {
			for i := range b.N {
				t, err := pools[w][i/turnsPerSession].turn(ctx, f.c, oneToolText)
				if err != nil {
					errs[w] = err
					return
				}
				rounds.Add(int64(t.rounds))
				samples[w] = append(samples[w], t.total())
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	require.NoError(b, errors.Join(errs...))
	all := slices.Concat(samples...)
	b.ReportMetric(float64(rounds.Load())/elapsed.Seconds(), "rounds/s")
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "turns/s")
	b.ReportMetric(ms(percentile(all, 50)), "turn-p50-ms")
	b.ReportMetric(ms(percentile(all, 99)), "turn-p99-ms")
}

// sessionPools makes perWorker warmed sessions for each of n workers, n at a time.
func sessionPools(ctx context.Context, f *benchFixture, n, perWorker int) ([][]*benchSession, error) {
	pools := make([][]*benchSession, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for range perWorker {
				s, err := f.newSession(ctx, oneToolText)
				if err != nil {
					errs[w] = err
					return
				}
				pools[w] = append(pools[w], s)
			}
		})
	}
	wg.Wait()
	return pools, errors.Join(errs...)
}

// ---- commit to SSE ----------------------------------------------------------------------------

// BenchmarkCommitToSSE appends one event per op in a transaction, as the worker's emitter
// does, and waits until an open SDK stream yields it. commit→SSE starts when the commit is
// acknowledged; append→SSE also includes the transaction.
func BenchmarkCommitToSSE(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "bench", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}})
	require.NoError(b, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "bench"})
	require.NoError(b, err)
	sess, err := newSessionWith(ctx, e.client, agent.ID, envr.ID)
	require.NoError(b, err)
	sctx, cancel := context.WithCancel(context.Background())
	st := e.client.Beta.Sessions.Events.StreamEvents(sctx, sess.ID, anthropic.BetaSessionEventStreamParams{})
	b.Cleanup(func() { cancel(); _ = st.Close() })
	require.NoError(b, st.Err())

	b.Run("event", func(b *testing.B) {
		var fromCommit, fromAppend, tx []time.Duration
		for range b.N {
			var appended []wire.Event
			start := time.Now()
			err := e.api.Store.InTx(ctx, func(q *store.Queries) error {
				var err error
				appended, err = q.AppendEvents(ctx, sess.ID, []store.NewEvent{agentEvent("agent.thinking", `{}`)}, start)
				return err
			})
			committed := time.Now()
			require.NoError(b, err)
			require.True(b, st.Next(), "stream ended: %v", st.Err())
			got := time.Now()
			require.Equal(b, appended[0].ID, st.Current().ID)
			fromCommit = append(fromCommit, got.Sub(committed))
			fromAppend = append(fromAppend, got.Sub(start))
			tx = append(tx, committed.Sub(start))
		}
		b.StopTimer()
		b.ReportMetric(us(percentile(fromCommit, 50)), "commit-to-sse-p50-us")
		b.ReportMetric(us(percentile(fromCommit, 99)), "commit-to-sse-p99-us")
		b.ReportMetric(us(percentile(fromAppend, 50)), "append-to-sse-p50-us")
		b.ReportMetric(us(percentile(fromAppend, 99)), "append-to-sse-p99-us")
		b.ReportMetric(us(percentile(tx, 50)), "append-tx-p50-us")
	})
}

// ---- the pieces of a step -----------------------------------------------------------------------

// BenchmarkStepCosts times what the activities are made of, in process against PostgreSQL, on
// a session whose log holds turnsPerSession plain turns: one database round trip, LoadTurn
// (what ModelTurn and ToolCall read first), an Advance with nothing to do (the bookkeeping
// transaction that ends every step) and one emitted event (a WorkerEmitter transaction).
func BenchmarkStepCosts(b *testing.B) {
	f := newBenchFixture(b)
	ctx := context.Background()
	s, err := f.newSession(ctx, plainText)
	require.NoError(b, err)
	b.Cleanup(s.close)
	for range turnsPerSession - 1 {
		_, err := s.turn(ctx, f.c, plainText)
		require.NoError(b, err)
	}
	svc := turns.New(f.e.api.Store, discardLogger())
	turn, err := svc.LoadTurn(ctx, s.id)
	require.NoError(b, err)
	events := float64(len(turn.History))

	b.Run("pg-roundtrip", func(b *testing.B) {
		for b.Loop() {
			_, err := f.e.api.Store.Pool().Exec(ctx, "SELECT 1")
			require.NoError(b, err)
		}
	})
	b.Run("load-turn", func(b *testing.B) {
		for b.Loop() {
			_, err := svc.LoadTurn(ctx, s.id)
			require.NoError(b, err)
		}
		b.ReportMetric(events, "events")
	})
	b.Run("advance-noop", func(b *testing.B) {
		for b.Loop() {
			t, err := svc.Advance(ctx, s.id)
			require.NoError(b, err)
			require.Equal(b, agent.StepEnd, t.Step.Kind)
		}
		b.ReportMetric(events, "events")
	})
	b.Run("emit-event", func(b *testing.B) {
		// A session of its own: the emitted events must not grow the log read above.
		other, err := newSessionWith(ctx, f.c, f.agentID, f.envID)
		require.NoError(b, err)
		em := svc.Emitter(other.ID)
		for b.Loop() {
			_, err := em.Emit(ctx, []agent.NewEvent{{ID: ids.New(ids.Event), Type: "agent.thinking", Body: json.RawMessage(`{}`)}})
			require.NoError(b, err)
		}
	})
}

// ---- helpers ----------------------------------------------------------------------------------

// percentile is the nearest-rank percentile of samples (which it sorts a copy of).
func percentile(samples []time.Duration, p int) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100
	return s[max(rank, 1)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
