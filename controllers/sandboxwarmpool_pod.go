package controllers

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
)

// templateName is the name both sides of a template match render under, so the names
// derived from a binding's (the token Secret's) do not tell two pods apart.
const templateName = "template"

// templateHash identifies the pod the controller renders for spec, leaving out what a claim
// changes (the pod's name and labels, the token Secret's name) and the session. A binding
// claims a pool's pod only when their hashes are equal, so any field that reaches the pod,
// today's or one added later, is part of the match without being listed here, and so is
// the controller's own configuration (the sandboxd image): an upgraded controller rolls its
// pools instead of handing out pods of the old one.
func (c SandboxPods) templateHash(spec v1alpha1.SandboxBindingSpec) string {
	spec.SessionID = ""
	pod := c.sandboxPod(&v1alpha1.SandboxBinding{ObjectMeta: metav1.ObjectMeta{Name: templateName}, Spec: spec})
	raw, err := json.Marshal(pod.Spec)
	if err != nil {
		panic(err) // a PodSpec always encodes
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// poolHash is the template hash of pool's pods.
func (c SandboxPods) poolHash(pool *v1alpha1.SandboxWarmPool) string {
	return c.templateHash(pool.Spec.Template.ForBinding())
}

// warmPoolLabels are the labels of a pool's Secrets and NetworkPolicy; its pods add the
// template hash. They carry no session and no binding: nothing that selects a session's
// sandbox selects an unclaimed pod.
func warmPoolLabels(pool *v1alpha1.SandboxWarmPool) map[string]string {
	return map[string]string{
		v1alpha1.LabelWarmPool:         pool.Name,
		"app.kubernetes.io/managed-by": "managed-agents",
		"app.kubernetes.io/component":  "sandbox",
	}
}

// warmPoolSelector selects pool's unclaimed pods (status.selector, for kubectl and scale).
func warmPoolSelector(pool *v1alpha1.SandboxWarmPool) string {
	return labels.SelectorFromSet(labels.Set{v1alpha1.LabelWarmPool: pool.Name}).String()
}

// warmPoolPod renders a pool pod named name: a binding's pod, rendered from the template,
// with the pool's labels. Its token Secret is tokenSecretName of the same name.
func (c SandboxPods) warmPoolPod(pool *v1alpha1.SandboxWarmPool, name, hash string) *corev1.Pod {
	pod := c.sandboxPod(&v1alpha1.SandboxBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pool.Namespace},
		Spec: pool.Spec.Template.ForBinding()})
	pod.Labels = warmPoolLabels(pool)
	pod.Labels[v1alpha1.LabelTemplateHash] = hash
	return pod
}

// warmPoolNetworkPolicyName is the pool's policy; binding names (ma-<hex>) never end so.
func warmPoolNetworkPolicyName(pool *v1alpha1.SandboxWarmPool) string { return pool.Name + "-warmpool" }

// warmPoolNetworkPolicy denies every unclaimed pod of pool all ingress and egress: nothing
// runs in it until a binding claims it, and then the binding's policy (which selects it by
// its new binding label) is the one that applies.
func warmPoolNetworkPolicy(pool *v1alpha1.SandboxWarmPool) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: warmPoolNetworkPolicyName(pool), Namespace: pool.Namespace, Labels: warmPoolLabels(pool)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelWarmPool: pool.Name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
			Egress:      []networkingv1.NetworkPolicyEgressRule{},
		},
	}
}

// podTokenSecret is the Secret a pod reads its token from ("" if none).
func podTokenSecret(pod *corev1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name == "token" && v.Secret != nil {
			return v.Secret.SecretName
		}
	}
	return ""
}

// claimable says whether a binding may take pod from its pool now: a live, ready pool pod
// of the hash, with an address.
func claimable(pod *corev1.Pod, hash string) bool {
	return pod.DeletionTimestamp == nil && pod.Labels[v1alpha1.LabelTemplateHash] == hash &&
		pod.Status.Phase == corev1.PodRunning && podReady(pod) && pod.Status.PodIP != ""
}

// claimOrder sorts claim candidates oldest first (the longest-warm pod goes first, so a
// pool's pods do not age unused), by name on ties.
func claimOrder(pods []*corev1.Pod) {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
}

// warmPoolPlan is what the pool reconciler does to pool's pods now: computed by planWarmPool
// from what it observed, with no I/O, so every case is a table row.
type warmPoolPlan struct {
	// Create is the number of pods to start.
	Create int
	// Remove are the pods to delete: another template's, ended ones, and the surplus.
	Remove []*corev1.Pod
	// Replicas and Ready count the current template's live pods that stay.
	Replicas, Ready int32
	// Waiting is why the first pod that stays is not ready ("" if all are).
	Waiting string
}

// planWarmPool plans toward replicas ready pods of hash, given the pool's unclaimed pods. A
// pod being deleted counts for nothing; a pod of another hash (the template or the
// controller changed) and a pod that ended (it can never serve) go at once; the surplus
// goes not-ready first, then newest first, so the pods most likely to serve soonest stay.
func planWarmPool(pods []*corev1.Pod, hash string, replicas int32, port int32) warmPoolPlan {
	var plan warmPoolPlan
	var keep []*corev1.Pod
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp != nil:
		case p.Labels[v1alpha1.LabelTemplateHash] != hash,
			p.Status.Phase == corev1.PodFailed, p.Status.Phase == corev1.PodSucceeded:
			plan.Remove = append(plan.Remove, p)
		default:
			keep = append(keep, p)
		}
	}
	slices.SortStableFunc(keep, func(a, b *corev1.Pod) int {
		if ra, rb := claimable(a, hash), claimable(b, hash); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	if n := int(replicas); len(keep) > n {
		plan.Remove = append(plan.Remove, keep[n:]...)
		keep = keep[:n]
	}
	plan.Create = int(replicas) - len(keep)
	for _, p := range keep {
		plan.Replicas++
		if claimable(p, hash) {
			plan.Ready++
		} else if plan.Waiting == "" {
			v := viewSandbox(v1alpha1.SandboxBindingStatus{}, p, port)
			plan.Waiting = "pod " + p.Name + ": " + v.Message
		}
	}
	return plan
}
