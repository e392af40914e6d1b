package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// RemoteSandboxes is what the SandboxBinding controller needs of a remote sandbox provider:
// the same client the worker attaches with (internal/sandbox/e2b, …), so one client serves
// both paths.
type RemoteSandboxes interface {
	// Create is idempotent on spec.Name: a create retried after a lost answer or a status
	// write that failed adopts the sandbox the first one made.
	Create(ctx context.Context, spec sandbox.Spec) (sandbox.Ref, error)
	Destroy(ctx context.Context, ref sandbox.Ref) error
}

// remoteCreateTimeout bounds one reconcile's create at a remote provider (its slow start
// included); a create cut short is retried, and adopts what the first one made.
const remoteCreateTimeout = 5 * time.Minute

// reconcileRemote creates the sandbox of a binding that names a remote provider, once: after
// status.externalID is set it is never created again (a sandbox the provider lost is the
// worker's sandbox.ErrGone on its next attach, never a silent replacement).
func (r *SandboxBindingReconciler) reconcileRemote(ctx context.Context, b *v1alpha1.SandboxBinding, before *v1alpha1.SandboxBindingStatus) error {
	p, ok := r.Remote[b.Spec.Provider]
	if !ok {
		applyView(&b.Status, sandboxView{Phase: v1alpha1.SandboxPending, Ready: metav1.ConditionFalse, Reason: v1alpha1.ReasonNotConfigured,
			Message: fmt.Sprintf("this controller provisions no %q sandboxes (MANAGED_AGENT_CONTROLLER_SANDBOX_PROVIDERS)", b.Spec.Provider)}, b.Generation)
		return r.writeStatus(ctx, b, before)
	}
	if b.Status.ExternalID != "" {
		applyView(&b.Status, remoteView(b), b.Generation)
		return r.writeStatus(ctx, b, before)
	}
	if b.Status.Phase == v1alpha1.SandboxFailed {
		return nil // its setup failed for good: deleting the binding is the way on
	}
	// The cache may not hold the status this controller wrote a moment ago: ask the
	// apiserver before going to the provider, which a create costs round trips at.
	var fresh v1alpha1.SandboxBinding
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(b), &fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	if fresh.Status.ExternalID != "" || fresh.Status.Phase == v1alpha1.SandboxFailed {
		return nil // the event of that write brings the next reconcile
	}
	cctx, cancel := context.WithTimeout(ctx, remoteCreateTimeout)
	defer cancel()
	ref, err := p.Create(cctx, remoteSpec(b))
	switch {
	case errors.Is(err, sandbox.ErrSetup):
		// Permanent (the contract: nothing was made): the binding fails, like a pod that
		// cannot start.
		v := sandboxView{Phase: v1alpha1.SandboxFailed, Ready: metav1.ConditionFalse, Reason: v1alpha1.ReasonPodFailed, Message: err.Error()}
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, v.Reason, "Create", "%s", err.Error())
		applyView(&b.Status, v, b.Generation)
		return r.writeStatus(ctx, b, before)
	case err != nil:
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, v1alpha1.ReasonReconcileFailed, "Create", "%s", err.Error())
		applyView(&b.Status, sandboxView{Phase: v1alpha1.SandboxPending, Ready: metav1.ConditionFalse, Reason: v1alpha1.ReasonRemoteCreating,
			Message: err.Error()}, b.Generation)
		return errors.Join(fmt.Errorf("create the %s sandbox: %w", b.Spec.Provider, err), r.writeStatus(ctx, b, before))
	}
	b.Status.ExternalID = ref.ExternalID
	r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "Created", "Create", "created %s sandbox %s", b.Spec.Provider, ref.ExternalID)
	applyView(&b.Status, remoteView(b), b.Generation)
	return r.writeStatus(ctx, b, before)
}

