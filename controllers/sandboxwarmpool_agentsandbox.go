package controllers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	agentsandbox "sigs.k8s.io/agent-sandbox/api/v1beta1"
	agentsandboxext "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/sandboxtoken"
)

// On the agent-sandbox substrate a SandboxWarmPool is kept by agent-sandbox: the pool
// reconciler makes a SandboxTemplate and an agent-sandbox SandboxWarmPool, both named as the
// pool and owned by it, and agent-sandbox keeps the started pods; a binding claims one with a
// SandboxClaim (claimAgentSandbox). What stays ours: the pool's deny-all NetworkPolicy (the
// template's pods carry the pool label), the binding's own policy (which selects its claimed
// pod by agent-sandbox's claim label), and the token.
//
// The token: agent-sandbox renders every pod of a pool from one template, and a claim cannot
// change a started pod's volumes, so the pool's pods share one Secret. It holds a key, not a
// token: each pod's sandboxd derives its token from the key and its own pod UID (package
// sandboxtoken), and a binding that claims a pod gets a Secret of its own with that pod's
// token. A token the worker holds for one pod is thus refused by every other pod of the pool
// (one that took a stale endpoint's address, say), as on the pods substrate.

// poolTokenSecretName is the Secret of an agent-sandbox pool's token key.
func poolTokenSecretName(pool string) string { return pool + "-token" }

// sandboxTemplate renders pool's SandboxTemplate: the pod a binding of the template would
// get, named as the pool so that its token volume names the pool's Secret, labelled as the
// pool's pods (the pool's policy fences them until claimed), with no Service and no policy
// of agent-sandbox's own.
func (c SandboxPods) sandboxTemplate(pool *v1alpha1.SandboxWarmPool, hash string) *agentsandboxext.SandboxTemplate {
	pod := c.warmPoolPod(pool, pool.Name, hash)
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == sandboxContainer {
			// The Secret holds the pool's key: sandboxd derives its token for its pod's UID.
			pod.Spec.Containers[i].Env = append(pod.Spec.Containers[i].Env, corev1.EnvVar{Name: "MANAGED_AGENT_SANDBOXD_TOKEN_SUBJECT",
				ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}})
		}
	}
	return &agentsandboxext.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: pool.Name, Namespace: pool.Namespace, Labels: warmPoolLabels(pool)},
		Spec: agentsandboxext.SandboxTemplateSpec{
			SandboxBlueprint: agentsandbox.SandboxBlueprint{
				PodTemplate: agentsandbox.PodTemplate{ObjectMeta: agentsandbox.PodMetadata{Labels: pod.Labels}, Spec: pod.Spec},
				Service:     ptr.To(false),
			},
			NetworkPolicyManagement: agentsandboxext.NetworkPolicyManagementUnmanaged,
			// A claim's env would force a cold start from the template: never wanted.
			EnvVarsInjectionPolicy:     agentsandboxext.EnvVarsInjectionPolicyDisallowed,
			VolumeClaimTemplatesPolicy: agentsandboxext.VolumeClaimTemplatesPolicyDisallowed,
		},
	}
}

// reconcileAgentSandboxPool is the pool reconciler's work on the agent-sandbox substrate; it
// fills pool's status from the agent-sandbox pool's.
func (r *SandboxWarmPoolReconciler) reconcileAgentSandboxPool(ctx context.Context, pool *v1alpha1.SandboxWarmPool, hash string) error {
	var errs []error
	if err := r.ensureNetworkPolicy(ctx, pool); err != nil {
		return err // no pod before the policy that fences it
	}
	if err := r.ensurePoolSecret(ctx, pool); err != nil {
		return err // nor before its token
	}
	want := r.Pods.sandboxTemplate(pool, hash)
	tmpl := &agentsandboxext.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: pool.Name, Namespace: pool.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, tmpl, func() error {
		if !tmpl.CreationTimestamp.IsZero() && !metav1.IsControlledBy(tmpl, pool) {
			return fmt.Errorf("sandbox template %s exists and does not belong to sandbox warm pool %s", tmpl.Name, pool.Name)
		}
		// Merged: agent-sandbox labels templates too, and taking its labels away would make
		// each of us undo the other's update forever.
		if tmpl.Labels == nil {
			tmpl.Labels = map[string]string{}
		}
		maps.Copy(tmpl.Labels, want.Labels)
		tmpl.Spec = want.Spec
		return controllerutil.SetControllerReference(pool, tmpl, r.Client.Scheme())
	}); err != nil {
		return fmt.Errorf("sandbox template: %w", err)
	}
	asp := &agentsandboxext.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: pool.Name, Namespace: pool.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, asp, func() error {
		if !asp.CreationTimestamp.IsZero() && !metav1.IsControlledBy(asp, pool) {
			return fmt.Errorf("agent-sandbox warm pool %s exists and does not belong to sandbox warm pool %s", asp.Name, pool.Name)
		}
		if asp.Labels == nil {
			asp.Labels = map[string]string{}
		}
		maps.Copy(asp.Labels, warmPoolLabels(pool))
		asp.Spec.Replicas = ptr.To(pool.Spec.Replicas)
		asp.Spec.TemplateRef = agentsandboxext.SandboxTemplateRef{Name: tmpl.Name}
		// A changed template (or controller) replaces the started pods at once, as ours do:
		// a binding claims only pods of its hash.
		asp.Spec.UpdateStrategy = &agentsandboxext.SandboxWarmPoolUpdateStrategy{Type: agentsandboxext.RecreateSandboxWarmPoolUpdateStrategyType}
		return controllerutil.SetControllerReference(pool, asp, r.Client.Scheme())
	}); err != nil {
		errs = append(errs, fmt.Errorf("agent-sandbox warm pool: %w", err))
	}
	pool.Status.Replicas, pool.Status.ReadyReplicas = asp.Status.Replicas, asp.Status.ReadyReplicas
	return errors.Join(errs...)
}

