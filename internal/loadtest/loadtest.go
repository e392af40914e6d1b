// Package loadtest drives a managed-agents server through its public API with the official
// Go SDK, as a fleet of users would, and measures what they see: turn latency (POST →
// session.status_idle on the session's SSE stream), the POST's acknowledgement, throughput,
// commit-to-delivery on the streams, errors, and, when the server runs on this machine, the
// CPU and memory of its processes read from /proc. It is what `managed-agents bench` runs.
//
// It owns generating load and measuring it, nothing else: it imports the SDK and the
// standard library only, never the server's packages (store, turns, Temporal), so it
// measures any server, local or not, the way a client does.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
)

// Config is one load run.
type Config struct {
	BaseURL, APIKey string
	// Sessions run Turns turns each, concurrently, for every scenario in turn.
	Sessions, Turns int
	Scenarios       []Scenario
	// Fanout is how many subscribers each session has besides the one that drives it.
	Fanout int
	// Idle sessions are opened first (one plain turn each, their streams left open) and stay
	// open until the end.
	Idle int
	// Warmup runs one untimed turn on every session before the clock starts.
	Warmup bool
	// TurnTimeout ends a session whose turn has not gone idle by then.
	TurnTimeout time.Duration
	// Think is how long a session waits after a turn went idle before it sends the next, as
	// a user would; each session's first turn waits a part of it (sessions spread evenly),
	// so they do not all send at once. 0: every session sends again at once, as fast as the
	// server allows (a closed loop that finds the server's saturation).
	Think time.Duration
	// ServerPID is the server's process when it runs on this machine (0: it does not).
	ServerPID int
	// Server describes the server for the report ("dev started by bench", "external").
	Server string
	// ProcDir is where /proc is mounted (tests use a fake one); default /proc.
	ProcDir string
	// Progress receives a live progress line (nil: none); on a terminal it is rewritten in place.
	Progress io.Writer
	Logger   *slog.Logger
}

// Report is everything a run measured; it is what --json writes.
type Report struct {
	StartedAt time.Time `json:"started_at"`
	BaseURL   string    `json:"base_url"`
	Server    string    `json:"server"`
	ServerPID int       `json:"server_pid,omitempty"`
	CPUs      int       `json:"cpus"`
	Config    struct {
		Sessions      int      `json:"sessions"`
		Turns         int      `json:"turns"`
		Scenarios     []string `json:"scenarios"`
		Fanout        int      `json:"fanout"`
		Idle          int      `json:"idle"`
		Warmup        bool     `json:"warmup"`
		TurnTimeoutMS int64    `json:"turn_timeout_ms"`
		ThinkMS       int64    `json:"think_ms,omitempty"`
	} `json:"config"`
	Idle *IdleReport `json:"idle,omitempty"`
	Runs []RunReport `json:"runs"`
}

// RunReport is one scenario's run: Sessions sessions of TurnsPerSession turns at once.
type RunReport struct {
	Scenario        string `json:"scenario"`
	Sessions        int    `json:"sessions"`
	TurnsPerSession int    `json:"turns_per_session"`
	// SubscribersPerSession counts the stream that drives the session and the fan-out ones.
	SubscribersPerSession int `json:"subscribers_per_session"`
	// Turns is how many turns ended with end_turn; Errors how many things went wrong.
	Turns           int            `json:"turns"`
	Errors          int            `json:"errors"`
	ErrorsByKind    map[string]int `json:"errors_by_kind"`
	DurationSeconds float64        `json:"duration_seconds"`
	// TurnLatency: from sending the user.message to its session.status_idle (end_turn) on the
	// session's stream, answers to requires_action included.
	TurnLatency Summary `json:"turn_latency_ms"`
	// PostAck: the round trip of every POST /v1/sessions/{id}/events.
	PostAck Summary `json:"post_ack_ms"`
	// Delivery: receive time of an event on any stream minus its processed_at, for events
	// the server wrote (not user.*); the same machine's clock on both sides.
	Delivery Summary `json:"delivery_ms"`
	// Events counts the events the driving streams received (fan-out copies not counted).
	Events          int     `json:"events"`
	TurnsPerSecond  float64 `json:"turns_per_second"`
	EventsPerSecond float64 `json:"events_per_second"`
	// CPUMillisPerTurn sums the server's groups (server, postgres, temporal), not bench.
	CPUMillisPerTurn float64        `json:"cpu_ms_per_turn,omitempty"`
	Processes        []ProcessUsage `json:"processes,omitempty"`
}

