package controllers

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	agentsandbox "sigs.k8s.io/agent-sandbox/api/v1beta1"
	agentsandboxext "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
)

// SandboxBindingReconciler runs the pod of each SandboxBinding (DESIGN.md §6 kubernetes): a
// token Secret, a NetworkPolicy and the pod, all owned by the binding, and the binding's
// status from the pod (viewBinding), and for a persistent workspace its claim. It never makes
// a second pod for a binding, except on the same claim when resuming one it suspended: a pod
// deleted behind its back makes the binding Failed, so the worker sees the sandbox gone
// instead of a fresh, empty one.
type SandboxBindingReconciler struct {
	// Client reads through the manager's cache (pods and NetworkPolicies restricted to the
	// sandboxes' by SandboxCacheOptions).
	Client client.Client
	// APIReader reads the apiserver directly: a pod the cache does not hold yet must not be
	// taken for one deleted, and Secrets are never cached.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Pods      SandboxPods
	// OrphanSweepInterval is how often sandbox objects whose binding is gone are removed
	// (sandboxbinding_orphans.go); zero is DefaultOrphanSweepInterval.
	OrphanSweepInterval time.Duration
	// Remote are the remote providers bindings may name (spec.provider), by name.
	Remote map[string]RemoteSandboxes
}

// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=sandboxbindings,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=sandboxbindings/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=sandboxbindings/finalizers,verbs=update
// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=sandboxwarmpools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;create;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;create;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims;sandboxtemplates;sandboxwarmpools,verbs=get;list;watch;create;update;patch;delete

// SandboxCacheOptions restricts the manager's cache of pods and NetworkPolicies to those made
// for sandboxes (bindings' and warm pools' alike), so a controller in a big cluster does not
// hold every pod in memory; with namespace (MANAGED_AGENT_SANDBOX_NAMESPACE) also to that
// namespace, so the controller needs rights on pods there only (the chart's Role). On the
// agent-sandbox substrate (SandboxPods.Substrate) also agent-sandbox's Sandboxes.
func SandboxCacheOptions(namespace, substrate string) map[client.Object]cache.ByObject {
	sel := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": "managed-agents", "app.kubernetes.io/component": "sandbox"})
	var namespaces map[string]cache.Config
	if namespace != "" {
		namespaces = map[string]cache.Config{namespace: {}}
	}
	opts := map[client.Object]cache.ByObject{
		&corev1.Pod{}:                 {Label: sel, Namespaces: namespaces},
		&networkingv1.NetworkPolicy{}: {Label: sel, Namespaces: namespaces},
	}
	if substrate == SubstrateAgentSandbox {
		// Only there: the cache asks the apiserver about every kind it names, and a cluster
		// without agent-sandbox's CRDs would fail the manager's start.
		for _, obj := range []client.Object{&agentsandbox.Sandbox{}, &agentsandboxext.SandboxClaim{}, &agentsandboxext.SandboxTemplate{}, &agentsandboxext.SandboxWarmPool{}} {
			opts[obj] = cache.ByObject{Label: sel, Namespaces: namespaces}
		}
	}
	return opts
}

// bindingOfPod maps a sandbox pod to its binding on the agent-sandbox substrate: by the
// binding label its Sandbox's template gave it, or, for a pool pod a SandboxClaim took, by
// agent-sandbox's claim label, which names the claim by UID (claims are named as their
// bindings). The claim label lands on the pod after the claim's status says it is bound, so
// without this the binding would wait for its next resync to see its pod.
func (r *SandboxBindingReconciler) bindingOfPod(ctx context.Context, obj client.Object) []reconcile.Request {
	if name := obj.GetLabels()[v1alpha1.LabelSandboxBinding]; name != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}}}
	}
	uid := obj.GetLabels()[agentsandboxext.SandboxIDLabel]
	if uid == "" || !r.Pods.agentSandbox() { // no cache of claims elsewhere
		return nil
	}
	var claims agentsandboxext.SandboxClaimList
	if err := r.Client.List(ctx, &claims, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil // the claim's own events reconcile the binding too
	}
	for _, c := range claims.Items {
		if string(c.UID) == uid {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: c.Namespace, Name: c.Name}}}
		}
	}
	return nil
}