// ensurePoolSecret makes the pool's token Secret once, owned by the pool.
func (r *SandboxWarmPoolReconciler) ensurePoolSecret(ctx context.Context, pool *v1alpha1.SandboxWarmPool) error {
	var s corev1.Secret
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: poolTokenSecretName(pool.Name)}, &s)
	switch {
	case err == nil && !metav1.IsControlledBy(&s, pool):
		return fmt.Errorf("secret %s exists and does not belong to sandbox warm pool %s", s.Name, pool.Name)
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read the pool's token secret: %w", err)
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw) // never fails (crypto/rand)
	lbl := warmPoolLabels(pool)
	s = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: poolTokenSecretName(pool.Name), Namespace: pool.Namespace, Labels: lbl},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		Data:       map[string][]byte{v1alpha1.TokenSecretKey: []byte(hex.EncodeToString(raw))},
	}
	if err := controllerutil.SetControllerReference(pool, &s, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, &s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the pool's token secret: %w", err)
	}
	return nil
}

// finalizeAgentSandboxPool deletes what reconcileAgentSandboxPool made; the claimed sandboxes
// belong to their claims, and so to their bindings, and stay. The token Secret stays until
// the garbage collector takes it with the pool: a claimed pod keeps reading it.
func (r *SandboxWarmPoolReconciler) finalizeAgentSandboxPool(ctx context.Context, pool *v1alpha1.SandboxWarmPool) error {
	return deleteControlledBy(ctx, r.Client, r.APIReader, pool, []client.Object{
		&agentsandboxext.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: pool.Name, Namespace: pool.Namespace}},
		&agentsandboxext.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: pool.Name, Namespace: pool.Namespace}},
	})
}

// claimAgentSandbox claims a started sandbox of a warm pool whose template renders b's pod,
// with a SandboxClaim named as b, when that pool's agent-sandbox pool reports one ready
// (else b gets a Sandbox of its own: a claim never waits). A claim racing another for the
// last ready sandbox may find none left; agent-sandbox then starts one from the template,
// which serves as well, only later. It records the choice in b.Status.
func (r *SandboxBindingReconciler) claimAgentSandbox(ctx context.Context, b *v1alpha1.SandboxBinding) (bool, error) {
	var claim agentsandboxext.SandboxClaim
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Name}, &claim)
	switch {
	case err == nil && !metav1.IsControlledBy(&claim, b):
		return false, fmt.Errorf("sandbox claim %s exists and does not belong to sandbox binding %s", claim.Name, b.Name)
	case err == nil:
		// Made before a status write that was lost.
		r.recordClaim(b, claim.Spec.WarmPoolRef.Name)
		return true, nil
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("read the sandbox claim: %w", err)
	}
	// A Sandbox of b's own made before a status write that was lost: b's, not a claim.
	if sbx, err := r.getSandbox(ctx, b); err != nil || sbx != nil {
		if sbx != nil {
			b.Status.PodName, b.Status.TokenSecret, b.Status.Substrate = b.Name, tokenSecretName(b), SubstrateAgentSandbox
		}
		return sbx != nil, err
	}
	var pools v1alpha1.SandboxWarmPoolList
	if err := r.Client.List(ctx, &pools, client.InNamespace(b.Namespace)); err != nil {
		return false, fmt.Errorf("list the sandbox warm pools: %w", err)
	}
	hash := r.Pods.templateHash(b.Spec)
	for i := range pools.Items {
		pool := &pools.Items[i]
		if pool.DeletionTimestamp != nil || r.Pods.poolHash(pool) != hash {
			continue
		}
		var asp agentsandboxext.SandboxWarmPool
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: pool.Name}, &asp); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, fmt.Errorf("read agent-sandbox warm pool %s: %w", pool.Name, err)
		}
		if !metav1.IsControlledBy(&asp, pool) || asp.Status.ReadyReplicas == 0 {
			continue
		}
		claim = agentsandboxext.SandboxClaim{
			ObjectMeta: metav1.ObjectMeta{Name: b.Name, Labels: sandboxLabels(b)},
			Spec:       agentsandboxext.SandboxClaimSpec{WarmPoolRef: agentsandboxext.SandboxWarmPoolRef{Name: pool.Name}},
		}
		if err := r.owned(b, &claim); err != nil {
			return false, err
		}
		if err := r.Client.Create(ctx, &claim); err != nil {
			return false, fmt.Errorf("create the sandbox claim on warm pool %s: %w", pool.Name, err)
		}
		r.Recorder.Eventf(b, &claim, corev1.EventTypeNormal, "Claimed", "Claim", "claimed a started sandbox of warm pool %s (sandbox claim %s)", pool.Name, claim.Name)
		r.recordClaim(b, pool.Name)
		return true, nil
	}
	return false, nil
}

