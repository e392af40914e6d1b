package controllers

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	agentsandbox "sigs.k8s.io/agent-sandbox/api/v1beta1"
	agentsandboxext "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
)

// Substrates a binding's pod is made through (SandboxPods.Substrate,
// MANAGED_AGENT_SANDBOX_SUBSTRATE).
const (
	// SubstratePods: the controller creates the pod itself (the default).
	SubstratePods = "pods"
	// SubstrateAgentSandbox: the controller creates a kubernetes-sigs/agent-sandbox Sandbox
	// whose pod template is the pod it would have made, and agent-sandbox's controller makes
	// the pod; warm pools become agent-sandbox SandboxWarmPools, claimed by SandboxClaims. For
	// clusters that run agent-sandbox already (Anthropic's self-hosted product requires it):
	// one sandbox machinery, one set of quotas and dashboards.
	SubstrateAgentSandbox = "agent-sandbox"
)

// AgentSandboxGroupKind is the kind the agent-sandbox substrate needs the cluster to serve.
var AgentSandboxGroupKind = schema.GroupKind{Group: agentsandbox.GroupVersion.Group, Kind: agentsandbox.SandboxKind}

func (c SandboxPods) agentSandbox() bool { return c.Substrate == SubstrateAgentSandbox }

// sandboxObject renders b's Sandbox on the agent-sandbox substrate: named as b (its pod is
// then too, so the binding's status and the worker see the same pod name on both substrates),
// labelled as b's pod, with no Service (the worker dials the pod's IP, and only the workers
// may: the binding's NetworkPolicy), running unless b is suspended.
func (c SandboxPods) sandboxObject(b *v1alpha1.SandboxBinding) *agentsandbox.Sandbox {
	pod := c.sandboxPod(b)
	mode := agentsandbox.SandboxOperatingModeRunning
	if b.Spec.Suspended && b.Spec.Workspace.Persistent {
		mode = agentsandbox.SandboxOperatingModeSuspended
	}
	return &agentsandbox.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace, Labels: sandboxLabels(b)},
		Spec: agentsandbox.SandboxSpec{
			SandboxBlueprint: agentsandbox.SandboxBlueprint{
				PodTemplate: agentsandbox.PodTemplate{ObjectMeta: agentsandbox.PodMetadata{Labels: pod.Labels}, Spec: pod.Spec},
				Service:     ptr.To(false),
			},
			OperatingMode: mode,
		},
	}
}

// getSandbox reads b's Sandbox (nil: there is none), from the cache and, when the cache has
// none, from the apiserver (one created a moment ago must not be taken for one deleted). A
// deployment that moved to the pods substrate since has no cache of Sandboxes: the
// apiserver then.
func (r *SandboxBindingReconciler) getSandbox(ctx context.Context, b *v1alpha1.SandboxBinding) (*agentsandbox.Sandbox, error) {
	var sbx agentsandbox.Sandbox
	key := client.ObjectKey{Namespace: b.Namespace, Name: b.Name}
	var err error
	cached := r.Pods.agentSandbox() // else no informer watches Sandboxes: ask the apiserver
	if cached {
		err = r.Client.Get(ctx, key, &sbx)
	}
	if !cached || apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, &sbx)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case meta.IsNoMatchError(err):
		return nil, fmt.Errorf("the cluster serves no %s (install kubernetes-sigs/agent-sandbox, or set MANAGED_AGENT_SANDBOX_SUBSTRATE=pods): %w", AgentSandboxGroupKind, err)
	case err != nil:
		return nil, fmt.Errorf("read the sandbox %s: %w", b.Name, err)
	case !metav1.IsControlledBy(&sbx, b):
		return nil, fmt.Errorf("sandbox %s exists and does not belong to sandbox binding %s", sbx.Name, b.Name)
	}
	return &sbx, nil
}

