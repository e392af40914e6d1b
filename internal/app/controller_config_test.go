package app

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestControllerVariables(t *testing.T) {
	t.Parallel()
	env := func(kv map[string]string) Config {
		return FromLookup(Config{ControllerWorkspacePerNamespace: true, ControllerLeaderElect: true}, func(k string) (string, bool) {
			v, ok := kv[k]
			return v, ok
		})
	}
	c := env(map[string]string{
		"KUBECONFIG":                                       "/a:/b",
		"MANAGED_AGENT_CONTROLLER_METRICS_ADDR":            "0",
		"MANAGED_AGENT_CONTROLLER_HEALTH_ADDR":             ":9440",
		"MANAGED_AGENT_CONTROLLER_LEADER_ELECT":            "off",
		"MANAGED_AGENT_CONTROLLER_WORKSPACES":              " default = wrkspc_1 , team-a=wrkspc_2",
		"MANAGED_AGENT_CONTROLLER_WORKSPACE_PER_NAMESPACE": "no",
	})
	require.NoError(t, c.Validate())
	require.Equal(t, "/a:/b", c.Kubeconfig)
	require.False(t, c.ControllerLeaderElect)
	require.False(t, c.ControllerWorkspacePerNamespace)
	ws, err := c.controllerWorkspaces()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"default": "wrkspc_1", "team-a": "wrkspc_2"}, ws)

	defaults := env(nil)
	require.NoError(t, defaults.Validate())
	require.True(t, defaults.ControllerLeaderElect, "the role's default stands when the variable is unset")
	require.True(t, defaults.ControllerWorkspacePerNamespace)

	tests := []struct {
		name, variable, value, want string
	}{
		{"metrics address without a port", "MANAGED_AGENT_CONTROLLER_METRICS_ADDR", "localhost", "MANAGED_AGENT_CONTROLLER_METRICS_ADDR=\"localhost\": must be host:port"},
		{"health address", "MANAGED_AGENT_CONTROLLER_HEALTH_ADDR", "off", "MANAGED_AGENT_CONTROLLER_HEALTH_ADDR=\"off\": must be host:port, such as :8081, or 0 for none"},
		{"leader election not a boolean", "MANAGED_AGENT_CONTROLLER_LEADER_ELECT", "maybe", "MANAGED_AGENT_CONTROLLER_LEADER_ELECT=\"maybe\": must be a boolean"},
		{"per-namespace not a boolean", "MANAGED_AGENT_CONTROLLER_WORKSPACE_PER_NAMESPACE", "2", "MANAGED_AGENT_CONTROLLER_WORKSPACE_PER_NAMESPACE=\"2\": must be a boolean"},
		{"mapping without =", "MANAGED_AGENT_CONTROLLER_WORKSPACES", "default", `MANAGED_AGENT_CONTROLLER_WORKSPACES: "default" must be namespace=workspace_id pairs`},
		{"mapping to nothing", "MANAGED_AGENT_CONTROLLER_WORKSPACES", "default=", `"default=" must be namespace=workspace_id pairs`},
		{"mapping of a name that is no namespace", "MANAGED_AGENT_CONTROLLER_WORKSPACES", "Team_A=wrkspc_1", `"Team_A=wrkspc_1" must be`},
		{"namespace mapped twice", "MANAGED_AGENT_CONTROLLER_WORKSPACES", "a=wrkspc_1,a=wrkspc_2", "namespace a is mapped twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := env(map[string]string{tt.variable: tt.value}).Validate()
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestKubeRESTConfigOutsideAPodNeedsAKubeconfig(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := kubeRESTConfig("")
	require.ErrorContains(t, err, "neither KUBECONFIG nor --kubeconfig is set")
	_, err = kubeRESTConfig(t.TempDir() + "/missing")
	require.ErrorContains(t, err, "load kubeconfig")
}
