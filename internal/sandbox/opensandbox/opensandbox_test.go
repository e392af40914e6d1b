package opensandbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/opensandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/opensandbox/opensandboxfake"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
	"github.com/managed-agents/managed-agents/internal/tools/toolstest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

const (
	testKey   = "test-api-key"
	testToken = "test-execd-token"
)

var fastRetry = remote.Retry{Max: 3, WaitMin: time.Millisecond, WaitMax: 20 * time.Millisecond}

func startFake(t testing.TB, o opensandboxfake.Options) *opensandboxfake.Server {
	o.APIKey, o.ExecdToken = testKey, testToken
	return opensandboxfake.Start(t, o)
}

// newProvider is a provider over the fake, the way a deployment configures it: through the
// variables.
func newProvider(t testing.TB, f *opensandboxfake.Server, extra map[string]string) *opensandbox.Provider {
	env := map[string]string{
		"MANAGED_AGENT_OPENSANDBOX_API_URL":            f.URL(),
		"MANAGED_AGENT_OPENSANDBOX_API_KEY":            testKey,
		"MANAGED_AGENT_OPENSANDBOX_EXECD_ACCESS_TOKEN": testToken,
		"MANAGED_AGENT_OPENSANDBOX_USE_SERVER_PROXY":   "true",
		"MANAGED_AGENT_OPENSANDBOX_WORKSPACE":          "~/workspace",
		"MANAGED_AGENT_OPENSANDBOX_DEPLOYMENT":         "test",
	}
	for k, v := range extra {
		env[k] = v
	}
	cfg, err := opensandbox.ConfigFrom(env)
	require.NoError(t, err)
	cfg.Retry = fastRetry
	cfg.PollInterval = 5 * time.Millisecond
	p, err := opensandbox.New(cfg)
	require.NoError(t, err)
	return p
}

var sessions atomic.Int64

func testSpec() sandbox.Spec {
	s := sandbox.SpecFor(fmt.Sprintf("sesn_osb_%d_%d", time.Now().UnixNano(), sessions.Add(1)), wire.EnvironmentConfig{Type: "cloud"})
	s.Egress = sandbox.Egress{Mode: sandbox.EgressFull}
	return s
}

func TestContract(t *testing.T) {
	f := startFake(t, opensandboxfake.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider { return newProvider(t, f, nil) },
		Forged: []sandbox.Ref{
			{Provider: opensandbox.Name, ExternalID: "../v1/sandboxes"},
			{Provider: opensandbox.Name, ExternalID: "a/b"},
			{Provider: opensandbox.Name, ExternalID: "x y"},
			{Provider: opensandbox.Name, ExternalID: "id?state=Running"},
			{Provider: opensandbox.Name, ExternalID: strings.Repeat("a", 200)},
		},
	})
}

func newSandbox(t *testing.T, p *opensandbox.Provider) (sandbox.Sandbox, sandbox.Ref) {
	t.Helper()
	ref, err := p.Create(t.Context(), testSpec())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	return sb, ref
}

func TestTools(t *testing.T) {
	// Bare JSON lines (execd's framing) and SSE data frames: the client reads both.
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("SSEData=%t", sse), func(t *testing.T) {
			t.Parallel()
			f := startFake(t, opensandboxfake.Options{SSEData: sse})
			p := newProvider(t, f, nil)
			toolstest.Run(t, func(t *testing.T) sandbox.Sandbox { sb, _ := newSandbox(t, p); return sb })
		})
	}
}

