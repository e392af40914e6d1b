package wire

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEventMarshalJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 15, 10, 0, 0, 197000000, time.UTC)
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"with body", Event{ID: "sevt_1", Type: "user.message", Body: json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`)},
			`{"type":"user.message","id":"sevt_1","content":[{"type":"text","text":"hi"}],"processed_at":null}`},
		{"empty body", Event{ID: "sevt_2", Type: "session.status_running", Body: json.RawMessage(`{}`), ProcessedAt: &at},
			`{"type":"session.status_running","id":"sevt_2","processed_at":"2026-03-15T10:00:00.197Z"}`},
		{"no body", Event{ID: "sevt_3", Type: "agent.thinking", ProcessedAt: &at},
			`{"type":"agent.thinking","id":"sevt_3","processed_at":"2026-03-15T10:00:00.197Z"}`},
		{"body with spaces from jsonb", Event{ID: "sevt_4", Type: "x", Body: json.RawMessage(` { "a": 1 } `)},
			`{"type":"x","id":"sevt_4","a": 1,"processed_at":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(tt.ev)
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(got))
			require.True(t, json.Valid(got))
		})
	}
}

func TestNullable(t *testing.T) {
	t.Parallel()
	var v struct {
		A Nullable[string] `json:"a"`
		B Nullable[string] `json:"b"`
		C Nullable[string] `json:"c"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"a":null,"b":"x"}`), &v))
	require.True(t, v.A.Set)
	require.True(t, v.A.Null)
	require.True(t, v.B.HasValue())
	require.Equal(t, "x", v.B.Value)
	require.False(t, v.C.Set)
}

func TestDecodeStrictNamesTheField(t *testing.T) {
	t.Parallel()
	var p AgentCreateParams
	require.EqualError(t, DecodeStrict([]byte(`{"name":5}`), &p), "name: expected a string, got JSON number")
	require.EqualError(t, DecodeStrict([]byte(`{"nme":"x"}`), &p), `unknown field "nme"`)
	require.ErrorContains(t, DecodeStrict([]byte(`{"name":`), &p), "malformed JSON")
	require.EqualError(t, DecodeStrict([]byte(`{} {}`), &p), "unexpected data after the JSON value")
	require.ErrorContains(t, DecodeStrict([]byte(`{"model":{"id":"m","colour":1}}`), &p), `unknown field "colour"`)
}
