package e2b_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/e2b"
	"github.com/managed-agents/managed-agents/internal/sandbox/e2b/e2bfake"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func spec(session string) sandbox.Spec {
	return sandbox.SpecFor(session, wire.EnvironmentConfig{Type: "cloud"})
}

func TestExpiryWithoutAutoPauseIsGone(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f, "MANAGED_AGENT_E2B_AUTO_PAUSE", "false")
	ref, sb := newSandbox(t, p, session("sesn_expire"))
	f.Expire(ref.ExternalID)
	_, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true"})
	require.ErrorIs(t, err, sandbox.ErrGone, "a killed sandbox is gone for the client that had it")
	_, err = p.Attach(t.Context(), ref)
	require.ErrorIs(t, err, sandbox.ErrGone, "and for the next attach: never a silent replacement")
	require.Empty(t, f.Sandboxes())
	require.NoError(t, p.Destroy(t.Context(), ref), "destroying what expired is not an error")
}

func TestExpiryWithAutoPauseResumesOnAttach(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f)
	ref, sb := newSandbox(t, p, session("sesn_autopause"))
	require.True(t, f.Sandboxes()[0].AutoPause)
	require.NoError(t, sb.WriteFile(t.Context(), "kept.txt", []byte("kept")))
	f.Expire(ref.ExternalID)
	require.Equal(t, "paused", f.Sandboxes()[0].State)

	_, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true"})
	require.ErrorIs(t, err, sandbox.ErrUnavailable, "a paused sandbox is unreachable until attached again")
	require.NotErrorIs(t, err, sandbox.ErrGone)

	connects := f.Count("POST /sandboxes/{id}/connect")
	again, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	require.Equal(t, connects+1, f.Count("POST /sandboxes/{id}/connect"), "attach is one connect, which resumes")
	require.Equal(t, "running", f.Sandboxes()[0].State)
	data, err := again.ReadFile(t.Context(), "kept.txt")
	require.NoError(t, err)
	require.Equal(t, "kept", string(data))
}

func TestStopPausesAndAttachResumes(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f)
	ref, sb := newSandbox(t, p, session("sesn_stop"))
	require.NoError(t, sb.WriteFile(t.Context(), "kept.txt", []byte("kept")))
	require.NoError(t, p.Stop(t.Context(), ref))
	require.Equal(t, "paused", f.Sandboxes()[0].State)
	require.NoError(t, p.Stop(t.Context(), ref), "stopping a paused sandbox is not an error")
	again, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	res, err := again.Exec(t.Context(), sandbox.ExecRequest{Command: "cat kept.txt"})
	require.NoError(t, err)
	require.Equal(t, "kept", string(res.Output))
	require.NoError(t, p.Destroy(t.Context(), ref))
	require.ErrorIs(t, p.Stop(t.Context(), ref), sandbox.ErrGone)
}

func TestRetriesAndRefusals(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f)

	// 503 and 429 are retried within bounds, for a create too (the service did not act).
	f.Fail("POST /sandboxes", 503, 1)
	f.Fail("GET /v2/sandboxes", 429, 2)
	ref, err := p.Create(t.Context(), spec(session("sesn_retry")))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
	require.Equal(t, 2, f.Count("POST /sandboxes"))
	require.Len(t, f.Sandboxes(), 1)

	f.Fail("POST /sandboxes/{id}/connect", 503, 2)
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)

	// Past the bounded retries: unavailable, with the service's message.
	f.Fail("POST /sandboxes/{id}/connect", 503, 10)
	_, err = p.Attach(t.Context(), ref)
	require.ErrorIs(t, err, sandbox.ErrUnavailable)
	require.NotErrorIs(t, err, sandbox.ErrGone)
	require.ErrorContains(t, err, "injected failure")

	// A command is sent once: a 503 on Start is not repeated.
	starts := f.Count("POST /process.Process/Start")
	f.Fail("POST /process.Process/Start", 503, 1)
	_, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo once >> once.txt"})
	require.ErrorIs(t, err, sandbox.ErrUnavailable)
	require.Equal(t, starts+1, f.Count("POST /process.Process/Start"))

	// A refused key names its variable and is not retried.
	bad := newProvider(t, f, "MANAGED_AGENT_E2B_API_KEY", "wrong")
	creates := f.Count("POST /sandboxes") + f.Count("GET /v2/sandboxes")
	_, err = bad.Create(t.Context(), spec(session("sesn_badkey")))
	require.ErrorIs(t, err, remote.ErrAuth)
	require.ErrorContains(t, err, "MANAGED_AGENT_E2B_API_KEY")
	require.Equal(t, creates+1, f.Count("POST /sandboxes")+f.Count("GET /v2/sandboxes"))

	// A template the service does not know fails the same way every time: a setup error.
	_, err = p.Create(t.Context(), sandbox.Spec{Name: sandbox.NameFor("sesn_tpl"), SessionID: "sesn_tpl", Image: "missing"})
	require.ErrorIs(t, err, sandbox.ErrSetup)
	require.ErrorContains(t, err, `template "missing"`)

	s := spec(session("sesn_pkgs"))
	s.Packages = map[string][]string{"pip": {"requests"}}
	_, err = p.Create(t.Context(), s)
	require.ErrorIs(t, err, sandbox.ErrSetup)
	require.ErrorContains(t, err, "MANAGED_AGENT_E2B_TEMPLATE")
}