// SetupWithManager registers the reconciler and the orphan sweep; pod and NetworkPolicy
// changes reach their binding through the owner reference.
func (r *SandboxBindingReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// Only in the one sandbox namespace: across the cluster it would need to list every
	// namespace's Secrets, and could take another deployment's objects for orphans.
	if r.Pods.Namespace != "" {
		sweep := &sandboxOrphans{c: r.Client, api: r.APIReader, namespace: r.Pods.Namespace,
			interval: cmp.Or(r.OrphanSweepInterval, DefaultOrphanSweepInterval), agentSandbox: r.Pods.agentSandbox()}
		if err := mgr.Add(sweep); err != nil {
			return fmt.Errorf("add the sandbox orphan sweep: %w", err)
		}
	}
	// Several at once: a create at a remote provider may take minutes of its slow start, and
	// must not hold up the pod bindings meanwhile.
	// A Sandbox's pod is the Sandbox's, not the binding's: it reaches its binding by the
	// binding label the pod template carries, or (a claimed pool pod) by its claim. Also on
	// the pods substrate, for bindings begun on agent-sandbox before the deployment changed.
	b := ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.SandboxBinding{}).
		Owns(&corev1.Pod{}).Owns(&networkingv1.NetworkPolicy{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.bindingOfPod))
	if r.Pods.agentSandbox() {
		b = b.Owns(&agentsandbox.Sandbox{}).Owns(&agentsandboxext.SandboxClaim{})
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: 16}).
		Named("sandboxbinding").Complete(r)
}