func TestCreateRequest(t *testing.T) {
	f := startFake(t, opensandboxfake.Options{})
	p := newProvider(t, f, map[string]string{"MANAGED_AGENT_OPENSANDBOX_TIMEOUT": "2h"})
	s := testSpec()
	s.Env = map[string]string{"GREETING": "hello there"}
	s.Resources = sandbox.Resources{MilliCPU: 1500, MemoryBytes: 3 << 30}
	s.Egress = sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{"*.example.com", "pypi.org"}}
	ref, err := p.Create(t.Context(), s)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
	boxes := f.Sandboxes()
	require.Len(t, boxes, 1)
	got := boxes[0]
	require.Equal(t, ref.ExternalID, got.ID)
	require.Equal(t, map[string]string{"managed-agents/sandbox": s.Name, "managed-agents/session-id": s.SessionID, "managed-agents/deployment": "test"}, got.Metadata)
	require.Equal(t, map[string]string{"cpu": "1500m", "memory": "3072Mi"}, got.Limits)
	require.Equal(t, "hello there", got.Env["GREETING"])
	require.JSONEq(t, `{"defaultAction":"deny","egress":[{"action":"allow","target":"*.example.com"},{"action":"allow","target":"pypi.org"}]}`, string(got.NetworkPolicy))
	require.NotNil(t, got.Expires)
	require.WithinDuration(t, time.Now().Add(2*time.Hour), *got.Expires, time.Minute)

	none := testSpec()
	none.Egress = sandbox.Egress{}
	ref2, err := p.Create(t.Context(), none)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), ref2) })
	for _, b := range f.Sandboxes() {
		if b.ID == ref2.ExternalID {
			require.JSONEq(t, `{"defaultAction":"deny","egress":[]}`, string(b.NetworkPolicy), "no egress is deny-all")
		}
	}

	pkgs := testSpec()
	pkgs.Packages = map[string][]string{"pip": {"requests"}}
	_, err = p.Create(t.Context(), pkgs)
	require.ErrorIs(t, err, sandbox.ErrSetup)
	require.Len(t, f.Sandboxes(), 2, "a refused spec makes nothing")
}

func TestSlowStartIsWaitedFor(t *testing.T) {
	f := startFake(t, opensandboxfake.Options{StartDelay: 300 * time.Millisecond})
	p := newProvider(t, f, nil)
	sb, _ := newSandbox(t, p)
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo up"})
	require.NoError(t, err)
	require.Equal(t, "up\n", string(res.Output))
	require.Greater(t, f.Count("GET /sandboxes/{id}"), 1, "Create polled the Pending sandbox")
}

func TestNotRunningInTimeIsSetupErrorAndDeleted(t *testing.T) {
	f := startFake(t, opensandboxfake.Options{StartDelay: time.Hour})
	p := newProvider(t, f, map[string]string{"MANAGED_AGENT_OPENSANDBOX_READY_TIMEOUT": "5s"})
	_, err := p.Create(t.Context(), testSpec())
	require.ErrorIs(t, err, sandbox.ErrSetup)
	require.Contains(t, err.Error(), "MANAGED_AGENT_OPENSANDBOX_READY_TIMEOUT")
	require.Empty(t, f.Sandboxes(), "the sandbox that never ran was deleted")
}

func TestExpiredSandboxIsGone(t *testing.T) {
	f := startFake(t, opensandboxfake.Options{})
	p := newProvider(t, f, nil)
	sb, ref := newSandbox(t, p)
	f.Expire(ref.ExternalID)
	_, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true"})
	require.ErrorIs(t, err, sandbox.ErrGone)
	_, err = sb.ReadFile(t.Context(), "x")
	require.ErrorIs(t, err, sandbox.ErrGone)
	_, err = p.Attach(t.Context(), ref)
	require.ErrorIs(t, err, sandbox.ErrGone)
	require.Contains(t, err.Error(), "deleted or expired")
	require.NoError(t, p.Destroy(t.Context(), ref), "destroying an expired sandbox is done")
}

func TestRefusedRequestsAreRetried(t *testing.T) {
	f := startFake(t, opensandboxfake.Options{})
	p := newProvider(t, f, nil)
	f.FailNext(503, 429, 502) // the listing before the create, twice, then the create
	sb, ref := newSandbox(t, p)
	require.Len(t, f.Sandboxes(), 1)
	data := []byte("through a 503")
	f.FailExecd("POST /files/upload", 503, 429)
	require.NoError(t, sb.WriteFile(t.Context(), "f.txt", data), "the upload's 503 and 429 were retried")
	f.FailExecd("GET /files/download", 502, 500)
	got, err := sb.ReadFile(t.Context(), "f.txt")
	require.NoError(t, err, "a download is retried through a 502 and a 500")
	require.Equal(t, data, got)

	// A command is never repeated, whatever the answer: it may have run.
	for _, status := range []int{500, 503} {
		f.FailExecd("POST /command", status)
		before := f.Count("POST /command")
		_, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true"})
		require.ErrorIs(t, err, sandbox.ErrUnavailable)
		require.Equal(t, before+1, f.Count("POST /command"))
	}

	// What the retries cannot get through is reported, bounded.
	f.FailNext(503, 503, 503, 503, 503)
	_, err = p.Attach(t.Context(), ref)
	require.ErrorIs(t, err, sandbox.ErrUnavailable)
	require.Contains(t, err.Error(), "HTTP 503")
}

