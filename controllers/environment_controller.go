package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// EnvironmentReconciler keeps an API environment in step with each Environment resource:
// it creates it, sends spec changes as updates and, when the resource is deleted, deletes
// the environment, or archives it while sessions still use it. Like the agent reconciler it
// touches only the environment carrying the resource's UID, and only on a spec change.
type EnvironmentReconciler struct {
	Client     client.Client
	API        API
	Workspaces *Workspaces
	Recorder   events.EventRecorder
}

// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=environments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=environments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=environments/finalizers,verbs=update

// Reconcile brings one Environment's API environment and status up to date.
func (r *EnvironmentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var e v1alpha1.Environment
	if err := r.Client.Get(ctx, req.NamespacedName, &e); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !e.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &e)
	}
	if controllerutil.AddFinalizer(&e, v1alpha1.Finalizer) {
		if err := r.Client.Update(ctx, &e); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	before := e.Status.DeepCopy()
	res, err := r.sync(ctx, &e)
	if statusErr := updateStatusIfChanged(ctx, r.Client, &e, before, &e.Status); statusErr != nil && err == nil {
		err = statusErr
	}
	return res, err
}

func (r *EnvironmentReconciler) sync(ctx context.Context, e *v1alpha1.Environment) (ctrl.Result, error) {
	ws, err := r.Workspaces.For(ctx, e.Namespace)
	if err != nil {
		return notMapped(e, &e.Status.Conditions, r.Recorder, err)
	}
	e.Status.WorkspaceID = ws
	if e.Status.ID == "" {
		found, err := r.adopt(ctx, ws, string(e.UID))
		if err != nil {
			return ctrl.Result{}, err
		}
		if found == nil {
			created, err := r.API.CreateEnvironment(ctx, ws, environmentCreateParams(e))
			if err != nil {
				return refusedResult(e, &e.Status.Conditions, e.Generation, r.Recorder, err)
			}
			found = &created
			r.Recorder.Eventf(e, nil, corev1.EventTypeNormal, "Created", "Create", "created environment %s", created.ID)
		}
		r.observed(e, *found)
		return ctrl.Result{}, nil
	}
	cur, err := r.API.GetEnvironment(ctx, ws, e.Status.ID)
	if err != nil {
		if apiKind(err) == sessions.KindNotFound {
			setReady(&e.Status.Conditions, e.Generation, metav1.ConditionFalse, "NotFound", fmt.Sprintf("environment %s no longer exists in workspace %s", e.Status.ID, ws))
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !ownedBy(cur.Metadata, string(e.UID)) {
		setReady(&e.Status.Conditions, e.Generation, metav1.ConditionFalse, "NotOwned",
			fmt.Sprintf("environment %s does not carry this resource's %s mark; the controller leaves it alone", cur.ID, ownerKey))
		return ctrl.Result{}, nil
	}
	if cur.ArchivedAt != nil {
		setReady(&e.Status.Conditions, e.Generation, metav1.ConditionFalse, "Archived", fmt.Sprintf("environment %s was archived through the API", cur.ID))
		return ctrl.Result{}, nil
	}
	if e.Status.ObservedGeneration == e.Generation || refusedAt(e.Status.Conditions, e.Generation) {
		return ctrl.Result{}, nil
	}
	next, err := r.API.UpdateEnvironment(ctx, ws, cur.ID, environmentUpdateParams(e, cur))
	if err != nil {
		return refusedResult(e, &e.Status.Conditions, e.Generation, r.Recorder, err)
	}
	r.observed(e, next)
	return ctrl.Result{}, nil
}

func (r *EnvironmentReconciler) observed(e *v1alpha1.Environment, env wire.Environment) {
	e.Status.ID, e.Status.ObservedGeneration = env.ID, e.Generation
	setReady(&e.Status.Conditions, e.Generation, metav1.ConditionTrue, "Synced", fmt.Sprintf("environment %s matches the spec", env.ID))
}

func (r *EnvironmentReconciler) adopt(ctx context.Context, ws, uid string) (*wire.Environment, error) {
	p := sessions.ListParams{Limit: listPage, IncludeArchived: true}
	for {
		page, more, err := r.API.ListEnvironments(ctx, ws, p)
		if err != nil {
			return nil, fmt.Errorf("look for an environment created earlier: %w", err)
		}
		for i := range page {
			if ownedBy(page[i].Metadata, uid) {
				return &page[i], nil
			}
		}
		if !more || len(page) == 0 {
			return nil, nil
		}
		last := page[len(page)-1]
		p.After = &sessions.Keyset{CreatedAt: time.Time(last.CreatedAt), ID: last.ID}
	}
}

// finalize deletes the environment the resource owns, or archives it while sessions use it
// (the API refuses to delete it then), and lets the resource go.
func (r *EnvironmentReconciler) finalize(ctx context.Context, e *v1alpha1.Environment) error {
	if !controllerutil.ContainsFinalizer(e, v1alpha1.Finalizer) {
		return nil
	}
	if e.Status.ID == "" {
		// As for agents: a create whose status write was lost is found by its mark.
		if ws, err := r.Workspaces.For(ctx, e.Namespace); err == nil {
			found, err := r.adopt(ctx, ws, string(e.UID))
			if err != nil {
				return err
			}
			if found != nil {
				e.Status.ID, e.Status.WorkspaceID = found.ID, ws
			}
		}
	}
	if e.Status.ID != "" && e.Status.WorkspaceID != "" {
		ws := e.Status.WorkspaceID
		cur, err := r.API.GetEnvironment(ctx, ws, e.Status.ID)
		switch {
		case apiKind(err) == sessions.KindNotFound:
		case err != nil:
			return err
		case ownedBy(cur.Metadata, string(e.UID)):
			err := r.API.DeleteEnvironment(ctx, ws, cur.ID)
			if apiKind(err) == sessions.KindInvalid {
				// Sessions still use it: archived, it takes no new ones and they keep running.
				r.Recorder.Eventf(e, nil, corev1.EventTypeNormal, "Archived", "Delete", "environment %s is used by sessions; archived instead of deleted", cur.ID)
				_, err = r.API.ArchiveEnvironment(ctx, ws, cur.ID)
			}
			if err != nil && apiKind(err) != sessions.KindNotFound {
				return fmt.Errorf("delete environment %s: %w", cur.ID, err)
			}
		}
	}
	controllerutil.RemoveFinalizer(e, v1alpha1.Finalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, e))
}

// SetupWithManager registers the reconciler.
func (r *EnvironmentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.Environment{}).Named("environment").Complete(r)
}