// Reconcile makes what b needs and writes its status.
func (r *SandboxBindingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b v1alpha1.SandboxBinding
	if err := r.Client.Get(ctx, req.NamespacedName, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &b)
	}
	if r.Pods.Namespace != "" && b.Namespace != r.Pods.Namespace {
		before := b.Status.DeepCopy()
		applyView(&b.Status, sandboxView{Phase: v1alpha1.SandboxPending, Ready: metav1.ConditionFalse, Reason: v1alpha1.ReasonNotConfigured,
			Message: "this controller makes sandbox pods only in namespace " + r.Pods.Namespace + " (MANAGED_AGENT_SANDBOX_NAMESPACE)"}, b.Generation)
		return ctrl.Result{}, r.writeStatus(ctx, &b, before)
	}
	if controllerutil.AddFinalizer(&b, v1alpha1.Finalizer) {
		if err := r.Client.Update(ctx, &b); err != nil {
			return ctrl.Result{}, fmt.Errorf("add the finalizer: %w", err)
		}
	}
	before := b.Status.DeepCopy()
	if b.Spec.IsRemote() {
		return ctrl.Result{}, r.reconcileRemote(ctx, &b, before)
	}
	if b.Spec.Workspace.Persistent {
		b.Status.WorkspaceClaim = workspaceClaimName(&b)
	}
	if r.Pods.SandboxdImage == "" {
		applyView(&b.Status, sandboxView{Phase: v1alpha1.SandboxPending, Ready: metav1.ConditionFalse, Reason: v1alpha1.ReasonNotConfigured,
			Message: "the controller has no sandboxd image (MANAGED_AGENT_SANDBOXD_IMAGE): no sandbox pod can be made"}, b.Generation)
		return ctrl.Result{}, r.writeStatus(ctx, &b, before)
	}
	var errs []error
	// The policy first: a claimed warm pod is fenced by it from the moment it is relabelled,
	// and a pod of b's own must not start unconfined for a moment.
	if agentSandboxClaim(&b) {
		// Its policy selects the claimed pod by its claim: ensureClaimedSandbox.
	} else if err := r.ensureNetworkPolicy(ctx, &b); err != nil {
		errs = append(errs, err)
	}
	claimGone := false
	if b.Spec.Workspace.Persistent {
		var err error
		if claimGone, err = r.ensureClaim(ctx, &b); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && !podChosen(&b) {
		if err := r.choosePod(ctx, &b); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && !agentSandboxClaim(&b) {
		// A claimed agent-sandbox pod's token is derived for it once it is known:
		// ensureClaimedSandbox.
		if err := r.ensureSecret(ctx, &b); err != nil {
			errs = append(errs, err)
		}
	}
	var pod *corev1.Pod
	if len(errs) == 0 {
		// No pod before its Secret, policy and claim exist: it would start without a token,
		// unconfined for a moment, or not at all.
		var err error
		suspend := b.Spec.Suspended && b.Spec.Workspace.Persistent
		switch {
		case suspend && r.ownSandbox(&b):
			pod, err = r.suspendSandbox(ctx, &b)
		case suspend:
			pod, err = r.suspendPod(ctx, &b)
		case claimGone:
		case agentSandboxClaim(&b):
			pod, err = r.ensureClaimedSandbox(ctx, &b)
		case r.ownSandbox(&b):
			pod, err = r.ensureSandbox(ctx, &b)
		default:
			pod, err = r.ensurePod(ctx, &b)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	v := viewBinding(b.Status, pod, bindingPort(&b), b.Spec.Suspended && b.Spec.Workspace.Persistent, claimGone)
	err := errors.Join(errs...)
	if err != nil && v.Phase != v1alpha1.SandboxFailed {
		v.Ready, v.Reason, v.Message = metav1.ConditionFalse, v1alpha1.ReasonReconcileFailed, err.Error()
	}
	if prev := meta.FindStatusCondition(before.Conditions, v1alpha1.ConditionReady); v.Phase == v1alpha1.SandboxFailed && (prev == nil || prev.Reason != v.Reason) {
		r.Recorder.Eventf(&b, nil, corev1.EventTypeWarning, v.Reason, "Sandbox", "%s", v.Message)
	}
	if err != nil {
		r.Recorder.Eventf(&b, nil, corev1.EventTypeWarning, v1alpha1.ReasonReconcileFailed, "Reconcile", "%s", err.Error())
	}
	applyView(&b.Status, v, b.Generation)
	return ctrl.Result{}, errors.Join(err, r.writeStatus(ctx, &b, before))
}

func (r *SandboxBindingReconciler) writeStatus(ctx context.Context, b *v1alpha1.SandboxBinding, before *v1alpha1.SandboxBindingStatus) error {
	if equality.Semantic.DeepEqual(before, &b.Status) {
		return nil
	}
	if err := r.Client.Status().Update(ctx, b); err != nil {
		return fmt.Errorf("write the status of sandbox binding %s: %w", b.Name, err)
	}
	return nil
}

func (r *SandboxBindingReconciler) owned(b *v1alpha1.SandboxBinding, obj client.Object) error {
	obj.SetNamespace(b.Namespace)
	return controllerutil.SetControllerReference(b, obj, r.Client.Scheme())
}

// ensureSecret creates the binding's token Secret once; an existing one keeps its token (the
// pod may be reading it). A claimed warm pod's Secret is its pod's, never made here: the pod
// reads the token it was started with.
func (r *SandboxBindingReconciler) ensureSecret(ctx context.Context, b *v1alpha1.SandboxBinding) error {
	var s corev1.Secret
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Status.TokenSecret}, &s)
	if err == nil {
		if metav1.IsControlledBy(&s, b) || claimedSecret(b, &s) {
			return nil
		}
		return fmt.Errorf("secret %s exists and does not belong to sandbox binding %s", s.Name, b.Name)
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read the token secret: %w", err)
	}
	if b.Status.TokenSecret != tokenSecretName(b) {
		return fmt.Errorf("the token secret %s of claimed pod %s is missing: the sandbox cannot be reached; delete the binding", b.Status.TokenSecret, b.Status.PodName)
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw) // never fails (crypto/rand)
	s = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tokenSecretName(b), Labels: sandboxLabels(b)},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		Data:       map[string][]byte{v1alpha1.TokenSecretKey: []byte(hex.EncodeToString(raw))},
	}
	if r.Pods.proxied(b) {
		// The spec is fixed once the pod exists, so the credentials made once hold.
		u, err := r.Pods.proxyURL(ctx, b)
		if err != nil {
			return err
		}
		s.Data[v1alpha1.ProxyURLSecretKey] = []byte(u)
	}
	if err := r.owned(b, &s); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, &s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the token secret: %w", err)
	}
	return nil
}

