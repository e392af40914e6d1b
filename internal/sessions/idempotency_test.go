package sessions

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestCheckIdempotencyKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key, err string
	}{
		{"0b9f7c1e-6a43-4c1e-9a57-3f5d2b8c9e10", ""},
		{"a", ""},
		{strings.Repeat("k", 255), ""},
		{"with space and ~!", ""},
		{"", "must be 1 to 255 characters long (got 0)"},
		{strings.Repeat("k", 256), "must be 1 to 255 characters long (got 256)"},
		{"tab\there", "byte 3 is 0x09"},
		{"schlüssel", "must be printable ASCII; byte 4 is 0xc3"},
		{"del\x7f", "byte 3 is 0x7f"},
	} {
		err := checkIdempotencyKey(tc.key)
		if tc.err == "" {
			require.NoError(t, err, "%q", tc.key)
			continue
		}
		var se *Error
		require.ErrorAs(t, err, &se, "%q", tc.key)
		require.Equal(t, KindInvalid, se.Kind)
		require.Contains(t, se.Message, "Idempotency-Key: ")
		require.Contains(t, se.Message, tc.err)
	}
}

// TestRequestHash: a retry that re-serialises the same request (other key order, other
// whitespace, inside raw fields too) hashes the same; any change of content does not.
func TestRequestHash(t *testing.T) {
	t.Parallel()
	title := "t"
	base := wire.SessionCreateParams{Agent: json.RawMessage(`{"type":"agent","id":"agent_1","version":12345678901234567}`), EnvironmentID: "env_1", Title: &title}
	h := func(p wire.SessionCreateParams) string {
		t.Helper()
		s, err := requestHash(p)
		require.NoError(t, err)
		return s
	}
	same := base
	same.Agent = json.RawMessage("{ \"version\": 12345678901234567,\n \"id\": \"agent_1\", \"type\": \"agent\" }")
	require.Equal(t, h(base), h(same))

	for name, change := range map[string]func(*wire.SessionCreateParams){
		"environment": func(p *wire.SessionCreateParams) { p.EnvironmentID = "env_2" },
		"title":       func(p *wire.SessionCreateParams) { other := "u"; p.Title = &other },
		"no title":    func(p *wire.SessionCreateParams) { p.Title = nil },
		"version": func(p *wire.SessionCreateParams) {
			p.Agent = json.RawMessage(`{"type":"agent","id":"agent_1","version":12345678901234568}`)
		},
		"metadata": func(p *wire.SessionCreateParams) { p.Metadata = wire.MetadataParam{"k": "v"} },
	} {
		p := base
		change(&p)
		require.NotEqual(t, h(base), h(p), name)
	}
}
