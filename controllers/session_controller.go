package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// DefaultResync is how often a Session's status is refreshed without a wake-up: a backstop
// for a lost notification, not the way status normally moves.
const DefaultResync = 5 * time.Minute

// SessionKey is the idempotency key a Session's session is created with: its UID, so every
// attempt for one resource, by any controller replica and after any crash, creates the same
// single session. The prefix keeps it apart from keys REST clients send.
func SessionKey(uid types.UID) string { return "kubernetes:" + string(uid) }

// SessionReconciler creates a session for each Session resource, keeps the resource's
// status in step with it and deletes it when the resource is deleted.
type SessionReconciler struct {
	Client     client.Client
	API        API
	Workspaces *Workspaces
	Recorder   events.EventRecorder
	// Events brings the wake-ups of committed events; without it status moves only on the
	// resync.
	Events *SessionEvents
	// Resync is the backstop refresh period; zero means DefaultResync.
	Resync time.Duration
	// AfterCreate, if set, runs once a session is created, before the status records it; an
	// error aborts the reconcile there. Tests use it to stop a controller at the worst moment.
	AfterCreate func(ctx context.Context, sessionID string) error
}

// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=sessions,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=sessions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agents.managed-agents.io,resources=sessions/finalizers,verbs=update

// Reconcile brings one Session's session and status up to date.
func (r *SessionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s v1alpha1.Session
	if err := r.Client.Get(ctx, req.NamespacedName, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := s.Status.DeepCopy()
	var res ctrl.Result
	var err error
	if !s.DeletionTimestamp.IsZero() {
		res, err = r.finalize(ctx, &s)
		if !controllerutil.ContainsFinalizer(&s, v1alpha1.Finalizer) {
			return res, err // gone, or going: no status to write
		}
	} else {
		if controllerutil.AddFinalizer(&s, v1alpha1.Finalizer) {
			if err := r.Client.Update(ctx, &s); err != nil {
				return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
			}
		}
		res, err = r.sync(ctx, &s)
	}
	if statusErr := updateStatusIfChanged(ctx, r.Client, &s, before, &s.Status); statusErr != nil && err == nil {
		err = statusErr
	}
	return res, err
}

func (r *SessionReconciler) sync(ctx context.Context, s *v1alpha1.Session) (ctrl.Result, error) {
	ws, err := r.Workspaces.For(ctx, s.Namespace)
	if err != nil {
		if errors.As(err, new(ErrNamespaceNotMapped)) {
			return r.blocked(s, "NamespaceNotMapped", err.Error()), nil
		}
		return ctrl.Result{}, err
	}
	s.Status.WorkspaceID = ws
	if s.Status.SessionID == "" {
		if refusedAt(s.Status.Conditions, s.Generation) {
			return ctrl.Result{}, nil // the API refused this spec; a new generation retries
		}
		sess, found, err := r.API.SessionByKey(ctx, ws, SessionKey(s.UID))
		if err != nil {
			return ctrl.Result{}, err
		}
		if !found {
			var res *ctrl.Result
			if sess, res, err = r.create(ctx, ws, s); res != nil || err != nil {
				return deref(res), err
			}
		}
		s.Status.SessionID = sess.ID
		s.Status.ObservedGeneration = s.Generation // title and metadata went with the create
	} else if s.Status.ObservedGeneration != s.Generation {
		if err := r.update(ctx, ws, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	if r.Events != nil {
		r.Events.track(s.Status.SessionID, types.NamespacedName{Namespace: s.Namespace, Name: s.Name})
	}
	if err := r.observe(ctx, ws, s, false); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.resync()}, nil
}

// create resolves the agent and environment and creates the session with the initial
// message. A non-nil result means the session is not created and the reconcile ends there.
func (r *SessionReconciler) create(ctx context.Context, ws string, s *v1alpha1.Session) (wire.Session, *ctrl.Result, error) {
	agentRef, reason, msg, err := r.resolveAgent(ctx, s)
	if err != nil || reason != "" {
		res := r.blocked(s, reason, msg)
		return wire.Session{}, &res, err
	}
	envID, reason, msg, err := r.resolveEnvironment(ctx, s)
	if err != nil || reason != "" {
		res := r.blocked(s, reason, msg)
		return wire.Session{}, &res, err
	}
	params, err := sessionCreateParams(s, agentRef, envID)
	if err != nil {
		return wire.Session{}, nil, err
	}
	sess, err := r.API.CreateSessionKeyed(ctx, ws, SessionKey(s.UID), params)
	if err != nil {
		switch apiKind(err) {
		case sessions.KindNotFound:
			reason := "AgentNotFound"
			if strings.HasPrefix(err.Error(), "environment") {
				reason = "EnvironmentNotFound"
			}
			res := r.blocked(s, reason, err.Error())
			return wire.Session{}, &res, nil
		case sessions.KindInvalid, sessions.KindKeyReused, sessions.KindConflict:
			res := r.blocked(s, "Invalid", err.Error())
			return wire.Session{}, &res, nil
		case sessions.KindRateLimited:
			// The workspace's quota on running sessions: created once another session is idle.
			res := r.blocked(s, "QuotaExceeded", err.Error())
			return wire.Session{}, &res, nil
		}
		return wire.Session{}, nil, fmt.Errorf("create session: %w", err)
	}
	if r.AfterCreate != nil {
		if err := r.AfterCreate(ctx, sess.ID); err != nil {
			return wire.Session{}, nil, err
		}
	}
	r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, "Created", "Create", "created session %s", sess.ID)
	return sess, nil, nil
}

// blocked records why the session cannot be created yet and when to look again: soon at
// first, then less often (up to two minutes) the longer it stays blocked. A change of the
// named Agent or Environment reconciles at once anyway.
func (r *SessionReconciler) blocked(s *v1alpha1.Session, reason, msg string) ctrl.Result {
	prev := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
	if prev == nil || prev.Reason != reason || prev.Message != msg {
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, reason, "Create", "%s", msg)
	}
	for _, c := range sessionConditions(sessionState{Blocked: reason, Message: msg}, s.Generation) {
		meta.SetStatusCondition(&s.Status.Conditions, c)
	}
	if reason == "Invalid" {
		return ctrl.Result{}
	}
	since := time.Second
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		since = time.Since(c.LastTransitionTime.Time)
	}
	return ctrl.Result{RequeueAfter: min(max(since, time.Second), 2*time.Minute)}
}

