package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox/e2b"
)

func TestE2BSettingsAreReadAndValidatedNamingTheVariable(t *testing.T) {
	lookup := func(env map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	}
	c := FromLookup(Config{}, lookup(map[string]string{"MANAGED_AGENT_SANDBOX": "e2b"}))
	require.ErrorContains(t, c.Validate(), "MANAGED_AGENT_E2B_API_KEY is not set")

	c = FromLookup(Config{}, lookup(map[string]string{
		"MANAGED_AGENT_SANDBOX": "e2b", "MANAGED_AGENT_E2B_API_KEY": "k", "MANAGED_AGENT_E2B_TEMPLATE": "python",
	}))
	require.NoError(t, c.Validate())
	p, err := NewSandboxProvider(c)
	require.NoError(t, err)
	require.Equal(t, e2b.NameE2B, p.Name())

	c = FromLookup(Config{}, lookup(map[string]string{
		"MANAGED_AGENT_SANDBOX": "cubesandbox", "MANAGED_AGENT_CUBESANDBOX_API_URL": "http://cube:3000",
		"MANAGED_AGENT_CUBESANDBOX_TIMEOUT": "soon",
	}))
	err = c.Validate()
	require.ErrorContains(t, err, "MANAGED_AGENT_CUBESANDBOX_TEMPLATE is not set")
	require.ErrorContains(t, err, `MANAGED_AGENT_CUBESANDBOX_TIMEOUT="soon"`)
	require.NoError(t, CheckSandboxGuard(Config{Sandbox: "cubesandbox", Model: "claude-x"}), "a remote sandbox isolates")
}
