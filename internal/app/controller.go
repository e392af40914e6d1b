package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	"go.temporal.io/sdk/client"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/controllers"
	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/metrics"
	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/store"
)

// ControllerDeps are what the controller role runs on besides the configuration.
type ControllerDeps struct {
	// Store is the migrated database; Service the sessions service over it (with a runner,
	// so created sessions run and deletes can tear sandboxes down).
	Store   *store.Store
	Service *sessions.Service
	// REST is the cluster to reconcile; nil means from cfg.Kubeconfig or in-cluster.
	REST *rest.Config
	// Workspaces are namespace mappings of the caller (dev maps default to its key's
	// workspace); MANAGED_AGENT_CONTROLLER_WORKSPACES entries win over them.
	Workspaces map[string]string
	// AfterCreate is the Session reconciler's test seam (controllers.SessionReconciler).
	AfterCreate func(ctx context.Context, sessionID string) error
}

// leaderElectionID names the Lease the controller replicas compete for.
const leaderElectionID = "managed-agents-controller.agents.managed-agents.io"

// RunControllerManager runs the Agent, Environment and Session reconcilers in a
// controller-runtime manager (leader election, health probes and metrics as configured)
// until ctx ends. Committed-event wake-ups reach the Session reconciler through a LISTEN of
// its own on the events topic.
func RunControllerManager(ctx context.Context, cfg Config, d ControllerDeps, logger *slog.Logger) error {
	restCfg := d.REST
	if restCfg == nil {
		var err error
		if restCfg, err = kubeRESTConfig(cfg.Kubeconfig); err != nil {
			return err
		}
	}
	fixed, err := cfg.controllerWorkspaces()
	if err != nil {
		return err
	}
	mapping := map[string]string{}
	for ns, ws := range d.Workspaces {
		mapping[ns] = ws
	}
	for ns, ws := range fixed {
		mapping[ns] = ws
	}
	for ns, ws := range mapping {
		ok, err := d.Service.WorkspaceExists(ctx, ws)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("MANAGED_AGENT_CONTROLLER_WORKSPACES: namespace %s names workspace %s, which does not exist", ns, ws)
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := controllers.AddAgentSandboxToScheme(scheme); err != nil {
		return err
	}
	log := logr.FromSlogHandler(logger.Handler())
	ctrl.SetLogger(log)
	sandboxPods, err := cfg.sandboxPodsConfig()
	if err != nil {
		return err
	}
	if err := controllers.CheckSubstrate(restCfg, sandboxPods.Substrate); err != nil {
		return err
	}
	skip := true
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        scheme,
		Logger:                        log,
		Metrics:                       metricsserver.Options{BindAddress: cfg.controllerMetricsAddr()},
		HealthProbeBindAddress:        orDefault(cfg.ControllerHealthAddr, ":8081"),
		LeaderElection:                cfg.ControllerLeaderElect,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       cfg.ControllerLeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		// Only sandbox pods and their NetworkPolicies, not every pod of the cluster.
		Cache: cache.Options{ByObject: controllers.SandboxCacheOptions(sandboxPods.Namespace, sandboxPods.Substrate)},
		// Controller names are checked for uniqueness per process; tests run managers one
		// after another in one process.
		Controller: ctrlconfig.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		if cfg.ControllerLeaderElect && cfg.ControllerLeaderElectionNamespace == "" {
			return fmt.Errorf("start the controller manager: %w (outside a pod, set MANAGED_AGENT_CONTROLLER_LEADER_ELECTION_NAMESPACE or MANAGED_AGENT_CONTROLLER_LEADER_ELECT=false)", err)
		}
		return fmt.Errorf("start the controller manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("database", func(r *http.Request) error { return d.Store.Ping(r.Context()) }); err != nil {
		return err
	}
	wsMap := &controllers.Workspaces{API: d.Service, Fixed: mapping, PerNamespace: cfg.ControllerWorkspacePerNamespace}
	wakes := controllers.NewSessionEvents()
	listener := store.NewListener(d.Store.Pool(), logger, cfg.listenerOptions()...)
	if err := listener.Listen(store.TopicEvents, wakes); err != nil {
		return err
	}
	if err := listener.Start(ctx); err != nil {
		return err
	}
	defer listener.Stop()

	if err := (&controllers.AgentReconciler{Client: mgr.GetClient(), API: d.Service, Workspaces: wsMap, Recorder: mgr.GetEventRecorder("managed-agents-agent")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the Agent controller: %w", err)
	}
	if err := (&controllers.EnvironmentReconciler{Client: mgr.GetClient(), API: d.Service, Workspaces: wsMap, Recorder: mgr.GetEventRecorder("managed-agents-environment")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the Environment controller: %w", err)
	}
	sr := &controllers.SessionReconciler{Client: mgr.GetClient(), API: d.Service, Workspaces: wsMap, Recorder: mgr.GetEventRecorder("managed-agents-session"),
		Events: wakes, AfterCreate: d.AfterCreate}
	if err := sr.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up the Session controller: %w", err)
	}
	remote, err := cfg.remoteProviders("MANAGED_AGENT_CONTROLLER_SANDBOX_PROVIDERS", cfg.ControllerSandboxProviders, true)
	if err != nil {
		return err
	}
	sb := &controllers.SandboxBindingReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("managed-agents-sandbox"), Pods: sandboxPods, Remote: map[string]controllers.RemoteSandboxes{}}
	for name, p := range remote {
		sb.Remote[name] = p
	}
	if err := sb.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the SandboxBinding controller: %w", err)
	}
	wp := &controllers.SandboxWarmPoolReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("managed-agents-sandbox"), Pods: sandboxPods}
	if err := wp.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the SandboxWarmPool controller: %w", err)
	}
	if sandboxPods.SandboxdImage == "" {
		// Only the kubernetes sandbox provider makes bindings; other deployments need no image.
		logger.Info("MANAGED_AGENT_SANDBOXD_IMAGE is not set: SandboxBindings stay Pending (NotConfigured); the kubernetes sandbox provider needs it")
	}
	logger.Info("controller manager starting", "host", restCfg.Host, "leader_election", cfg.ControllerLeaderElect, "mapped_namespaces", len(mapping),
		"workspace_per_namespace", cfg.ControllerWorkspacePerNamespace)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("controller manager: %w", err)
	}
	return nil
}