// ensureNetworkPolicy creates the binding's policy or brings its spec back to what it must be.
func (r *SandboxBindingReconciler) ensureNetworkPolicy(ctx context.Context, b *v1alpha1.SandboxBinding) error {
	return r.ensureNetworkPolicyFor(ctx, b, nil)
}

// ensureNetworkPolicyFor is ensureNetworkPolicy for a policy that selects the pods labelled
// pods rather than those of the binding's label (nil).
func (r *SandboxBindingReconciler) ensureNetworkPolicyFor(ctx context.Context, b *v1alpha1.SandboxBinding, pods map[string]string) error {
	want := r.Pods.sandboxNetworkPolicy(b)
	if pods != nil {
		want.Spec.PodSelector = metav1.LabelSelector{MatchLabels: pods}
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, np, func() error {
		if !np.CreationTimestamp.IsZero() && !metav1.IsControlledBy(np, b) {
			return fmt.Errorf("network policy %s exists and does not belong to sandbox binding %s", np.Name, b.Name)
		}
		np.Labels = want.Labels
		np.Spec = want.Spec
		return controllerutil.SetControllerReference(b, np, r.Client.Scheme())
	})
	if err != nil {
		return fmt.Errorf("network policy: %w", err)
	}
	return nil
}

// ensurePod returns b's pod, creating it only if none was ever made (status has no pod UID)
// or b is resuming from a suspension. A nil pod with no error and a recorded UID is a pod
// deleted behind our back.
func (r *SandboxBindingReconciler) ensurePod(ctx context.Context, b *v1alpha1.SandboxBinding) (*corev1.Pod, error) {
	key := client.ObjectKey{Namespace: b.Namespace, Name: b.Status.PodName}
	var pod corev1.Pod
	err := r.Client.Get(ctx, key, &pod)
	if apierrors.IsNotFound(err) || (err == nil && b.Status.WarmPool != "" && !metav1.IsControlledBy(&pod, b)) {
		// The cache may not hold a pod created a moment ago, nor the claim of a pool pod just
		// made: ask the apiserver before deciding it is missing or not ours.
		err = r.APIReader.Get(ctx, key, &pod)
	}
	switch {
	case err == nil:
		if !metav1.IsControlledBy(&pod, b) {
			return nil, fmt.Errorf("pod %s exists and does not belong to sandbox binding %s", pod.Name, b.Name)
		}
		return &pod, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("read the sandbox pod: %w", err)
	case b.Status.Phase == v1alpha1.SandboxFailed:
		return nil, nil
	case (b.Status.ExternalID != "" || b.Status.PodName != b.Name) && b.Status.Phase != v1alpha1.SandboxSuspended:
		// Once made, or claimed (a pool pod's name): gone for good, unless resuming from a
		// suspension (claimed pods are never persistent, so never suspended).
		return nil, nil
	}
	p := r.Pods.sandboxPod(b)
	if err := r.owned(b, p); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, p); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create the sandbox pod: %w (retrying)", err)
		}
		return nil, fmt.Errorf("create the sandbox pod: %w", err)
	}
	r.Recorder.Eventf(b, p, corev1.EventTypeNormal, "Created", "Create", "created sandbox pod %s", p.Name)
	return p, nil
}