// sandboxPodOf reads sbx's pod (nil: there is none): named as the Sandbox and controlled by
// it. fresh reads the apiserver rather than the cache.
func (r *SandboxBindingReconciler) sandboxPodOf(ctx context.Context, sbx *agentsandbox.Sandbox, fresh bool) (*corev1.Pod, error) {
	var pod corev1.Pod
	key := client.ObjectKey{Namespace: sbx.Namespace, Name: sbx.Name}
	var err error
	if !fresh {
		err = r.Client.Get(ctx, key, &pod)
	}
	if fresh || apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, &pod)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read the sandbox pod: %w", err)
	case !metav1.IsControlledBy(&pod, sbx):
		return nil, fmt.Errorf("pod %s exists and does not belong to sandbox %s", pod.Name, sbx.Name)
	}
	return &pod, nil
}

// ensureSandbox is ensurePod on the agent-sandbox substrate: it makes b's Sandbox once, as
// ensurePod makes the pod once (never again after a pod ran, unless resuming), sets it
// running again when b resumes, and returns its pod. agent-sandbox recreates a pod deleted
// behind its back; that pod has another UID, which viewBinding takes for a replaced pod, so
// the binding fails as on the pods substrate instead of serving an empty workspace.
func (r *SandboxBindingReconciler) ensureSandbox(ctx context.Context, b *v1alpha1.SandboxBinding) (*corev1.Pod, error) {
	sbx, err := r.getSandbox(ctx, b)
	if err != nil {
		return nil, err
	}
	if sbx == nil {
		switch {
		case b.Status.Phase == v1alpha1.SandboxFailed:
			return nil, nil
		case b.Status.ExternalID != "" && b.Status.Phase != v1alpha1.SandboxSuspended:
			return nil, nil // made once and gone: the view says so
		}
		sbx = r.Pods.sandboxObject(b)
		if err := r.owned(b, sbx); err != nil {
			return nil, err
		}
		if err := r.Client.Create(ctx, sbx); err != nil {
			if meta.IsNoMatchError(err) {
				return nil, fmt.Errorf("the cluster serves no %s (install kubernetes-sigs/agent-sandbox, or set MANAGED_AGENT_SANDBOX_SUBSTRATE=pods): %w", AgentSandboxGroupKind, err)
			}
			return nil, fmt.Errorf("create the sandbox: %w", err)
		}
		r.Recorder.Eventf(b, sbx, corev1.EventTypeNormal, "Created", "Create", "created sandbox %s (agent-sandbox makes its pod)", sbx.Name)
		return nil, nil
	}
	if sbx.Spec.OperatingMode == agentsandbox.SandboxOperatingModeSuspended && sbx.DeletionTimestamp == nil {
		// Resuming: agent-sandbox makes the new pod, on the same claim, once the old one is gone.
		patch := client.MergeFromWithOptions(sbx.DeepCopy(), client.MergeFromWithOptimisticLock{})
		sbx.Spec.OperatingMode = agentsandbox.SandboxOperatingModeRunning
		if err := r.Client.Patch(ctx, sbx, patch); err != nil {
			return nil, fmt.Errorf("resume the sandbox: %w", err)
		}
		r.Recorder.Eventf(b, sbx, corev1.EventTypeNormal, v1alpha1.ReasonResuming, "Resume", "set sandbox %s running again on claim %s", sbx.Name, workspaceClaimName(b))
	}
	return r.sandboxPodOf(ctx, sbx, false)
}