// IdleReport is the memory idle sessions hold.
type IdleReport struct {
	Sessions     int            `json:"sessions"`
	Opened       int            `json:"opened"`
	Errors       int            `json:"errors"`
	ErrorsByKind map[string]int `json:"errors_by_kind"`
	// Processes: RSS before the sessions were opened and after, once they had settled.
	Processes []IdleUsage `json:"processes,omitempty"`
}

// IdleUsage is one group of processes before and after the idle sessions were opened.
type IdleUsage struct {
	Name           string `json:"name"`
	PID            int    `json:"pid"`
	RSSBeforeBytes int64  `json:"rss_before_bytes"`
	RSSAfterBytes  int64  `json:"rss_after_bytes"`
	PeakRSSBytes   int64  `json:"peak_rss_bytes"`
}

const (
	// setupParallel bounds the sessions created (and warmed up) at once.
	setupParallel = 8
	// idleSettle is how long idle sessions sit before their memory is read.
	idleSettle = 2 * time.Second
	// answerRounds bounds the requires_action answers one turn may need.
	answerRounds = 4
)

type stream = ssestream.Stream[anthropic.BetaManagedAgentsStreamSessionEventsUnion]

type runner struct {
	cfg    Config
	client anthropic.Client
	mon    *monitor
	envID  string
	logger *slog.Logger

	// progress counters of the current run
	done, failed atomic.Int64
}

// Run runs the load cfg describes and reports what it measured; stopped by ctx in the middle
// of a scenario, it returns the runs so far (the last one partial) with the error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ProcDir == "" {
		cfg.ProcDir = "/proc"
	}
	if cfg.TurnTimeout <= 0 {
		cfg.TurnTimeout = time.Minute
	}
	// Every stream holds a connection; keep the POSTs' connections alive too instead of
	// paying a handshake per request (the default keeps two idle per host).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1024
	r := &runner{
		cfg: cfg, logger: cfg.Logger,
		client: anthropic.NewClient(option.WithBaseURL(cfg.BaseURL), option.WithAPIKey(cfg.APIKey),
			option.WithMaxRetries(0), option.WithHTTPClient(&http.Client{Transport: tr})),
		mon: newMonitor(procFS(cfg.ProcDir), cfg.ServerPID),
	}
	rep := &Report{StartedAt: time.Now().UTC(), BaseURL: cfg.BaseURL, Server: cfg.Server, ServerPID: cfg.ServerPID, CPUs: runtime.NumCPU()}
	rep.Config.Sessions, rep.Config.Turns, rep.Config.Fanout, rep.Config.Idle, rep.Config.Warmup = cfg.Sessions, cfg.Turns, cfg.Fanout, cfg.Idle, cfg.Warmup
	rep.Config.TurnTimeoutMS = cfg.TurnTimeout.Milliseconds()
	rep.Config.ThinkMS = cfg.Think.Milliseconds()
	for _, s := range cfg.Scenarios {
		rep.Config.Scenarios = append(rep.Config.Scenarios, string(s))
	}
	if _, err := r.mon.sample(); err != nil {
		return nil, fmt.Errorf("read the server's processes (pid %d): %w", cfg.ServerPID, err)
	}
	mctx, stopMonitor := context.WithCancel(ctx)
	defer stopMonitor()
	go r.mon.run(mctx, 250*time.Millisecond)

	// Environment names are unique in a workspace: one per run.
	envName := fmt.Sprintf("bench-%s-%d", time.Now().UTC().Format("20060102-150405.000"), os.Getpid())
	envr, err := r.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: envName})
	if err != nil {
		return nil, fmt.Errorf("create an environment at %s: %w", cfg.BaseURL, err)
	}
	r.envID = envr.ID

	if cfg.Idle > 0 {
		idle, closeIdle, err := r.openIdle(ctx)
		defer closeIdle()
		if err != nil {
			return nil, err
		}
		rep.Idle = idle
	}
	if cfg.Sessions > 0 && cfg.Turns > 0 {
		for _, sc := range cfg.Scenarios {
			run, err := r.runScenario(ctx, sc)
			if err != nil {
				return nil, err
			}
			rep.Runs = append(rep.Runs, *run)
			if ctx.Err() != nil {
				return rep, fmt.Errorf("stopped during the %s run: %w", sc, ctx.Err())
			}
		}
	}
	return rep, nil
}