func TestWrongCredentialsNameTheVariable(t *testing.T) {
	f := startFake(t, opensandboxfake.Options{})
	p := newProvider(t, f, map[string]string{"MANAGED_AGENT_OPENSANDBOX_API_KEY": "wrong"})
	_, err := p.Create(t.Context(), testSpec())
	require.ErrorIs(t, err, remote.ErrAuth)
	require.Contains(t, err.Error(), "MANAGED_AGENT_OPENSANDBOX_API_KEY")

	good := newProvider(t, f, nil)
	_, ref := newSandbox(t, good)
	bad := newProvider(t, f, map[string]string{"MANAGED_AGENT_OPENSANDBOX_EXECD_ACCESS_TOKEN": "wrong"})
	sb, err := bad.Attach(t.Context(), ref)
	require.NoError(t, err)
	_, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true"})
	require.ErrorIs(t, err, remote.ErrAuth)
	require.Contains(t, err.Error(), "MANAGED_AGENT_OPENSANDBOX_EXECD_ACCESS_TOKEN")
}

func TestDroppedCommandStreamIsUnavailable(t *testing.T) {
	f := startFake(t, opensandboxfake.Options{})
	p := newProvider(t, f, nil)
	sb, _ := newSandbox(t, p)
	f.DropCommands(1)
	before := f.Count("POST /command")
	_, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo partial; sleep 5; echo never"})
	require.ErrorIs(t, err, sandbox.ErrUnavailable)
	require.NotErrorIs(t, err, sandbox.ErrGone)
	require.Equal(t, before+1, f.Count("POST /command"), "a command is sent once")
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo fine"})
	require.NoError(t, err)
	require.Equal(t, "fine\n", string(res.Output))
}

func TestLostCreateAnswerAdoptsTheSandbox(t *testing.T) {
	f := startFake(t, opensandboxfake.Options{})
	p := newProvider(t, f, nil)
	f.DropCreates(1)
	s := testSpec()
	ref, err := p.Create(t.Context(), s)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
	require.Equal(t, 1, f.Count("POST /sandboxes"), "the POST is not repeated")
	require.Len(t, f.Sandboxes(), 1, "the sandbox the lost answer made is the one adopted")
	again, err := p.Create(t.Context(), s)
	require.NoError(t, err)
	require.Equal(t, ref, again)
	require.Len(t, f.Sandboxes(), 1)
}

func TestStopPausesAndAttachResumes(t *testing.T) {
	f := startFake(t, opensandboxfake.Options{StartDelay: 50 * time.Millisecond})
	p := newProvider(t, f, nil)
	sb, ref := newSandbox(t, p)
	require.NoError(t, sb.WriteFile(t.Context(), "kept.txt", []byte("kept")))
	require.NoError(t, p.Stop(t.Context(), ref))
	require.NoError(t, p.Stop(t.Context(), ref), "stopping a pausing sandbox again is not an error")
	require.Eventually(t, func() bool { return f.Sandboxes()[0].State == "Paused" }, 10*time.Second, 10*time.Millisecond)

	again, err := newProvider(t, f, nil).Attach(t.Context(), ref)
	require.NoError(t, err)
	require.Equal(t, 1, f.Count("POST /sandboxes/{id}/resume"))
	require.Equal(t, "Running", f.Sandboxes()[0].State)
	data, err := again.ReadFile(t.Context(), "kept.txt")
	require.NoError(t, err)
	require.Equal(t, "kept", string(data))

	require.NoError(t, p.Destroy(t.Context(), ref))
	require.ErrorIs(t, p.Stop(t.Context(), ref), sandbox.ErrGone)
}

func TestTTLIsRenewedWhileInUse(t *testing.T) {
	f := startFake(t, opensandboxfake.Options{})
	p := newProvider(t, f, map[string]string{"MANAGED_AGENT_OPENSANDBOX_TIMEOUT": "1m"})
	sb, _ := newSandbox(t, p)
	_, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true"})
	require.NoError(t, err)
	require.Zero(t, f.Count("POST /sandboxes/{id}/renew-expiration"), "not due yet")
}

