package turns

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/store"
)

func TestDecodedAgents(t *testing.T) {
	s := &Service{}
	snapshot := func(name string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"id":"agent_1","type":"agent","version":1,"name":%q,"tools":[{"type":"agent_toolset_20260401"}]}`, name))
	}
	tests := []struct {
		name, raw, want string
		err             bool
	}{
		{name: "decoded", raw: string(snapshot("one")), want: "one"},
		{name: "the same bytes again", raw: string(snapshot("one")), want: "one"},
		{name: "a changed snapshot is a new entry", raw: string(snapshot("two")), want: "two"},
		{name: "invalid JSON", raw: `{"name":`, err: true},
		{name: "invalid JSON is not kept", raw: `{"name":`, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := s.decodeAgent(store.SessionRecord{ID: "sesn_1", Agent: json.RawMessage(tt.raw)})
			if tt.err {
				require.ErrorContains(t, err, "decode agent snapshot of session sesn_1")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, a.Name)
			require.Len(t, a.Tools, 1)
		})
	}
	require.Len(t, s.agents.m, 2)

	for i := range maxDecodedAgents + 10 {
		_, err := s.decodeAgent(store.SessionRecord{Agent: snapshot(fmt.Sprint(i))})
		require.NoError(t, err)
	}
	require.LessOrEqual(t, len(s.agents.m), maxDecodedAgents, "the bound holds")
}
