package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
)

const ownerKey = v1alpha1.OwnerMetadataKey

// AgentReconciler keeps an API agent in step with each Agent resource: it creates the
// agent, sends every spec change as an update (a new agent version when something changed)
// and archives the agent when the resource is deleted. It only ever touches the agent it
// created (the one whose metadata carries the resource's UID), and only when the spec
// changes: an agent changed through the REST API stays as the REST client left it until the
// next spec change.
type AgentReconciler struct {
	Client     client.Client
	API        API
	Workspaces *Workspaces
	Recorder   events.EventRecorder
}

// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=agents,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=agents/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=agents/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one Agent's API agent and status up to date.
func (r *AgentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var a v1alpha1.Agent
	if err := r.Client.Get(ctx, req.NamespacedName, &a); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !a.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &a)
	}
	if controllerutil.AddFinalizer(&a, v1alpha1.Finalizer) {
		if err := r.Client.Update(ctx, &a); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	before := a.Status.DeepCopy()
	res, err := r.sync(ctx, &a)
	if statusErr := updateStatusIfChanged(ctx, r.Client, &a, before, &a.Status); statusErr != nil && err == nil {
		err = statusErr
	}
	return res, err
}

func (r *AgentReconciler) sync(ctx context.Context, a *v1alpha1.Agent) (ctrl.Result, error) {
	ws, err := r.Workspaces.For(ctx, a.Namespace)
	if err != nil {
		return notMapped(a, &a.Status.Conditions, r.Recorder, err)
	}
	a.Status.WorkspaceID = ws
	if a.Status.ID == "" {
		found, err := r.adopt(ctx, ws, string(a.UID))
		if err != nil {
			return ctrl.Result{}, err
		}
		if found == nil {
			params, err := agentCreateParams(a)
			if err != nil {
				return r.refused(a, err)
			}
			created, err := r.API.CreateAgent(ctx, ws, params)
			if err != nil {
				return r.refused(a, err)
			}
			found = &created
			r.Recorder.Eventf(a, nil, corev1.EventTypeNormal, "Created", "Create", "created agent %s", created.ID)
		}
		r.observed(a, *found)
		return ctrl.Result{}, nil
	}
	cur, err := r.API.GetAgent(ctx, ws, a.Status.ID, 0)
	if err != nil {
		if apiKind(err) == sessions.KindNotFound {
			setReady(&a.Status.Conditions, a.Generation, metav1.ConditionFalse, "NotFound", fmt.Sprintf("agent %s no longer exists in workspace %s", a.Status.ID, ws))
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !ownedBy(cur.Metadata, string(a.UID)) {
		setReady(&a.Status.Conditions, a.Generation, metav1.ConditionFalse, "NotOwned",
			fmt.Sprintf("agent %s does not carry this resource's %s mark; the controller leaves it alone", cur.ID, ownerKey))
		return ctrl.Result{}, nil
	}
	if cur.ArchivedAt != nil {
		setReady(&a.Status.Conditions, a.Generation, metav1.ConditionFalse, "Archived", fmt.Sprintf("agent %s was archived through the API", cur.ID))
		a.Status.Version = cur.Version
		return ctrl.Result{}, nil
	}
	if a.Status.ObservedGeneration == a.Generation || refusedAt(a.Status.Conditions, a.Generation) {
		a.Status.Version = cur.Version // a REST client may have made newer versions
		return ctrl.Result{}, nil
	}
	params, err := agentUpdateParams(a, cur)
	if err != nil {
		return r.refused(a, err)
	}
	next, err := r.API.UpdateAgent(ctx, ws, cur.ID, params)
	if err != nil {
		return r.refused(a, err)
	}
	if next.Version != cur.Version {
		r.Recorder.Eventf(a, nil, corev1.EventTypeNormal, "Updated", "Update", "agent %s is at version %d", next.ID, next.Version)
	}
	r.observed(a, next)
	return ctrl.Result{}, nil
}

func (r *AgentReconciler) observed(a *v1alpha1.Agent, ag wire.Agent) {
	a.Status.ID, a.Status.Version, a.Status.ObservedGeneration = ag.ID, ag.Version, a.Generation
	setReady(&a.Status.Conditions, a.Generation, metav1.ConditionTrue, "Synced", fmt.Sprintf("agent %s version %d matches the spec", ag.ID, ag.Version))
}

// refused records an error: a rule violation (the spec is wrong) is a condition and an event
// and is not retried until the spec changes; anything else is retried with backoff.
func (r *AgentReconciler) refused(a *v1alpha1.Agent, err error) (ctrl.Result, error) {
	return refusedResult(a, &a.Status.Conditions, a.Generation, r.Recorder, err)
}

// adopt finds the agent an earlier attempt created for the resource (a crash between the
// create and the status write), so a retry never creates a second one.
func (r *AgentReconciler) adopt(ctx context.Context, ws, uid string) (*wire.Agent, error) {
	p := sessions.ListParams{Limit: listPage, IncludeArchived: true}
	for {
		page, more, err := r.API.ListAgents(ctx, ws, p)
		if err != nil {
			return nil, fmt.Errorf("look for an agent created earlier: %w", err)
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

// finalize archives the agent the resource owns, then lets the resource go.
func (r *AgentReconciler) finalize(ctx context.Context, a *v1alpha1.Agent) error {
	if !controllerutil.ContainsFinalizer(a, v1alpha1.Finalizer) {
		return nil
	}
	if a.Status.ID == "" {
		// A create may have committed without its status write (a crash in between): find
		// the agent by the mark it carries, or it would outlive its resource.
		if ws, err := r.Workspaces.For(ctx, a.Namespace); err == nil {
			found, err := r.adopt(ctx, ws, string(a.UID))
			if err != nil {
				return err
			}
			if found != nil {
				a.Status.ID, a.Status.WorkspaceID = found.ID, ws
			}
		}
	}
	if a.Status.ID != "" && a.Status.WorkspaceID != "" {
		cur, err := r.API.GetAgent(ctx, a.Status.WorkspaceID, a.Status.ID, 0)
		switch {
		case apiKind(err) == sessions.KindNotFound:
		case err != nil:
			return err
		case ownedBy(cur.Metadata, string(a.UID)) && cur.ArchivedAt == nil:
			if _, err := r.API.ArchiveAgent(ctx, a.Status.WorkspaceID, cur.ID); err != nil && apiKind(err) != sessions.KindNotFound {
				return fmt.Errorf("archive agent %s: %w", cur.ID, err)
			}
		}
	}
	controllerutil.RemoveFinalizer(a, v1alpha1.Finalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, a))
}

// SetupWithManager registers the reconciler.
func (r *AgentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.Agent{}).Named("agent").Complete(r)
}

// agentName is the API name: the spec's, else the resource's.
func agentName(a *v1alpha1.Agent) string {
	if a.Spec.Name != "" {
		return a.Spec.Name
	}
	return a.Name
}

// agentCreateParams is the REST create body the spec stands for, with the ownership mark.
func agentCreateParams(a *v1alpha1.Agent) (wire.AgentCreateParams, error) {
	tools, err := rawList(a.Spec.Tools)
	if err != nil {
		return wire.AgentCreateParams{}, err
	}
	servers, err := rawList(a.Spec.MCPServers)
	if err != nil {
		return wire.AgentCreateParams{}, err
	}
	md := wire.MetadataParam{ownerKey: string(a.UID)}
	for k, v := range a.Spec.Metadata {
		md[k] = v
	}
	md[ownerKey] = string(a.UID)
	model := modelParam(a.Spec.Model)
	return wire.AgentCreateParams{Name: agentName(a), Model: &model, Description: optional(a.Spec.Description), System: optional(a.Spec.System),
		Tools: tools, MCPServers: servers, Skills: skillParams(a.Spec.Skills), ExecutionIdentity: executionIdentity(a.Spec.ExecutionIdentity), Metadata: md}, nil
}

// agentUpdateParams makes the agent match the spec: every field is sent (an empty one
// clears), and metadata keys the spec no longer has are removed.
func agentUpdateParams(a *v1alpha1.Agent, cur wire.Agent) (wire.AgentUpdateParams, error) {
	tools, err := rawList(a.Spec.Tools)
	if err != nil {
		return wire.AgentUpdateParams{}, err
	}
	servers, err := rawList(a.Spec.MCPServers)
	if err != nil {
		return wire.AgentUpdateParams{}, err
	}
	p := wire.AgentUpdateParams{
		Name:        wire.Nullable[string]{Set: true, Value: agentName(a)},
		Model:       wire.Nullable[wire.ModelParam]{Set: true, Value: modelParam(a.Spec.Model)},
		Description: nullableText(a.Spec.Description),
		System:      nullableText(a.Spec.System),
		Tools:       wire.Nullable[json.RawMessage]{Set: true, Null: tools == nil, Value: tools},
		MCPServers:  wire.Nullable[json.RawMessage]{Set: true, Null: servers == nil, Value: servers},
		Skills:      wire.Nullable[[]wire.SkillParam]{Set: true, Value: skillParams(a.Spec.Skills)},
		Metadata:    metadataPatch(cur.Metadata, a.Spec.Metadata, string(a.UID)),
	}
	if ei := executionIdentity(a.Spec.ExecutionIdentity); ei != nil {
		p.ExecutionIdentity = wire.Nullable[wire.ExecutionIdentity]{Set: true, Value: *ei}
	} else {
		p.ExecutionIdentity = wire.Nullable[wire.ExecutionIdentity]{Set: true, Null: true}
	}
	return p, nil
}

func modelParam(m v1alpha1.AgentModel) wire.ModelParam {
	p := wire.ModelParam{ID: m.ID, Speed: m.Speed, InferenceGeo: m.InferenceGeo}
	if m.Effort != "" {
		p.Effort = &wire.Effort{Type: m.Effort}
	}
	return p
}

func executionIdentity(in *v1alpha1.AgentExecutionIdentity) *wire.ExecutionIdentity {
	if in == nil {
		return nil
	}
	return &wire.ExecutionIdentity{Type: in.Type, RoleARN: in.RoleARN}
}

func skillParams(in []v1alpha1.AgentSkill) []wire.SkillParam {
	out := make([]wire.SkillParam, len(in))
	for i, s := range in {
		out[i] = wire.SkillParam{Type: s.Type, SkillID: s.SkillID, Version: s.Version}
	}
	return out
}

// rawList is a JSON array of the entries, nil for none.
func rawList(in []runtime.RawExtension) (json.RawMessage, error) {
	if len(in) == 0 {
		return nil, nil
	}
	items := make([]json.RawMessage, len(in))
	for i, e := range in {
		if len(e.Raw) == 0 {
			return nil, &sessions.Error{Kind: sessions.KindInvalid, Message: fmt.Sprintf("entry %d: must be a JSON object", i)}
		}
		items[i] = e.Raw
	}
	b, err := json.Marshal(items)
	if err != nil {
		return nil, &sessions.Error{Kind: sessions.KindInvalid, Message: err.Error()}
	}
	return b, nil
}

// metadataPatch turns cur into want plus the ownership mark.
func metadataPatch(cur, want map[string]string, uid string) wire.MetadataPatch {
	p := wire.MetadataPatch{}
	for k := range cur {
		if _, keep := want[k]; !keep && k != ownerKey {
			p[k] = nil
		}
	}
	for k, v := range want {
		p[k] = &v
	}
	p[ownerKey] = &uid
	return p
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullableText(s string) wire.Nullable[string] {
	return wire.Nullable[string]{Set: true, Null: s == "", Value: s}
}

// Conditions and results shared by the reconcilers.

func setReady(conds *[]metav1.Condition, gen int64, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
}

// refusedAt: the API refused this generation's spec already; it is not sent again until the
// spec changes.
func refusedAt(conds []metav1.Condition, gen int64) bool {
	c := meta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Invalid" && c.ObservedGeneration == gen
}

func refusedResult(obj runtime.Object, conds *[]metav1.Condition, gen int64, rec events.EventRecorder, err error) (ctrl.Result, error) {
	switch apiKind(err) {
	case sessions.KindInvalid, sessions.KindConflict, sessions.KindKeyReused, sessions.KindNotFound:
		reason := "Invalid"
		if apiKind(err) == sessions.KindConflict {
			reason = "Conflict"
		}
		setReady(conds, gen, metav1.ConditionFalse, reason, err.Error())
		rec.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Sync", "the API refused the spec: %s", err.Error())
		if reason == "Conflict" {
			// Another API object holds the name; it may go away.
			return ctrl.Result{RequeueAfter: time.Minute}, nil
		}
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

func notMapped(obj runtime.Object, conds *[]metav1.Condition, rec events.EventRecorder, err error) (ctrl.Result, error) {
	var nm ErrNamespaceNotMapped
	if !errors.As(err, &nm) {
		return ctrl.Result{}, err
	}
	setReady(conds, 0, metav1.ConditionFalse, "NamespaceNotMapped", err.Error())
	rec.Eventf(obj, nil, corev1.EventTypeWarning, "NamespaceNotMapped", "Sync", "%s", err.Error())
	return ctrl.Result{RequeueAfter: 5 * time.Minute}, nil
}

// updateStatusIfChanged writes status when the reconcile changed it.
func updateStatusIfChanged(ctx context.Context, c client.Client, obj client.Object, before, after any) error {
	if equalJSON(before, after) {
		return nil
	}
	if err := c.Status().Update(ctx, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