// session is one session with its driving stream and its fan-out subscribers.
type session struct {
	id     string
	st     *stream
	cancel context.CancelFunc // ends every stream of the session
	rec    recorder
	fanout []*recorder
	// measuring is set when the timed turns start: the fan-out subscribers record from then.
	measuring atomic.Bool
	wg        sync.WaitGroup
}

func (s *session) close() {
	s.cancel()
	_ = s.st.Close()
	s.wg.Wait()
}

// recorder collects one goroutine's samples; runs merge them at the end.
type recorder struct {
	turns, posts, delivery []time.Duration
	events                 int
	errors                 map[string]int
}

func (rc *recorder) fail(kind string) {
	if rc.errors == nil {
		rc.errors = map[string]int{}
	}
	rc.errors[kind]++
}

// newAgent creates the agent every session of sc runs.
func (r *runner) newAgent(ctx context.Context, sc Scenario) (string, error) {
	a, err := r.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "bench-" + string(sc), Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}, Tools: sc.tools()})
	if err != nil {
		return "", fmt.Errorf("create the %s agent: %w", sc, err)
	}
	return a.ID, nil
}

// openSession creates a session of agentID and opens its driving stream and fanout more.
func (r *runner) openSession(ctx context.Context, agentID string, fanout int) (*session, error) {
	sess, err := r.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(agentID)}, EnvironmentID: r.envID})
	if err != nil {
		return nil, &loadError{kind: "create_session" + statusSuffix(err), err: err}
	}
	// The session's streams end with the session, or with the run.
	sctx, cancel := context.WithCancel(ctx)
	s := &session{id: sess.ID, cancel: cancel}
	s.st = r.client.Beta.Sessions.Events.StreamEvents(sctx, sess.ID, anthropic.BetaSessionEventStreamParams{})
	if err := s.st.Err(); err != nil {
		cancel()
		return nil, &loadError{kind: "open_stream" + statusSuffix(err), err: err}
	}
	s.fanout = make([]*recorder, fanout)
	for i := range fanout {
		st := r.client.Beta.Sessions.Events.StreamEvents(sctx, sess.ID, anthropic.BetaSessionEventStreamParams{})
		if err := st.Err(); err != nil {
			s.close()
			return nil, &loadError{kind: "open_stream" + statusSuffix(err), err: err}
		}
		rec := &recorder{}
		s.fanout[i] = rec
		s.wg.Go(func() {
			defer st.Close()
			for st.Next() {
				if s.measuring.Load() {
					recordDelivery(rec, st.Current(), time.Now())
				}
			}
			if sctx.Err() == nil {
				rec.fail("fanout_stream_ended") // the server ended it, not the session's close
			}
		})
	}
	return s, nil
}

// recordDelivery records how long ev, received at got, took from its processed_at.
func recordDelivery(rc *recorder, ev anthropic.BetaManagedAgentsStreamSessionEventsUnion, got time.Time) {
	if ev.ProcessedAt.IsZero() || strings.HasPrefix(ev.Type, "user.") {
		return // a client's event: processed_at is when the run took it up, not its commit
	}
	rc.delivery = append(rc.delivery, max(got.Sub(ev.ProcessedAt), 0))
}

// loadError is a failure of one kind (the report's errors_by_kind).
type loadError struct {
	kind string
	err  error
}

func (e *loadError) Error() string {
	if e.err == nil {
		return e.kind
	}
	return e.kind + ": " + e.err.Error()
}
func (e *loadError) Unwrap() error { return e.err }

func kindOf(err error) string {
	if le, ok := errors.AsType[*loadError](err); ok {
		return le.kind
	}
	return "other"
}

// statusSuffix is "_429" for an API error with status 429, "" for a transport error.
func statusSuffix(err error) string {
	if apiErr, ok := errors.AsType[*anthropic.Error](err); ok {
		return fmt.Sprintf("_%d", apiErr.StatusCode)
	}
	return ""
}