// agentParam is the session's agent as the create body wants it.
type agentParam struct {
	ID      string
	Version *int64
}

func (r *SessionReconciler) resolveAgent(ctx context.Context, s *v1alpha1.Session) (agentParam, string, string, error) {
	if s.Spec.AgentID != "" {
		return agentParam{ID: s.Spec.AgentID, Version: s.Spec.AgentVersion}, "", "", nil
	}
	if s.Spec.AgentRef == nil {
		return agentParam{}, "Invalid", "spec names no agent: set agentRef or agentID", nil
	}
	var a v1alpha1.Agent
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.AgentRef.Name}, &a)
	if client.IgnoreNotFound(err) != nil {
		return agentParam{}, "", "", err
	}
	if err != nil {
		return agentParam{}, "AgentNotFound", fmt.Sprintf("Agent %q does not exist in namespace %s", s.Spec.AgentRef.Name, s.Namespace), nil
	}
	if a.Status.ID == "" {
		return agentParam{}, "AgentNotFound", fmt.Sprintf("Agent %q has no API agent yet (see its Ready condition)", a.Name), nil
	}
	return agentParam{ID: a.Status.ID, Version: s.Spec.AgentVersion}, "", "", nil
}

func (r *SessionReconciler) resolveEnvironment(ctx context.Context, s *v1alpha1.Session) (string, string, string, error) {
	if s.Spec.EnvironmentID != "" {
		return s.Spec.EnvironmentID, "", "", nil
	}
	if s.Spec.EnvironmentRef == nil {
		return "", "Invalid", "spec names no environment: set environmentRef or environmentID", nil
	}
	var e v1alpha1.Environment
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.EnvironmentRef.Name}, &e)
	if client.IgnoreNotFound(err) != nil {
		return "", "", "", err
	}
	if err != nil {
		return "", "EnvironmentNotFound", fmt.Sprintf("Environment %q does not exist in namespace %s", s.Spec.EnvironmentRef.Name, s.Namespace), nil
	}
	if e.Status.ID == "" {
		return "", "EnvironmentNotFound", fmt.Sprintf("Environment %q has no API environment yet (see its Ready condition)", e.Name), nil
	}
	return e.Status.ID, "", "", nil
}

