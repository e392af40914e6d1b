//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/secretbox"
)

// TestDevCommand runs `managed-agents dev` as a user would: zero configuration, a turn through
// the official SDK (the README's Go quickstart), Ctrl-C, and a second start on the same data
// dir that still has everything.
func TestDevCommand(t *testing.T) {
	t.Parallel()
	bin := managedAgentsBinary(t)
	dataDir := filepath.Join(reachableTempDir(t), "data")
	addr := freeAddr(t)

	dev := startDev(t, bin, dataDir, addr)
	key, err := os.ReadFile(filepath.Join(dataDir, "api-key"))
	require.NoError(t, err, "dev generates a key on first start and keeps it in the data dir")

	// The README's Go quickstart.
	ctx := context.Background()
	client := anthropic.NewClient(option.WithBaseURL("http://"+addr), option.WithAPIKey(strings.TrimSpace(string(key))))
	sess, seen := devTurn(t, client)

	// Every role of dev records into one registry, answered on the API's listener.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		fams := scrape(t, "http://"+addr)
		assert.Equal(c, float64(1), sample(fams, "managed_agents_turns_finished_total", map[string]string{"stop_reason": "end_turn"}))
		assert.Equal(c, float64(1), sample(fams, "managed_agents_http_requests_total", map[string]string{"route": "POST /v1/sessions/{id}/events", "code": "200"}))
		// The API and the worker have a pool each, as they have in a deployment.
		assert.Positive(c, sample(fams, "managed_agents_db_pool_max_connections", map[string]string{"pool": "api"}))
		assert.Positive(c, sample(fams, "managed_agents_db_pool_acquires_total", map[string]string{"pool": "worker"}), "the worker's steps use its own pool")
	}, 10*time.Second, 20*time.Millisecond)

	// Ctrl-C stops everything dev started: a clean PostgreSQL shutdown removes its pid file.
	dev.interrupt(t)
	_, err = os.Stat(filepath.Join(dataDir, "postgres", "postmaster.pid"))
	require.ErrorIs(t, err, os.ErrNotExist, "PostgreSQL was stopped")

	// A second start on the same data dir keeps all data.
	startDev(t, bin, dataDir, addr)
	got, err := client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Equal(t, anthropic.BetaManagedAgentsSessionStatus("idle"), got.Status)
	page, err := client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{})
	require.NoError(t, err)
	require.Len(t, page.Data, len(seen))
}

// devTurn runs one turn through the official SDK (the README's Go quickstart) in a new
// session, and returns the session and the types of the events its stream saw.
func devTurn(t *testing.T, client anthropic.Client) (*anthropic.BetaManagedAgentsSession, []string) {
	t.Helper()
	ctx := context.Background()
	agent, err := client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "helper", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}})
	require.NoError(t, err)
	env, err := client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "dev-" + ids.New("")})
	require.NoError(t, err)
	sess, err := client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(agent.ID)}, EnvironmentID: env.ID})
	require.NoError(t, err)
	streamCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	stream := client.Beta.Sessions.Events.StreamEvents(streamCtx, sess.ID, anthropic.BetaSessionEventStreamParams{})
	defer stream.Close()
	_, err = client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "hello"}}}}}}})
	require.NoError(t, err)
	var seen []string
	for stream.Next() {
		ev := stream.Current()
		seen = append(seen, ev.Type)
		if ev.Type == "session.status_idle" && ev.StopReason.Type != "requires_action" {
			break
		}
	}
	require.NoError(t, stream.Err())
	require.Contains(t, seen, "agent.message")
	require.Equal(t, "session.status_idle", seen[len(seen)-1])
	return sess, seen
}

// TestDevSIGKILLLeavesNoChild kills dev with SIGKILL: none of its children outlives it (the
// Temporal dev server used to, and the next start then ran a second server on the same
// SQLite file), and a new start on the same data dir comes up and serves a turn.
func TestDevSIGKILLLeavesNoChild(t *testing.T) {
	t.Parallel()
	bin := managedAgentsBinary(t)
	dataDir := filepath.Join(reachableTempDir(t), "data")
	addr := freeAddr(t)
	dev := startDev(t, bin, dataDir, addr)
	require.NoError(t, dev.cmd.Process.Signal(syscall.SIGKILL))
	<-dev.done

	db := filepath.Join(dataDir, "temporal.db")
	deadline := time.Now().Add(30 * time.Second)
	for len(processesWithArg(t, db)) > 0 || len(processesWithArg(t, filepath.Join(dataDir, "postgres"))) > 0 {
		require.True(t, time.Now().Before(deadline), "children of the killed dev still run: temporal %v, postgres %v",
			processesWithArg(t, db), processesWithArg(t, filepath.Join(dataDir, "postgres")))
		time.Sleep(100 * time.Millisecond)
	}

	startDev(t, bin, dataDir, addr)
	key, err := os.ReadFile(filepath.Join(dataDir, "api-key"))
	require.NoError(t, err)
	devTurn(t, anthropic.NewClient(option.WithBaseURL("http://"+addr), option.WithAPIKey(strings.TrimSpace(string(key)))))
}