// sweepStore answers the orphan sweep: bindings of the sessions in it.
type sweepStore struct {
	bindings map[string]sandbox.AgedBinding
}

func (s sweepStore) SweepIdle(context.Context, time.Duration, bool, func(context.Context, sandbox.Binding) error) (int, error) {
	return 0, nil
}

func (s sweepStore) BindingsOf(_ context.Context, ids []string) (map[string]sandbox.AgedBinding, error) {
	out := map[string]sandbox.AgedBinding{}
	for _, id := range ids {
		if b, ok := s.bindings[id]; ok {
			out[id] = b
		}
	}
	return out, nil
}

func TestSweepRemovesOrphans(t *testing.T) {
	f := startFake(t, opensandboxfake.Options{})
	p := newProvider(t, f, nil)
	orphan := testSpec()
	kept := testSpec()
	orphanRef, err := p.Create(t.Context(), orphan)
	require.NoError(t, err)
	keptRef, err := p.Create(t.Context(), kept)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), keptRef) })
	other := newProvider(t, f, map[string]string{"MANAGED_AGENT_OPENSANDBOX_DEPLOYMENT": "other"})
	otherRef, err := other.Create(t.Context(), testSpec())
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Destroy(context.Background(), otherRef) })

	listed, err := p.List(t.Context())
	require.NoError(t, err)
	require.ElementsMatch(t, []string{orphanRef.ExternalID, keptRef.ExternalID}, []string{listed[0].Ref.ExternalID, listed[1].Ref.ExternalID},
		"only this deployment's sandboxes are listed")

	reg, err := sandbox.NewRegistry(p)
	require.NoError(t, err)
	sw := sandbox.Sweeper{Registry: reg, OrphanGrace: time.Nanosecond, Store: sweepStore{bindings: map[string]sandbox.AgedBinding{
		kept.SessionID: {Binding: sandbox.Binding{SessionID: kept.SessionID, State: sandbox.BindingReady, Ref: keptRef}},
	}}}
	res, err := sw.Sweep(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, res.Orphans)
	var ids []string
	for _, b := range f.Sandboxes() {
		ids = append(ids, b.ID)
	}
	require.ElementsMatch(t, []string{keptRef.ExternalID, otherRef.ExternalID}, ids)
}

func TestConfig(t *testing.T) {
	cfg, err := opensandbox.ConfigFrom(nil)
	require.NoError(t, err, "every variable has a default")
	require.Equal(t, opensandbox.DefaultAPIURL, cfg.APIURL.String())
	require.Zero(t, cfg.TTL, "manual cleanup by default")

	_, err = opensandbox.ConfigFrom(map[string]string{
		"MANAGED_AGENT_OPENSANDBOX_API_URL":          "ftp://x",
		"MANAGED_AGENT_OPENSANDBOX_TIMEOUT":          "30s",
		"MANAGED_AGENT_OPENSANDBOX_ENTRYPOINT":       "tail -f",
		"MANAGED_AGENT_OPENSANDBOX_CPU":              "lots",
		"MANAGED_AGENT_OPENSANDBOX_WORKSPACE":        "relative",
		"MANAGED_AGENT_OPENSANDBOX_USE_SERVER_PROXY": "maybe",
		"MANAGED_AGENT_OPENSANDBOX_DEPLOYMENT":       "a b",
	})
	require.Error(t, err)
	for _, name := range []string{"API_URL", "TIMEOUT", "ENTRYPOINT", "CPU", "WORKSPACE", "USE_SERVER_PROXY", "DEPLOYMENT"} {
		require.Contains(t, err.Error(), "MANAGED_AGENT_OPENSANDBOX_"+name)
	}
	cfg, err = opensandbox.ConfigFrom(map[string]string{"MANAGED_AGENT_OPENSANDBOX_ENTRYPOINT": `["/bin/sleep","infinity"]`, "MANAGED_AGENT_OPENSANDBOX_TIMEOUT": "24h"})
	require.NoError(t, err)
	require.Equal(t, []string{"/bin/sleep", "infinity"}, cfg.Entrypoint)
	require.Equal(t, 24*time.Hour, cfg.TTL)
	require.NoError(t, opensandbox.Check(nil))
}
