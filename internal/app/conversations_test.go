package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/turns"
)

func TestConversationCacheSize(t *testing.T) {
	tests := []struct {
		value   string
		want    int
		invalid bool
	}{
		{value: "", want: turns.DefaultConversationCacheBytes},
		{value: "0", want: 0},
		{value: "512m", want: 512 << 20},
		{value: "1g", want: 1 << 30},
		{value: "lots", invalid: true},
		{value: "-1m", invalid: true},
		{value: "65g", invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			t.Setenv("MANAGED_AGENT_CONVERSATION_CACHE", tt.value)
			c := FromEnv(Config{})
			got, err := c.conversationCacheBytes()
			if tt.invalid {
				require.ErrorContains(t, err, "MANAGED_AGENT_CONVERSATION_CACHE=")
				require.ErrorContains(t, c.Validate(), "MANAGED_AGENT_CONVERSATION_CACHE=")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
