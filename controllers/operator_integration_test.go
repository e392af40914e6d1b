//go:build integration

package controllers_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// repoRoot is the repository's root, where config/ lives.
func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	return filepath.Dir(filepath.Dir(file))
}

// startAPIServer starts kube-apiserver and etcd from KUBEBUILDER_ASSETS with the CRDs
// installed. Without assets the test is skipped, except in CI, where it fails.
func startAPIServer(t *testing.T) (*envtest.Environment, *rest.Config) {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests through make test (it builds the envtest assets) or set it to the output of hack/envtest-assets.sh")
		}
		t.Skip("KUBEBUILDER_ASSETS is not set (make envtest-assets prints the directory)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot(t), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := env.Start()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, env.Stop()) })
	return env, cfg
}

// stack is the whole system on real parts: PostgreSQL, a Temporal dev server, the API
// (over real HTTP, reached with the official SDK), a worker with the fake model and the local
// sandbox, and the controller against a real apiserver.
type stack struct {
	t      *testing.T
	env    *envtest.Environment
	rest   *rest.Config
	k8s    client.Client
	api    *app.API
	sdk    anthropic.Client
	ws     string
	cfg    app.Config
	logger *slog.Logger

	kubectlOnce sync.Once
	kubectlRun  func(args ...string) (stdout, stderr io.Reader, err error)
}

func newStack(t *testing.T) *stack {
	env, restCfg := startAPIServer(t)
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("E2E_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	temporal, err := durable.StartDevServer(ctx, durable.DevServerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = temporal.Stop() })
	cfg := app.Config{DatabaseURL: pgtest.URL(t), TaskQueue: "operator-" + ids.New(""), SandboxDir: t.TempDir(),
		ControllerMetricsAddr: "0", ControllerHealthAddr: "0", ControllerLeaderElect: true, ControllerLeaderElectionNamespace: "default",
		ControllerWorkspacePerNamespace: true}
	api, err := app.NewAPI(ctx, cfg, temporal.Client(), logger)
	require.NoError(t, err)
	srv := httptest.NewServer(api.Handler)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		api.Close()
	})
	w, err := app.NewWorker(cfg, temporal.Client(), api.Store, api.Previews, logger)
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)

	key := "sk-test-" + ids.New("")
	ws, err := api.BindAPIKey(ctx, key)
	require.NoError(t, err)
	scheme := kruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	k8s, err := client.New(restCfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return &stack{t: t, env: env, rest: restCfg, k8s: k8s, api: api, ws: ws, cfg: cfg, logger: logger,
		sdk: anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey(key), option.WithMaxRetries(0))}
}

// kubectl runs the assets' kubectl as a cluster admin.
func (s *stack) kubectl(args ...string) (stdout, stderr io.Reader, err error) {
	s.t.Helper()
	s.kubectlOnce.Do(func() {
		user, err := s.env.ControlPlane.AddUser(envtest.User{Name: "operator-test-admin", Groups: []string{"system:masters"}}, nil)
		require.NoError(s.t, err)
		k, err := user.Kubectl()
		require.NoError(s.t, err)
		s.kubectlRun = k.Run
	})
	return s.kubectlRun(args...)
}

// controller is one running controller manager; stop ends it as a crash would end a pod
// (its context is cancelled; nothing is flushed on purpose).
type controller struct {
	cancel context.CancelFunc
	done   chan error
	// health and metrics are the manager's probe and metrics addresses.
	health, metrics string
}

// startController runs a controller manager with namespace default mapped to the SDK key's
// workspace, as dev does.
func (s *stack) startController(afterCreate func(context.Context, string) error) *controller {
	ctx, cancel := context.WithCancel(context.Background())
	c := &controller{cancel: cancel, done: make(chan error, 1), health: freeAddr(s.t), metrics: freeAddr(s.t)}
	cfg := s.cfg
	cfg.ControllerHealthAddr, cfg.ControllerMetricsAddr = c.health, c.metrics
	go func() {
		c.done <- app.RunControllerManager(ctx, cfg, app.ControllerDeps{Store: s.api.Store, Service: s.api.Service, REST: s.rest,
			Workspaces: map[string]string{"default": s.ws}, AfterCreate: afterCreate}, s.logger)
	}()
	return c
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// get answers the status and body of a GET, or 0 when nothing answers.
func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (c *controller) stop(t *testing.T) {
	c.cancel()
	select {
	case err := <-c.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the controller did not stop")
	}
}

const wait = 90 * time.Second

// session waits until the named Session satisfies ok and returns it.
func (s *stack) session(ns, name string, ok func(*v1alpha1.Session) bool) *v1alpha1.Session {
	s.t.Helper()
	var got v1alpha1.Session
	require.Eventually(s.t, func() bool {
		err := s.k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &got)
		return err == nil && ok(&got)
	}, wait, 50*time.Millisecond, "Session %s/%s: last seen %+v", ns, name, &got.Status)
	return &got
}

