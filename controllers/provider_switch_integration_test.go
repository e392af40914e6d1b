//go:build integration

package controllers_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/app"
)

// A session whose sandbox was made under the local provider can still be deleted after the
// deployment switched to the kubernetes provider (helm upgrade --set
// sandbox.provider=kubernetes): nothing in the new deployment can reach the old sandbox, so
// the teardown removes its binding with a warning, the session goes and the Session's
// finalizer is removed. Before, the teardown failed with `unknown sandbox provider "local"`,
// the finalizer started it again every second, and the resource never went.
func TestDeleteAfterTheSandboxProviderChanged(t *testing.T) {
	env, restCfg := startAPIServer(t)
	scheme := kruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	k8s, err := client.New(restCfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	ctx := context.Background()

	var first app.Config
	before := startDev(t, env, func(c *app.Config) { first = *c }) // the local provider
	require.NoError(t, k8s.Create(ctx, &v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tools"}, Spec: v1alpha1.AgentSpec{
		Name: "tools", Model: v1alpha1.AgentModel{ID: "m"}, Tools: []kruntime.RawExtension{{Raw: []byte(`{"type":"agent_toolset_20260401"}`)}}}}))
	require.NoError(t, k8s.Create(ctx, &v1alpha1.Environment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e"}}))
	require.NoError(t, k8s.Create(ctx, &v1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tooled"}, Spec: v1alpha1.SessionSpec{
		AgentRef: &v1alpha1.LocalObjectReference{Name: "tools"}, EnvironmentRef: &v1alpha1.LocalObjectReference{Name: "e"},
		InitialMessage: `/tool bash {"command":"echo made-on-local"}`}}))
	s := &stack{t: t, k8s: k8s}
	done := s.session("default", "tooled", idleWith("bash: made-on-local"))
	before.stop()

	// The same database, Temporal and task queue; only the sandbox provider changed.
	after := startDev(t, env, func(c *app.Config) {
		c.DatabaseURL, c.TemporalAddress, c.TaskQueue, c.APIKey = first.DatabaseURL, first.TemporalAddress, first.TaskQueue, first.APIKey
		c.Sandbox, c.KubernetesNamespace, c.KubernetesImage = "kubernetes", "default", "sandbox:test"
	})
	require.NoError(t, k8s.Delete(ctx, done))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(done), &v1alpha1.Session{}))
	}, wait, 100*time.Millisecond, "the Session's finalizer is removed")
	sdk := anthropic.NewClient(option.WithBaseURL("http://"+after.addr), option.WithAPIKey(first.APIKey), option.WithMaxRetries(0))
	_, err = sdk.Beta.Sessions.Get(ctx, done.Status.SessionID, anthropic.BetaSessionGetParams{})
	requireStatus(t, err, http.StatusNotFound)
	after.stop()
}
