package mcp

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestObjectSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   any
		want string
	}{
		{"missing", nil, `{"type":"object"}`},
		{"not an object", []any{1}, `{"type":"object"}`},
		{"a string", "x", `{"type":"object"}`},
		{"another type", map[string]any{"type": "string"}, `{"type":"object"}`},
		{"no type", map[string]any{"properties": map[string]any{"a": map[string]any{"type": "number"}}}, `{"properties":{"a":{"type":"number"}},"type":"object"}`},
		{"kept as it is", map[string]any{"type": "object", "required": []any{"a"}}, `{"required":["a"],"type":"object"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.JSONEq(t, tc.want, string(objectSchema(tc.in)))
			require.True(t, json.Valid(objectSchema(tc.in)))
		})
	}
}

func TestObjectArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "", want: "{}"}, {in: "null", want: "{}"}, {in: "  null \n", want: "{}"},
		{in: `{"a":1}`, want: `{"a":1}`}, {in: ` {"n":12345678901234567890} `, want: `{"n":12345678901234567890}`},
		{in: "[]", bad: true}, {in: `"x"`, bad: true}, {in: "1", bad: true}, {in: "{", bad: true}, {in: `{"a":1}x`, bad: true},
	} {
		got, err := objectArgs(json.RawMessage(tc.in))
		if tc.bad {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, string(got), tc.in)
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	r := redactor("https://user:pw@h.example/mcp?key=k", "tok")
	require.Equal(t, "Post https://REDACTED@h.example/mcp?REDACTED: REDACTED", r("Post https://user:pw@h.example/mcp?key=k: tok"))
}
