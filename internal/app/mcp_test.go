package app

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMCPConfigFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    MCPConfig
		wantErr []string
	}{
		{name: "defaults", env: map[string]string{}},
		{name: "set", env: map[string]string{"MANAGED_AGENT_MCP_CONNECT_TIMEOUT": "5s", "MANAGED_AGENT_MCP_CALL_TIMEOUT": "2m", "MANAGED_AGENT_MCP_MAX_OUTPUT_CHARS": "5000"},
			want: MCPConfig{ConnectTimeout: 5 * time.Second, CallTimeout: 2 * time.Minute, MaxOutputChars: 5000}},
		{name: "unparsable values name their variables",
			env:     map[string]string{"MANAGED_AGENT_MCP_CONNECT_TIMEOUT": "soon", "MANAGED_AGENT_MCP_CALL_TIMEOUT": "1 minute", "MANAGED_AGENT_MCP_MAX_OUTPUT_CHARS": "lots"},
			wantErr: []string{`MANAGED_AGENT_MCP_CONNECT_TIMEOUT="soon"`, `MANAGED_AGENT_MCP_CALL_TIMEOUT="1 minute"`, `MANAGED_AGENT_MCP_MAX_OUTPUT_CHARS="lots": must be a whole number`}},
		{name: "a call longer than a step", env: map[string]string{"MANAGED_AGENT_MCP_CALL_TIMEOUT": "11m"},
			wantErr: []string{"MANAGED_AGENT_MCP_CALL_TIMEOUT=11m0s: must be between 0"}},
		{name: "negative values", env: map[string]string{"MANAGED_AGENT_MCP_CONNECT_TIMEOUT": "-1s", "MANAGED_AGENT_MCP_MAX_OUTPUT_CHARS": "-1"},
			wantErr: []string{"MANAGED_AGENT_MCP_CONNECT_TIMEOUT=-1s: must be between 0", "MANAGED_AGENT_MCP_MAX_OUTPUT_CHARS=-1: must not be negative"}},
		{name: "a connect timeout longer than a turn should wait", env: map[string]string{"MANAGED_AGENT_MCP_CONNECT_TIMEOUT": "3m"},
			wantErr: []string{"MANAGED_AGENT_MCP_CONNECT_TIMEOUT=3m0s: must be between 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := FromLookup(Config{}, func(name string) (string, bool) {
				v, ok := tt.env[name]
				return v, ok
			})
			err := c.Validate()
			if len(tt.wantErr) == 0 {
				require.NoError(t, err)
				require.Equal(t, tt.want, c.MCP)
				return
			}
			for _, want := range tt.wantErr {
				require.ErrorContains(t, err, want)
			}
		})
	}
}
