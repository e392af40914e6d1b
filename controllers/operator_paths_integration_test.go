//go:build integration

package controllers_test

import (
	"context"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/controllers"
	"github.com/managed-agents/managed-agents/internal/ids"
)

// The paths TestOperator does not walk: Sessions naming API objects by id, and an Agent
// deleted after its status write was lost.
func TestOperatorAPIObjectsAndLostStatus(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	ctrl := s.startController(nil)
	defer func() { ctrl.stop(t) }()

	t.Run("a Session naming an agent and environment by id, pinned to version 1", func(t *testing.T) {
		agent, err := s.sdk.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "rest-" + ids.New(""),
			Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"}})
		require.NoError(t, err)
		require.Equal(t, int64(1), agent.Version)
		env, err := s.sdk.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "rest-" + ids.New("")})
		require.NoError(t, err)
		v2, err := s.sdk.Beta.Agents.Update(ctx, agent.ID, anthropic.BetaAgentUpdateParams{System: param.NewOpt("version two")})
		require.NoError(t, err)
		require.Equal(t, int64(2), v2.Version)

		one := int64(1)
		pinned := &v1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pinned"}, Spec: v1alpha1.SessionSpec{
			AgentID: agent.ID, AgentVersion: &one, EnvironmentID: env.ID, InitialMessage: "pinned"}}
		latest := &v1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "latest"}, Spec: v1alpha1.SessionSpec{
			AgentID: agent.ID, EnvironmentID: env.ID, InitialMessage: "latest"}}
		require.NoError(t, s.k8s.Create(ctx, pinned))
		require.NoError(t, s.k8s.Create(ctx, latest))

		for _, c := range []struct {
			name, answer string
			version      int64
		}{{"pinned", "echo: pinned", 1}, {"latest", "echo: latest", 2}} {
			got := s.session("default", c.name, idleWith(c.answer))
			require.Equal(t, agent.ID, got.Status.AgentID, c.name)
			require.Equal(t, c.version, got.Status.AgentVersion, c.name)
			require.Equal(t, env.ID, got.Status.EnvironmentID, c.name)
			sess, err := s.sdk.Beta.Sessions.Get(ctx, got.Status.SessionID, anthropic.BetaSessionGetParams{})
			require.NoError(t, err)
			require.Equal(t, agent.ID, sess.Agent.ID, c.name)
			require.Equal(t, c.version, sess.Agent.Version, c.name)
			require.Equal(t, env.ID, sess.EnvironmentID, c.name)
		}
	})

	t.Run("a Session naming an agent id that does not exist waits with a condition", func(t *testing.T) {
		env, err := s.sdk.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "rest-" + ids.New("")})
		require.NoError(t, err)
		missing := "agent_" + ids.New("")
		ghost := &v1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ghost"}, Spec: v1alpha1.SessionSpec{
			AgentID: missing, EnvironmentID: env.ID, InitialMessage: "anyone?"}}
		require.NoError(t, s.k8s.Create(ctx, ghost))
		got := s.session("default", "ghost", func(s *v1alpha1.Session) bool {
			c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Reason == "AgentNotFound"
		})
		require.Empty(t, got.Status.SessionID)
		require.Contains(t, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message, missing)
		// Waiting for the agent is not a failure of the session: it may yet be created.
		require.True(t, meta.IsStatusConditionFalse(got.Status.Conditions, v1alpha1.ConditionFailed))
		require.True(t, meta.IsStatusConditionFalse(got.Status.Conditions, v1alpha1.ConditionRunning))
		require.Eventually(t, func() bool {
			var evs eventsv1.EventList
			if err := s.k8s.List(ctx, &evs, client.InNamespace("default")); err != nil {
				return false
			}
			for _, e := range evs.Items {
				if e.Regarding.Name == "ghost" && e.Reason == "AgentNotFound" && e.Type == corev1.EventTypeWarning {
					return true
				}
			}
			return false
		}, wait, 100*time.Millisecond, "a Warning event AgentNotFound for the Session")
		_, found, err := s.api.Service.SessionByKey(ctx, s.ws, controllers.SessionKey(got.UID))
		require.NoError(t, err)
		require.False(t, found, "no session was created for a missing agent")

		// The resource still goes away cleanly.
		require.NoError(t, s.k8s.Delete(ctx, got))
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(s.k8s.Get(ctx, client.ObjectKeyFromObject(got), &v1alpha1.Session{}))
		}, wait, 50*time.Millisecond)
	})

	t.Run("deleting an Agent whose status write was lost archives its agent", func(t *testing.T) {
		lost := &v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lost"}, Spec: v1alpha1.AgentSpec{
			Model: v1alpha1.AgentModel{ID: "claude-sonnet-4-5"}}}
		require.NoError(t, s.k8s.Create(ctx, lost))
		require.Eventually(t, func() bool {
			err := s.k8s.Get(ctx, client.ObjectKeyFromObject(lost), lost)
			return err == nil && lost.Status.ID != "" && controllerutil.ContainsFinalizer(lost, v1alpha1.Finalizer)
		}, wait, 50*time.Millisecond)
		id := lost.Status.ID

		// A running controller would adopt the agent again at once (the sync looks it up by
		// its mark too), so the status is lost while no controller runs, and the resource is
		// deleted before the next one starts: only the finalizer can find the agent.
		ctrl.stop(t)
		lost.Status = v1alpha1.AgentStatus{}
		require.NoError(t, s.k8s.Status().Update(ctx, lost))
		require.NoError(t, s.k8s.Delete(ctx, lost))
		require.NoError(t, s.k8s.Get(ctx, client.ObjectKeyFromObject(lost), lost))
		require.Empty(t, lost.Status.ID)
		require.False(t, lost.DeletionTimestamp.IsZero())

		ctrl = s.startController(nil)
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(s.k8s.Get(ctx, client.ObjectKeyFromObject(lost), &v1alpha1.Agent{}))
		}, wait, 50*time.Millisecond)
		got, err := s.sdk.Beta.Agents.Get(ctx, id, anthropic.BetaAgentGetParams{})
		require.NoError(t, err)
		require.Equal(t, string(lost.UID), got.Metadata[v1alpha1.OwnerMetadataKey])
		require.False(t, got.ArchivedAt.IsZero(), "the finalizer found the agent by its mark and archived it")
	})
}
