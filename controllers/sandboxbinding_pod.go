package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/egress"
)

// Where things are in a sandbox pod.
const (
	sandboxContainer = "sandbox"
	injectContainer  = "install-sandboxd"
	// sandboxdDir is the shared volume the init container copies the binary into; the
	// sandbox container sees it read-only.
	sandboxdDir    = "/opt/managed-agents"
	sandboxdBinary = sandboxdDir + "/managed-agents"
	workspaceDir   = "/workspace"
	tokenDir       = "/var/run/managed-agents/sandboxd"
	// sandboxUID is the uid and gid every sandbox runs as, whatever user the image names:
	// the restricted pod security standard needs a non-root one, and a fixed one owns the
	// workspace through fsGroup.
	sandboxUID = 65532
	// DefaultWorkspaceSize bounds a workspace emptyDir whose binding names no size.
	DefaultWorkspaceSize = "10Gi"
	// tmpSize bounds /tmp, another writable place (the root filesystem is read-only).
	tmpSize = "1Gi"
	// packagesDir is where an environment's packages are installed, as the sandbox's user
	// (sandboxd's MANAGED_AGENT_SANDBOXD_PACKAGES_DIR), in an emptyDir of packagesSize.
	packagesDir  = "/opt/ma-packages"
	packagesSize = "4Gi"
	// DefaultSandboxdPort is the port of a binding that names none.
	DefaultSandboxdPort = 8090
	// DefaultSandboxCPU and DefaultSandboxMemory are the CPU and memory of a sandbox whose
	// binding names none and whose deployment sets no default of its own: those of a docker
	// sandbox (MANAGED_AGENT_DOCKER_CPUS, _MEMORY), so an environment gets the same sandbox on
	// either provider.
	DefaultSandboxCPU    = "1"
	DefaultSandboxMemory = "1Gi"
)

// PodPeer names pods a NetworkPolicy lets in or out: those matching Selector in Namespace
// ("" = the binding's own namespace).
type PodPeer struct {
	Namespace string
	Selector  map[string]string
}

func (p PodPeer) peer() networkingv1.NetworkPolicyPeer {
	peer := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: p.Selector}}
	if p.Namespace != "" {
		peer.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: p.Namespace}}
	}
	return peer
}

// SandboxPods is the controller's side of every sandbox pod: where sandboxd comes from, who
// may call it, where allowlisted egress goes.
type SandboxPods struct {
	// SandboxdImage is the image the init container copies sandboxd from: the managed-agents
	// image (MANAGED_AGENT_SANDBOXD_IMAGE). Empty: bindings stay Pending with a
	// NotConfigured condition.
	SandboxdImage string
	// Workers are the only pods that may reach sandboxd (MANAGED_AGENT_SANDBOX_WORKER_SELECTOR,
	// MANAGED_AGENT_SANDBOX_WORKER_NAMESPACE).
	Workers PodPeer
	// EgressProxy receives the egress of bindings in Hosts mode on EgressProxyPort
	// (MANAGED_AGENT_SANDBOX_EGRESS_PROXY_SELECTOR, _NAMESPACE, _PORT). Without a selector those
	// bindings get no egress at all: narrower, never wider.
	EgressProxy     PodPeer
	EgressProxyPort int32
	// EgressProxyHost is where those pods reach the proxy (MANAGED_AGENT_SANDBOX_EGRESS_PROXY_HOST):
	// its Service's name, which the controller resolves to the Service's IP (the pods'
	// NetworkPolicy lets no DNS out), or an IP. With EgressProxyKey (MANAGED_AGENT_EGRESS_PROXY_KEY,
	// the proxy's own), the controller signs each such pod's allowlist into proxy credentials
	// (package egress), kept in its token Secret and given to the pod as HTTP(S)_PROXY. Without
	// them those pods get no proxy variables (the proxy would refuse them anyway).
	EgressProxyHost string
	EgressProxyKey  []byte
	// DefaultResources are the CPU and memory of a sandbox container whose binding names
	// none (MANAGED_AGENT_KUBERNETES_DEFAULT_CPU, _MEMORY); unset entries are DefaultSandboxCPU
	// and DefaultSandboxMemory.
	DefaultResources corev1.ResourceList
	// Substrate is what new bindings' pods are made through: SubstratePods ("" too) or
	// SubstrateAgentSandbox (MANAGED_AGENT_SANDBOX_SUBSTRATE).
	Substrate string
	// Namespace, when set, is the only namespace whose bindings get pods
	// (MANAGED_AGENT_SANDBOX_NAMESPACE; the chart sets it to its sandbox namespace): a
	// binding is a pod of the author's choosing made with the controller's rights, so only
	// the namespace the workers write to is served.
	Namespace string
}