// update sends a change of title or metadata.
func (r *SessionReconciler) update(ctx context.Context, ws string, s *v1alpha1.Session) error {
	cur, err := r.API.GetSession(ctx, ws, s.Status.SessionID)
	if err != nil {
		if apiKind(err) == sessions.KindNotFound {
			return nil // observe reports it
		}
		return err
	}
	md := wire.MetadataPatch{}
	for k := range cur.Metadata {
		if _, keep := s.Spec.Metadata[k]; !keep {
			md[k] = nil
		}
	}
	for k, v := range s.Spec.Metadata {
		md[k] = &v
	}
	_, err = r.API.UpdateSession(ctx, ws, cur.ID, wire.SessionUpdateParams{Title: nullableText(s.Spec.Title), Metadata: md})
	switch apiKind(err) {
	case 0:
		if err != nil {
			return fmt.Errorf("update session %s: %w", cur.ID, err)
		}
	case sessions.KindConflict: // terminated or archived: read-only, nothing to update
	default:
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, "Invalid", "Update", "the API refused the update: %s", err.Error())
	}
	s.Status.ObservedGeneration = s.Generation
	return nil
}

// observe copies the session and the news of its log into status and computes the
// conditions.
func (r *SessionReconciler) observe(ctx context.Context, ws string, s *v1alpha1.Session, deleting bool) error {
	id := s.Status.SessionID
	sess, err := r.API.GetSession(ctx, ws, id)
	if apiKind(err) == sessions.KindNotFound {
		for _, c := range sessionConditions(sessionState{Blocked: "SessionNotFound", Message: fmt.Sprintf("session %s no longer exists (deleted through the API)", id)}, s.Generation) {
			meta.SetStatusCondition(&s.Status.Conditions, c)
		}
		return nil
	}
	if err != nil {
		return err
	}
	st := &s.Status
	st.Status, st.AgentID, st.AgentVersion, st.EnvironmentID = sess.Status, sess.Agent.ID, sess.Agent.Version, sess.EnvironmentID
	st.Usage = usageStatus(sess.Usage)

	last, err := r.lastEvent(ctx, ws, id)
	if err != nil {
		return err
	}
	if last != nil {
		st.LastEventID = last.ID
		t := metav1.NewTime(last.CreatedAt)
		st.LastEventTime = &t
	}
	msg, err := r.lastEvent(ctx, ws, id, wire.EventAgentMessage)
	if err != nil {
		return err
	}
	if msg != nil {
		body, err := wire.DecodeBody[wire.MessageBody](*msg)
		if err != nil {
			return err
		}
		st.LastAgentMessage = messageText(body)
	}
	idleEv, err := r.lastEvent(ctx, ws, id, wire.EventSessionStatusIdle)
	if err != nil {
		return err
	}
	var idle wire.StatusIdleBody
	if idleEv != nil {
		if idle, err = wire.DecodeBody[wire.StatusIdleBody](*idleEv); err != nil {
			return err
		}
	}
	st.StopReason, st.RequiredActionEventIDs = "", nil
	if sess.Status == wire.SessionStatusIdle {
		st.StopReason, st.RequiredActionEventIDs = idle.StopReason.Type, idle.StopReason.EventIDs
	}
	errEv, err := r.lastEvent(ctx, ws, id, wire.EventSessionError)
	if err != nil {
		return err
	}
	st.LastError = ""
	if errEv != nil && (idleEv == nil || errEv.Seq > idleEv.Seq || idle.StopReason.Type == wire.StopRetriesExhausted) {
		body, err := wire.DecodeBody[wire.SessionErrorBody](*errEv)
		if err != nil {
			return err
		}
		st.LastError = cut(body.Error.Message)
	}
	for _, c := range sessionConditions(sessionState{Status: sess.Status, StopReason: idle.StopReason.Type, Deleting: deleting}, s.Generation) {
		meta.SetStatusCondition(&st.Conditions, c)
	}
	return nil
}