// suspendSandbox is suspendPod on the agent-sandbox substrate: once b's status says
// Suspended (see suspendPod for why not before), it sets the Sandbox's operating mode to
// Suspended, which has agent-sandbox delete the pod; the claim, b's, stays. It returns the
// pod as the apiserver has it, or nil once it is gone.
func (r *SandboxBindingReconciler) suspendSandbox(ctx context.Context, b *v1alpha1.SandboxBinding) (*corev1.Pod, error) {
	sbx, err := r.getSandbox(ctx, b)
	if err != nil || sbx == nil {
		return nil, err
	}
	pod, err := r.sandboxPodOf(ctx, sbx, true)
	if err != nil {
		return nil, err
	}
	if b.Status.Phase != v1alpha1.SandboxSuspended || sbx.Spec.OperatingMode == agentsandbox.SandboxOperatingModeSuspended {
		return pod, nil
	}
	patch := client.MergeFromWithOptions(sbx.DeepCopy(), client.MergeFromWithOptimisticLock{})
	sbx.Spec.OperatingMode = agentsandbox.SandboxOperatingModeSuspended
	if err := r.Client.Patch(ctx, sbx, patch); err != nil {
		return nil, fmt.Errorf("suspend the sandbox: %w", err)
	}
	r.Recorder.Eventf(b, sbx, corev1.EventTypeNormal, v1alpha1.ReasonSuspended, "Suspend", "suspended sandbox %s (agent-sandbox deletes its pod); claim %s keeps the workspace", sbx.Name, workspaceClaimName(b))
	return pod, nil
}

// substrate is the substrate new bindings' pods are made through.
func (c SandboxPods) substrate() string {
	if c.agentSandbox() {
		return SubstrateAgentSandbox
	}
	return SubstratePods
}

// ownSandbox says whether b's pod comes from a Sandbox of b's own: on the agent-sandbox
// substrate, and not claimed from a warm pool.
func (r *SandboxBindingReconciler) ownSandbox(b *v1alpha1.SandboxBinding) bool {
	return b.Status.Substrate == SubstrateAgentSandbox && b.Status.WarmPool == ""
}

// agentSandboxObjects are the agent-sandbox objects a binding on that substrate may own,
// named as the binding: its Sandbox, or its SandboxClaim on a warm pool.
func agentSandboxObjects(b *v1alpha1.SandboxBinding) []client.Object {
	return []client.Object{
		&agentsandbox.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace}},
		&agentsandboxext.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace}},
	}
}

// AddAgentSandboxToScheme registers the agent-sandbox kinds the controller reads and makes.
// Always, whatever the substrate: a binding keeps the substrate it began on.
func AddAgentSandboxToScheme(s *runtime.Scheme) error {
	if err := agentsandbox.AddToScheme(s); err != nil {
		return fmt.Errorf("register agent-sandbox's kinds: %w", err)
	}
	if err := agentsandboxext.AddToScheme(s); err != nil {
		return fmt.Errorf("register agent-sandbox's extension kinds: %w", err)
	}
	return nil
}

// CheckSubstrate fails, on the agent-sandbox substrate, when the cluster serves none of
// agent-sandbox's kinds the controller uses, naming what to install: better at start than
// as every binding's reconcile error.
func CheckSubstrate(cfg *rest.Config, substrate string) error {
	if substrate != SubstrateAgentSandbox {
		return nil
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("MANAGED_AGENT_SANDBOX_SUBSTRATE=agent-sandbox: a discovery client: %w", err)
	}
	for _, want := range []struct {
		gv    schema.GroupVersion
		kinds []string
	}{
		{agentsandbox.GroupVersion, []string{"Sandbox"}},
		{agentsandboxext.GroupVersion, []string{"SandboxClaim", "SandboxTemplate", "SandboxWarmPool"}},
	} {
		list, err := dc.ServerResourcesForGroupVersion(want.gv.String())
		if err != nil {
			return fmt.Errorf("MANAGED_AGENT_SANDBOX_SUBSTRATE=agent-sandbox, but the cluster does not serve %s (install kubernetes-sigs/agent-sandbox with its extensions, or use the pods substrate): %w", want.gv, err)
		}
		for _, kind := range want.kinds {
			if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Kind == kind }) {
				return fmt.Errorf("MANAGED_AGENT_SANDBOX_SUBSTRATE=agent-sandbox, but the cluster does not serve %s %s (install kubernetes-sigs/agent-sandbox with its extensions, or use the pods substrate)", want.gv, kind)
			}
		}
	}
	return nil
}