func TestSlowStartIsWaitedFor(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f)
	f.SlowStart(8)
	_, sb := newSandbox(t, p, session("sesn_slow"))
	require.GreaterOrEqual(t, f.Count("GET /health"), 9, "create waits until envd answers")
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo up"})
	require.NoError(t, err)
	require.Equal(t, "up\n", string(res.Output))
}

func TestSlowStartPastTheReadyTimeoutFailsAndCleansUp(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f, "MANAGED_AGENT_E2B_READY_TIMEOUT", "1s")
	f.SlowStart(1 << 30)
	_, err := p.Create(t.Context(), spec(session("sesn_never")))
	require.ErrorIs(t, err, sandbox.ErrUnavailable)
	require.ErrorContains(t, err, "envd did not answer within 1s")
	require.Empty(t, f.Sandboxes(), "the sandbox that never came up is killed")
}

func TestLostCreateAnswerIsAdopted(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f)
	f.LoseCreate(1)
	ref, err := p.Create(t.Context(), spec(session("sesn_lost")))
	require.NoError(t, err)
	require.Equal(t, 1, f.Count("POST /sandboxes"), "a POST whose answer was lost is not repeated")
	list := f.Sandboxes()
	require.Len(t, list, 1, "the sandbox the lost attempt made is adopted, not leaked")
	require.Equal(t, list[0].ID, ref.ExternalID)
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo ok"})
	require.NoError(t, err)
	require.Equal(t, "ok\n", string(res.Output))
}

func TestDroppedExecStreamIsUnavailable(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f)
	_, sb := newSandbox(t, p, session("sesn_drop"))
	signals := f.Count("POST /process.Process/SendSignal")
	f.DropExec(1)
	_, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "sleep 30; echo late > late.txt"})
	require.ErrorIs(t, err, sandbox.ErrUnavailable, "a dropped stream is no result")
	require.NotErrorIs(t, err, sandbox.ErrGone, "the sandbox is still there")
	require.Equal(t, signals+1, f.Count("POST /process.Process/SendSignal"), "the command left running is stopped")
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo still here"})
	require.NoError(t, err)
	require.Equal(t, "still here\n", string(res.Output))
}

func TestCreateMapsEgressAndMetadata(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f, "MANAGED_AGENT_E2B_DEPLOYMENT", "prod", "MANAGED_AGENT_E2B_TIMEOUT", "20m")
	tests := []struct {
		egress   sandbox.Egress
		allow    *bool
		allowOut []string
		denyOut  []string
	}{
		{sandbox.Egress{Mode: sandbox.EgressNone}, ptr(false), nil, nil},
		{sandbox.Egress{Mode: sandbox.EgressFull}, ptr(true), nil, nil},
		{sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{"*.pypi.org", "example.com"}}, nil,
			[]string{"*.pypi.org", "example.com"}, []string{"0.0.0.0/0"}},
	}
	for _, tt := range tests {
		s := spec(session("sesn_egress"))
		s.Egress = tt.egress
		s.Env = map[string]string{"GREETING": "hello"}
		before := time.Now()
		ref, err := p.Create(t.Context(), s)
		require.NoError(t, err)
		var got e2bfake.Sandbox
		for _, sb := range f.Sandboxes() {
			if sb.ID == ref.ExternalID {
				got = sb
			}
		}
		require.Equal(t, tt.allow, got.AllowInternetAccess, "%+v", tt.egress)
		require.Equal(t, tt.allowOut, got.AllowOut)
		require.Equal(t, tt.denyOut, got.DenyOut)
		require.Equal(t, map[string]string{e2b.MetaSandbox: s.Name, e2b.MetaSession: s.SessionID, e2b.MetaDeployment: "prod"}, got.Metadata)
		require.Equal(t, map[string]string{"GREETING": "hello"}, got.Env)
		require.WithinRange(t, got.End, before.Add(20*time.Minute), time.Now().Add(20*time.Minute+time.Second))
		require.NoError(t, p.Destroy(t.Context(), ref))
	}
}

