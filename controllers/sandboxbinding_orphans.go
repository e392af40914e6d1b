package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	agentsandbox "sigs.k8s.io/agent-sandbox/api/v1beta1"
	agentsandboxext "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
)

// DefaultOrphanSweepInterval is how often the controller looks for sandbox objects whose
// binding is gone.
const DefaultOrphanSweepInterval = time.Minute

// sandboxOrphans removes the pods, Secrets, NetworkPolicies and workspace claims labelled
// with a SandboxBinding (LabelSandboxBinding) that no longer exists, or that a binding of the
// same name but another UID has replaced. Owner references do it where the garbage collector runs, but
// not for an object whose binding was deleted without its finalizer (removed by hand, a
// controller that was not running), nor anywhere without a collector. Objects labelled
// for a binding that exists and carry no owner reference are left alone: the binding's own
// reconcile reports them.
//
// It runs on the leader only (a Runnable needs leader election unless it says otherwise),
// over the sandbox namespace when the controller has one.
type sandboxOrphans struct {
	c client.Client // deletes
	// api lists from the apiserver: the cache holds only objects with the sandbox labels
	// (SandboxCacheOptions), and an orphan is whatever carries the binding label; one
	// labelled list a minute is cheap.
	api       client.Reader
	namespace string
	interval  time.Duration
	// agentSandbox also sweeps agent-sandbox's Sandboxes and SandboxClaims (the agent-sandbox
	// substrate; the kinds may not exist elsewhere).
	agentSandbox bool
}

// Start sweeps every interval until ctx ends.
func (o *sandboxOrphans) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("sandbox-orphans")
	t := time.NewTicker(o.interval)
	defer t.Stop()
	for {
		if n, err := o.sweep(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "sweep sandbox orphans", "removed", n)
		} else if n > 0 {
			log.Info("removed sandbox objects whose binding is gone", "removed", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sweep removes the orphans it finds and returns how many.
func (o *sandboxOrphans) sweep(ctx context.Context) (int, error) {
	opts := []client.ListOption{client.HasLabels{v1alpha1.LabelSandboxBinding}}
	if o.namespace != "" {
		opts = append(opts, client.InNamespace(o.namespace))
	}
	var pods corev1.PodList
	var secrets corev1.SecretList
	var claims corev1.PersistentVolumeClaimList
	var policies networkingv1.NetworkPolicyList
	var errs []error
	if err := o.api.List(ctx, &pods, opts...); err != nil {
		errs = append(errs, fmt.Errorf("list sandbox pods: %w", err))
	}
	if err := o.api.List(ctx, &secrets, opts...); err != nil {
		errs = append(errs, fmt.Errorf("list sandbox secrets: %w", err))
	}
	if err := o.api.List(ctx, &claims, opts...); err != nil {
		errs = append(errs, fmt.Errorf("list sandbox workspace claims: %w", err))
	}
	if err := o.api.List(ctx, &policies, opts...); err != nil {
		errs = append(errs, fmt.Errorf("list sandbox network policies: %w", err))
	}
	var objs []client.Object
	if o.agentSandbox {
		var sandboxes agentsandbox.SandboxList
		var claims agentsandboxext.SandboxClaimList
		if err := o.api.List(ctx, &sandboxes, opts...); err != nil {
			errs = append(errs, fmt.Errorf("list sandboxes: %w", err))
		}
		if err := o.api.List(ctx, &claims, opts...); err != nil {
			errs = append(errs, fmt.Errorf("list sandbox claims: %w", err))
		}
		for i := range sandboxes.Items {
			objs = append(objs, &sandboxes.Items[i])
		}
		for i := range claims.Items {
			objs = append(objs, &claims.Items[i])
		}
	}
	for i := range pods.Items {
		objs = append(objs, &pods.Items[i])
	}
	for i := range secrets.Items {
		objs = append(objs, &secrets.Items[i])
	}
	for i := range claims.Items {
		objs = append(objs, &claims.Items[i])
	}
	for i := range policies.Items {
		objs = append(objs, &policies.Items[i])
	}
	bindings := map[types.NamespacedName]*v1alpha1.SandboxBinding{}
	removed := 0
	for _, obj := range objs {
		if obj.GetDeletionTimestamp() != nil {
			continue
		}
		key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetLabels()[v1alpha1.LabelSandboxBinding]}
		b, seen := bindings[key]
		if !seen {
			var got v1alpha1.SandboxBinding
			switch err := o.api.Get(ctx, key, &got); {
			case apierrors.IsNotFound(err):
				b = nil
			case err != nil:
				errs = append(errs, fmt.Errorf("read sandbox binding %s: %w", key, err))
				continue
			default:
				b = &got
			}
			bindings[key] = b
		}
		if !orphaned(obj, b) {
			continue
		}
		uid := obj.GetUID()
		if err := o.c.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("delete orphaned %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err))
			}
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// orphaned says whether obj, labelled for binding b (nil: none of that name exists), is
// left over: its binding is gone, or it is controlled by another object than b (an earlier
// binding of the same name).
func orphaned(obj client.Object, b *v1alpha1.SandboxBinding) bool {
	owner := metav1.GetControllerOf(obj)
	if owner != nil && owner.Kind == agentsandbox.SandboxKind && owner.APIVersion == agentsandbox.GroupVersion.String() {
		// A Sandbox's pod: the Sandbox is the orphan, and a pod deleted under it would only be
		// made again.
		return false
	}
	if b == nil {
		return true
	}
	return owner != nil && owner.Kind == "SandboxBinding" && owner.UID != b.UID
}
