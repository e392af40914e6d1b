//go:build integration

package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/loadtest"
)

// runBench runs `managed-agents bench args… --json FILE` with env added to a copy of ours
// without MANAGED_AGENT_* variables, requires it to succeed, and returns its report.
func runBench(t *testing.T, env []string, args ...string) (*loadtest.Report, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.json")
	cmd := exec.Command(managedAgentsBinary(t), append([]string{"bench", "--json", out}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MANAGED_AGENT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Run(), "bench %v\nstdout:\n%s\nstderr:\n%s", args, stdout.String(), stderr.String())
	t.Logf("bench %v:\n%s", args, stdout.String())
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var rep loadtest.Report
	require.NoError(t, json.Unmarshal(b, &rep), "%s", b)
	return &rep, stdout.String()
}

// requireCleanRun checks a run's counts and that every figure was measured.
func requireCleanRun(t *testing.T, run loadtest.RunReport, scenario string, sessions, turns int) {
	t.Helper()
	require.Equal(t, scenario, run.Scenario)
	require.Equal(t, sessions*turns, run.Turns, "errors: %v", run.ErrorsByKind)
	require.Zero(t, run.Errors, "errors: %v", run.ErrorsByKind)
	require.Equal(t, sessions*turns, run.TurnLatency.Count)
	for name, v := range map[string]float64{"turn p50": run.TurnLatency.P50, "turn p90": run.TurnLatency.P90, "turn p99": run.TurnLatency.P99,
		"turn max": run.TurnLatency.Max, "POST p50": run.PostAck.P50, "POST p99": run.PostAck.P99, "delivery p50": run.Delivery.P50,
		"delivery p99": run.Delivery.P99, "turns/s": run.TurnsPerSecond, "events/s": run.EventsPerSecond} {
		require.Positive(t, v, name)
	}
	require.GreaterOrEqual(t, run.TurnLatency.P99, run.TurnLatency.P50)
	require.GreaterOrEqual(t, run.TurnLatency.Max, run.TurnLatency.P99)
}

// TestBenchAgainstServer drives the harness's server (API and worker in this process) with the
// load tool, as a user drives a deployed one.
func TestBenchAgainstServer(t *testing.T) {
	t.Parallel()
	e := newRunningEnv(t)
	rep, table := runBench(t, nil, "--base-url", e.srv.URL, "--api-key", e.key, "--sessions", "2", "--turns", "3", "--scenario", "tool",
		"--think", "300ms")
	require.Len(t, rep.Runs, 1)
	run := rep.Runs[0]
	requireCleanRun(t, run, "tool", 2, 3)
	// With think time each session waits 300 ms before its second and third turn.
	require.EqualValues(t, 300, rep.Config.ThinkMS)
	require.GreaterOrEqual(t, run.DurationSeconds, 0.6)
	// A tool turn commits at least user.message, running, two model spans, tool use and
	// result, the message, usage and idle.
	require.GreaterOrEqual(t, run.Events, 6*8)
	require.Equal(t, 6, run.PostAck.Count, "one POST per tool turn")
	require.Empty(t, run.Processes, "an external server without --pid: no process figures")
	require.Equal(t, "external", rep.Server)
	require.Contains(t, table, "tool")
}

// TestBenchScenarios runs every other scenario once, briefly, with fan-out subscribers and
// idle sessions: the answer paths (tool confirmation, custom tool result) and the options.
func TestBenchScenarios(t *testing.T) {
	t.Parallel()
	e := newRunningEnv(t)
	rep, _ := runBench(t, nil, "--base-url", e.srv.URL, "--api-key", e.key, "--sessions", "1", "--turns", "2",
		"--scenario", "plain,tools3,confirm,custom", "--fanout", "2", "--idle", "2", "--warmup")
	require.NotNil(t, rep.Idle)
	require.Equal(t, 2, rep.Idle.Opened)
	require.Zero(t, rep.Idle.Errors, "%v", rep.Idle.ErrorsByKind)
	require.Len(t, rep.Runs, 4)
	for i, sc := range []string{"plain", "tools3", "confirm", "custom"} {
		run := rep.Runs[i]
		requireCleanRun(t, run, sc, 1, 2)
		require.Equal(t, 3, run.SubscribersPerSession)
		posts := 2
		if sc == "confirm" || sc == "custom" {
			posts = 4 // the message and the answer
		}
		require.Equal(t, posts, run.PostAck.Count, sc)
		// Every subscriber sees every event the server wrote.
		require.Greater(t, run.Delivery.Count, 2*run.Events, sc)
	}
}

// TestBenchStartsDev runs the load tool with no server: it starts dev in a temporary data dir,
// reports the CPU and memory of dev's processes, and leaves nothing behind.
func TestBenchStartsDev(t *testing.T) {
	t.Parallel()
	tmp := reachableTempDir(t)
	rep, table := runBench(t, []string{"TMPDIR=" + tmp}, "--sessions", "2", "--turns", "3", "--scenario", "tool")
	require.Equal(t, "dev started by bench", rep.Server)
	require.Len(t, rep.Runs, 1)
	run := rep.Runs[0]
	requireCleanRun(t, run, "tool", 2, 3)
	require.Positive(t, run.CPUMillisPerTurn)
	got := map[string]loadtest.ProcessUsage{}
	for _, p := range run.Processes {
		got[p.Name] = p
	}
	for _, name := range []string{"server", "postgres", "temporal", "bench"} {
		p, ok := got[name]
		require.True(t, ok, "no %s in %+v", name, run.Processes)
		require.Positive(t, p.PeakRSSBytes, name)
		require.Positive(t, p.PeakRSSSumBytes, name)
		if name != "bench" {
			require.Positive(t, p.CPUSeconds, name)
			require.Positive(t, p.PID, name)
		}
	}
	require.Equal(t, rep.ServerPID, got["server"].PID)
	require.Greater(t, got["postgres"].Processes, 1, "the postmaster and its backends")
	// The machine's row counts every busy CPU, so about at least what the tree's groups used:
	// the kernel samples the machine's time by ticks and a process's more finely, so the two
	// may part by a few per cent.
	machine, ok := got["machine"]
	require.True(t, ok, "no machine in %+v", run.Processes)
	require.GreaterOrEqual(t, machine.CPUSeconds, 0.9*(got["server"].CPUSeconds+got["postgres"].CPUSeconds+got["temporal"].CPUSeconds))
	require.InDelta(t, run.CPUMillisPerTurn, got["server"].CPUMillisPerTurn+got["postgres"].CPUMillisPerTurn+got["temporal"].CPUMillisPerTurn, 0.01,
		"the scenario's CPU/turn is the server's three groups, not the machine")
	require.Contains(t, table, "temporal")

	// dev was stopped and its data dir removed.
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(rep.ServerPID)))
	require.ErrorIs(t, err, os.ErrNotExist, "dev still runs")
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left, "bench leaves nothing in TMPDIR")
}