// processesWithArg lists the live processes that have arg among their arguments.
func processesWithArg(t *testing.T, arg string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil || strings.Contains(string(stat[strings.LastIndexByte(string(stat), ')'):]), ") Z") {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if slices.Contains(strings.Split(string(cmdline), "\x00"), arg) {
			pids = append(pids, pid)
		}
	}
	return pids
}

type devProcess struct {
	cmd  *exec.Cmd
	done chan error
}

// startDev starts dev with none of our variables but extraEnv, and waits until it is ready.
func startDev(t *testing.T, bin, dataDir, addr string, extraEnv ...string) *devProcess {
	t.Helper()
	cmd := exec.Command(bin, "dev", "--addr", addr, "--data-dir", dataDir)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MANAGED_AGENT_") {
			env = append(env, kv) // zero configuration: none of ours
		}
	}
	env = append(env, extraEnv...)
	cmd.Env = env
	logFile, err := os.OpenFile(filepath.Join(filepath.Dir(dataDir), "dev.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	d := &devProcess{cmd: cmd, done: make(chan error, 1)}
	go func() { d.done <- cmd.Wait(); logFile.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		select {
		case err := <-d.done:
			log, _ := os.ReadFile(filepath.Join(filepath.Dir(dataDir), "dev.log"))
			t.Fatalf("dev exited before it was ready: %v\n%s", err, log)
		case <-time.After(100 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "dev did not become ready")
	}
}

// interrupt sends Ctrl-C and requires a clean exit.
func (d *devProcess) interrupt(t *testing.T) {
	t.Helper()
	require.NoError(t, d.cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-d.done:
		require.NoError(t, err, "dev exits 0 on Ctrl-C")
	case <-time.After(60 * time.Second):
		t.Fatal("dev did not stop on Ctrl-C")
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return fmt.Sprintf("127.0.0.1:%d", ln.Addr().(*net.TCPAddr).Port)
}

// TestDevRestartsDeadChildren kills dev's PostgreSQL and then its Temporal dev server: each
// time /readyz answers 503 until dev has brought the child back, and a turn then completes.
func TestDevRestartsDeadChildren(t *testing.T) {
	t.Parallel()
	bin := managedAgentsBinary(t)
	dataDir := filepath.Join(reachableTempDir(t), "data")
	addr := freeAddr(t)
	startDev(t, bin, dataDir, addr)
	key, err := os.ReadFile(filepath.Join(dataDir, "api-key"))
	require.NoError(t, err)
	client := anthropic.NewClient(option.WithBaseURL("http://"+addr), option.WithAPIKey(strings.TrimSpace(string(key))))

	for _, tc := range []struct {
		name, pidFile string
	}{
		{"postgres", filepath.Join(dataDir, "postgres", "postmaster.pid")},
		{"temporal", filepath.Join(dataDir, "temporal.db.pid")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(tc.pidFile)
			require.NoError(t, err)
			pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
			require.NoError(t, err)
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			require.Eventually(t, func() bool { return readyz(addr) != http.StatusOK }, 30*time.Second, 20*time.Millisecond,
				"/readyz reports the dead %s", tc.name)
			require.Eventually(t, func() bool { return readyz(addr) == http.StatusOK }, 90*time.Second, 50*time.Millisecond,
				"dev brings %s back", tc.name)
			devTurn(t, client)
		})
	}
}

// readyz returns the status of GET /readyz, 0 if there is no answer.
func readyz(addr string) int {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDevKeepsCredentialsOutOfEnviron: a process of the same user (a command in the local
// sandbox) reading /proc/PID/environ of dev, or of its Temporal child, does not find the API
// key dev was given, and the key still works.
func TestDevKeepsCredentialsOutOfEnviron(t *testing.T) {
	t.Parallel()
	bin := managedAgentsBinary(t)
	dataDir := filepath.Join(reachableTempDir(t), "data")
	addr := freeAddr(t)
	const key = "sk-ma-test-secret-7d1c0e"
	vaultKeys := secretbox.NewSpec("k1")
	dev := startDev(t, bin, dataDir, addr, "MANAGED_AGENT_API_KEY="+key, "MANAGED_AGENT_VAULT_KEYS="+vaultKeys)

	b, err := os.ReadFile(filepath.Join(dataDir, "temporal.db.pid"))
	require.NoError(t, err)
	temporalPID := strings.TrimSpace(string(b))
	for _, pid := range []string{strconv.Itoa(dev.cmd.Process.Pid), temporalPID} {
		environ, err := os.ReadFile(filepath.Join("/proc", pid, "environ"))
		require.NoError(t, err)
		require.NotContains(t, string(environ), key, "/proc/%s/environ", pid)
		require.NotContains(t, string(environ), vaultKeys[len("k1:"):], "/proc/%s/environ", pid)
	}
	client := anthropic.NewClient(option.WithBaseURL("http://"+addr), option.WithAPIKey(key))
	_, err = client.Beta.Agents.List(context.Background(), anthropic.BetaAgentListParams{})
	require.NoError(t, err, "the key dev was given works")
}

// reachableTempDir is t.TempDir, which PostgreSQL's server user (`postgres`, when the tests
// run as root) may pass through: the testing package makes its parent 0700, and dev changes
// no directory above its data dir.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711))
		require.NoError(t, os.Chmod(dir, 0o711))
	}
	return dir
}
