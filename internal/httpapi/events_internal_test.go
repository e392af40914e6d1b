package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// The streamed events page must be byte for byte what json.Marshal of the page was before
// it streamed: clients and the e2e shape checks compare bodies.
func TestEventPageWriterMatchesMarshal(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 4, 1, 12, 0, 0, 123456000, time.UTC)
	// jsonb's text output spaces its separators; json.Marshal compacts and escapes <>&.
	a := wire.Event{ID: "sevt_a", Type: wire.EventUserMessage, Seq: 1, CreatedAt: at, ProcessedAt: &at,
		Body: json.RawMessage(`{"content": [{"text": "<b>&amp; \u2028    ünï", "type": "text"}]}`)}
	b := wire.Event{ID: "sevt_b", Type: wire.EventSessionStatusIdle, Seq: 2, CreatedAt: at, Body: json.RawMessage(`{}`)}
	cases := []struct {
		name string
		evs  []wire.Event
		next string
	}{
		{"empty", nil, ""},
		{"one", []wire.Event{a}, ""},
		{"two with next page", []wire.Event{a, b}, "page_<abc>=="},
		{"nothing to escape", []wire.Event{b, b}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want, err := json.Marshal(wire.Page[wire.Event]{Data: append([]wire.Event{}, tc.evs...), NextPage: tc.next})
			require.NoError(t, err)
			rec := httptest.NewRecorder()
			pw := &eventPageWriter{w: rec}
			for _, e := range tc.evs {
				full, err := pw.add(e)
				require.NoError(t, err)
				require.False(t, full)
			}
			pw.finish(tc.next)
			require.Equal(t, string(want), rec.Body.String())
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			require.Equal(t, 200, rec.Code)
		})
	}
}