// lastEvent is the newest event of the session's log of one of types (any type when none
// is given), nil for none.
func (r *SessionReconciler) lastEvent(ctx context.Context, ws, id string, types ...string) (*wire.Event, error) {
	var out *wire.Event
	_, err := r.API.StreamEvents(ctx, ws, id, sessions.EventListParams{Limit: 1, Desc: true, Types: types}, func(ev wire.Event) (bool, error) {
		out = &ev
		return true, nil
	})
	if err != nil && apiKind(err) != sessions.KindNotFound {
		return nil, fmt.Errorf("read the log of session %s: %w", id, err)
	}
	return out, nil
}

// finalize deletes the session (the two-part delete: it returns without waiting for a
// sandbox teardown and is called again until the session is gone) and then lets the
// resource go. A running session is interrupted first.
func (r *SessionReconciler) finalize(ctx context.Context, s *v1alpha1.Session) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s, v1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	ws := s.Status.WorkspaceID
	if ws == "" {
		var err error
		if ws, err = r.Workspaces.For(ctx, s.Namespace); err != nil {
			if !errors.As(err, new(ErrNamespaceNotMapped)) {
				return ctrl.Result{}, err
			}
		}
	}
	id := s.Status.SessionID
	if id == "" && ws != "" {
		// A create may have committed without its status write (a crash in between).
		sess, found, err := r.API.SessionByKey(ctx, ws, SessionKey(s.UID))
		if err != nil {
			return ctrl.Result{}, err
		}
		if found {
			id = sess.ID
		}
	}
	if id != "" && ws != "" {
		finished, err := r.API.BeginDelete(ctx, ws, id)
		switch apiKind(err) {
		case 0:
			if err != nil {
				return ctrl.Result{}, fmt.Errorf("delete session %s: %w", id, err)
			}
		case sessions.KindNotFound:
			finished = true
		case sessions.KindInvalid:
			// Running: interrupt it; the turn ends soon and the wake-up brings us back.
			// Keyed by the deletion, so the requeues below send it once, not every 2 s for
			// as long as the turn takes to end (or the worker is down).
			interrupt := json.RawMessage(`{"type":"user.interrupt"}`)
			key := fmt.Sprintf("kubernetes-delete:%s:%d", s.UID, s.DeletionTimestamp.Unix())
			if _, err := r.API.SendEventsKeyed(ctx, ws, id, key, []json.RawMessage{interrupt}); err != nil && apiKind(err) == 0 {
				return ctrl.Result{}, fmt.Errorf("interrupt session %s before its delete: %w", id, err)
			}
			if s.Status.SessionID != "" {
				if err := r.observe(ctx, ws, s, true); err != nil {
					return ctrl.Result{}, err
				}
			}
			return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
		default:
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		}
		if !finished {
			gone, err := r.API.SessionDeleted(ctx, ws, id)
			if err != nil {
				return ctrl.Result{}, err
			}
			if !gone {
				// The teardown runs in the worker; look again shortly.
				return ctrl.Result{RequeueAfter: deleteRecheck(time.Since(s.DeletionTimestamp.Time))}, nil
			}
		}
		r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, "Deleted", "Delete", "deleted session %s", id)
		if r.Events != nil {
			r.Events.forget(id)
		}
	}
	controllerutil.RemoveFinalizer(s, v1alpha1.Finalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Update(ctx, s))
}

