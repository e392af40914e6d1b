package app

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/controllers"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes"
)

// DefaultSandboxWorkerSelector selects the chart's worker pods, the only ones a sandbox
// pod's NetworkPolicy lets in.
const DefaultSandboxWorkerSelector = "app.kubernetes.io/component=worker"

// kubernetesConfig parses the MANAGED_AGENT_KUBERNETES_* values (the cluster client is added
// by newKubernetesProvider); every problem names its variable.
func (c Config) kubernetesConfig() (kubernetes.Config, error) {
	cfg := kubernetes.Config{Namespace: c.KubernetesNamespace, Image: c.KubernetesImage,
		RuntimeClassName: c.KubernetesRuntimeClass, ServiceAccountName: c.KubernetesServiceAccount,
		PersistentWorkspace: c.KubernetesPersistentWorkspace, WorkspaceStorageClass: c.KubernetesWorkspaceStorageClass}
	var errs []error
	if c.KubernetesNamespace == "" {
		errs = append(errs, errors.New("MANAGED_AGENT_KUBERNETES_NAMESPACE is not set: the namespace of the sandbox pods (MANAGED_AGENT_SANDBOX=kubernetes)"))
	} else if msgs := validation.IsDNS1123Label(c.KubernetesNamespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_NAMESPACE=%q: must be a namespace name (%s)", c.KubernetesNamespace, msgs[0]))
	}
	if c.KubernetesImage == "" {
		errs = append(errs, errors.New("MANAGED_AGENT_KUBERNETES_IMAGE is not set: the sandbox image of environments that name none (MANAGED_AGENT_SANDBOX=kubernetes)"))
	}
	if c.KubernetesSandboxdPort != "" {
		v, err := strconv.Atoi(c.KubernetesSandboxdPort)
		if err != nil || v < 1 || v > 65535 {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_SANDBOXD_PORT=%q: must be a port from 1 to 65535", c.KubernetesSandboxdPort))
		}
		cfg.Port = int32(v)
	}
	if c.KubernetesRuntimeClass != "" {
		if msgs := validation.IsDNS1123Subdomain(c.KubernetesRuntimeClass); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_RUNTIME_CLASS=%q: must be a RuntimeClass name such as gvisor (%s)", c.KubernetesRuntimeClass, msgs[0]))
		}
	}
	if c.KubernetesServiceAccount != "" {
		if msgs := validation.IsDNS1123Subdomain(c.KubernetesServiceAccount); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_SERVICE_ACCOUNT=%q: must be a ServiceAccount name (%s)", c.KubernetesServiceAccount, msgs[0]))
		}
	}
	if prov := c.KubernetesProvider; v1alpha1.IsRemoteProvider(prov) {
		if _, err := c.remoteProviders("MANAGED_AGENT_KUBERNETES_PROVIDER", prov, false); err != nil {
			errs = append(errs, err)
		}
	}
	if c.KubernetesReadyTimeout != "" {
		d, err := time.ParseDuration(c.KubernetesReadyTimeout)
		if err != nil || d < time.Second {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_READY_TIMEOUT=%q: must be a duration of at least 1s, such as 3m", c.KubernetesReadyTimeout))
		}
		cfg.ReadyTimeout = d
	}
	if c.KubernetesPackageTimeout != "" {
		d, err := time.ParseDuration(c.KubernetesPackageTimeout)
		if err != nil || d < time.Second {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_PACKAGE_TIMEOUT=%q: must be a duration of at least 1s, such as 5m", c.KubernetesPackageTimeout))
		}
		cfg.PackageTimeout = d
	}
	if c.KubernetesWorkspaceStorageClass != "" {
		if msgs := validation.IsDNS1123Subdomain(c.KubernetesWorkspaceStorageClass); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_WORKSPACE_STORAGE_CLASS=%q: must be a StorageClass name (%s)", c.KubernetesWorkspaceStorageClass, msgs[0]))
		} else if !c.KubernetesPersistentWorkspace {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_WORKSPACE_STORAGE_CLASS=%q: needs MANAGED_AGENT_KUBERNETES_PERSISTENT_WORKSPACE=true (an emptyDir workspace has no storage class)", c.KubernetesWorkspaceStorageClass))
		}
	}
	if c.KubernetesWorkspaceSize != "" {
		q, err := resource.ParseQuantity(c.KubernetesWorkspaceSize)
		if err != nil || q.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_WORKSPACE_SIZE=%q: must be a positive quantity such as 10Gi", c.KubernetesWorkspaceSize))
		} else {
			cfg.WorkspaceSize = &q
		}
	}
	return cfg, errors.Join(errs...)
}

