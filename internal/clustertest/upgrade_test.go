//go:build cluster

package clustertest

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"
)

// TestUpgradeAndRollback installs the previous chart with the previous image (PREV_CHART,
// PREV_IMG: make test-cluster builds them from CLUSTER_PREVIOUS_REF), makes sessions with
// turns, upgrades to this chart and image with the data in place, and rolls back: every
// session keeps every event through both, and each version runs new turns on them.
func TestUpgradeAndRollback(t *testing.T) {
	prevChart, prevImg := os.Getenv("PREV_CHART"), os.Getenv("PREV_IMG")
	require.NotEmpty(t, prevChart, "PREV_CHART is set by make test-cluster")
	require.NotEmpty(t, prevImg, "PREV_IMG is set by make test-cluster")
	r := &release{ns: "upgrades", name: "up"}
	values := imageValues(t)
	// The previous chart as a user installed it: its own defaults (it has none of this
	// chart's new values), with the offline images.
	prevValues := append(releaseImages(t), "--set", "image.repository="+strings.Split(prevImg, ":")[0],
		"--set-string", "image.tag="+strings.Split(prevImg, ":")[1])
	helm(t, append([]string{"install", r.name, prevChart, "--namespace", r.ns, "--create-namespace",
		"--wait", "--timeout", "6m"}, prevValues...)...)
	t.Cleanup(func() { uninstall(t, r) })

	c := clusterIPClient(t, r)
	ctx := context.Background()
	agent, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "upgrades", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}})
	require.NoError(t, err)
	env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "upgrades"})
	require.NoError(t, err)
	var ids []string
	for range 3 {
		s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
			Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(agent.ID)}, EnvironmentID: env.ID})
		require.NoError(t, err)
		require.NoError(t, sendAndAwaitTurn(c, s.ID, "before the upgrade", 3*time.Minute))
		ids = append(ids, s.ID)
	}
	logs := map[string][]string{}
	snapshot := func(stage string) {
		for _, id := range ids {
			var got []string
			for _, ev := range allEvents(t, c, id) {
				got = append(got, ev.ID)
			}
			if prev, ok := logs[id]; ok {
				require.GreaterOrEqual(t, len(got), len(prev), "%s: session %s lost events", stage, id)
				require.Equal(t, prev, got[:len(prev)], "%s: session %s keeps its log", stage, id)
			}
			logs[id] = got
		}
	}
	snapshot("installed")
	installed := map[string][]string{}
	for id, evs := range logs {
		installed[id] = evs
	}
	preUpgrade := append([]string{}, ids...)

	// docs/upgrades.md's backup, as written there (release and namespace substituted).
	pg := r.fullname() + "-postgresql-0"
	dump := filepath.Join(t.TempDir(), "managed-agents.dump")
	out, err := os.Create(dump)
	require.NoError(t, err)
	cmd := exec.Command(tools.kubectl, "-n", r.ns, "exec", pg, "--",
		"sh", "-c", `PGPASSWORD="$POSTGRES_PASSWORD" pg_dump -U "$POSTGRES_USER" -d "$POSTGRES_DB" -Fc`)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = out, &stderr
	require.NoError(t, cmd.Run(), "pg_dump: %s", stderr.String())
	require.NoError(t, out.Close())
	info, err := os.Stat(dump)
	require.NoError(t, err)
	require.Greater(t, info.Size(), int64(1024), "the dump holds the database")

	begin := time.Now()
	helm(t, append([]string{"upgrade", r.name, chart, "--namespace", r.ns, "--wait", "--timeout", "6m"}, values...)...)
	t.Logf("figure: helm upgrade from %s to this chart: %s", prevImg, time.Since(begin).Round(time.Second))
	c = clusterIPClient(t, r)
	snapshot("upgraded")
	for _, id := range ids {
		require.NoError(t, sendAndAwaitTurn(c, id, "after the upgrade", 3*time.Minute))
	}
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(agent.ID)}, EnvironmentID: env.ID})
	require.NoError(t, err)
	require.NoError(t, sendAndAwaitTurn(c, s.ID, "made after the upgrade", 3*time.Minute))
	ids = append(ids, s.ID)
	snapshot("upgraded, new turns")

	begin = time.Now()
	helm(t, "rollback", r.name, "1", "--namespace", r.ns, "--wait", "--timeout", "6m")
	t.Logf("figure: helm rollback to %s: %s", prevImg, time.Since(begin).Round(time.Second))
	c = clusterIPClient(t, r)
	snapshot("rolled back")
	for _, id := range ids {
		require.NoError(t, sendAndAwaitTurn(c, id, "after the rollback", 3*time.Minute))
	}
	snapshot("rolled back, new turns")

	// docs/upgrades.md's restore: the writers stopped, the dump restored, the writers back.
	deploys := []string{"deploy/" + r.fullname() + "-api", "deploy/" + r.fullname() + "-worker", "deploy/" + r.fullname() + "-controller"}
	kubectl(t, append([]string{"-n", r.ns, "scale", "--replicas=0"}, deploys...)...)
	eventually(t, 3*time.Minute, "the writers' pods are gone", func() (bool, string) {
		out, err := tryRun(tools.kubectl, "-n", r.ns, "get", "pods", "-o", "name",
			"-l", "app.kubernetes.io/instance="+r.name+",app.kubernetes.io/component in (api,worker,controller)")
		return err == nil && strings.TrimSpace(out) == "", out
	})
	in, err := os.Open(dump)
	require.NoError(t, err)
	restore := exec.Command(tools.kubectl, "-n", r.ns, "exec", "-i", pg, "--",
		"sh", "-c", `export PGPASSWORD="$POSTGRES_PASSWORD"
    psql -v ON_ERROR_STOP=1 -q -U "$POSTGRES_USER" -d "$POSTGRES_DB" -c "DROP SCHEMA public CASCADE; CREATE SCHEMA public;" &&
    pg_restore --exit-on-error -U "$POSTGRES_USER" -d "$POSTGRES_DB"`)
	restore.Stdin = in
	msg, err := restore.CombinedOutput()
	require.NoError(t, err, "pg_restore: %s", msg)
	require.NoError(t, in.Close())
	kubectl(t, append([]string{"-n", r.ns, "scale", "--replicas=1"}, deploys...)...)
	for _, d := range deploys {
		kubectl(t, "-n", r.ns, "rollout", "status", d, "--timeout=5m")
	}
	c = clusterIPClient(t, r)
	for _, id := range preUpgrade {
		var got []string
		for _, ev := range allEvents(t, c, id) {
			got = append(got, ev.ID)
		}
		require.Equal(t, installed[id], got, "restored: session %s is as it was at the backup", id)
		require.NoError(t, sendAndAwaitTurn(c, id, "after the restore", 3*time.Minute))
	}
	_, err = c.Beta.Sessions.Get(ctx, ids[len(ids)-1], anthropic.BetaSessionGetParams{})
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr, "the session made after the backup is gone after the restore")
	require.Equal(t, http.StatusNotFound, apiErr.StatusCode)
}

// clusterIPClient reaches the release's API by its Service's ClusterIP (the test runs on the
// node), with the chart's generated key, once the API answers.
func clusterIPClient(t testing.TB, r *release) anthropic.Client {
	t.Helper()
	key, err := decodeBase64(kubectl(t, "-n", r.ns, "get", "secret", r.fullname(), "-o", "jsonpath={.data.api-key}"))
	require.NoError(t, err)
	ip := strings.TrimSpace(kubectl(t, "-n", r.ns, "get", "svc", r.fullname(), "-o", "jsonpath={.spec.clusterIP}"))
	c := anthropic.NewClient(option.WithBaseURL("http://"+ip+":8080"), option.WithAPIKey(key),
		option.WithMaxRetries(10), option.WithRequestTimeout(30*time.Second))
	eventually(t, 2*time.Minute, "the API answers", func() (bool, string) {
		_, err := c.Beta.Sessions.List(context.Background(), anthropic.BetaSessionListParams{})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return c
}
