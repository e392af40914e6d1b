package controllers

import (
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
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	agentsandboxext "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
)

// SandboxWarmPoolReconciler keeps each SandboxWarmPool's Replicas pods started and
// unclaimed (docs/kubernetes.md, "Warm pool"): a pod rendered as a binding's would be, its own
// token Secret (owned by the pod), and one deny-all NetworkPolicy over all of the pool's
// unclaimed pods. The
// SandboxBindingReconciler claims them (claimWarmPod); a claim moves the pod's owner
// reference to the binding, which wakes this reconciler to start a replacement.
type SandboxWarmPoolReconciler struct {
	Client client.Client
	// APIReader lists the pool's pods from the apiserver (a pod created a moment ago and not
	// yet in the cache must not be created again) and reads Secrets, which are never cached.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Pods      SandboxPods
}

// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=sandboxwarmpools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=sandboxwarmpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=sandboxwarmpools/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;delete
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxtemplates;sandboxwarmpools,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the reconciler; its pods' changes, claims included, reach the
// pool through the owner reference (on a claim the old object's owner is the pool).
func (r *SandboxWarmPoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.SandboxWarmPool{}).
		Owns(&corev1.Pod{}).Owns(&networkingv1.NetworkPolicy{})
	if r.Pods.agentSandbox() {
		b = b.Owns(&agentsandboxext.SandboxWarmPool{})
	}
	return b.Named("sandboxwarmpool").Complete(r)
}

// Reconcile brings pool's pods to its spec and writes its status.
func (r *SandboxWarmPoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pool v1alpha1.SandboxWarmPool
	if err := r.Client.Get(ctx, req.NamespacedName, &pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pool.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &pool)
	}
	before := pool.Status.DeepCopy()
	pool.Status.Selector = warmPoolSelector(&pool)
	if msg := r.notConfigured(&pool); msg != "" {
		setPoolCondition(&pool, metav1.ConditionFalse, v1alpha1.ReasonNotConfigured, msg)
		return ctrl.Result{}, r.writeStatus(ctx, &pool, before)
	}
	if controllerutil.AddFinalizer(&pool, v1alpha1.Finalizer) {
		if err := r.Client.Update(ctx, &pool); err != nil {
			return ctrl.Result{}, fmt.Errorf("add the finalizer: %w", err)
		}
	}
	hash := r.Pods.poolHash(&pool)
	pool.Status.TemplateHash = hash
	if r.Pods.agentSandbox() {
		// Pods of ours from before the substrate changed go; agent-sandbox keeps the pool now.
		pool.Status.Substrate = SubstrateAgentSandbox
		err := r.deleteUnclaimed(ctx, &pool)
		if err == nil {
			err = r.reconcileAgentSandboxPool(ctx, &pool, hash)
		}
		status, reason, msg := warmPoolCondition(pool.Spec.Replicas, warmPoolPlan{Replicas: pool.Status.Replicas, Ready: pool.Status.ReadyReplicas}, err)
		if err != nil {
			r.Recorder.Eventf(&pool, nil, corev1.EventTypeWarning, v1alpha1.ReasonReconcileFailed, "Reconcile", "%s", err.Error())
		}
		setPoolCondition(&pool, status, reason, msg)
		return ctrl.Result{}, errors.Join(err, r.writeStatus(ctx, &pool, before))
	}
	var errs []error
	if pool.Status.Substrate == SubstrateAgentSandbox {
		// Kept by agent-sandbox until the deployment changed substrate: its pool goes.
		if err := r.finalizeAgentSandboxPool(ctx, &pool); err != nil {
			errs = append(errs, err)
		} else {
			pool.Status.Substrate = SubstratePods
		}
	}
	if err := r.ensureNetworkPolicy(ctx, &pool); err != nil {
		errs = append(errs, err)
	}
	pods, err := r.unclaimedPods(ctx, &pool)
	if err != nil {
		errs = append(errs, err)
	}
	var plan warmPoolPlan
	requeue := false
	if len(errs) == 0 {
		// No pod before the policy that fences it exists.
		plan = planWarmPool(pods, hash, pool.Spec.Replicas, bindingPort(&v1alpha1.SandboxBinding{Spec: pool.Spec.Template.ForBinding()}))
		for _, p := range plan.Remove {
			if err := r.deletePod(ctx, p); apierrors.IsConflict(err) {
				requeue = true
			} else if err != nil {
				errs = append(errs, err)
			}
		}
		for range plan.Create {
			if err := r.createPod(ctx, &pool, hash); err != nil {
				errs = append(errs, err)
				break // the next would most likely fail alike (quota, admission)
			}
			plan.Replicas++
		}
		errs = append(errs, r.ensureSecrets(ctx, &pool, pods, hash))
	}
	pool.Status.Replicas, pool.Status.ReadyReplicas = plan.Replicas, plan.Ready
	err = errors.Join(errs...)
	status, reason, msg := warmPoolCondition(pool.Spec.Replicas, plan, err)
	if err != nil {
		r.Recorder.Eventf(&pool, nil, corev1.EventTypeWarning, v1alpha1.ReasonReconcileFailed, "Reconcile", "%s", err.Error())
	}
	setPoolCondition(&pool, status, reason, msg)
	res := ctrl.Result{}
	if requeue {
		res.RequeueAfter = time.Second
	}
	return res, errors.Join(err, r.writeStatus(ctx, &pool, before))
}

