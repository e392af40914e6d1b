//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/managed-agents/managed-agents/internal/turns"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/wire"
)

var (
	binaryOnce sync.Once
	binaryDir  string
	binaryPath string
	binaryErr  error
)

// removeBinary deletes the binary managedAgentsBinary built (TestMain calls it), so a test
// run leaves nothing in the temporary directory.
func removeBinary() {
	if binaryDir != "" {
		_ = os.RemoveAll(binaryDir)
	}
}

// managedAgentsBinary builds the real binary once per test run: the crash test kills real
// worker processes.
func managedAgentsBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ma-bin-")
		if err != nil {
			binaryErr = err
			return
		}
		binaryDir, binaryPath = dir, filepath.Join(dir, "managed-agents")
		cmd := exec.Command("go", "build", "-o", binaryPath, "../..")
		// Static, as `make build` makes it: the docker sandbox runs this binary in its containers.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			binaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binaryErr)
	return binaryPath
}

// workerProcess is a `managed-agents worker` child process.
type workerProcess struct {
	cmd *exec.Cmd
	log *os.File
}

func startWorkerProcess(t *testing.T, bin string, env []string, logPath string) *workerProcess {
	t.Helper()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	cmd := exec.Command(bin, "worker")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Die with the test: a leaked worker would keep taking this queue's tasks.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	return &workerProcess{cmd: cmd, log: logFile}
}

func (w *workerProcess) kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	_ = w.cmd.Wait()
	w.log.Close()
}

// TestCrashWorkerKilledRepeatedly kills the worker process with SIGKILL at random points of
// tool-heavy runs, at least 20 times, starting a fresh one each time. Every run must finish;
// the log must have no duplicate and no missing event; no tool call may run twice (each call
// appends its own line to a file in the sandbox, which must hold every line exactly once).
func TestCrashWorkerKilledRepeatedly(t *testing.T) {
	bin := managedAgentsBinary(t)
	tc := sharedTemporal(t)
	queue := "crash-" + ids.New("")
	e := newAPIEnv(t, app.Config{TaskQueue: queue, ModelRetry: fastRetry}, tc)
	sandboxDir := t.TempDir()
	env := []string{
		"MANAGED_AGENT_DATABASE_URL=" + e.dbURL,
		"MANAGED_AGENT_TEMPORAL_ADDRESS=" + temporalSrv.FrontendHostPort(),
		"MANAGED_AGENT_TEMPORAL_TASK_QUEUE=" + queue,
		"MANAGED_AGENT_SANDBOX_DIR=" + sandboxDir,
		"MANAGED_AGENT_LOG_LEVEL=warn",
		// Off: a fixed port (:9090 by default) may be taken by another test or process.
		"MANAGED_AGENT_METRICS_ADDR=off",
	}
	logPath := filepath.Join(t.TempDir(), "workers.log")
	ctx := context.Background()
	agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "crashy",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}, Tools: []anthropic.BetaAgentNewParamsToolUnion{builtinTools("always_allow")}})
	require.NoError(t, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "crash"})
	require.NoError(t, err)

	const sessionCount, turnCount, callsPerTurn = 3, 3, 6
	var sessionIDs []string
	for range sessionCount {
		s, err := newSession(t, e.client, agent.ID, envr.ID)
		require.NoError(t, err)
		sessionIDs = append(sessionIDs, s.ID)
	}

	w := startWorkerProcess(t, bin, env, logPath)
	defer func() { w.kill() }()

	// Each session runs its turns one after another; a turn is a message with several tool
	// calls, each sleeping a little so kills land mid-call as well as between steps.
	var wg sync.WaitGroup
	errs := make(chan error, sessionCount)
	for si, id := range sessionIDs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for turn := range turnCount {
				var lines []string
				for call := range callsPerTurn {
					lines = append(lines, fmt.Sprintf(`/tool bash {"command":"sleep 0.05; echo s%d-t%d-c%d >> effects.txt"}`, si, turn, call))
				}
				if err := sendAndAwaitIdle(e, id, strings.Join(lines, "\n")); err != nil {
					errs <- fmt.Errorf("session %s turn %d: %w", id, turn, err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// Kill at random points while the runs are under way; after enough kills let them
	// finish. Every kill costs a recovery (the heartbeat timeout notices the dead worker), so
	// killing forever would mostly measure recovery time.
	const wantKills = 24
	kills := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(time.Duration(300+rand.IntN(700)) * time.Millisecond):
			if kills < wantKills {
				w.kill()
				kills++
				w = startWorkerProcess(t, bin, env, logPath)
			}
		}
	}
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("killed the worker %d times", kills)
	require.GreaterOrEqual(t, kills, 20)

	provider := local.New(sandboxDir)
	for si, id := range sessionIDs {
		history := e.history(t, id)
		requireConsistentLog(t, history)
		ref, err := turns.New(e.api.Store, discardLogger()).SandboxRef(ctx, id)
		require.NoError(t, err)
		dir, err := provider.Workspace(ref)
		require.NoError(t, err)
		effects, err := os.ReadFile(filepath.Join(dir, "effects.txt"))
		require.NoError(t, err)
		got := strings.Fields(string(effects))
		sort.Strings(got)
		var want []string
		for turn := range turnCount {
			for call := range callsPerTurn {
				want = append(want, fmt.Sprintf("s%d-t%d-c%d", si, turn, call))
			}
		}
		sort.Strings(want)
		require.Equal(t, want, got, "every tool call ran exactly once in session %s", id)
	}
}