// newKubernetesProvider builds the kubernetes provider on a client of the cluster KUBECONFIG
// names, else the pod's own. The client reads the apiserver directly (no cache): a worker
// waits on a handful of bindings and must see the controller's last word.
func newKubernetesProvider(c Config) (sandbox.Provider, error) {
	cfg, err := c.kubernetesConfig()
	if err != nil {
		return nil, err
	}
	rest, err := kubeRESTConfig(c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("MANAGED_AGENT_SANDBOX=kubernetes: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cl, err := client.New(rest, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("MANAGED_AGENT_SANDBOX=kubernetes: a client of %s: %w", rest.Host, err)
	}
	cfg.Client = cl
	if prov := c.KubernetesProvider; v1alpha1.IsRemoteProvider(prov) {
		remote, err := c.remoteProviders("MANAGED_AGENT_KUBERNETES_PROVIDER", prov, true)
		if err != nil {
			return nil, err
		}
		cfg.Provider, cfg.Remote = prov, remote
	}
	return kubernetes.New(cfg)
}

// sandboxPodsConfig parses the controller's sandbox pod settings; every problem names its
// variable.
func (c Config) sandboxPodsConfig() (controllers.SandboxPods, error) {
	pods := controllers.SandboxPods{SandboxdImage: c.SandboxdImage, Namespace: c.SandboxNamespace, Substrate: c.SandboxSubstrate}
	var errs []error
	switch c.SandboxSubstrate {
	case "", controllers.SubstratePods, controllers.SubstrateAgentSandbox:
	default:
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_SANDBOX_SUBSTRATE=%q: must be %s (the controller makes sandbox pods) or %s (through kubernetes-sigs/agent-sandbox's Sandbox, SandboxClaim and SandboxWarmPool)",
			c.SandboxSubstrate, controllers.SubstratePods, controllers.SubstrateAgentSandbox))
	}
	sel, err := selectorMap("MANAGED_AGENT_SANDBOX_WORKER_SELECTOR", orDefault(c.SandboxWorkerSelector, DefaultSandboxWorkerSelector))
	errs = append(errs, err)
	pods.Workers = controllers.PodPeer{Namespace: c.SandboxWorkerNamespace, Selector: sel}
	if c.SandboxEgressProxySelector != "" {
		sel, err := selectorMap("MANAGED_AGENT_SANDBOX_EGRESS_PROXY_SELECTOR", c.SandboxEgressProxySelector)
		errs = append(errs, err)
		pods.EgressProxy = controllers.PodPeer{Namespace: c.SandboxEgressProxyNamespace, Selector: sel}
		port, err := strconv.Atoi(c.SandboxEgressProxyPort)
		if err != nil || port < 1 || port > 65535 {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_SANDBOX_EGRESS_PROXY_PORT=%q: must be a port from 1 to 65535 (it is required with MANAGED_AGENT_SANDBOX_EGRESS_PROXY_SELECTOR)", c.SandboxEgressProxyPort))
		}
		pods.EgressProxyPort = int32(port)
		if c.SandboxEgressProxyHost != "" {
			if _, err := netip.ParseAddr(c.SandboxEgressProxyHost); err != nil && len(validation.IsDNS1123Subdomain(c.SandboxEgressProxyHost)) > 0 {
				errs = append(errs, fmt.Errorf("MANAGED_AGENT_SANDBOX_EGRESS_PROXY_HOST=%q: must be the egress proxy Service's DNS name or an IP address (no scheme or port)", c.SandboxEgressProxyHost))
			}
			key, err := c.Network.key()
			switch {
			case err != nil:
				errs = append(errs, err)
			case key == "":
				errs = append(errs, errors.New("MANAGED_AGENT_SANDBOX_EGRESS_PROXY_HOST is set but MANAGED_AGENT_EGRESS_PROXY_KEY (or _FILE) is not: the controller signs allowlisted sandboxes' proxy credentials with the proxy's key"))
			}
			pods.EgressProxyHost, pods.EgressProxyKey = c.SandboxEgressProxyHost, []byte(key)
		}
	} else if c.SandboxEgressProxyHost != "" {
		errs = append(errs, errors.New("MANAGED_AGENT_SANDBOX_EGRESS_PROXY_HOST is set without MANAGED_AGENT_SANDBOX_EGRESS_PROXY_SELECTOR: the sandboxes' NetworkPolicy needs the proxy pods' labels"))
	}
	for _, v := range []struct {
		name, value string
		resource    corev1.ResourceName
		example     string
	}{
		{"MANAGED_AGENT_KUBERNETES_DEFAULT_CPU", c.KubernetesDefaultCPU, corev1.ResourceCPU, "1 or 500m"},
		{"MANAGED_AGENT_KUBERNETES_DEFAULT_MEMORY", c.KubernetesDefaultMemory, corev1.ResourceMemory, "1Gi or 512Mi"},
	} {
		if v.value == "" {
			continue
		}
		q, err := resource.ParseQuantity(v.value)
		if err != nil || q.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: must be a positive quantity such as %s", v.name, v.value, v.example))
			continue
		}
		if pods.DefaultResources == nil {
			pods.DefaultResources = corev1.ResourceList{}
		}
		pods.DefaultResources[v.resource] = q
	}
	for name, ns := range map[string]string{"MANAGED_AGENT_SANDBOX_NAMESPACE": c.SandboxNamespace, "MANAGED_AGENT_SANDBOX_WORKER_NAMESPACE": c.SandboxWorkerNamespace, "MANAGED_AGENT_SANDBOX_EGRESS_PROXY_NAMESPACE": c.SandboxEgressProxyNamespace} {
		if ns == "" {
			continue
		}
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s=%q: must be a namespace name (%s)", name, ns, msgs[0]))
		}
	}
	return pods, errors.Join(errs...)
}

// selectorMap parses an equality label selector ("a=b,c=d"): a NetworkPolicy peer takes
// matchLabels, and set-based selectors would be refused by it anyway.
func selectorMap(name, v string) (map[string]string, error) {
	set, err := labels.ConvertSelectorToLabelsMap(v)
	if err != nil || len(set) == 0 {
		return nil, fmt.Errorf("%s=%q: must be labels such as app.kubernetes.io/component=worker (key=value, comma separated)", name, v)
	}
	return set, nil
}