// warmPoolCondition is the pool's Ready condition for plan (after its creates).
func warmPoolCondition(replicas int32, plan warmPoolPlan, err error) (metav1.ConditionStatus, string, string) {
	switch {
	case err != nil:
		return metav1.ConditionFalse, v1alpha1.ReasonReconcileFailed, err.Error()
	case plan.Ready >= replicas:
		return metav1.ConditionTrue, v1alpha1.ReasonPoolFilled, fmt.Sprintf("%d of %d pods ready to claim", plan.Ready, replicas)
	}
	msg := fmt.Sprintf("%d of %d pods ready to claim", plan.Ready, replicas)
	if plan.Waiting != "" {
		msg += "; " + plan.Waiting
	}
	return metav1.ConditionFalse, v1alpha1.ReasonPoolFilling, msg
}

func setPoolCondition(pool *v1alpha1.SandboxWarmPool, status metav1.ConditionStatus, reason, msg string) {
	pool.Status.ObservedGeneration = pool.Generation
	meta.SetStatusCondition(&pool.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: status,
		Reason: reason, Message: msg, ObservedGeneration: pool.Generation})
}

// notConfigured says why this controller makes no pods for pool ("" if it does), as for
// bindings.
func (r *SandboxWarmPoolReconciler) notConfigured(pool *v1alpha1.SandboxWarmPool) string {
	switch {
	case r.Pods.Namespace != "" && pool.Namespace != r.Pods.Namespace:
		return "this controller makes sandbox pods only in namespace " + r.Pods.Namespace + " (MANAGED_AGENT_SANDBOX_NAMESPACE)"
	case r.Pods.SandboxdImage == "":
		return "the controller has no sandboxd image (MANAGED_AGENT_SANDBOXD_IMAGE): no sandbox pod can be made"
	}
	return ""
}

func (r *SandboxWarmPoolReconciler) writeStatus(ctx context.Context, pool *v1alpha1.SandboxWarmPool, before *v1alpha1.SandboxWarmPoolStatus) error {
	if equality.Semantic.DeepEqual(before, &pool.Status) {
		return nil
	}
	if err := r.Client.Status().Update(ctx, pool); err != nil {
		return fmt.Errorf("write the status of sandbox warm pool %s: %w", pool.Name, err)
	}
	return nil
}

func (r *SandboxWarmPoolReconciler) ensureNetworkPolicy(ctx context.Context, pool *v1alpha1.SandboxWarmPool) error {
	want := warmPoolNetworkPolicy(pool)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, np, func() error {
		if !np.CreationTimestamp.IsZero() && !metav1.IsControlledBy(np, pool) {
			return fmt.Errorf("network policy %s exists and does not belong to sandbox warm pool %s", np.Name, pool.Name)
		}
		np.Labels = want.Labels
		np.Spec = want.Spec
		return controllerutil.SetControllerReference(pool, np, r.Client.Scheme())
	})
	if err != nil {
		return fmt.Errorf("network policy: %w", err)
	}
	return nil
}

// unclaimedPods are pool's pods that no binding claimed (a claim removes the pool label).
func (r *SandboxWarmPoolReconciler) unclaimedPods(ctx context.Context, pool *v1alpha1.SandboxWarmPool) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.APIReader.List(ctx, &list, client.InNamespace(pool.Namespace), client.MatchingLabels{v1alpha1.LabelWarmPool: pool.Name}); err != nil {
		return nil, fmt.Errorf("list the pool's pods: %w", err)
	}
	var out []*corev1.Pod
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], pool) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// createPod starts one pool pod, then its token Secret, owned by the pod: it goes with the
// pod wherever the pod goes (claimed by a binding, deleted by anyone), by the garbage
// collector, so the controller never needs to list or update Secrets. Until the Secret
// exists the kubelet waits to start the pod; a Secret whose create was lost is made by the
// next reconcile (ensureSecrets).
func (r *SandboxWarmPoolReconciler) createPod(ctx context.Context, pool *v1alpha1.SandboxWarmPool, hash string) error {
	suffix := make([]byte, 5)
	_, _ = rand.Read(suffix) // never fails (crypto/rand)
	p := r.Pods.warmPoolPod(pool, pool.Name+"-"+hex.EncodeToString(suffix), hash)
	if err := controllerutil.SetControllerReference(pool, p, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, p); err != nil {
		return fmt.Errorf("create a pool pod: %w", err)
	}
	return r.createSecret(ctx, pool, p)
}