func (r *SandboxBindingReconciler) recordClaim(b *v1alpha1.SandboxBinding, pool string) {
	b.Status.Substrate, b.Status.WarmPool, b.Status.TokenSecret = SubstrateAgentSandbox, pool, tokenSecretName(b)
}

// agentSandboxClaim says whether b's pod comes from a SandboxClaim of b's on a warm pool.
func agentSandboxClaim(b *v1alpha1.SandboxBinding) bool {
	return b.Status.Substrate == SubstrateAgentSandbox && b.Status.WarmPool != ""
}

// ensureClaimedSandbox is ensurePod for a binding that claimed through a SandboxClaim: it
// follows the claim to its Sandbox and the Sandbox to its pod, records the pod's name, and
// fences the pod with b's NetworkPolicy, which selects it by agent-sandbox's claim label
// (claim metadata is confined to allowlisted label domains, so b's own labels cannot be
// added). Until then the pod is its pool's, under the pool's deny-all policy.
func (r *SandboxBindingReconciler) ensureClaimedSandbox(ctx context.Context, b *v1alpha1.SandboxBinding) (*corev1.Pod, error) {
	var claim agentsandboxext.SandboxClaim
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Name}, &claim); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil // deleted behind our back: the view says so once a pod ran
		}
		return nil, fmt.Errorf("read the sandbox claim: %w", err)
	}
	if !metav1.IsControlledBy(&claim, b) {
		return nil, fmt.Errorf("sandbox claim %s exists and does not belong to sandbox binding %s", claim.Name, b.Name)
	}
	if err := r.ensureNetworkPolicyFor(ctx, b, map[string]string{agentsandboxext.SandboxIDLabel: string(claim.UID)}); err != nil {
		return nil, err
	}
	name := claim.Status.SandboxStatus.Name
	if name == "" {
		return nil, nil
	}
	var sbx agentsandbox.Sandbox
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: name}, &sbx); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read sandbox %s of claim %s: %w", name, claim.Name, err)
	}
	if !metav1.IsControlledBy(&sbx, &claim) {
		return nil, nil // not adopted yet
	}
	if p := sbx.Annotations[agentsandbox.SandboxPodNameAnnotation]; p != "" && p != sbx.Name {
		return nil, fmt.Errorf("sandbox %s runs pod %s, not one of its name; this agent-sandbox release is not supported", sbx.Name, p)
	}
	pod, err := r.sandboxPodOf(ctx, &sbx, true)
	if err != nil || pod == nil {
		return pod, err
	}
	if pod.Labels[agentsandboxext.SandboxIDLabel] != string(claim.UID) {
		return nil, nil // its claim label not written yet: b's policy does not select it
	}
	// Its token before the status names the pod: the worker reads the Secret once Ready.
	if err := r.ensureClaimedToken(ctx, b, pod); err != nil {
		return nil, err
	}
	b.Status.PodName = pod.Name
	return pod, nil
}

// ensureClaimedToken makes b's token Secret for its claimed pod once: the token that pod's
// sandboxd derives from the pool's key and its UID. An existing one is kept (the spec of a
// Secret is immutable, and a pod replaced since fails the binding anyway).
func (r *SandboxBindingReconciler) ensureClaimedToken(ctx context.Context, b *v1alpha1.SandboxBinding, pod *corev1.Pod) error {
	var s corev1.Secret
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: tokenSecretName(b)}, &s)
	switch {
	case err == nil && !metav1.IsControlledBy(&s, b):
		return fmt.Errorf("secret %s exists and does not belong to sandbox binding %s", s.Name, b.Name)
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read the token secret: %w", err)
	}
	var key corev1.Secret
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: poolTokenSecretName(b.Status.WarmPool)}, &key); err != nil {
		return fmt.Errorf("read the token key of warm pool %s: %w", b.Status.WarmPool, err)
	}
	if owner := metav1.GetControllerOf(&key); owner == nil || owner.Kind != "SandboxWarmPool" || owner.APIVersion != v1alpha1.GroupVersion.String() || owner.Name != b.Status.WarmPool {
		return fmt.Errorf("secret %s does not belong to sandbox warm pool %s", key.Name, b.Status.WarmPool)
	}
	s = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tokenSecretName(b), Labels: sandboxLabels(b)},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		Data: map[string][]byte{v1alpha1.TokenSecretKey: []byte(sandboxtoken.Derive(
			strings.TrimRight(string(key.Data[v1alpha1.TokenSecretKey]), "\r\n"), string(pod.UID)))},
	}
	if err := r.owned(b, &s); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, &s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the token secret: %w", err)
	}
	return nil
}