// kubeRESTConfig loads the cluster's address and credentials: from the kubeconfig files
// (a list, as KUBECONFIG holds it) when given, else from the pod's service account.
func kubeRESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no cluster to reconcile: not running in a pod (%w) and neither KUBECONFIG nor --kubeconfig is set", err)
		}
		return c, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(kubeconfig)}
	c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	return c, nil
}

// RunController is the `controller` subcommand: it validates the configuration, opens the
// migrated database, connects to Temporal when MANAGED_AGENT_TEMPORAL_ADDRESS is set (so
// created sessions start running and deleted ones get their sandboxes torn down) and runs
// the controller manager. With MANAGED_AGENT_API_KEY set, namespace default maps to that
// key's workspace, as the API binds it.
func RunController(ctx context.Context, cfg Config, version string) error {
	logger, err := start(cfg)
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return errors.New("MANAGED_AGENT_DATABASE_URL is not set")
	}
	if cfg.Metrics == nil {
		if cfg.Metrics, err = controllerMetrics(); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
		cfg.MetricsRegistry = ctrlmetrics.Registry
	}
	// While it waits for PostgreSQL, the migrations and Temporal, the probes answer: alive,
	// not ready. The manager serves them itself from its start on.
	boot := newStarting(cfg, logger)
	stopProbes := func() {}
	if addr := orDefault(cfg.ControllerHealthAddr, ":8081"); addr != "0" {
		stop, err := boot.serveStartingProbes(addr)
		if err != nil {
			return err
		}
		stopProbes = sync.OnceFunc(stop)
		defer stopProbes()
	}
	st, err := boot.waitPostgres(ctx, cfg.DatabaseURL, cfg.storeOptions()...)
	if err != nil {
		return stopped(ctx, err)
	}
	defer st.Close()
	if err := boot.waitMigrated(ctx, st); err != nil {
		return stopped(ctx, err)
	}
	unregisterPool, err := cfg.registerPool(st.Pool())
	if err != nil {
		return err
	}
	defer unregisterPool()
	var opts []sessions.Option
	if cfg.TemporalAddress != "" {
		tc, err := boot.waitTemporal(ctx, cfg, logger)
		if err != nil {
			return stopped(ctx, err)
		}
		defer tc.Close()
		opts = append(opts, sessions.WithRunner(controllerRunner(cfg, tc, logger)))
	} else {
		logger.Warn("MANAGED_AGENT_TEMPORAL_ADDRESS is not set: sessions the controller creates wait for a worker's sweep, and deleting one with a sandbox fails")
	}
	boot.done()
	// The workspace quota on running sessions holds for sessions made from resources too
	// (a refused create is retried with the reconciler's backoff); the per-key limits never
	// apply here, since the controller uses no key.
	opts = append(opts, sessions.WithLimits(cfg.sessionLimits()))
	svc := sessions.New(st, store.NewNotifier(), logger, opts...)
	svc.Wakes().Start()
	defer svc.Wakes().Stop()
	deps := ControllerDeps{Store: st, Service: svc}
	if cfg.APIKey != "" {
		ws, err := svc.BindConfiguredKey(ctx, cfg.APIKey, "default")
		if errors.Is(err, store.ErrKeyEnded) {
			// The key's workspace still serves namespace default; the key itself stays refused.
			logger.Error("MANAGED_AGENT_API_KEY was revoked or has expired: namespace default keeps its workspace; configure a new key", "error", err)
		} else if err != nil {
			return err
		}
		deps.Workspaces = map[string]string{"default": ws}
	}
	logger.Info("controller running", "version", version)
	stopProbes() // the manager listens on the same address
	return RunControllerManager(ctx, cfg, deps, logger)
}

// controllerMetrics are the collectors of the controller role, in controller-runtime's
// registry (which its metrics server serves beside its own). That registry is the process's:
// they are made once however often a process runs the role (tests do).
var controllerMetrics = sync.OnceValues(func() (*metrics.Metrics, error) { return metrics.New(ctrlmetrics.Registry) })

func controllerRunner(cfg Config, tc client.Client, logger *slog.Logger) sessions.Runner {
	return &durable.Runner{Client: tc, TaskQueue: cfg.TaskQueue, Retry: cfg.modelRetry(), Logger: logger}
}