// suspendPod deletes b's pod, if it still has one, and returns it as the apiserver has it
// (terminating) or nil once it is gone. Only the pod goes: its claim keeps the workspace.
// The pod is deleted only once the status says Suspended: were it deleted first and the
// status write lost (a resumption racing the suspension), the terminating pod would read as
// one deleted behind our back. Writing the status triggers the reconcile that deletes it.
func (r *SandboxBindingReconciler) suspendPod(ctx context.Context, b *v1alpha1.SandboxBinding) (*corev1.Pod, error) {
	var pod corev1.Pod
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Name}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read the sandbox pod: %w", err)
	}
	if !metav1.IsControlledBy(&pod, b) {
		return nil, fmt.Errorf("pod %s exists and does not belong to sandbox binding %s", pod.Name, b.Name)
	}
	if pod.DeletionTimestamp != nil || b.Status.Phase != v1alpha1.SandboxSuspended {
		return &pod, nil
	}
	uid := pod.UID
	if err := r.Client.Delete(ctx, &pod, client.Preconditions{UID: &uid}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("delete the sandbox pod to suspend it: %w", err)
	}
	r.Recorder.Eventf(b, &pod, corev1.EventTypeNormal, v1alpha1.ReasonSuspended, "Suspend", "deleted sandbox pod %s; claim %s keeps the workspace", pod.Name, workspaceClaimName(b))
	return &pod, nil
}

// ensureClaim creates b's workspace claim once. gone reports a claim that must exist (a pod
// ran on it: b recorded one, or was suspended) but is missing or being deleted behind our
// back: a new one would be empty.
func (r *SandboxBindingReconciler) ensureClaim(ctx context.Context, b *v1alpha1.SandboxBinding) (gone bool, err error) {
	var pvc corev1.PersistentVolumeClaim
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: workspaceClaimName(b)}, &pvc)
	hadPod := b.Status.ExternalID != "" || b.Status.Phase == v1alpha1.SandboxSuspended
	switch {
	case err == nil && !metav1.IsControlledBy(&pvc, b):
		return false, fmt.Errorf("persistent volume claim %s exists and does not belong to sandbox binding %s", pvc.Name, b.Name)
	case err == nil:
		return pvc.DeletionTimestamp != nil, nil
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("read the workspace claim: %w", err)
	case hadPod:
		return true, nil
	}
	claim := r.Pods.workspaceClaim(b)
	if err := r.owned(b, claim); err != nil {
		return false, err
	}
	if err := r.Client.Create(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("create the workspace claim: %w", err)
	}
	return false, nil
}