// sendAndAwaitIdle sends a message and waits, by reading the log, until its turn is over.
func sendAndAwaitIdle(e *env, sessionID, text string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sent, err := e.client.Beta.Sessions.Events.Send(ctx, sessionID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage(text)}})
	if err != nil {
		return err
	}
	msgID := sent.Data[0].ID
	for {
		hist, err := e.api.Store.History(ctx, sessionID)
		if err != nil {
			return err
		}
		seen := false
		for _, ev := range hist {
			seen = seen || ev.ID == msgID && ev.ProcessedAt != nil
			if seen && ev.Type == wire.EventSessionStatusIdle {
				var body struct {
					StopReason struct{ Type string } `json:"stop_reason"`
				}
				_ = json.Unmarshal(ev.Body, &body)
				if body.StopReason.Type != "end_turn" {
					return fmt.Errorf("turn ended with %s", body.StopReason.Type)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("turn did not finish: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (e *env) history(t *testing.T, sessionID string) []wire.Event {
	t.Helper()
	h, err := e.api.Store.History(context.Background(), sessionID)
	require.NoError(t, err)
	return h
}

// requireConsistentLog checks what a crash could break: seqs strictly increase; each
// model request has exactly one end; each tool call exactly one result; each turn one
// running/idle pair; no event is left undelivered.
func requireConsistentLog(t *testing.T, h []wire.Event) {
	t.Helper()
	results := map[string]int{}
	ends := map[string]int{}
	var starts, uses []string
	var running, idle int
	for i, ev := range h {
		if i > 0 {
			require.Greater(t, ev.Seq, h[i-1].Seq)
		}
		require.NotNil(t, ev.ProcessedAt, "event %s (%s) left undelivered", ev.ID, ev.Type)
		var body map[string]any
		require.NoError(t, json.Unmarshal(ev.Body, &body))
		switch ev.Type {
		case "span.model_request_start":
			starts = append(starts, ev.ID)
		case "span.model_request_end":
			ends[body["model_request_start_id"].(string)]++
		case "agent.tool_use":
			uses = append(uses, ev.ID)
		case "agent.tool_result":
			results[body["tool_use_id"].(string)]++
		case "session.status_running":
			running++
		case "session.status_idle":
			idle++
		}
	}
	for _, id := range starts {
		require.Equal(t, 1, ends[id], "model request %s must end exactly once", id)
	}
	for _, id := range uses {
		require.Equal(t, 1, results[id], "tool call %s must have exactly one result", id)
	}
	require.Equal(t, running, idle, "every running has its idle")
	require.Len(t, results, len(uses))
}