// turn runs one turn of sc on s: the user message, answers to requires_action if sc parks,
// until session.status_idle with end_turn. The session cannot go on after an error unless
// first reports that the turn's first POST failed (nothing was started).
func (r *runner) turn(ctx context.Context, s *session, sc Scenario, rec *recorder) (first bool, err error) {
	start := time.Now()
	events := []anthropic.BetaManagedAgentsEventParamsUnion{userMessage(sc.text())}
	for round := range answerRounds {
		sent := time.Now()
		_, err := r.client.Beta.Sessions.Events.Send(ctx, s.id, anthropic.BetaSessionEventSendParams{Events: events})
		if err != nil {
			return round == 0, &loadError{kind: "post" + statusSuffix(err), err: err}
		}
		rec.posts = append(rec.posts, time.Since(sent))
		idle, err := r.untilIdle(ctx, s, rec)
		if err != nil {
			return false, err
		}
		switch reason := idle.StopReason.Type; {
		case reason == "end_turn":
			rec.turns = append(rec.turns, time.Since(start))
			return false, nil
		case reason == "requires_action" && len(idle.StopReason.EventIDs) > 0 && len(sc.answer(idle.StopReason.EventIDs)) > 0:
			events = sc.answer(idle.StopReason.EventIDs)
		default:
			return false, &loadError{kind: "stop_" + reason}
		}
	}
	return false, &loadError{kind: "stop_requires_action", err: fmt.Errorf("still parked after %d answers", answerRounds-1)}
}

// untilIdle reads s's driving stream up to the next session.status_idle, recording every
// event; when none comes within the turn timeout the stream is closed (the session ends).
func (r *runner) untilIdle(ctx context.Context, s *session, rec *recorder) (anthropic.BetaManagedAgentsStreamSessionEventsUnion, error) {
	var timedOut atomic.Bool
	guard := time.AfterFunc(r.cfg.TurnTimeout, func() { timedOut.Store(true); _ = s.st.Close() })
	defer guard.Stop()
	for s.st.Next() {
		ev := s.st.Current()
		recordDelivery(rec, ev, time.Now())
		rec.events++
		switch ev.Type {
		case "session.error":
			rec.fail("session_error")
		case "session.status_idle":
			return ev, nil
		}
	}
	if ctx.Err() != nil {
		return anthropic.BetaManagedAgentsStreamSessionEventsUnion{}, &loadError{kind: "cancelled", err: ctx.Err()}
	}
	if timedOut.Load() {
		return anthropic.BetaManagedAgentsStreamSessionEventsUnion{}, &loadError{kind: "timeout", err: fmt.Errorf("no idle within %v", r.cfg.TurnTimeout)}
	}
	return anthropic.BetaManagedAgentsStreamSessionEventsUnion{}, &loadError{kind: "stream_ended", err: s.st.Err()}
}

// runScenario opens cfg.Sessions sessions of sc, then runs cfg.Turns turns on each at once.
func (r *runner) runScenario(ctx context.Context, sc Scenario) (*RunReport, error) {
	agentID, err := r.newAgent(ctx, sc)
	if err != nil {
		return nil, err
	}
	r.logger.Info("opening sessions", "scenario", sc, "sessions", r.cfg.Sessions, "subscribers_per_session", 1+r.cfg.Fanout, "warmup", r.cfg.Warmup)
	setupErrs := &recorder{}
	sessions := r.openMany(ctx, r.cfg.Sessions, setupErrs, func(ctx context.Context) (*session, error) {
		s, err := r.openSession(ctx, agentID, r.cfg.Fanout)
		if err != nil || !r.cfg.Warmup {
			return s, err
		}
		if _, err := r.turn(ctx, s, sc, &recorder{}); err != nil {
			s.close()
			return nil, fmt.Errorf("warm-up turn: %w", err)
		}
		return s, nil
	})
	defer func() {
		for _, s := range sessions {
			s.close()
		}
	}()

	r.done.Store(0)
	var setupFailed int64
	for _, n := range setupErrs.errors {
		setupFailed += int64(n)
	}
	r.failed.Store(setupFailed)
	start, err := r.mon.mark()
	if err != nil {
		return nil, fmt.Errorf("read the server's processes: %w", err)
	}
	stopProgress := r.showProgress(ctx, string(sc), len(sessions)*r.cfg.Turns)
	began := time.Now()
	for _, s := range sessions {
		s.measuring.Store(true)
	}
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Go(func() {
			for n := range r.cfg.Turns {
				pause := r.cfg.Think
				if n == 0 {
					pause = r.cfg.Think * time.Duration(i) / time.Duration(len(sessions))
				}
				if !sleepCtx(ctx, pause) {
					return
				}
				first, err := r.turn(ctx, s, sc, &s.rec)
				if err == nil {
					r.done.Add(1)
					continue
				}
				r.failed.Add(1)
				s.rec.fail(kindOf(err))
				r.logger.Debug("turn failed", "session", s.id, "error", err)
				if !first || ctx.Err() != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	stopProgress()

	out := &RunReport{Scenario: string(sc), Sessions: r.cfg.Sessions, TurnsPerSession: r.cfg.Turns,
		SubscribersPerSession: 1 + r.cfg.Fanout, DurationSeconds: elapsed.Seconds(), ErrorsByKind: map[string]int{}}
	for _, s := range sessions {
		s.close() // the fan-out readers are done once it returns
	}
	all := []*recorder{setupErrs}
	for _, s := range sessions {
		all = append(all, &s.rec)
		all = append(all, s.fanout...)
	}
	var turns, posts, delivery []time.Duration
	for _, rc := range all {
		turns, posts, delivery = append(turns, rc.turns...), append(posts, rc.posts...), append(delivery, rc.delivery...)
		out.Events += rc.events
		for k, n := range rc.errors {
			out.ErrorsByKind[k] += n
			out.Errors += n
		}
	}
	out.Turns = len(turns)
	out.TurnLatency, out.PostAck, out.Delivery = Summarize(turns), Summarize(posts), Summarize(delivery)
	if elapsed > 0 {
		out.TurnsPerSecond = float64(out.Turns) / elapsed.Seconds()
		out.EventsPerSecond = float64(out.Events) / elapsed.Seconds()
	}
	if out.Processes, err = r.mon.usage(start, out.Turns); err != nil {
		return nil, fmt.Errorf("read the server's processes: %w", err)
	}
	if r.cfg.ServerPID == 0 {
		out.Processes = nil // bench alone says nothing of the server
	}
	for _, p := range out.Processes {
		if p.Name != groupClient && p.Name != groupMachine {
			out.CPUMillisPerTurn += p.CPUMillisPerTurn
		}
	}
	return out, nil
}

// openMany opens n sessions with open, setupParallel at a time; a failure is recorded in
// errs and leaves that session out.
func (r *runner) openMany(ctx context.Context, n int, errs *recorder, open func(context.Context) (*session, error)) []*session {
	var (
		mu  sync.Mutex
		out []*session
		wg  sync.WaitGroup
		sem = make(chan struct{}, setupParallel)
	)
	for range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s, err := open(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs.fail("setup_" + kindOf(err))
				r.logger.Warn("open a session", "error", err)
				return
			}
			out = append(out, s)
		})
	}
	wg.Wait()
	return out
}