// finalize deletes what the binding made (owner references would too, but only where a
// garbage collector runs, and later) and then lets the binding go. What runs goes first (the
// pod, or its Sandbox or claim); its NetworkPolicy, token and workspace only once no pod of
// the binding is left: a terminating pod runs for its grace period, and must stay fenced.
func (r *SandboxBindingReconciler) finalize(ctx context.Context, b *v1alpha1.SandboxBinding) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, v1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	var errs []error
	if b.Spec.IsRemote() {
		errs = append(errs, r.finalizeRemote(ctx, b))
	}
	running := []client.Object{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace}}}
	if b.Status.Substrate == SubstrateAgentSandbox {
		// Its pod goes with it (agent-sandbox's controller, or the garbage collector).
		running = append(running, agentSandboxObjects(b)...)
	}
	errs = append(errs, r.deleteControlled(ctx, b, running))
	// A claimed warm pod (found by its label, so also one claimed just before a status write
	// that was lost) and the token Secret it owns.
	claimed, err := r.claimedPods(ctx, b)
	errs = append(errs, err)
	for _, p := range claimed {
		uid := p.UID
		if err := r.Client.Delete(ctx, p, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete pod %s: %w", p.Name, err))
			continue
		}
		errs = append(errs, deleteSecretOf(ctx, r.Client, r.APIReader, p))
	}
	if name := b.Status.TokenSecret; name != "" && name != tokenSecretName(b) {
		// The claimed pod's Secret when the pod is gone already (deleted behind our back; a
		// garbage collector would take the Secret with it, envtest has none).
		var sec corev1.Secret
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: name}, &sec)
		switch {
		case err == nil && claimedSecret(b, &sec):
			uid := sec.UID
			if err := r.Client.Delete(ctx, &sec, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete secret %s: %w", name, err))
			}
		case err != nil && !apierrors.IsNotFound(err):
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, v1alpha1.ReasonReconcileFailed, "Delete", "%s", err.Error())
		return ctrl.Result{}, err
	}
	left, err := r.podsLeft(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	if left > 0 {
		// The pod's deletion wakes this reconcile (it is watched); the requeue is the fallback.
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	if err := r.deleteControlled(ctx, b, []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tokenSecretName(b), Namespace: b.Namespace}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: workspaceClaimName(b), Namespace: b.Namespace}},
	}); err != nil {
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, v1alpha1.ReasonReconcileFailed, "Delete", "%s", err.Error())
		return ctrl.Result{}, err
	}
	controllerutil.RemoveFinalizer(b, v1alpha1.Finalizer)
	if err := r.Client.Update(ctx, b); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove the finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// deleteControlled deletes those of objs (named; read here) that b controls.
func (r *SandboxBindingReconciler) deleteControlled(ctx context.Context, b *v1alpha1.SandboxBinding, objs []client.Object) error {
	return deleteControlledBy(ctx, r.Client, r.APIReader, b, objs)
}

// deleteControlledBy deletes those of objs (named; read from the apiserver) that owner
// controls, in the background (their dependents follow through the garbage collector). A
// kind the cluster does not serve has nothing to delete: agent-sandbox was uninstalled, and
// its objects with its CRDs.
func deleteControlledBy(ctx context.Context, c client.Client, reader client.Reader, owner metav1.Object, objs []client.Object) error {
	var errs []error
	for _, obj := range objs {
		if err := reader.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
				errs = append(errs, err)
			}
			continue
		}
		if !metav1.IsControlledBy(obj, owner) {
			continue
		}
		uid := obj.GetUID()
		if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %T %s: %w", obj, obj.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// stuckTerminating is how long past its grace period a terminating pod holds back its
// binding's deletion.
const stuckTerminating = 2 * time.Minute

// podsLeft counts the pods of b that still exist, terminating ones included: its own, a
// claimed pool pod of ours (both controlled by b), and its Sandbox's (controlled by the
// Sandbox of b's name). Each carries b's label, so b's policy selects it until it is gone. A
// pod claimed through agent-sandbox keeps its pool's label and deny-all policy instead.
func (r *SandboxBindingReconciler) podsLeft(ctx context.Context, b *v1alpha1.SandboxBinding) (int, error) {
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(b.Namespace), client.MatchingLabels{v1alpha1.LabelSandboxBinding: b.Name}); err != nil {
		return 0, fmt.Errorf("list the pods of sandbox binding %s: %w", b.Name, err)
	}
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil && time.Since(p.DeletionTimestamp.Time) > stuckTerminating {
			continue // its node is gone, most likely: the binding does not wait for it forever
		}
		owner := metav1.GetControllerOf(p)
		switch {
		case metav1.IsControlledBy(p, b):
			n++
		case owner != nil && owner.Kind == agentsandbox.SandboxKind && owner.APIVersion == agentsandbox.GroupVersion.String() && owner.Name == b.Name:
			n++
		}
	}
	return n, nil
}
