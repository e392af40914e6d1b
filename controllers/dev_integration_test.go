//go:build integration

package controllers_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/pgtest"
)

// dev with a kubeconfig runs the controller too: a Session applied to the cluster becomes a
// session the dev API key sees, and dev stops cleanly.
func TestDevWithKubeconfigRunsTheController(t *testing.T) {
	env, restCfg := startAPIServer(t)
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "dev-admin", Groups: []string{"system:masters"}}, nil)
	require.NoError(t, err)
	kc, err := user.KubeConfig()
	require.NoError(t, err)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, kc, 0o600))

	temporal, err := durable.StartDevServer(context.Background(), durable.DevServerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = temporal.Stop() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	key := "sk-dev-" + ids.New("")
	cfg := app.Config{Addr: addr, DataDir: t.TempDir(), DatabaseURL: pgtest.URL(t), TemporalAddress: temporal.FrontendHostPort(),
		TaskQueue: "dev-" + ids.New(""), SandboxDir: t.TempDir(), APIKey: key, LogFormat: "text", LogLevel: "error",
		Kubeconfig: kubeconfig, ControllerWorkspacePerNamespace: true}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.RunDev(ctx, cfg) }()
	t.Cleanup(cancel)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, wait, 50*time.Millisecond)

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

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("dev did not stop")
	}
}
