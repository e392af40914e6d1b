//go:build integration

package controllers_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/controllers"
	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes/kubetest"
	"github.com/managed-agents/managed-agents/internal/sandbox/opensandbox/opensandboxfake"
)

// TestSessionsRunToolsAtARemoteProviderThroughBindings: dev (API, worker, controller)
// against envtest with MANAGED_AGENT_SANDBOX=kubernetes and bindings naming a remote
// provider (OpenSandbox, against its local fake): the controller creates the session's
// sandbox at the provider and records its id, the worker runs the tools there through its
// own client, and deleting the Session deletes the binding and the remote sandbox.
func TestSessionsRunToolsAtARemoteProviderThroughBindings(t *testing.T) {
	env, restCfg := startAPIServer(t)
	k8s, err := client.New(restCfg, client.Options{Scheme: kubetest.Scheme(t)})
	require.NoError(t, err)
	ctx := context.Background()
	const sandboxNS = "remote-sandboxes"
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sandboxNS}}))
	fake := opensandboxfake.Start(t, opensandboxfake.Options{APIKey: "binding-key"})

	startDev(t, env, func(c *app.Config) {
		c.TaskQueue = "remote-" + ids.New("")
		c.Sandbox, c.KubernetesNamespace, c.KubernetesImage = "kubernetes", sandboxNS, "python:3.13"
		c.KubernetesProvider, c.ControllerSandboxProviders = "opensandbox", "opensandbox"
		c.SandboxdImage = "managed-agents:test"
		c.ProviderSettings = map[string]string{
			"MANAGED_AGENT_OPENSANDBOX_API_URL":          fake.URL(),
			"MANAGED_AGENT_OPENSANDBOX_API_KEY":          "binding-key",
			"MANAGED_AGENT_OPENSANDBOX_USE_SERVER_PROXY": "true",
			"MANAGED_AGENT_OPENSANDBOX_WORKSPACE":        "~/workspace",
		}
	})
	s := &stack{t: t, k8s: k8s}
	require.NoError(t, k8s.Create(ctx, &v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "remote-tools"}, Spec: v1alpha1.AgentSpec{
		Name: "remote-tools", Model: v1alpha1.AgentModel{ID: "m"}, Tools: []kruntime.RawExtension{{Raw: []byte(`{"type":"agent_toolset_20260401"}`)}}}}))
	require.NoError(t, k8s.Create(ctx, &v1alpha1.Environment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "remote"}}))
	session := &v1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "remote-one"}, Spec: v1alpha1.SessionSpec{
		AgentRef: &v1alpha1.LocalObjectReference{Name: "remote-tools"}, EnvironmentRef: &v1alpha1.LocalObjectReference{Name: "remote"},
		InitialMessage: `/tool bash {"command":"echo far away > f.txt && cat f.txt"}`}}
	require.NoError(t, k8s.Create(ctx, session))
	one := s.session("default", "remote-one", idleWith("bash: far away"))

	var list v1alpha1.SandboxBindingList
	require.NoError(t, k8s.List(ctx, &list, client.InNamespace(sandboxNS), client.MatchingLabels{v1alpha1.LabelSessionID: one.Status.SessionID}))
	require.Len(t, list.Items, 1)
	b := list.Items[0]
	require.Equal(t, "opensandbox", b.Spec.Provider)
	require.Equal(t, v1alpha1.SandboxRunning, b.Status.Phase)
	boxes := fake.Sandboxes()
	require.Len(t, boxes, 1, "one sandbox at the provider")
	require.Equal(t, boxes[0].ID, b.Status.ExternalID, "the binding records the provider's id")
	require.Equal(t, controllers.RemoteEndpoint("opensandbox", boxes[0].ID), b.Status.Endpoint)
	require.Equal(t, one.Status.SessionID, boxes[0].Metadata["managed-agents/session-id"])
	var pods corev1.PodList
	require.NoError(t, k8s.List(ctx, &pods, client.InNamespace(sandboxNS)))
	require.Empty(t, pods.Items, "no pod: the sandbox is remote")

	// Deleting the Session deletes the binding, whose finalizer destroys the remote sandbox.
	require.NoError(t, k8s.Delete(ctx, one))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(&b), &v1alpha1.SandboxBinding{})) && len(fake.Sandboxes()) == 0
	}, wait, 100*time.Millisecond)
}