// sandboxLabels are the labels of everything made for b.
func sandboxLabels(b *v1alpha1.SandboxBinding) map[string]string {
	return map[string]string{
		v1alpha1.LabelSandboxBinding:   b.Name,
		v1alpha1.LabelSessionID:        b.Spec.SessionID,
		"app.kubernetes.io/managed-by": "managed-agents",
		"app.kubernetes.io/component":  "sandbox",
	}
}

func bindingPort(b *v1alpha1.SandboxBinding) int32 {
	return cmp.Or(b.Spec.Port, DefaultSandboxdPort)
}

func tokenSecretName(b *v1alpha1.SandboxBinding) string { return b.Name + "-token" }

// proxyEnvNames are the variables that send a Hosts pod's HTTP(S) through the egress
// proxy, in both spellings tools read; a template cannot set them.
var proxyEnvNames = []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}

// noProxyEnvNames keep loopback off the proxy.
var noProxyEnvNames = []string{"NO_PROXY", "no_proxy"}

// proxied says whether b's pod gets proxy credentials.
func (c SandboxPods) proxied(b *v1alpha1.SandboxBinding) bool {
	return b.Spec.Network.Egress == v1alpha1.EgressHosts && len(c.EgressProxy.Selector) > 0 && c.EgressProxyPort > 0 &&
		c.EgressProxyHost != "" && len(c.EgressProxyKey) > 0
}

func workspaceClaimName(b *v1alpha1.SandboxBinding) string { return b.Name + "-workspace" }

func workspaceSize(b *v1alpha1.SandboxBinding) resource.Quantity {
	if b.Spec.WorkspaceSize != nil {
		return *b.Spec.WorkspaceSize
	}
	return resource.MustParse(DefaultWorkspaceSize)
}

// workspaceClaim renders the claim of b's persistent workspace: one node at a time mounts it
// (one pod at a time uses it), of the binding's workspace size.
func (c SandboxPods) workspaceClaim(b *v1alpha1.SandboxBinding) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: workspaceClaimName(b), Namespace: b.Namespace, Labels: sandboxLabels(b)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: b.Spec.Workspace.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: workspaceSize(b)}},
		},
	}
}

