package kubetest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/controllers"
)

// Scheme holds core/v1, networking, v1alpha1 and agent-sandbox's kinds, as the controller's.
func Scheme(t testing.TB) *kruntime.Scheme {
	s := kruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	require.NoError(t, controllers.AddAgentSandboxToScheme(s))
	return s
}

// Cluster is a kube-apiserver and etcd (envtest) with the CRDs installed.
type Cluster struct {
	Env    *envtest.Environment
	REST   *rest.Config
	Client client.Client
}

// StartCluster starts the apiserver from KUBEBUILDER_ASSETS; without assets the test is
// skipped, except in CI, where it fails.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests through make test or set it to the output of hack/envtest-assets.sh")
		}
		t.Skip("KUBEBUILDER_ASSETS is not set (make envtest-assets prints the directory)")
	}
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := env.Start()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, env.Stop()) })
	c, err := client.New(cfg, client.Options{Scheme: Scheme(t)})
	require.NoError(t, err)
	return &Cluster{Env: env, REST: cfg, Client: c}
}

// Namespace creates a namespace of that name.
func (c *Cluster) Namespace(t testing.TB, name string) {
	t.Helper()
	require.NoError(t, c.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
}

// RunSandboxController runs the SandboxBinding and SandboxWarmPool reconcilers in a manager of its own (as the
// controller role wires it) until the test ends; stop ends it earlier, as a crash would.
// configure adjusts the reconciler before it starts (its remote providers, say).
func (c *Cluster) RunSandboxController(t testing.TB, pods controllers.SandboxPods, configure ...func(*controllers.SandboxBindingReconciler)) (stop func()) {
	t.Helper()
	skip := true
	mgr, err := ctrl.NewManager(c.REST, ctrl.Options{
		Scheme:                 Scheme(t),
		Logger:                 logr.Discard(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: controllers.SandboxCacheOptions(pods.Namespace, pods.Substrate)},
		Controller:             ctrlconfig.Controller{SkipNameValidation: &skip},
	})
	require.NoError(t, err)
	r := &controllers.SandboxBindingReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("managed-agents-sandbox"), Pods: pods, OrphanSweepInterval: 100 * time.Millisecond}
	for _, f := range configure {
		f(r)
	}
	require.NoError(t, r.SetupWithManager(mgr))
	pools := &controllers.SandboxWarmPoolReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("managed-agents-sandbox"), Pods: pods}
	require.NoError(t, pools.SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return stop
}
