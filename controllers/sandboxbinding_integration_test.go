//go:build integration

package controllers_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes/kubetest"
)

// TestSessionsRunToolsInSandboxPods is the kubernetes provider end to end: dev (API, worker,
// controller) with MANAGED_AGENT_SANDBOX=kubernetes against envtest, the test playing the
// kubelet. Sessions applied as resources run tools in their own pods; files persist across
// runs; a pod deleted behind our back fails the next tool call with a session.error; deleting
// a Session deletes its binding, pod, Secret and NetworkPolicy.
func TestSessionsRunToolsInSandboxPods(t *testing.T) {
	env, restCfg := startAPIServer(t)
	k8s, err := client.New(restCfg, client.Options{Scheme: kubetest.Scheme(t)})
	require.NoError(t, err)
	ctx := context.Background()
	const sandboxNS = "sandboxes"
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sandboxNS}}))
	kubelet := kubetest.Start(t, k8s, sandboxNS)

	dev := startDev(t, env, func(c *app.Config) {
		c.TaskQueue = "kube-" + ids.New("")
		c.Sandbox, c.KubernetesNamespace, c.KubernetesImage = "kubernetes", sandboxNS, "sandbox:test"
		c.KubernetesSandboxdPort = strconv.Itoa(int(kubelet.Port()))
		c.SandboxdImage = "managed-agents:test"
	})
	addr, key := dev.addr, dev.key
	sdk := anthropic.NewClient(option.WithBaseURL("http://"+addr), option.WithAPIKey(key), option.WithMaxRetries(0))
	s := &stack{t: t, k8s: k8s}

	require.NoError(t, k8s.Create(ctx, &v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tools"}, Spec: v1alpha1.AgentSpec{
		Name: "tools", Model: v1alpha1.AgentModel{ID: "m"}, Tools: []kruntime.RawExtension{{Raw: []byte(`{"type":"agent_toolset_20260401"}`)}}}}))
	require.NoError(t, k8s.Create(ctx, &v1alpha1.Environment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pods"}}))
	newSession := func(name, msg string) {
		require.NoError(t, k8s.Create(ctx, &v1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: v1alpha1.SessionSpec{
			AgentRef: &v1alpha1.LocalObjectReference{Name: "tools"}, EnvironmentRef: &v1alpha1.LocalObjectReference{Name: "pods"}, InitialMessage: msg}}))
	}
	send := func(sessionID, text string) {
		_, err := sdk.Beta.Sessions.Events.Send(ctx, sessionID, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
				Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: text}}}}}}})
		require.NoError(t, err)
	}
	bindingOf := func(sessionID string) *v1alpha1.SandboxBinding {
		var list v1alpha1.SandboxBindingList
		require.NoError(t, k8s.List(ctx, &list, client.InNamespace(sandboxNS), client.MatchingLabels{v1alpha1.LabelSessionID: sessionID}))
		require.Len(t, list.Items, 1, "one binding per session")
		return &list.Items[0]
	}

	// A tool call runs in the session's pod, and its files are there on the next run.
	newSession("one", `/tool bash {"command":"echo precious > kept.txt && echo written"}`)
	one := s.session("default", "one", idleWith("bash: written"))
	b1 := bindingOf(one.Status.SessionID)
	require.Equal(t, v1alpha1.SandboxRunning, b1.Status.Phase)
	send(one.Status.SessionID, `/tool bash {"command":"cat kept.txt"}`)
	s.session("default", "one", idleWith("bash: precious"))

	// Another session gets another pod.
	newSession("two", `/tool bash {"command":"ls kept.txt 2>&1 || true"}`)
	two := s.session("default", "two", func(x *v1alpha1.Session) bool {
		return x.Status.Status == "idle" && x.Status.LastAgentMessage != "" && x.Status.LastAgentMessage != "bash: kept.txt"
	})
	b2 := bindingOf(two.Status.SessionID)
	require.NotEqual(t, b1.Name, b2.Name)
	require.NotEqual(t, b1.Status.ExternalID, b2.Status.ExternalID, "two pods")

	// A pod deleted behind our back fails the next tool call clearly; no new pod appears.
	require.NoError(t, k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: sandboxNS, Name: b2.Name}}))
	require.Eventually(t, func() bool {
		var b v1alpha1.SandboxBinding
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(b2), &b))
		return b.Status.Phase == v1alpha1.SandboxFailed
	}, wait, 50*time.Millisecond)
	// Once its daemon is gone too (the container outlives the pod object for a moment).
	require.Eventually(t, func() bool { return !kubelet.Serving(types.UID(b2.Status.ExternalID)) }, wait, 50*time.Millisecond)
	// The live client learns it from its failed call: the model gets a tool error saying so
	// (the session could still go on without tools)...
	send(two.Status.SessionID, `/tool bash {"command":"echo again"}`)
	s.session("default", "two", func(x *v1alpha1.Session) bool {
		return x.Status.Status == "idle" && strings.Contains(x.Status.LastAgentMessage, "the session's sandbox no longer exists")
	})
	// ...and the next acquisition, which attaches again, fails the session with a session.error.
	send(two.Status.SessionID, `/tool bash {"command":"echo once more"}`)
	var errText string
	require.Eventually(t, func() bool {
		page, err := sdk.Beta.Sessions.Events.List(ctx, two.Status.SessionID, anthropic.BetaSessionEventListParams{
			Types: []anthropic.BetaManagedAgentsSessionEventType{"session.error"}})
		require.NoError(t, err)
		if len(page.Data) == 0 {
			return false
		}
		raw, err := json.Marshal(page.Data[0])
		require.NoError(t, err)
		errText = string(raw)
		return true
	}, wait, 100*time.Millisecond, "a session.error")
	require.Contains(t, errText, "no longer exists")
	require.Contains(t, errText, b2.Name)
	require.True(t, apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: sandboxNS, Name: b2.Name}, &corev1.Pod{})), "not replaced")

	// Deleting the Session deletes the binding and everything it made.
	require.NoError(t, k8s.Delete(ctx, one))
	require.Eventually(t, func() bool {
		for _, obj := range []client.Object{&v1alpha1.SandboxBinding{}, &corev1.Pod{}, &networkingv1.NetworkPolicy{}} {
			if !apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: sandboxNS, Name: b1.Name}, obj)) {
				return false
			}
		}
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: sandboxNS, Name: b1.Status.TokenSecret}, &corev1.Secret{})) &&
			apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(one), &v1alpha1.Session{}))
	}, wait, 100*time.Millisecond)
}
