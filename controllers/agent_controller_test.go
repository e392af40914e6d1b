package controllers

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// The spec maps onto the REST create body field by field; the tool entries pass through as
// the API's own JSON.
func TestAgentCreateParamsAreTheRESTBody(t *testing.T) {
	geo, skillVersion := "us", "3"
	a := &v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "res", UID: "uid-1"}, Spec: v1alpha1.AgentSpec{
		Name: "Coder", Description: "writes code", System: "be brief",
		Model: v1alpha1.AgentModel{ID: "claude-x", Effort: "high", Speed: "fast", InferenceGeo: &geo},
		Tools: []runtime.RawExtension{{Raw: []byte(`{"type":"agent_toolset_20260401"}`)},
			{Raw: []byte(`{"type":"custom","name":"lookup","description":"d","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}`)}},
		MCPServers:        []runtime.RawExtension{{Raw: []byte(`{"type":"url","name":"docs","url":"https://mcp.example.com"}`)}},
		Skills:            []v1alpha1.AgentSkill{{Type: "anthropic", SkillID: "xlsx", Version: &skillVersion}},
		ExecutionIdentity: &v1alpha1.AgentExecutionIdentity{Type: "aws_role", RoleARN: "arn:aws:iam::123456789012:role/agent"},
		Metadata:          map[string]string{"team": "docs"},
	}}
	p, err := agentCreateParams(a)
	require.NoError(t, err)
	got, err := json.Marshal(p)
	require.NoError(t, err)
	require.JSONEq(t, `{
		"name": "Coder", "description": "writes code", "system": "be brief",
		"model": {"id": "claude-x", "effort": {"type": "high"}, "speed": "fast", "inference_geo": "us"},
		"tools": [{"type":"agent_toolset_20260401"}, {"type":"custom","name":"lookup","description":"d","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}],
		"mcp_servers": [{"type":"url","name":"docs","url":"https://mcp.example.com"}],
		"skills": [{"type": "anthropic", "skill_id": "xlsx", "version": "3"}],
		"multiagent": null,
		"execution_identity": {"type": "aws_role", "role_arn": "arn:aws:iam::123456789012:role/agent"},
		"metadata": {"team": "docs", "managed-agents.io/kubernetes-uid": "uid-1"}
	}`, string(got))

	// The defaults: the resource's name, no tools, no texts.
	bare := &v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "res", UID: "uid-2"}, Spec: v1alpha1.AgentSpec{Model: v1alpha1.AgentModel{ID: "m"}}}
	p, err = agentCreateParams(bare)
	require.NoError(t, err)
	require.Equal(t, "res", p.Name)
	require.Nil(t, p.Tools)
	require.Nil(t, p.Description)
	require.Nil(t, p.ExecutionIdentity)

	// An update clears what the spec no longer has.
	u, err := agentUpdateParams(bare, wire.Agent{AgentConfig: wire.AgentConfig{Metadata: wire.Metadata{"team": "docs", ownerKey: "uid-2"}}})
	require.NoError(t, err)
	require.True(t, u.Tools.Set && u.Tools.Null)
	require.True(t, u.System.Set && u.System.Null)
	require.True(t, u.ExecutionIdentity.Set && u.ExecutionIdentity.Null)
	require.Nil(t, u.Metadata["team"])
	require.Equal(t, "uid-2", *u.Metadata[ownerKey])
}