// deleteRecheck is when to look again at a delete whose teardown began deleting ago: soon at
// first (a teardown takes seconds), then less often, up to a minute. Each look begins the
// delete again, which starts a teardown that failed anew, so a teardown that keeps failing
// is retried with this backoff rather than every second for as long as it fails.
func deleteRecheck(deleting time.Duration) time.Duration {
	return min(max(deleting/2, time.Second), time.Minute)
}

func (r *SessionReconciler) resync() time.Duration {
	if r.Resync > 0 {
		return r.Resync
	}
	return DefaultResync
}

// Field indexes of Sessions by the Agent and Environment they name, so a change of one
// reconciles the Sessions waiting for it.
const (
	indexAgentRef       = "spec.agentRef.name"
	indexEnvironmentRef = "spec.environmentRef.name"
)

// SetupWithManager registers the reconciler: it watches Sessions (spec changes and
// deletions, not its own status writes), the Agents and Environments they name, and the
// committed-event wake-ups.
func (r *SessionReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha1.Session{}, indexAgentRef, func(o client.Object) []string {
		if ref := o.(*v1alpha1.Session).Spec.AgentRef; ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1alpha1.Session{}, indexEnvironmentRef, func(o client.Object) []string {
		if ref := o.(*v1alpha1.Session).Spec.EnvironmentRef; ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Session{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("session").
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Watches(&v1alpha1.Agent{}, handler.EnqueueRequestsFromMapFunc(r.referencing(indexAgentRef))).
		Watches(&v1alpha1.Environment{}, handler.EnqueueRequestsFromMapFunc(r.referencing(indexEnvironmentRef)))
	if r.Events != nil {
		b = b.WatchesRawSource(r.Events.Source())
	}
	return b.Complete(r)
}

func (r *SessionReconciler) referencing(index string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list v1alpha1.SessionList
		if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, s := range list.Items {
			if s.Status.SessionID == "" { // only Sessions still waiting care
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
			}
		}
		return out
	}
}

// sessionCreateParams is the REST create body the spec stands for.
func sessionCreateParams(s *v1alpha1.Session, agent agentParam, envID string) (wire.SessionCreateParams, error) {
	var agentJSON []byte
	var err error
	if agent.Version == nil {
		agentJSON, err = json.Marshal(agent.ID)
	} else {
		agentJSON, err = json.Marshal(map[string]any{"type": "agent", "id": agent.ID, "version": *agent.Version})
	}
	if err != nil {
		return wire.SessionCreateParams{}, fmt.Errorf("encode agent: %w", err)
	}
	p := wire.SessionCreateParams{Agent: agentJSON, EnvironmentID: envID, Title: optional(s.Spec.Title)}
	if len(s.Spec.Metadata) > 0 {
		p.Metadata = wire.MetadataParam(s.Spec.Metadata)
	}
	if s.Spec.InitialMessage != "" {
		msg, err := json.Marshal(map[string]any{"type": wire.EventUserMessage, "content": wire.NewTextBlocks(s.Spec.InitialMessage)})
		if err != nil {
			return wire.SessionCreateParams{}, fmt.Errorf("encode initial message: %w", err)
		}
		p.InitialEvents = []json.RawMessage{msg}
	}
	return p, nil
}

func deref(r *ctrl.Result) ctrl.Result {
	if r == nil {
		return ctrl.Result{}
	}
	return *r
}