func ptr[T any](v T) *T { return &v }

func TestLongCommandRenewsTheTimeToLive(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f, "MANAGED_AGENT_E2B_TIMEOUT", "1m")
	ref, sb := newSandbox(t, p, session("sesn_ttl"))
	renewals := f.Count("POST /sandboxes/{id}/timeout")
	_, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true", Timeout: 30 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, renewals+1, f.Count("POST /sandboxes/{id}/timeout"), "a command longer than the time to live extends it first")
	for _, s := range f.Sandboxes() {
		if s.ID == ref.ExternalID {
			require.Greater(t, time.Until(s.End), 30*time.Minute)
		}
	}
	_, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true", Timeout: time.Minute})
	require.NoError(t, err)
	require.Equal(t, renewals+1, f.Count("POST /sandboxes/{id}/timeout"), "while it has time left, nothing more is asked")
}

// sweepStore is a sweep store with the given bindings, each ready and old.
type sweepStore map[string]sandbox.Ref

func (sweepStore) SweepIdle(context.Context, time.Duration, bool, func(context.Context, sandbox.Binding) error) (int, error) {
	return 0, nil
}

func (s sweepStore) BindingsOf(_ context.Context, ids []string) (map[string]sandbox.AgedBinding, error) {
	out := map[string]sandbox.AgedBinding{}
	for _, id := range ids {
		if ref, ok := s[id]; ok {
			out[id] = sandbox.AgedBinding{Binding: sandbox.Binding{SessionID: id, State: sandbox.BindingReady, Ref: ref}, Since: time.Hour}
		}
	}
	return out, nil
}

func TestSweepRemovesOrphans(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f)
	kept, _ := newSandbox(t, p, "sesn_bound")
	old := time.Now().Add(-time.Hour)
	orphan := f.Put(map[string]string{e2b.MetaSandbox: sandbox.NameFor("sesn_deleted"), e2b.MetaSession: "sesn_deleted", e2b.MetaDeployment: "default"}, old)
	young := f.Put(map[string]string{e2b.MetaSandbox: sandbox.NameFor("sesn_new"), e2b.MetaSession: "sesn_new", e2b.MetaDeployment: "default"}, time.Now())
	foreign := f.Put(map[string]string{e2b.MetaSandbox: sandbox.NameFor("sesn_other"), e2b.MetaSession: "sesn_other", e2b.MetaDeployment: "staging"}, old)

	listed, err := p.List(t.Context())
	require.NoError(t, err)
	ids := map[string]string{}
	for _, r := range listed {
		ids[r.Ref.ExternalID] = r.SessionID
	}
	require.Equal(t, map[string]string{kept.ExternalID: "sesn_bound", orphan: "sesn_deleted", young: "sesn_new"}, ids,
		"this deployment's sandboxes, with their sessions")

	registry, err := sandbox.NewRegistry(p)
	require.NoError(t, err)
	sweeper := &sandbox.Sweeper{Registry: registry, Store: sweepStore{"sesn_bound": kept}, OrphanGrace: 10 * time.Minute}
	res, err := sweeper.Sweep(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, res.Orphans)
	var left []string
	for _, s := range f.Sandboxes() {
		left = append(left, s.ID)
	}
	require.ElementsMatch(t, []string{kept.ExternalID, young, foreign}, left,
		"the orphan is removed; the bound, the young and another deployment's are not")
}

func TestListPages(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f)
	for i := range 230 {
		f.Put(map[string]string{e2b.MetaSession: session("sesn_page"), e2b.MetaDeployment: "default", "n": itoa(i)}, time.Now())
	}
	listed, err := p.List(t.Context())
	require.NoError(t, err)
	require.Len(t, listed, 230)
	require.Equal(t, 3, f.Count("GET /v2/sandboxes"), "pages of 100")
}

func itoa(n int) string { return time.Duration(n).String() }
