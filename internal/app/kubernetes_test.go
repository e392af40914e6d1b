package app

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/managed-agents/managed-agents/controllers"
)

func TestKubernetesSettingsAreValidatedNamingTheVariable(t *testing.T) {
	kube := func(mod func(*Config)) Config {
		c := Config{Sandbox: "kubernetes", KubernetesNamespace: "sandboxes", KubernetesImage: "python:3.13"}
		mod(&c)
		return c
	}
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"namespace and image are required", Config{Sandbox: "kubernetes"}, []string{"MANAGED_AGENT_KUBERNETES_NAMESPACE is not set", "MANAGED_AGENT_KUBERNETES_IMAGE is not set"}},
		{"a bad namespace", kube(func(c *Config) { c.KubernetesNamespace = "Sand_Boxes" }), []string{`MANAGED_AGENT_KUBERNETES_NAMESPACE="Sand_Boxes"`}},
		{"a bad port", kube(func(c *Config) { c.KubernetesSandboxdPort = "0" }), []string{`MANAGED_AGENT_KUBERNETES_SANDBOXD_PORT="0"`}},
		{"a bad runtime class", kube(func(c *Config) { c.KubernetesRuntimeClass = "g visor" }), []string{`MANAGED_AGENT_KUBERNETES_RUNTIME_CLASS="g visor"`}},
		{"a bad service account", kube(func(c *Config) { c.KubernetesServiceAccount = "-x" }), []string{`MANAGED_AGENT_KUBERNETES_SERVICE_ACCOUNT="-x"`}},
		{"a bad ready timeout", kube(func(c *Config) { c.KubernetesReadyTimeout = "soon" }), []string{`MANAGED_AGENT_KUBERNETES_READY_TIMEOUT="soon"`}},
		{"a bad storage class", kube(func(c *Config) { c.KubernetesPersistentWorkspace, c.KubernetesWorkspaceStorageClass = true, "Fast SSD" }), []string{`MANAGED_AGENT_KUBERNETES_WORKSPACE_STORAGE_CLASS="Fast SSD"`}},
		{"a storage class without persistence", kube(func(c *Config) { c.KubernetesWorkspaceStorageClass = "fast" }), []string{"needs MANAGED_AGENT_KUBERNETES_PERSISTENT_WORKSPACE=true"}},
		{"a bad workspace size", kube(func(c *Config) { c.KubernetesWorkspaceSize = "big" }), []string{`MANAGED_AGENT_KUBERNETES_WORKSPACE_SIZE="big"`}},
		{"a negative workspace size", kube(func(c *Config) { c.KubernetesWorkspaceSize = "-1Gi" }), []string{`MANAGED_AGENT_KUBERNETES_WORKSPACE_SIZE="-1Gi"`}},
		{"a bad worker selector", Config{SandboxWorkerSelector: "a in (b)"}, []string{`MANAGED_AGENT_SANDBOX_WORKER_SELECTOR="a in (b)"`}},
		{"a proxy selector needs a port", Config{SandboxEgressProxySelector: "app=egress"}, []string{"MANAGED_AGENT_SANDBOX_EGRESS_PROXY_PORT"}},
		{"a bad worker namespace", Config{SandboxWorkerNamespace: "A"}, []string{`MANAGED_AGENT_SANDBOX_WORKER_NAMESPACE="A"`}},
		{"a bad default CPU", Config{KubernetesDefaultCPU: "two"}, []string{`MANAGED_AGENT_KUBERNETES_DEFAULT_CPU="two": must be a positive quantity such as 1 or 500m`}},
		{"a zero default memory", Config{KubernetesDefaultMemory: "0"}, []string{`MANAGED_AGENT_KUBERNETES_DEFAULT_MEMORY="0": must be a positive quantity`}},
		{"an unknown substrate", Config{SandboxSubstrate: "kata"}, []string{`MANAGED_AGENT_SANDBOX_SUBSTRATE="kata": must be pods`, "agent-sandbox"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			require.Error(t, err)
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
	require.NoError(t, Config{}.Validate(), "another provider needs none of it")
}

func TestKubernetesSettingsParse(t *testing.T) {
	c := FromLookup(Config{}, func(name string) (string, bool) {
		v, ok := map[string]string{
			"MANAGED_AGENT_KUBERNETES_PACKAGE_TIMEOUT":         "10m",
			"MANAGED_AGENT_SANDBOX":                            "kubernetes",
			"MANAGED_AGENT_KUBERNETES_NAMESPACE":               "sandboxes",
			"MANAGED_AGENT_KUBERNETES_IMAGE":                   "python:3.13",
			"MANAGED_AGENT_KUBERNETES_SANDBOXD_PORT":           "9000",
			"MANAGED_AGENT_KUBERNETES_RUNTIME_CLASS":           "gvisor",
			"MANAGED_AGENT_KUBERNETES_READY_TIMEOUT":           "90s",
			"MANAGED_AGENT_KUBERNETES_PERSISTENT_WORKSPACE":    "true",
			"MANAGED_AGENT_KUBERNETES_WORKSPACE_STORAGE_CLASS": "fast-ssd",
			"MANAGED_AGENT_KUBERNETES_WORKSPACE_SIZE":          "20Gi",
			"MANAGED_AGENT_SANDBOXD_IMAGE":                     "managed-agents:v1",
			"MANAGED_AGENT_SANDBOX_WORKER_NAMESPACE":           "agents",
			"MANAGED_AGENT_SANDBOX_EGRESS_PROXY_SELECTOR":      "app=egress,tier=proxy",
			"MANAGED_AGENT_SANDBOX_EGRESS_PROXY_NAMESPACE":     "agents",
			"MANAGED_AGENT_SANDBOX_EGRESS_PROXY_PORT":          "3128",
			"MANAGED_AGENT_SANDBOX_EGRESS_PROXY_HOST":          "ma-egress.agents.svc.cluster.local",
			"MANAGED_AGENT_EGRESS_PROXY_KEY":                   "0123456789abcdef0123456789abcdef",
			"MANAGED_AGENT_KUBERNETES_DEFAULT_CPU":             "2",
			"MANAGED_AGENT_KUBERNETES_DEFAULT_MEMORY":          "4Gi",
			"MANAGED_AGENT_SANDBOX_SUBSTRATE":                  "agent-sandbox",
		}[name]
		return v, ok
	})
	require.NoError(t, c.Validate())
	k, err := c.kubernetesConfig()
	require.NoError(t, err)
	require.Equal(t, "sandboxes", k.Namespace)
	require.Equal(t, int32(9000), k.Port)
	require.Equal(t, "gvisor", k.RuntimeClassName)
	require.Equal(t, 90*time.Second, k.ReadyTimeout)
	require.Equal(t, 10*time.Minute, k.PackageTimeout)
	require.True(t, k.PersistentWorkspace)
	require.Equal(t, "fast-ssd", k.WorkspaceStorageClass)
	require.Equal(t, "20Gi", k.WorkspaceSize.String())
	pods, err := c.sandboxPodsConfig()
	require.NoError(t, err)
	require.Equal(t, controllers.SandboxPods{
		SandboxdImage:    "managed-agents:v1",
		Workers:          controllers.PodPeer{Namespace: "agents", Selector: map[string]string{"app.kubernetes.io/component": "worker"}},
		EgressProxy:      controllers.PodPeer{Namespace: "agents", Selector: map[string]string{"app": "egress", "tier": "proxy"}},
		EgressProxyPort:  3128,
		EgressProxyHost:  "ma-egress.agents.svc.cluster.local",
		EgressProxyKey:   []byte("0123456789abcdef0123456789abcdef"),
		DefaultResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
		Substrate:        controllers.SubstrateAgentSandbox,
	}, pods)
}

func TestSandboxEgressProxyHostNeedsAKeyAndASelector(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		c       Config
		wantErr string
	}{
		{"no key", Config{SandboxEgressProxySelector: "app=egress", SandboxEgressProxyPort: "3128", SandboxEgressProxyHost: "10.0.0.9"}, "MANAGED_AGENT_EGRESS_PROXY_KEY (or _FILE) is not"},
		{"no selector", Config{SandboxEgressProxyHost: "10.0.0.9"}, "without MANAGED_AGENT_SANDBOX_EGRESS_PROXY_SELECTOR"},
		{"a URL", Config{SandboxEgressProxySelector: "app=egress", SandboxEgressProxyPort: "3128", SandboxEgressProxyHost: "http://proxy:3128",
			Network: NetworkConfig{EgressKey: "0123456789abcdef0123456789abcdef"}}, `MANAGED_AGENT_SANDBOX_EGRESS_PROXY_HOST="http://proxy:3128"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.c.sandboxPodsConfig()
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