// remoteView is the status of a binding whose remote sandbox exists.
func remoteView(b *v1alpha1.SandboxBinding) sandboxView {
	return sandboxView{Phase: v1alpha1.SandboxRunning, Ready: metav1.ConditionTrue, Reason: v1alpha1.ReasonRemoteReady,
		Message:  fmt.Sprintf("%s sandbox %s", b.Spec.Provider, b.Status.ExternalID),
		Endpoint: RemoteEndpoint(b.Spec.Provider, b.Status.ExternalID), ExternalID: b.Status.ExternalID}
}

// RemoteEndpoint is the status endpoint of a remote sandbox: the worker attaches through its
// own client of the provider, by the id.
func RemoteEndpoint(provider, id string) string { return provider + "://" + id }

// finalizeRemote destroys the binding's remote sandbox. A binding whose create never got an
// answer has no id: its sandbox, if the provider made one, is found by the session's labels
// when the provider can list them, else left to the worker's orphan sweep.
func (r *SandboxBindingReconciler) finalizeRemote(ctx context.Context, b *v1alpha1.SandboxBinding) error {
	p, ok := r.Remote[b.Spec.Provider]
	if !ok {
		if b.Status.ExternalID == "" {
			return nil // never configured here, so never created
		}
		return fmt.Errorf("cannot destroy %s sandbox %s: this controller has no %q client (MANAGED_AGENT_CONTROLLER_SANDBOX_PROVIDERS)",
			b.Spec.Provider, b.Status.ExternalID, b.Spec.Provider)
	}
	var refs []sandbox.Ref
	if id := b.Status.ExternalID; id != "" {
		refs = append(refs, sandbox.Ref{Provider: b.Spec.Provider, ExternalID: id})
	} else if l, ok := p.(sandbox.Lister); ok {
		all, err := l.List(ctx)
		if err != nil {
			return fmt.Errorf("find the %s sandbox of session %s: %w", b.Spec.Provider, b.Spec.SessionID, err)
		}
		for _, res := range all {
			if res.SessionID == b.Spec.SessionID {
				refs = append(refs, res.Ref)
			}
		}
	}
	var errs []error
	for _, ref := range refs {
		if err := p.Destroy(ctx, ref); err != nil && !errors.Is(err, sandbox.ErrGone) {
			errs = append(errs, fmt.Errorf("destroy %s sandbox %s: %w", ref.Provider, ref.ExternalID, err))
			continue
		}
		r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "Destroyed", "Delete", "destroyed %s sandbox %s", ref.Provider, ref.ExternalID)
	}
	return errors.Join(errs...)
}

// remoteSpec is the sandbox spec of a remote binding: what the worker's kubernetes provider
// wrote into it from the session's spec.
func remoteSpec(b *v1alpha1.SandboxBinding) sandbox.Spec {
	s := sandbox.Spec{Name: b.Name, SessionID: b.Spec.SessionID, Image: b.Spec.Image}
	if q, ok := b.Spec.Resources.Limits[corev1.ResourceCPU]; ok {
		s.Resources.MilliCPU = q.MilliValue()
	}
	if q, ok := b.Spec.Resources.Limits[corev1.ResourceMemory]; ok {
		s.Resources.MemoryBytes = q.Value()
	}
	if b.Spec.WorkspaceSize != nil {
		s.Resources.DiskBytes = b.Spec.WorkspaceSize.Value()
	}
	for _, e := range b.Spec.Env {
		if s.Env == nil {
			s.Env = map[string]string{}
		}
		s.Env[e.Name] = e.Value
	}
	switch b.Spec.Network.Egress {
	case v1alpha1.EgressFull:
		s.Egress = sandbox.Egress{Mode: sandbox.EgressFull}
	case v1alpha1.EgressHosts:
		s.Egress = sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: append([]string(nil), b.Spec.Network.Hosts...)}
	default:
		s.Egress = sandbox.Egress{Mode: sandbox.EgressNone}
	}
	return s
}
