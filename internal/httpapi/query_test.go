package httpapi

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sessions"
)

func TestHasBeta(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []string
		want   bool
	}{
		{"single", []string{"managed-agents-2026-04-01"}, true},
		{"comma list with extras", []string{"files-api-2025-04-14, managed-agents-2026-04-01"}, true},
		{"repeated headers", []string{"files-api-2025-04-14", "managed-agents-2026-04-01"}, true},
		{"missing", []string{"files-api-2025-04-14"}, false},
		{"prefix only", []string{"managed-agents-2026-04-01x"}, false},
		{"none", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, hasBeta(tt.values, betaManagedAgents))
		})
	}
}

func TestCursorRoundTripAndOrder(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 10, 0, 0, 123456000, time.UTC)
	tok := cursor{Kind: "sessions", Order: "desc", Time: at, ID: "sesn_x", Backward: true}.encode()
	q := newQuery(&url.URL{RawQuery: url.Values{"page": {tok}}.Encode()})

	c, err := q.pageCursor("sessions", "desc")
	require.NoError(t, err)
	require.True(t, c.Time.Equal(at))
	require.Equal(t, "sesn_x", c.ID)
	require.True(t, c.Backward)

	_, err = q.pageCursor("sessions", "asc")
	require.EqualError(t, err, "page token order does not match request")

	_, err = q.pageCursor("agents", "desc")
	require.EqualError(t, err, "invalid page cursor", "a cursor only works on the list that issued it")
}

func TestQueryErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		query string
		want  string
	}{
		{"garbage cursor", "page=nope", "invalid page cursor"},
		{"cursor without prefix", "page=eyJvIjoiZGVzYyJ9", "invalid page cursor"},
		{"limit zero", "limit=0", "limit: must be an integer from 1 to 100"},
		{"limit too large", "limit=101", "limit: must be an integer from 1 to 100"},
		{"limit not a number", "limit=ten", "limit: must be an integer from 1 to 100"},
		{"bad boolean", "include_archived=maybe", "include_archived: must be true or false"},
		{"bad time", "created_at%5Bgte%5D=yesterday", "created_at[gte]: must be an RFC 3339 timestamp"},
		{"bad order", "order=sideways", "order: must be asc or desc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse("/x?" + tt.query)
			require.NoError(t, err)
			_, err = newQuery(u).listParams("sessions", "desc", 20, 100, true)
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestListParamsParsesFractionalTimesAndBrackets(t *testing.T) {
	t.Parallel()
	u, err := url.Parse("/x?created_at%5Bgte%5D=2026-01-02T03:04:05.6Z&created_at%5Blt%5D=2026-01-03T00:00:00Z&include_archived=true&limit=5&order=asc")
	require.NoError(t, err)
	p, err := newQuery(u).listParams("sessions", "desc", 20, 100, true)
	require.NoError(t, err)
	require.Equal(t, 5, p.Limit)
	require.False(t, p.Desc)
	require.True(t, p.IncludeArchived)
	require.True(t, p.CreatedGTE.Equal(time.Date(2026, 1, 2, 3, 4, 5, 600000000, time.UTC)))
	require.True(t, p.CreatedLT.Equal(time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)))

	u, err = url.Parse("/x?types%5B%5D=a&types%5B%5D=b&types=c")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, newQuery(u).list("types"))
}

func TestKeysetPageCursors(t *testing.T) {
	t.Parallel()
	type item struct {
		at time.Time
		id string
	}
	key := func(i item) (time.Time, string) { return i.at, i.id }
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	items := []item{{t0, "a"}, {t0.Add(time.Second), "b"}}
	after := &sessions.Keyset{CreatedAt: t0, ID: "z"}

	tests := []struct {
		name           string
		p              sessions.ListParams
		more           bool
		bidirectional  bool
		wantNext       bool
		wantPrev       bool
		wantNextFromID string
	}{
		{"first page, more", sessions.ListParams{}, true, true, true, false, "b"},
		{"first page, last", sessions.ListParams{}, false, true, false, false, ""},
		{"later page, last", sessions.ListParams{After: after}, false, true, false, true, ""},
		{"later page, not bidirectional", sessions.ListParams{After: after}, false, false, false, false, ""},
		{"backward, more before", sessions.ListParams{After: after, Backward: true}, true, true, true, true, "b"},
		{"backward, reached start", sessions.ListParams{After: after, Backward: true}, false, true, true, false, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			page := keysetPage("sessions", items, tt.more, tt.p, key, tt.bidirectional)
			require.Equal(t, tt.wantNext, page.NextPage != "", "next_page")
			require.Equal(t, tt.wantPrev, page.PrevPage != "", "prev_page")
			if tt.wantNextFromID != "" {
				u := &url.URL{RawQuery: url.Values{"page": {page.NextPage}}.Encode()}
				c, err := newQuery(u).pageCursor("sessions", "asc")
				require.NoError(t, err)
				require.Equal(t, tt.wantNextFromID, c.ID)
				require.False(t, c.Backward)
			}
		})
	}
	require.Equal(t, []item{}, keysetPage("sessions", []item(nil), false, sessions.ListParams{}, key, true).Data)
}

func TestUncleanPath(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{
		"/v1/agents": false, "/v1/agents/": false, "/": false, "/v1/sessions/sesn_1/events": false,
		"/v1/sessions//events": true, "/v1/./agents": true, "/v1/agents/../x": true, "//v1/agents": true, "": true, "*": true,
	} {
		require.Equal(t, want, uncleanPath(p), p)
	}
}

func TestPathIDField(t *testing.T) {
	t.Parallel()
	require.Equal(t, "agent_id", pathIDField("GET /v1/agents/{id}/versions"))
	require.Equal(t, "environment_id", pathIDField("POST /v1/environments/{id}"))
	require.Equal(t, "session_id", pathIDField("GET /v1/sessions/{id}/events/stream"))
	require.Empty(t, pathIDField("GET /v1/sessions"))
}