func environmentName(e *v1alpha1.Environment) string {
	if e.Spec.Name != "" {
		return e.Spec.Name
	}
	return e.Name
}

// environmentConfigParam is the spec's config in full: omitted parts are sent as their
// defaults so that an update makes the environment match the spec.
func environmentConfigParam(e *v1alpha1.Environment) *wire.EnvironmentConfigParam {
	c := e.Spec.Config
	if c == nil {
		c = &v1alpha1.EnvironmentConfig{}
	}
	typ := c.Type
	if typ == "" {
		typ = "cloud"
	}
	p := &wire.EnvironmentConfigParam{Type: typ}
	if typ != "cloud" {
		return p
	}
	p.Networking = &wire.NetworkingParam{Type: "unrestricted"}
	if n := c.Networking; n != nil {
		p.Networking = &wire.NetworkingParam{Type: n.Type, AllowedHosts: n.AllowedHosts, AllowMCPServers: n.AllowMCPServers, AllowPackageManagers: n.AllowPackageManagers}
		if p.Networking.Type == "" {
			p.Networking.Type = "unrestricted"
		}
	}
	p.Packages = &wire.PackagesParam{}
	if k := c.Packages; k != nil {
		p.Packages = &wire.PackagesParam{Apt: k.Apt, Cargo: k.Cargo, Gem: k.Gem, Go: k.Go, Npm: k.Npm, Pip: k.Pip}
	}
	return p
}

func environmentCreateParams(e *v1alpha1.Environment) wire.EnvironmentCreateParams {
	md := wire.MetadataParam{}
	for k, v := range e.Spec.Metadata {
		md[k] = v
	}
	md[ownerKey] = string(e.UID)
	return wire.EnvironmentCreateParams{Name: environmentName(e), Description: optional(e.Spec.Description), Config: environmentConfigParam(e), Metadata: md}
}

func environmentUpdateParams(e *v1alpha1.Environment, cur wire.Environment) wire.EnvironmentUpdateParams {
	return wire.EnvironmentUpdateParams{
		Name:        wire.Nullable[string]{Set: true, Value: environmentName(e)},
		Description: nullableText(e.Spec.Description),
		Config:      wire.Nullable[wire.EnvironmentConfigParam]{Set: true, Value: *environmentConfigParam(e)},
		Metadata:    metadataPatch(cur.Metadata, e.Spec.Metadata, string(e.UID)),
	}
}