// sandboxPod renders b's pod: restricted pod security, sandboxd copied from our image into
// the user's by an init container, a size-limited workspace (or the binding's claim) and
// /tmp, the token as a file. The pod never restarts into a new one: RestartPolicy Always
// restarts sandboxd in place and keeps the emptyDirs.
func (c SandboxPods) sandboxPod(b *v1alpha1.SandboxBinding) *corev1.Pod {
	port := bindingPort(b)
	workspace := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(workspaceSize(b))}}
	if b.Spec.Workspace.Persistent {
		workspace = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: workspaceClaimName(b)}}
	}
	tmp := resource.MustParse(tmpSize)
	pkgs := resource.MustParse(packagesSize)
	restricted := &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	env := []corev1.EnvVar{
		{Name: "MANAGED_AGENT_SANDBOXD_ADDR", Value: ":" + itoa(port)},
		{Name: "MANAGED_AGENT_SANDBOXD_WORKSPACE", Value: workspaceDir},
		{Name: "MANAGED_AGENT_SANDBOXD_TOKEN_FILE", Value: tokenDir + "/" + v1alpha1.TokenSecretKey},
		{Name: "MANAGED_AGENT_SANDBOXD_PACKAGES_DIR", Value: packagesDir},
		{Name: "MANAGED_AGENT_LOG_FORMAT", Value: "json"},
		{Name: "HOME", Value: workspaceDir},
		{Name: "TMPDIR", Value: "/tmp"},
	}
	for _, e := range b.Spec.Env {
		// The template's variables come after ours and so win for everything but ours:
		// sandboxd drops MANAGED_AGENT_* from what commands see, and a template must not move
		// the daemon's token or workspace.
		if strings.HasPrefix(e.Name, "MANAGED_AGENT_") {
			continue
		}
		if e.ValueFrom != nil {
			// Values only: the kubelet, not the binding's author, would resolve a reference,
			// so one could pull any Secret of the namespace (another sandbox's token) in.
			continue
		}
		if c.proxied(b) && (slices.Contains(proxyEnvNames, e.Name) || slices.Contains(noProxyEnvNames, e.Name)) {
			// The proxy is the pod's only way out: a template cannot point it elsewhere.
			continue
		}
		env = append(env, e)
	}
	if c.proxied(b) {
		// By reference: the credentials sign the pod's allowlist and must not sit in the
		// pod spec, which more people can read than the Secret.
		for _, name := range proxyEnvNames {
			env = append(env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: tokenSecretName(b)}, Key: v1alpha1.ProxyURLSecretKey}}})
		}
		for _, name := range noProxyEnvNames {
			env = append(env, corev1.EnvVar{Name: name, Value: "localhost,127.0.0.1,::1"})
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace, Labels: sandboxLabels(b)},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			ServiceAccountName:            b.Spec.ServiceAccountName,
			RuntimeClassName:              b.Spec.RuntimeClassName,
			NodeSelector:                  maps.Clone(b.Spec.NodeSelector),
			Tolerations:                   b.Spec.Tolerations,
			TerminationGracePeriodSeconds: ptr.To[int64](15),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](sandboxUID),
				RunAsGroup:     ptr.To[int64](sandboxUID),
				FSGroup:        ptr.To[int64](sandboxUID),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers: []corev1.Container{{
				Name:  injectContainer,
				Image: c.SandboxdImage,
				// The image has no shell: the binary copies itself.
				Command:         []string{"/managed-agents", "install-binary", sandboxdBinary},
				SecurityContext: restricted,
				VolumeMounts:    []corev1.VolumeMount{{Name: "sandboxd", MountPath: sandboxdDir}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
					// A CPU limit too: a namespace whose ResourceQuota counts limits.cpu admits
					// only pods whose every container has one.
					Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
			}},
			Containers: []corev1.Container{{
				Name:            sandboxContainer,
				Image:           b.Spec.Image,
				Command:         []string{sandboxdBinary, "sandboxd"},
				WorkingDir:      workspaceDir,
				Env:             env,
				Ports:           []corev1.ContainerPort{{Name: "sandboxd", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
				Resources:       c.sandboxResources(b.Spec.Resources),
				SecurityContext: restricted,
				// sandboxd's health route needs the token, which a probe must not carry (it
				// would sit in the pod spec): sandboxd opens its port only once its token and
				// workspace are checked, so an open port is a daemon ready to serve, and the
				// worker's Connect then checks health with the token.
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}},
					PeriodSeconds: 2, FailureThreshold: 3,
				},
				LivenessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}},
					PeriodSeconds: 10, FailureThreshold: 6,
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "sandboxd", MountPath: sandboxdDir, ReadOnly: true},
					{Name: "workspace", MountPath: workspaceDir},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "packages", MountPath: packagesDir},
					{Name: "token", MountPath: tokenDir, ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "sandboxd", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("256Mi"))}}},
				{Name: "workspace", VolumeSource: workspace},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &tmp}}},
				{Name: "packages", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &pkgs}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: tokenSecretName(b), DefaultMode: ptr.To[int32](0o440),
					Items: []corev1.KeyToPath{{Key: v1alpha1.TokenSecretKey, Path: v1alpha1.TokenSecretKey}},
				}}},
			},
		},
	}
	return pod
}

