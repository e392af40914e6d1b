package controllers

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
)

// choosePod decides, once per binding, which pod is b's: one made or claimed for it before
// its status was written (a lost status write must not lead to a second pod), else a ready
// warm pool pod of the same template (on the agent-sandbox substrate: a SandboxClaim on a
// pool with a ready sandbox), else a pod of its own (b's name) to create. It records the
// choice in b.Status (PodName, TokenSecret, WarmPool, Substrate).
func (r *SandboxBindingReconciler) choosePod(ctx context.Context, b *v1alpha1.SandboxBinding) error {
	// The cache may hold b from before a status write that chose its pod: were its pool pod
	// then deleted, a choice made again from that copy would find no claim and make a pod of
	// b's own, which a binding whose claimed pod is gone must never get. Decide from the
	// apiserver's b.
	var fresh v1alpha1.SandboxBinding
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(b), &fresh); err != nil {
		return fmt.Errorf("read sandbox binding %s: %w", b.Name, err)
	}
	if podChosen(&fresh) {
		*b = fresh
		return nil
	}
	claimed, err := r.claimedPods(ctx, b)
	if err != nil {
		return err
	}
	var pod *corev1.Pod
	if len(claimed) > 0 {
		pod = claimed[0]
	}
	unstarted := b.Status.ExternalID == "" && b.Status.Phase != v1alpha1.SandboxFailed
	if pod == nil && unstarted && r.Pods.agentSandbox() {
		// agent-sandbox keeps the pools' pods: claim through it (its pools have no pods of
		// ours to claim).
		ok, err := r.claimAgentSandbox(ctx, b)
		if ok || err != nil {
			return err
		}
	} else if pod == nil && unstarted {
		if pod, err = r.claimWarmPod(ctx, b); err != nil {
			return err
		}
	}
	if pod == nil {
		b.Status.PodName, b.Status.TokenSecret = b.Name, tokenSecretName(b)
		b.Status.Substrate = r.Pods.substrate()
		return nil
	}
	b.Status.Substrate = SubstratePods
	b.Status.PodName, b.Status.TokenSecret = pod.Name, podTokenSecret(pod)
	b.Status.WarmPool = pod.Annotations[v1alpha1.AnnotationClaimedFrom]
	return nil
}

// claimedPods are the warm pool pods b claimed, straight from the apiserver (this runs only
// before b's status names a pod, and when b goes). b's own pod, if any, is found by its name
// (ensurePod), where a squatter of that name is reported too.
func (r *SandboxBindingReconciler) claimedPods(ctx context.Context, b *v1alpha1.SandboxBinding) ([]*corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(b.Namespace), client.MatchingLabels{v1alpha1.LabelSandboxBinding: b.Name}); err != nil {
		return nil, fmt.Errorf("list the pods of sandbox binding %s: %w", b.Name, err)
	}
	var out []*corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; metav1.IsControlledBy(p, b) && p.Name != b.Name {
			out = append(out, p)
		}
	}
	claimOrder(out)
	return out, nil
}

// claimWarmPod takes a ready pod of a warm pool whose template renders b's pod, or returns
// nil when none is ready (b then gets a pod of its own: a claim never waits).
//
// The claim is one update of the pod, conditional on the resource version this controller
// read: it moves the controller reference from the pool to b, replaces the pool's labels
// with b's (so b's NetworkPolicy, which must exist already, is the one that selects it from
// then on) and records the pool. Of two bindings claiming one pod, or a claim racing the
// pool deleting it, exactly one update wins; the loser tries the next pod. The pod's token
// Secret needs no change: the pod owns it.
func (r *SandboxBindingReconciler) claimWarmPod(ctx context.Context, b *v1alpha1.SandboxBinding) (*corev1.Pod, error) {
	var pools v1alpha1.SandboxWarmPoolList
	if err := r.Client.List(ctx, &pools, client.InNamespace(b.Namespace)); err != nil {
		return nil, fmt.Errorf("list the sandbox warm pools: %w", err)
	}
	if len(pools.Items) == 0 {
		return nil, nil
	}
	hash := r.Pods.templateHash(b.Spec)
	for i := range pools.Items {
		pool := &pools.Items[i]
		if pool.DeletionTimestamp != nil || r.Pods.poolHash(pool) != hash {
			continue
		}
		var list corev1.PodList
		if err := r.Client.List(ctx, &list, client.InNamespace(b.Namespace),
			client.MatchingLabels{v1alpha1.LabelWarmPool: pool.Name, v1alpha1.LabelTemplateHash: hash}); err != nil {
			return nil, fmt.Errorf("list the pods of sandbox warm pool %s: %w", pool.Name, err)
		}
		var candidates []*corev1.Pod
		for j := range list.Items {
			if p := &list.Items[j]; metav1.IsControlledBy(p, pool) && claimable(p, hash) {
				candidates = append(candidates, p)
			}
		}
		claimOrder(candidates)
		for _, p := range candidates {
			claimed, err := r.claim(ctx, b, pool, p)
			switch {
			case err == nil:
				r.Recorder.Eventf(b, claimed, corev1.EventTypeNormal, "Claimed", "Claim", "claimed ready pod %s of sandbox warm pool %s", claimed.Name, pool.Name)
				return claimed, nil
			case apierrors.IsConflict(err), apierrors.IsNotFound(err):
				continue // taken by another binding, deleted, or changed since the cache read it
			default:
				return nil, err
			}
		}
	}
	return nil, nil
}

// claim makes p b's (see claimWarmPod); the update fails with a conflict if p changed since
// it was read.
func (r *SandboxBindingReconciler) claim(ctx context.Context, b *v1alpha1.SandboxBinding, pool *v1alpha1.SandboxWarmPool, p *corev1.Pod) (*corev1.Pod, error) {
	p = p.DeepCopy()
	p.OwnerReferences = withoutController(p.OwnerReferences)
	if err := controllerutil.SetControllerReference(b, p, r.Client.Scheme()); err != nil {
		return nil, err
	}
	lbl := maps.Clone(p.Labels)
	delete(lbl, v1alpha1.LabelWarmPool)
	delete(lbl, v1alpha1.LabelTemplateHash)
	maps.Copy(lbl, sandboxLabels(b))
	p.Labels = lbl
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[v1alpha1.AnnotationClaimedFrom] = pool.Name
	if err := r.Client.Update(ctx, p); err != nil {
		return nil, fmt.Errorf("claim pod %s of sandbox warm pool %s: %w", p.Name, pool.Name, err)
	}
	return p, nil
}

// claimedSecret says whether s is the token Secret of b's claimed pod: owned by that pod
// (pool pods own their Secrets, so it goes with the pod).
func claimedSecret(b *v1alpha1.SandboxBinding, s *corev1.Secret) bool {
	owner := metav1.GetControllerOf(s)
	return b.Status.WarmPool != "" && owner != nil && owner.Kind == "Pod" && owner.Name == b.Status.PodName &&
		(b.Status.ExternalID == "" || string(owner.UID) == b.Status.ExternalID)
}

// withoutController drops the controller reference (there is at most one) and keeps the
// other owners.
func withoutController(refs []metav1.OwnerReference) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs))
	for _, ref := range refs {
		if ref.Controller != nil && *ref.Controller {
			continue
		}
		out = append(out, ref)
	}
	return out
}

// podChosen says whether choosePod decided b's pod: named, or (an agent-sandbox claim) to be
// named by the claim.
func podChosen(b *v1alpha1.SandboxBinding) bool {
	return b.Status.PodName != "" || agentSandboxClaim(b)
}
