package controllers

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// sessionState is what a Session's conditions are computed from: whether the session
// exists, what keeps it from existing, and the API session's status.
type sessionState struct {
	// Blocked is the reason the session is not created yet (AgentNotFound,
	// EnvironmentNotFound, Invalid, NamespaceNotMapped, Pending), with Message; empty once
	// it exists.
	Blocked string
	Message string
	// Status and StopReason are the API session's (wire.SessionStatus*, wire.Stop*).
	Status     string
	StopReason string
	// Deleting: the resource is being deleted.
	Deleting bool
}

// sessionConditions computes the four conditions of a Session from its state. Pure, so the
// table in session_status_test.go covers every combination that matters.
func sessionConditions(st sessionState, gen int64) []metav1.Condition {
	cond := func(typ string, ok bool, reason, msg string) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen}
	}
	if st.Blocked != "" {
		failed := st.Blocked == "Invalid"
		return []metav1.Condition{
			cond(v1alpha1.ConditionReady, false, st.Blocked, st.Message),
			cond(v1alpha1.ConditionRunning, false, st.Blocked, "the session is not created"),
			cond(v1alpha1.ConditionRequiresAction, false, st.Blocked, "the session is not created"),
			cond(v1alpha1.ConditionFailed, failed, st.Blocked, st.Message),
		}
	}
	running := st.Status == wire.SessionStatusRunning || st.Status == wire.SessionStatusRescheduling
	idle := st.Status == wire.SessionStatusIdle
	terminated := st.Status == wire.SessionStatusTerminated
	exhausted := idle && st.StopReason == wire.StopRetriesExhausted
	action := idle && st.StopReason == wire.StopRequiresAction

	var ready metav1.Condition
	switch {
	case st.Deleting:
		ready = cond(v1alpha1.ConditionReady, false, "Deleting", "the session is being deleted")
	case terminated:
		ready = cond(v1alpha1.ConditionReady, false, "Terminated", "the session is terminated and accepts no events")
	case running:
		ready = cond(v1alpha1.ConditionReady, false, "Running", "a turn is in progress")
	case action:
		ready = cond(v1alpha1.ConditionReady, true, "RequiresAction", "idle: waiting for a tool confirmation or a custom tool result")
	case idle:
		ready = cond(v1alpha1.ConditionReady, true, "Idle", "idle: waiting for the next message")
	default:
		ready = cond(v1alpha1.ConditionReady, false, "Unknown", "session status "+st.Status)
	}

	runReason := "Idle"
	switch {
	case st.Status == wire.SessionStatusRescheduling:
		runReason = "Rescheduling"
	case running:
		runReason = "Running"
	case terminated:
		runReason = "Terminated"
	}
	actionReason, actionMsg := "NoActionRequired", "nothing waits on a client"
	if action {
		actionReason, actionMsg = "RequiresAction", "the agent waits for a tool confirmation or a custom tool result (status.requiredActionEventIDs)"
	}
	failReason, failMsg := "NotFailed", "the session can go on"
	switch {
	case terminated:
		failReason, failMsg = "Terminated", "the session is terminated"
	case exhausted:
		failReason, failMsg = "RetriesExhausted", "the last turn gave up after the model kept failing (status.lastError); a new message starts a new turn"
	}
	return []metav1.Condition{
		ready,
		cond(v1alpha1.ConditionRunning, running, runReason, "session status "+st.Status),
		cond(v1alpha1.ConditionRequiresAction, action, actionReason, actionMsg),
		cond(v1alpha1.ConditionFailed, terminated || exhausted, failReason, failMsg),
	}
}

// maxStatusText bounds the texts status carries, so a long answer does not bloat the
// resource (kubectl shows the start of it).
const maxStatusText = 256

// messageText is the text of an agent.message body, its blocks joined, cut short.
func messageText(b wire.MessageBody) string {
	var parts []string
	for _, c := range b.Content {
		if c.Text != nil {
			parts = append(parts, *c.Text)
		}
	}
	return cut(strings.Join(parts, "\n"))
}

func cut(s string) string { return wire.Excerpt(s, maxStatusText) }

func usageStatus(u wire.Usage) *v1alpha1.SessionUsage {
	return &v1alpha1.SessionUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadInputTokens: u.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreation.Ephemeral5mInputTokens + u.CacheCreation.Ephemeral1hInputTokens}
}