// openIdle opens cfg.Idle sessions that each run one plain turn and then keep their stream
// open, and reads the processes' memory before and after.
func (r *runner) openIdle(ctx context.Context) (*IdleReport, func(), error) {
	agentID, err := r.newAgent(ctx, Plain)
	if err != nil {
		return nil, func() {}, err
	}
	before, err := r.mon.mark()
	if err != nil {
		return nil, func() {}, fmt.Errorf("read the server's processes: %w", err)
	}
	r.logger.Info("opening idle sessions", "sessions", r.cfg.Idle)
	errs := &recorder{}
	r.done.Store(0)
	r.failed.Store(0)
	stopProgress := r.showProgress(ctx, "idle", r.cfg.Idle)
	sessions := r.openMany(ctx, r.cfg.Idle, errs, func(ctx context.Context) (*session, error) {
		s, err := r.openSession(ctx, agentID, 0)
		if err != nil {
			r.failed.Add(1)
			return nil, err
		}
		if _, err := r.turn(ctx, s, Plain, &recorder{}); err != nil {
			r.failed.Add(1)
			s.close()
			return nil, err
		}
		r.done.Add(1)
		return s, nil
	})
	stopProgress()
	closeAll := func() {
		for _, s := range sessions {
			s.close()
		}
	}
	select {
	case <-ctx.Done():
		return nil, closeAll, ctx.Err()
	case <-time.After(idleSettle):
	}
	after, err := r.mon.sample()
	if err != nil {
		return nil, closeAll, fmt.Errorf("read the server's processes: %w", err)
	}
	rep := &IdleReport{Sessions: r.cfg.Idle, Opened: len(sessions), ErrorsByKind: map[string]int{}}
	for k, n := range errs.errors {
		rep.ErrorsByKind[k] += n
		rep.Errors += n
	}
	if r.cfg.ServerPID != 0 {
		for _, name := range []string{groupServer, groupPostgres, groupTemporal, groupClient} {
			a := after[name]
			if a == nil {
				continue
			}
			u := IdleUsage{Name: name, PID: a.pid, RSSAfterBytes: a.rssSum, PeakRSSBytes: a.hwm}
			if b := before[name]; b != nil {
				u.RSSBeforeBytes = b.rssSum
			}
			rep.Processes = append(rep.Processes, u)
		}
	}
	return rep, closeAll, nil
}

// sleepCtx waits d (nothing for d ≤ 0); false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
