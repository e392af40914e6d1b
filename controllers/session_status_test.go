package controllers

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestSessionConditions(t *testing.T) {
	T, F := metav1.ConditionTrue, metav1.ConditionFalse
	type want struct {
		ready, running, action, failed metav1.ConditionStatus
		readyReason                    string
	}
	tests := []struct {
		name string
		st   sessionState
		want want
	}{
		{"agent missing", sessionState{Blocked: "AgentNotFound", Message: "Agent a not found"}, want{F, F, F, F, "AgentNotFound"}},
		{"environment missing", sessionState{Blocked: "EnvironmentNotFound"}, want{F, F, F, F, "EnvironmentNotFound"}},
		{"refused by the API", sessionState{Blocked: "Invalid"}, want{F, F, F, T, "Invalid"}},
		{"running", sessionState{Status: wire.SessionStatusRunning}, want{F, T, F, F, "Running"}},
		{"rescheduling", sessionState{Status: wire.SessionStatusRescheduling}, want{F, T, F, F, "Running"}},
		{"idle after a turn", sessionState{Status: wire.SessionStatusIdle, StopReason: wire.StopEndTurn}, want{T, F, F, F, "Idle"}},
		{"idle, never ran", sessionState{Status: wire.SessionStatusIdle}, want{T, F, F, F, "Idle"}},
		{"waiting on a client", sessionState{Status: wire.SessionStatusIdle, StopReason: wire.StopRequiresAction}, want{T, F, T, F, "RequiresAction"}},
		{"retries exhausted", sessionState{Status: wire.SessionStatusIdle, StopReason: wire.StopRetriesExhausted}, want{T, F, F, T, "Idle"}},
		{"terminated", sessionState{Status: wire.SessionStatusTerminated}, want{F, F, F, T, "Terminated"}},
		{"deleting an idle one", sessionState{Status: wire.SessionStatusIdle, Deleting: true}, want{F, F, F, F, "Deleting"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conds := sessionConditions(tt.st, 7)
			got := map[string]metav1.Condition{}
			for _, c := range conds {
				require.Equal(t, int64(7), c.ObservedGeneration)
				require.NotEmpty(t, c.Reason, c.Type)
				got[c.Type] = c
			}
			require.Len(t, got, 4)
			require.Equal(t, tt.want.ready, got[v1alpha1.ConditionReady].Status, "Ready")
			require.Equal(t, tt.want.readyReason, got[v1alpha1.ConditionReady].Reason, "Ready reason")
			require.Equal(t, tt.want.running, got[v1alpha1.ConditionRunning].Status, "Running")
			require.Equal(t, tt.want.action, got[v1alpha1.ConditionRequiresAction].Status, "RequiresAction")
			require.Equal(t, tt.want.failed, got[v1alpha1.ConditionFailed].Status, "Failed")
		})
	}
}

func TestMessageTextIsCut(t *testing.T) {
	long := strings.Repeat("é", 400)
	text := wire.ContentBlock{Type: wire.ContentTypeText, Text: &long}
	got := messageText(wire.MessageBody{Content: []wire.ContentBlock{text}})
	require.LessOrEqual(t, len(got), maxStatusText+len("…"))
	require.True(t, strings.HasSuffix(got, "…"))

	a, b := "first", "second"
	require.Equal(t, "first\nsecond", messageText(wire.MessageBody{Content: []wire.ContentBlock{{Type: "text", Text: &a}, {Type: "text", Text: &b}}}))
}

func TestMetadataPatchRemovesWhatTheSpecDropped(t *testing.T) {
	p := metadataPatch(map[string]string{"keep": "1", "drop": "2", ownerKey: "uid"}, map[string]string{"keep": "3", "new": "4"}, "uid")
	require.Nil(t, p["drop"])
	require.Contains(t, p, "drop")
	require.Equal(t, "3", *p["keep"])
	require.Equal(t, "4", *p["new"])
	require.Equal(t, "uid", *p[ownerKey])
}