func (r *SandboxWarmPoolReconciler) createSecret(ctx context.Context, pool *v1alpha1.SandboxWarmPool, p *corev1.Pod) error {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw) // never fails (crypto/rand)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: podTokenSecret(p), Namespace: p.Namespace, Labels: warmPoolLabels(pool)},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		Data:       map[string][]byte{v1alpha1.TokenSecretKey: []byte(hex.EncodeToString(raw))},
	}
	delete(s.Labels, v1alpha1.LabelWarmPool) // it follows its pod, into a binding too
	if err := controllerutil.SetControllerReference(p, s, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the token secret of pool pod %s: %w", p.Name, err)
	}
	return nil
}

// ensureSecrets makes the missing token Secrets of pods that are not ready (only those can
// lack one: a pod cannot start without it).
func (r *SandboxWarmPoolReconciler) ensureSecrets(ctx context.Context, pool *v1alpha1.SandboxWarmPool, pods []*corev1.Pod, hash string) error {
	var errs []error
	for _, p := range pods {
		if p.DeletionTimestamp != nil || claimable(p, hash) {
			continue
		}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: podTokenSecret(p)}, &corev1.Secret{})
		switch {
		case apierrors.IsNotFound(err):
			errs = append(errs, r.createSecret(ctx, pool, p))
		case err != nil:
			errs = append(errs, fmt.Errorf("read the token secret of pool pod %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// deletePod deletes an unclaimed pool pod and its Secret; the UID and resource version
// preconditions make a pod a binding claimed meanwhile (its labels and owner changed) a
// conflict, never a deletion. The Secret is deleted here too, for clusters without a garbage
// collector (envtest).
func (r *SandboxWarmPoolReconciler) deletePod(ctx context.Context, p *corev1.Pod) error {
	uid, rv := p.UID, p.ResourceVersion
	err := r.Client.Delete(ctx, p, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	switch {
	case apierrors.IsNotFound(err):
	case apierrors.IsConflict(err):
		// Changed since read (claimed, or its status moved): read it anew.
		return fmt.Errorf("pool pod %s changed meanwhile: %w", p.Name, err)
	case err != nil:
		return fmt.Errorf("delete pool pod %s: %w", p.Name, err)
	}
	return deleteSecretOf(ctx, r.Client, r.APIReader, p)
}

// deleteSecretOf deletes the token Secret pod p owns, if it still exists and is p's.
func deleteSecretOf(ctx context.Context, c client.Client, reader client.Reader, p *corev1.Pod) error {
	var s corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: podTokenSecret(p)}, &s); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&s, p) {
		return nil
	}
	uid := s.UID
	if err := c.Delete(ctx, &s, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the token secret of pod %s: %w", p.Name, err)
	}
	return nil
}

// finalize deletes the pool's unclaimed pods, their Secrets and the pool's policy (owner
// references would too, but only where a garbage collector runs); claimed pods belong to
// their bindings and stay.
func (r *SandboxWarmPoolReconciler) finalize(ctx context.Context, pool *v1alpha1.SandboxWarmPool) error {
	if !controllerutil.ContainsFinalizer(pool, v1alpha1.Finalizer) {
		return nil
	}
	errs := []error{r.deleteUnclaimed(ctx, pool), r.finalizeAgentSandboxPool(ctx, pool)}
	np := &networkingv1.NetworkPolicy{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: warmPoolNetworkPolicyName(pool)}, np); err == nil {
		if metav1.IsControlledBy(np, pool) {
			if err := r.Client.Delete(ctx, np); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete network policy %s: %w", np.Name, err))
			}
		}
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("read network policy: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, v1alpha1.ReasonReconcileFailed, "Delete", "%s", err.Error())
		return err
	}
	controllerutil.RemoveFinalizer(pool, v1alpha1.Finalizer)
	if err := r.Client.Update(ctx, pool); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove the finalizer: %w", err)
	}
	return nil
}

// deleteUnclaimed deletes pool's unclaimed pods and their Secrets.
func (r *SandboxWarmPoolReconciler) deleteUnclaimed(ctx context.Context, pool *v1alpha1.SandboxWarmPool) error {
	pods, err := r.unclaimedPods(ctx, pool)
	errs := []error{err}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			errs = append(errs, r.deletePod(ctx, p))
		} else {
			errs = append(errs, deleteSecretOf(ctx, r.Client, r.APIReader, p))
		}
	}
	return errors.Join(errs...)
}