// sandboxResources are the sandbox container's resources: the binding's, with CPU and memory
// always both requested and limited. One named on one side only is set to the same on the
// other, and one named on neither gets the deployment's default. Without a limit a sandbox
// can take its node's whole memory; without a request the scheduler counts it as free and
// it is the first evicted. Requests equal limits, as the worker writes them: a sandbox gets
// what it is promised.
func (c SandboxPods) sandboxResources(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *r.DeepCopy()
	if out.Limits == nil {
		out.Limits = corev1.ResourceList{}
	}
	if out.Requests == nil {
		out.Requests = corev1.ResourceList{}
	}
	defaults := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(DefaultSandboxCPU), corev1.ResourceMemory: resource.MustParse(DefaultSandboxMemory)}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		limit, limited := out.Limits[name]
		request, requested := out.Requests[name]
		switch {
		case limited && requested:
		case limited:
			out.Requests[name] = limit.DeepCopy()
		case requested:
			out.Limits[name] = request.DeepCopy()
		default:
			q, ok := c.DefaultResources[name]
			if !ok {
				q = defaults[name]
			}
			out.Limits[name], out.Requests[name] = q.DeepCopy(), q.DeepCopy()
		}
	}
	return out
}

// sandboxNetworkPolicy renders b's NetworkPolicy: ingress only from the worker pods to
// sandboxd's port; egress none, all, or (Hosts) only to the egress proxy's pods on its port.
// Both directions are always listed in PolicyTypes, so an empty rule list denies.
func (c SandboxPods) sandboxNetworkPolicy(b *v1alpha1.SandboxBinding) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace, Labels: sandboxLabels(b)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelSandboxBinding: b.Name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{c.Workers.peer()},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(bindingPort(b)))}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{},
		},
	}
	switch b.Spec.Network.Egress {
	case v1alpha1.EgressFull:
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	case v1alpha1.EgressHosts:
		if len(c.EgressProxy.Selector) > 0 && c.EgressProxyPort > 0 {
			np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{c.EgressProxy.peer()},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(c.EgressProxyPort))}},
			}}
		}
	}
	return np
}

// proxyURL is the egress proxy URL of a Hosts binding, with credentials that sign its
// hosts. They are not bound to a client address (package egress can): the pod's IP is not
// known before the pod exists, and its environment is fixed by then.
func (c SandboxPods) proxyURL(ctx context.Context, b *v1alpha1.SandboxBinding) (string, error) {
	policy := egress.Policy{Sandbox: b.Name, Hosts: b.Spec.Network.Hosts}
	if err := egress.CheckPolicy(policy); err != nil {
		return "", err
	}
	host := c.EgressProxyHost
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.String()
	} else {
		// The pods cannot resolve names (their policy lets no DNS out), so the URL names the
		// proxy Service's IP, which stays as long as the Service does.
		lookup, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupNetIP(lookup, "ip", host)
		if err != nil || len(addrs) == 0 {
			return "", fmt.Errorf("resolve the egress proxy %s (MANAGED_AGENT_SANDBOX_EGRESS_PROXY_HOST): %w", host, cmp.Or(err, errors.New("no address")))
		}
		host = addrs[0].Unmap().String()
	}
	user, password := egress.Credentials(c.EgressProxyKey, policy)
	u := url.URL{Scheme: "http", User: url.UserPassword(user, password), Host: net.JoinHostPort(host, itoa(c.EgressProxyPort))}
	return u.String(), nil
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
