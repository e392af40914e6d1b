//go:build integration

package controllers_test

import (
	"context"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
)

// dev with a kubeconfig runs the controller too: a Session applied to the cluster becomes a
// session the dev API key sees, and dev stops cleanly.
func TestDevWithKubeconfigRunsTheController(t *testing.T) {
	env, restCfg := startAPIServer(t)
	dev := startDev(t, env, nil)
	ctx := context.Background()
	addr, key := dev.addr, dev.key

	scheme := kruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	k8s, err := client.New(restCfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	require.NoError(t, k8s.Create(ctx, &v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}, Spec: v1alpha1.AgentSpec{Model: v1alpha1.AgentModel{ID: "m"}}}))
	require.NoError(t, k8s.Create(ctx, &v1alpha1.Environment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e"}}))
	require.NoError(t, k8s.Create(ctx, &v1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"}, Spec: v1alpha1.SessionSpec{
		AgentRef: &v1alpha1.LocalObjectReference{Name: "a"}, EnvironmentRef: &v1alpha1.LocalObjectReference{Name: "e"}, InitialMessage: "from dev"}}))

	s := &stack{t: t, k8s: k8s}
	got := s.session("default", "s", idleWith("echo: from dev"))
	sdk := anthropic.NewClient(option.WithBaseURL("http://"+addr), option.WithAPIKey(key), option.WithMaxRetries(0))
	sess, err := sdk.Beta.Sessions.Get(ctx, got.Status.SessionID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err, "the dev key's workspace is namespace default's")
	require.Equal(t, "idle", string(sess.Status))

	dev.stop() // and cleanly
}
