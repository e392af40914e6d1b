//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/turns"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// TestWorkerSIGTERMDrainsToolCall stops the worker process with SIGTERM while a bash call
// runs. Within the stop timeout the stop waits for the call, which records its real output
// (it used to be cut at once, and a later attempt reported it "interrupted by a worker
// failure"); past the timeout the call is cut and then handled as after a crash: reported
// as interrupted, never run a second time.
func TestWorkerSIGTERMDrainsToolCall(t *testing.T) {
	bin := managedAgentsBinary(t)
	tc := sharedTemporal(t)
	for _, tt := range []struct {
		name        string
		stopTimeout string
		command     string
		wantError   bool
		wantText    string
	}{
		{"drained", "", "echo run >> runs.txt; sleep 2; echo done", false, "done"},
		{"cut at the deadline", "500ms", "echo run >> runs.txt; sleep 10; echo done", true, "interrupted by a worker failure"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			queue := "stop-" + ids.New("")
			e := newAPIEnv(t, app.Config{TaskQueue: queue, ModelRetry: fastRetry}, tc)
			sandboxDir := t.TempDir()
			env := []string{
				"MANAGED_AGENT_DATABASE_URL=" + e.dbURL,
				"MANAGED_AGENT_TEMPORAL_ADDRESS=" + temporalSrv.FrontendHostPort(),
				"MANAGED_AGENT_TEMPORAL_TASK_QUEUE=" + queue,
				"MANAGED_AGENT_SANDBOX_DIR=" + sandboxDir,
				"MANAGED_AGENT_LOG_LEVEL=warn",
			}
			if tt.stopTimeout != "" {
				env = append(env, "MANAGED_AGENT_WORKER_STOP_TIMEOUT="+tt.stopTimeout)
			}
			logPath := filepath.Join(t.TempDir(), "workers.log")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "stopper",
				Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}, Tools: []anthropic.BetaAgentNewParamsToolUnion{builtinTools("always_allow")}})
			require.NoError(t, err)
			envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "stop"})
			require.NoError(t, err)
			sess, err := newSession(t, e.client, agent.ID, envr.ID)
			require.NoError(t, err)

			w := startWorkerProcess(t, bin, env, logPath)
			defer func() { w.kill() }()
			input, err := json.Marshal(map[string]string{"command": tt.command})
			require.NoError(t, err)
			_, err = e.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{
				Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("/tool bash " + string(input))}})
			require.NoError(t, err)

			// The command is running once it has written its line.
			engine := turns.New(e.api.Store, discardLogger())
			provider := local.New(sandboxDir)
			runs := func() string {
				ref, err := engine.SandboxRef(ctx, sess.ID)
				if err != nil {
					return ""
				}
				dir, err := provider.Workspace(ref)
				if err != nil {
					return ""
				}
				b, _ := os.ReadFile(filepath.Join(dir, "runs.txt"))
				return string(b)
			}
			for runs() == "" {
				select {
				case <-ctx.Done():
					t.Fatal("the command did not start")
				case <-time.After(20 * time.Millisecond):
				}
			}
			require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
			err = w.cmd.Wait()
			w.log.Close()
			require.NoError(t, err, "the worker exits 0 after a stop")

			// A fresh worker runs the rest of the turn.
			w = startWorkerProcess(t, bin, env, logPath)
			var result *wire.ToolResultBody
			for result == nil || !idleAfter(e.history(t, sess.ID)) {
				for _, ev := range e.history(t, sess.ID) {
					if ev.Type == wire.EventAgentToolResult {
						var body wire.ToolResultBody
						require.NoError(t, json.Unmarshal(ev.Body, &body))
						result = &body
					}
				}
				select {
				case <-ctx.Done():
					t.Fatal("the turn did not finish")
				case <-time.After(50 * time.Millisecond):
				}
			}
			requireConsistentLog(t, e.history(t, sess.ID))
			raw, err := json.Marshal(result)
			require.NoError(t, err)
			require.Equal(t, tt.wantError, result.IsError, "%s", raw)
			require.Contains(t, string(raw), tt.wantText)
			require.Equal(t, "run\n", runs(), "the command ran once")
		})
	}
}

// idleAfter reports whether the log ends with an idle status after a running one.
func idleAfter(h []wire.Event) bool {
	return len(h) > 0 && h[len(h)-1].Type == wire.EventSessionStatusIdle
}
