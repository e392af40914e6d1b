package daytona_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/daytona"
	"github.com/managed-agents/managed-agents/internal/sandbox/daytona/daytonafake"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
	"github.com/managed-agents/managed-agents/internal/tools/toolstest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

var fast = remote.Retry{Max: 3, WaitMin: time.Millisecond, WaitMax: 10 * time.Millisecond}

func provider(t testing.TB, f *daytonafake.Server, mod ...func(*daytona.Config)) *daytona.Provider {
	u, err := url.Parse(f.APIURL)
	require.NoError(t, err)
	cfg := daytona.Config{APIURL: u, APIKey: f.APIKey, PollInterval: time.Millisecond, Retry: fast, ReadyTimeout: 30 * time.Second}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := daytona.New(cfg)
	require.NoError(t, err)
	return p
}

var sessions atomic.Int64

func spec() sandbox.Spec {
	return sandbox.SpecFor(fmt.Sprintf("sesn_daytona_%d", sessions.Add(1)), wire.EnvironmentConfig{Type: "cloud"})
}

func create(t *testing.T, p *daytona.Provider, s sandbox.Spec) (sandbox.Ref, sandbox.Sandbox) {
	t.Helper()
	ref, err := p.Create(t.Context(), s)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	return ref, sb
}

func TestProviderContract(t *testing.T) {
	t.Parallel()
	fakes := map[*testing.T]*daytonafake.Server{}
	var mu = make(chan struct{}, 1)
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider {
			mu <- struct{}{}
			f, ok := fakes[t]
			if !ok {
				f = daytonafake.New(t)
				f.SlowStart(2)
				fakes[t] = f
			}
			<-mu
			return provider(t, f)
		},
		Forged: []sandbox.Ref{
			{Provider: daytona.Name, ExternalID: "../sandbox"},
			{Provider: daytona.Name, ExternalID: "a/b"},
			{Provider: daytona.Name, ExternalID: "x?force=true"},
			{Provider: daytona.Name, ExternalID: "-rf"},
			{Provider: daytona.Name, ExternalID: strings.Repeat("a", 200)},
		},
	})
}

func TestToolsSuite(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	p := provider(t, f)
	toolstest.Run(t, func(t *testing.T) sandbox.Sandbox {
		_, sb := create(t, p, spec())
		return sb
	})
}

func TestCreateRequestCarriesTheSpec(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	p := provider(t, f, func(c *daytona.Config) {
		c.Snapshot, c.Target, c.User, c.Deployment = "snap-default", "eu", "daytona", "prod"
		stop, del := 30, -1
		c.AutoStop, c.AutoDelete = &stop, &del
	})
	s := spec()
	s.Image = "my-snapshot"
	s.Env = map[string]string{"A": "1"}
	s.Resources = sandbox.Resources{MilliCPU: 1500, MemoryBytes: 3 << 29, DiskBytes: 10 << 30}
	s.Egress = sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{"*.example.com", "10.1.2.3", "pypi.org"}}
	ref, _ := create(t, p, s)
	got := f.CreateRequest(ref.ExternalID)
	require.Equal(t, s.Name, got["name"])
	require.Equal(t, "my-snapshot", got["snapshot"], "the environment's image names the snapshot")
	require.Equal(t, "eu", got["target"])
	require.Equal(t, map[string]any{"A": "1"}, got["env"])
	require.Equal(t, map[string]any{daytona.LabelSandbox: s.Name, daytona.LabelSession: s.SessionID, daytona.LabelDeployment: "prod"}, got["labels"])
	require.EqualValues(t, 2, got["cpu"], "cores round up")
	require.EqualValues(t, 2, got["memory"], "GB round up")
	require.EqualValues(t, 10, got["disk"])
	require.EqualValues(t, 30, got["autoStopInterval"])
	require.EqualValues(t, -1, got["autoDeleteInterval"])
	require.NotContains(t, got, "autoArchiveInterval", "unset intervals are Daytona's defaults")
	require.Equal(t, false, got["networkBlockAll"])
	require.Equal(t, "*.example.com,pypi.org", got["domainAllowList"])
	require.Equal(t, "10.1.2.3/32", got["networkAllowList"])

	for mode, block := range map[string]bool{sandbox.EgressNone: true, "": true, sandbox.EgressFull: false} {
		s := spec()
		s.Egress.Mode = mode
		ref, _ := create(t, p, s)
		require.Equal(t, block, f.CreateRequest(ref.ExternalID)["networkBlockAll"], "egress %q", mode)
	}
}

func TestPackagesAreRefusedClearly(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	s := spec()
	s.Packages = map[string][]string{"pip": {"requests"}}
	_, err := provider(t, f).Create(t.Context(), s)
	require.ErrorIs(t, err, sandbox.ErrSetup)
	require.Contains(t, err.Error(), daytona.EnvSnapshot)
	require.Empty(t, f.Sandboxes(), "nothing was made")
}