func idleWith(msg string) func(*v1alpha1.Session) bool {
	return func(s *v1alpha1.Session) bool {
		return s.Status.Status == "idle" && s.Status.LastAgentMessage == msg && meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReady)
	}
}

func TestOperator(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	ctrl := s.startController(nil)
	defer func() { ctrl.stop(t) }()

	// As a user would: kubectl apply -f config/samples/ with the assets' kubectl.
	stdout, stderr, err := s.kubectl("apply", "-n", "default", "-f", filepath.Join(repoRoot(t), "config", "samples"))
	require.NoError(t, err, "kubectl apply: %s", readAll(stderr))
	require.Contains(t, readAll(stdout), "session.agents.managed-agents.io/hello created")

	hello := s.session("default", "hello", idleWith("echo: Hello! What can you do?"))
	require.NotEmpty(t, hello.Status.SessionID)
	require.Equal(t, s.ws, hello.Status.WorkspaceID)
	require.Equal(t, "end_turn", hello.Status.StopReason)
	require.Equal(t, int64(1), hello.Status.AgentVersion)
	require.NotEmpty(t, hello.Status.LastEventID)
	require.NotNil(t, hello.Status.Usage)
	require.Positive(t, hello.Status.Usage.OutputTokens)
	require.Equal(t, hello.Generation, hello.Status.ObservedGeneration)
	require.True(t, meta.IsStatusConditionFalse(hello.Status.Conditions, v1alpha1.ConditionRunning))
	require.True(t, meta.IsStatusConditionFalse(hello.Status.Conditions, v1alpha1.ConditionFailed))

	// kubectl get sessions shows the session id, status, stop reason and last message.
	stdout, stderr, err = s.kubectl("get", "sessions", "-n", "default", "hello")
	require.NoError(t, err, "kubectl get: %s", readAll(stderr))
	table := readAll(stdout)
	require.Regexp(t, `^NAME\s+SESSION ID\s+STATUS\s+STOP REASON\s+LAST MESSAGE\s+AGE\n`, table)
	require.Regexp(t, `hello\s+`+hello.Status.SessionID+`\s+idle\s+end_turn\s+echo: Hello! What can you do\?`, table)

	t.Run("the manager serves probes and metrics", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz"} {
			code, _ := get("http://" + ctrl.health + path)
			require.Equal(t, http.StatusOK, code, path)
		}
		code, body := get("http://" + ctrl.metrics + "/metrics")
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, `controller_runtime_reconcile_total{controller="session"`)
	})

	t.Run("config/default applies to a real apiserver", func(t *testing.T) {
		stdout, stderr, err := s.kubectl("apply", "-k", filepath.Join(repoRoot(t), "config", "default"))
		require.NoError(t, err, "kubectl apply -k config/default: %s", readAll(stderr))
		out := readAll(stdout)
		for _, want := range []string{"deployment.apps/managed-agents-controller-manager created", "clusterrole.rbac.authorization.k8s.io/managed-agents-manager-role created",
			"role.rbac.authorization.k8s.io/managed-agents-leader-election-role created", "serviceaccount/managed-agents-controller-manager created"} {
			require.Contains(t, out, want)
		}
	})

	t.Run("the same session over the REST API", func(t *testing.T) {
		got, err := s.sdk.Beta.Sessions.Get(ctx, hello.Status.SessionID, anthropic.BetaSessionGetParams{})
		require.NoError(t, err)
		require.Equal(t, "idle", string(got.Status))
		require.Equal(t, "Hello from kubectl", got.Title)
		var agent v1alpha1.Agent
		require.NoError(t, s.k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: "assistant"}, &agent))
		require.Equal(t, agent.Status.ID, got.Agent.ID)
		rest, err := s.sdk.Beta.Agents.Get(ctx, agent.Status.ID, anthropic.BetaAgentGetParams{})
		require.NoError(t, err)
		require.Equal(t, string(agent.UID), rest.Metadata[v1alpha1.OwnerMetadataKey], "the agent carries its owner's mark")

		// A follow-up over REST shows in the resource's status.
		sent := time.Now()
		_, err = s.sdk.Beta.Sessions.Events.Send(ctx, got.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("and then?")}})
		require.NoError(t, err)
		s.session("default", "hello", idleWith("echo: and then?"))
		// Informational (the resync is 5 minutes, so only the wake-ups can bring it this soon).
		t.Logf("REST send to the answer in the resource's status: %s", time.Since(sent))
	})

	t.Run("a spec change of the Agent makes version 2", func(t *testing.T) {
		var agent v1alpha1.Agent
		require.NoError(t, s.k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: "assistant"}, &agent))
		require.Equal(t, int64(1), agent.Status.Version)
		agent.Spec.System = "You answer in one sentence."
		require.NoError(t, s.k8s.Update(ctx, &agent))
		require.Eventually(t, func() bool {
			err := s.k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: "assistant"}, &agent)
			return err == nil && agent.Status.Version == 2 && agent.Status.ObservedGeneration == agent.Generation
		}, wait, 50*time.Millisecond)
		got, err := s.sdk.Beta.Agents.Get(ctx, agent.Status.ID, anthropic.BetaAgentGetParams{})
		require.NoError(t, err)
		require.Equal(t, int64(2), got.Version)
		require.Equal(t, "You answer in one sentence.", got.System)
		// The session keeps the version it was created with.
		sess, err := s.sdk.Beta.Sessions.Get(ctx, hello.Status.SessionID, anthropic.BetaSessionGetParams{})
		require.NoError(t, err)
		require.Equal(t, int64(1), sess.Agent.Version)
	})

	t.Run("a Session naming a missing Agent waits with a condition and an event", func(t *testing.T) {
		orphan := &v1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orphan"}, Spec: v1alpha1.SessionSpec{
			AgentRef: &v1alpha1.LocalObjectReference{Name: "late"}, EnvironmentRef: &v1alpha1.LocalObjectReference{Name: "sandbox"}, InitialMessage: "finally"}}
		require.NoError(t, s.k8s.Create(ctx, orphan))
		got := s.session("default", "orphan", func(s *v1alpha1.Session) bool {
			c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Reason == "AgentNotFound"
		})
		require.Empty(t, got.Status.SessionID)
		require.Contains(t, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message, `Agent "late" does not exist`)
		require.Eventually(t, func() bool {
			var evs eventsv1.EventList
			if err := s.k8s.List(ctx, &evs, client.InNamespace("default")); err != nil {
				return false
			}
			for _, e := range evs.Items {
				if e.Regarding.Name == "orphan" && e.Reason == "AgentNotFound" && e.Type == corev1.EventTypeWarning {
					return true
				}
			}
			return false
		}, wait, 100*time.Millisecond, "a Warning event AgentNotFound for the Session")

		// Once the Agent exists the Session goes ahead, without waiting out its backoff.
		late := &v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "late"}, Spec: v1alpha1.AgentSpec{Model: v1alpha1.AgentModel{ID: "claude-sonnet-4-5"}}}
		require.NoError(t, s.k8s.Create(ctx, late))
		s.session("default", "orphan", idleWith("echo: finally"))
	})

	t.Run("the apiserver enforces the spec's rules", func(t *testing.T) {
		both := &v1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "both"}, Spec: v1alpha1.SessionSpec{
			AgentRef: &v1alpha1.LocalObjectReference{Name: "assistant"}, AgentID: "agent_x", EnvironmentID: "env_x"}}
		err := s.k8s.Create(ctx, both)
		require.True(t, apierrors.IsInvalid(err), "%v", err)
		require.ErrorContains(t, err, "set exactly one of agentRef and agentID")

		var cur v1alpha1.Session
		require.NoError(t, s.k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: "hello"}, &cur))
		cur.Spec.InitialMessage = "something else"
		err = s.k8s.Update(ctx, &cur)
		require.True(t, apierrors.IsInvalid(err), "%v", err)
		require.ErrorContains(t, err, "initialMessage cannot change")

		require.NoError(t, s.k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: "hello"}, &cur))
		cur.Spec.AgentRef = &v1alpha1.LocalObjectReference{Name: "late"}
		err = s.k8s.Update(ctx, &cur)
		require.ErrorContains(t, err, "the agent of a session cannot change")

		// Title and metadata may change; the session follows.
		require.NoError(t, s.k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: "hello"}, &cur))
		cur.Spec.Title = "Renamed"
		cur.Spec.Metadata = map[string]string{"owner": "docs"}
		require.NoError(t, s.k8s.Update(ctx, &cur))
		s.session("default", "hello", func(x *v1alpha1.Session) bool { return x.Status.ObservedGeneration == cur.Generation })
		got, err := s.sdk.Beta.Sessions.Get(ctx, cur.Status.SessionID, anthropic.BetaSessionGetParams{})
		require.NoError(t, err)
		require.Equal(t, "Renamed", got.Title)
		require.Equal(t, "docs", got.Metadata["owner"])
	})

	t.Run("deleting the Session deletes the session", func(t *testing.T) {
		id := hello.Status.SessionID
		require.NoError(t, s.k8s.Delete(ctx, hello))
		require.Eventually(t, func() bool {
			err := s.k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: "hello"}, &v1alpha1.Session{})
			return apierrors.IsNotFound(err)
		}, wait, 50*time.Millisecond)
		_, err := s.sdk.Beta.Sessions.Get(ctx, id, anthropic.BetaSessionGetParams{})
		requireStatus(t, err, http.StatusNotFound)
	})

	t.Run("deleting a Session with a sandbox tears it down without blocking", func(t *testing.T) {
		tooled := &v1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tooled"}, Spec: v1alpha1.SessionSpec{
			AgentRef: &v1alpha1.LocalObjectReference{Name: "assistant"}, EnvironmentRef: &v1alpha1.LocalObjectReference{Name: "sandbox"},
			InitialMessage: `/tool bash {"command":"echo from-the-sandbox"}`}}
		require.NoError(t, s.k8s.Create(ctx, tooled))
		done := s.session("default", "tooled", idleWith("bash: from-the-sandbox"))
		_, err := s.api.Store.GetBinding(ctx, done.Status.SessionID)
		require.NoError(t, err, "the session has a sandbox, so its delete goes through the worker's teardown")
		require.NoError(t, s.k8s.Delete(ctx, done))
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(s.k8s.Get(ctx, client.ObjectKeyFromObject(done), &v1alpha1.Session{}))
		}, wait, 50*time.Millisecond)
		_, err = s.sdk.Beta.Sessions.Get(ctx, done.Status.SessionID, anthropic.BetaSessionGetParams{})
		requireStatus(t, err, http.StatusNotFound)
	})

	t.Run("deleting a running Session interrupts it, then deletes it", func(t *testing.T) {
		busy := &v1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "busy"}, Spec: v1alpha1.SessionSpec{
			AgentRef: &v1alpha1.LocalObjectReference{Name: "assistant"}, EnvironmentRef: &v1alpha1.LocalObjectReference{Name: "sandbox"},
			InitialMessage: "/sleep 60000"}}
		require.NoError(t, s.k8s.Create(ctx, busy))
		running := s.session("default", "busy", func(s *v1alpha1.Session) bool {
			return s.Status.Status == "running" && meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionRunning)
		})
		require.NoError(t, s.k8s.Delete(ctx, running))
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(s.k8s.Get(ctx, client.ObjectKeyFromObject(running), &v1alpha1.Session{}))
		}, wait, 50*time.Millisecond, "the 60 s turn is interrupted, not waited out")
		_, err := s.sdk.Beta.Sessions.Get(ctx, running.Status.SessionID, anthropic.BetaSessionGetParams{})
		requireStatus(t, err, http.StatusNotFound)
	})

	t.Run("another namespace is another workspace", func(t *testing.T) {
		require.NoError(t, s.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}))
		stdout, stderr, err := s.kubectl("apply", "-n", "team-a", "-f", filepath.Join(repoRoot(t), "config", "samples"))
		require.NoError(t, err, "kubectl apply: %s %s", readAll(stdout), readAll(stderr))
		other := s.session("team-a", "hello", idleWith("echo: Hello! What can you do?"))
		require.NotEqual(t, s.ws, other.Status.WorkspaceID)
		_, err = s.sdk.Beta.Sessions.Get(ctx, other.Status.SessionID, anthropic.BetaSessionGetParams{})
		requireStatus(t, err, http.StatusNotFound)
	})

	t.Run("a controller stopped right after the create makes no second session", func(t *testing.T) {
		ctrl.stop(t)
		var mu sync.Mutex
		var created []string
		crashed := make(chan struct{})
		var crashing *controller
		crashing = s.startController(func(_ context.Context, id string) error {
			mu.Lock()
			defer mu.Unlock()
			created = append(created, id)
			if len(created) == 1 {
				crashing.cancel()
				close(crashed)
			}
			return errors.New("controller killed before it recorded the session")
		})
		title := "crash-" + ids.New("")
		crash := &v1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "crash"}, Spec: v1alpha1.SessionSpec{
			AgentRef: &v1alpha1.LocalObjectReference{Name: "assistant"}, EnvironmentRef: &v1alpha1.LocalObjectReference{Name: "sandbox"},
			Title: title, InitialMessage: "once"}}
		require.NoError(t, s.k8s.Create(ctx, crash))
		select {
		case <-crashed:
		case <-time.After(wait):
			t.Fatal("the controller never created the session")
		}
		crashing.stop(t)
		require.NoError(t, s.k8s.Get(ctx, client.ObjectKeyFromObject(crash), crash))
		require.Empty(t, crash.Status.SessionID, "the crashed controller must not have recorded the session")

		ctrl = s.startController(nil)
		got := s.session("default", "crash", idleWith("echo: once"))
		mu.Lock()
		require.Equal(t, created[0], got.Status.SessionID)
		mu.Unlock()
		require.Equal(t, 1, countSessions(t, s, title))
		// The initial message went once: one answer in the log.
		require.Equal(t, 1, countAgentMessages(t, s, got.Status.SessionID))
	})

	t.Run("deleting an Agent archives it; an Environment in use is archived", func(t *testing.T) {
		var late v1alpha1.Agent
		require.NoError(t, s.k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: "late"}, &late))
		require.NoError(t, s.k8s.Delete(ctx, &late))
		var env v1alpha1.Environment
		require.NoError(t, s.k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: "sandbox"}, &env))
		require.NoError(t, s.k8s.Delete(ctx, &env))
		for _, o := range []client.Object{&late, &env} {
			require.Eventually(t, func() bool {
				return apierrors.IsNotFound(s.k8s.Get(ctx, client.ObjectKeyFromObject(o), o))
			}, wait, 50*time.Millisecond)
		}
		agent, err := s.sdk.Beta.Agents.Get(ctx, late.Status.ID, anthropic.BetaAgentGetParams{})
		require.NoError(t, err)
		require.False(t, agent.ArchivedAt.IsZero(), "archived, not deleted")
		// The orphan Session still uses the environment, so it is archived rather than deleted.
		environment, err := s.sdk.Beta.Environments.Get(ctx, env.Status.ID, anthropic.BetaEnvironmentGetParams{})
		require.NoError(t, err)
		require.NotEmpty(t, environment.ArchivedAt)
	})
}

func countSessions(t *testing.T, s *stack, title string) int {
	n := 0
	iter := s.sdk.Beta.Sessions.ListAutoPaging(context.Background(), anthropic.BetaSessionListParams{})
	for iter.Next() {
		if iter.Current().Title == title {
			n++
		}
	}
	require.NoError(t, iter.Err())
	return n
}

func countAgentMessages(t *testing.T, s *stack, sessionID string) int {
	n := 0
	iter := s.sdk.Beta.Sessions.Events.ListAutoPaging(context.Background(), sessionID, anthropic.BetaSessionEventListParams{})
	for iter.Next() {
		if iter.Current().Type == "agent.message" {
			n++
		}
	}
	require.NoError(t, iter.Err())
	return n
}

func userMessage(text string) anthropic.BetaManagedAgentsEventParamsUnion {
	return anthropic.BetaManagedAgentsEventParamsUnion{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
		Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: text}}}}}
}

func requireStatus(t *testing.T, err error, status int) {
	t.Helper()
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr, "want HTTP %d", status)
	require.Equal(t, status, apiErr.StatusCode)
}

func readAll(r io.Reader) string {
	if r == nil {
		return ""
	}
	b, _ := io.ReadAll(r)
	return strings.TrimSpace(string(b))
}