func TestALostCreateAnswerIsAdopted(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	p := provider(t, f)
	f.LoseNextCreate()
	s := spec()
	ref, sb := create(t, p, s)
	require.Len(t, f.Sandboxes(), 1, "one sandbox, adopted after the lost answer")
	require.Equal(t, 1, f.Requests()["POST /sandbox"], "the create was not sent twice")
	require.NoError(t, sb.WriteFile(t.Context(), "a.txt", []byte("x")))
	again, err := p.Create(t.Context(), s)
	require.NoError(t, err)
	require.Equal(t, ref, again)
}

func TestRefusedAnswersAreRetriedWithinBounds(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	p := provider(t, f)
	f.Fail(http.StatusServiceUnavailable, 2)
	_, sb := create(t, p, spec())
	f.Fail(http.StatusTooManyRequests, 1)
	require.NoError(t, sb.WriteFile(t.Context(), "a.txt", []byte("x")))

	f.Fail(http.StatusServiceUnavailable, 100)
	_, err := p.Create(t.Context(), spec())
	require.ErrorIs(t, err, sandbox.ErrUnavailable, "what the retries could not get through")
	f.Fail(0, 0)

	// A 500 to a command is not repeated: it may have run.
	f.Fail(http.StatusInternalServerError, 1)
	f.ResetRequests()
	_, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo once >> ran.txt"})
	require.ErrorIs(t, err, sandbox.ErrUnavailable)
	require.Equal(t, 1, f.Requests()["POST /process/execute"])
}

func TestBadCredentialsNameTheVariable(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	p := provider(t, f, func(c *daytona.Config) { c.APIKey = "wrong" })
	_, err := p.Create(t.Context(), spec())
	require.ErrorIs(t, err, remote.ErrAuth)
	require.Contains(t, err.Error(), daytona.EnvAPIKey)
}

func TestExpiryIsGoneNotReplaced(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	p := provider(t, f)
	ref, sb := create(t, p, spec())
	f.Expire(ref.ExternalID)
	_, err := sb.ReadFile(t.Context(), "a.txt")
	require.ErrorIs(t, err, sandbox.ErrGone, "a live client sees it gone")
	_, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true"})
	require.ErrorIs(t, err, sandbox.ErrGone)
	_, err = p.Attach(t.Context(), ref)
	require.ErrorIs(t, err, sandbox.ErrGone, "and so does the next acquisition")
	require.Empty(t, f.Sandboxes(), "nothing was made in its place")
	require.NoError(t, p.Destroy(t.Context(), ref))
}

func TestStopAndAttachStartsAgain(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	f.SlowStart(3)
	p := provider(t, f)
	ref, sb := create(t, p, spec())
	require.NoError(t, sb.WriteFile(t.Context(), "kept.txt", []byte("kept")))
	require.NoError(t, p.Stop(t.Context(), ref))
	require.Equal(t, "stopped", f.State(ref.ExternalID))
	require.NoError(t, p.Stop(t.Context(), ref), "stopping a stopped sandbox is done")

	_, err := sb.ReadFile(t.Context(), "kept.txt")
	require.ErrorIs(t, err, sandbox.ErrUnavailable, "a client of a stopped sandbox is stale")
	require.NotErrorIs(t, err, sandbox.ErrGone)

	again, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	require.Equal(t, "started", f.State(ref.ExternalID))
	data, err := again.ReadFile(t.Context(), "kept.txt")
	require.NoError(t, err)
	require.Equal(t, "kept", string(data))

	f.SetState(ref.ExternalID, "archived")
	_, err = p.Attach(t.Context(), ref)
	require.NoError(t, err, "an archived sandbox is started too")

	f.Expire(ref.ExternalID)
	require.ErrorIs(t, p.Stop(t.Context(), ref), sandbox.ErrGone)
}

func TestAFailedSandboxIsASetupError(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	f.SlowStart(1000)
	p := provider(t, f)
	s := spec()
	done := make(chan error, 1)
	go func() { _, err := p.Create(t.Context(), s); done <- err }()
	require.Eventually(t, func() bool { return len(f.Sandboxes()) == 1 }, 10*time.Second, time.Millisecond)
	f.SetState(f.Sandboxes()[0], "build_failed")
	err := <-done
	require.ErrorIs(t, err, sandbox.ErrSetup)
	require.Contains(t, err.Error(), "build_failed")
	require.Empty(t, f.Sandboxes(), "what failed was deleted")
}

func TestADroppedExecIsUnavailable(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	p := provider(t, f)
	_, sb := create(t, p, spec())
	f.DropNextExec()
	_, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "sleep 1; echo late"})
	require.ErrorIs(t, err, sandbox.ErrUnavailable, "never a fake result")
	require.Equal(t, 1, f.Requests()["POST /process/execute"], "the command is sent once")
}

func TestExecLimits(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	p := provider(t, f, func(c *daytona.Config) { c.Timeout, c.MaxOutput = time.Second, 5 })
	_, sb := create(t, p, spec())
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo 0123456789; echo err >&2; sleep 100"})
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.True(t, res.Truncated)
	require.Equal(t, "01234", string(res.Output))
	require.Equal(t, 137, res.ExitCode)

	res, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo out; echo err >&2; exit 3", MaxOutput: 100})
	require.NoError(t, err)
	require.Equal(t, "out\nerr\n", string(res.Output), "stdout and stderr in order")
	require.Equal(t, 3, res.ExitCode)
	require.False(t, res.TimedOut)

	res, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "head -c 3000000 /dev/zero | tr '\\0' x; exit 7", MaxOutput: 10, Timeout: time.Minute})
	require.NoError(t, err)
	require.Equal(t, 7, res.ExitCode, "a command whose output is cut still exits as it did")
	require.True(t, res.Truncated)

	_, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true", Dir: "missing"})
	require.ErrorIs(t, err, sandbox.ErrNotExist)
	_, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true", Dir: "../.."})
	require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace)
}

func TestToolboxURLFromItsEndpoint(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	f.OmitToolboxURL()
	_, sb := create(t, provider(t, f), spec())
	require.NoError(t, sb.WriteFile(t.Context(), "a.txt", []byte("x")))
	require.Equal(t, 1, f.Requests()["GET /sandbox/{id}/toolbox-proxy-url"])
}

// sweepStore is a sweep store in which only bound has a binding.
type sweepStore struct{ bound sandbox.Binding }

func (sweepStore) SweepIdle(context.Context, time.Duration, bool, func(context.Context, sandbox.Binding) error) (int, error) {
	return 0, nil
}

func (s sweepStore) BindingsOf(_ context.Context, ids []string) (map[string]sandbox.AgedBinding, error) {
	out := map[string]sandbox.AgedBinding{}
	for _, id := range ids {
		if id == s.bound.SessionID {
			out[id] = sandbox.AgedBinding{Binding: s.bound, Since: time.Hour}
		}
	}
	return out, nil
}

func TestOrphanSweep(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	p := provider(t, f)
	other := provider(t, f, func(c *daytona.Config) { c.Deployment = "other" })
	bound, orphan := spec(), spec()
	boundRef, _ := create(t, p, bound)
	orphanRef, _ := create(t, p, orphan)
	foreignRef, _ := create(t, other, spec())

	list, err := p.List(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 2, "only this deployment's sandboxes")

	reg, err := sandbox.NewRegistry(p)
	require.NoError(t, err)
	sw := &sandbox.Sweeper{Registry: reg, OrphanGrace: time.Minute,
		Store: sweepStore{bound: sandbox.Binding{SessionID: bound.SessionID, State: sandbox.BindingReady, Ref: boundRef}}}
	res, err := sw.Sweep(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, res.Orphans)
	require.Empty(t, f.State(orphanRef.ExternalID), "the orphan was deleted")
	require.Equal(t, "started", f.State(boundRef.ExternalID))
	require.Equal(t, "started", f.State(foreignRef.ExternalID), "another deployment's sandbox is not ours to sweep")
}

func TestConfigFrom(t *testing.T) {
	t.Parallel()
	c, err := daytona.ConfigFrom(map[string]string{daytona.EnvAPIKey: "k", daytona.EnvAutoDelete: "-1", daytona.EnvWorkspace: "/home/daytona/work/"})
	require.NoError(t, err)
	require.Equal(t, daytona.DefaultAPIURL, c.APIURL.String())
	require.Equal(t, -1, *c.AutoDelete)
	require.Nil(t, c.AutoStop)
	require.Equal(t, "default", c.Deployment)

	_, err = daytona.ConfigFrom(map[string]string{daytona.EnvAPIURL: "ftp://x", daytona.EnvAutoStop: "-5", daytona.EnvWorkspace: "rel", daytona.EnvDeployment: "a b"})
	require.Error(t, err)
	for _, name := range []string{daytona.EnvAPIKey, daytona.EnvAPIURL, daytona.EnvAutoStop, daytona.EnvWorkspace, daytona.EnvDeployment} {
		require.Contains(t, err.Error(), name)
	}
}

func TestCommandsTravelIntactOrAreRefusedClearly(t *testing.T) {
	t.Parallel()
	f := daytonafake.New(t)
	_, sb := create(t, provider(t, f), spec())
	// Quotes, backslashes and runs of spaces the toolbox's own word splitting would mangle.
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: `printf '%s|' "a  b" 'c\'"'"'d' "e\\f"`})
	require.NoError(t, err)
	require.Equal(t, `a  b|c\'d|e\f|`, string(res.Output))

	f.ResetRequests()
	_, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo " + strings.Repeat("x", 200<<10)})
	require.ErrorContains(t, err, "too long")
	require.Zero(t, f.Requests()[""], "nothing was sent")
}
