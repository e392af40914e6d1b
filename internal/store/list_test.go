//go:build integration

package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
)

// listRow is one row of a keyset-paginated list as the model sees it.
type listRow struct {
	Keyset
	archived bool
}

// listKind adapts one of the (created_at, id) ordered lists to a common shape.
type listKind struct {
	name   string
	prefix string
	insert func(t *testing.T, f fixture, r listRow)
	list   func(ctx context.Context, f fixture, p ListParams) ([]Keyset, bool, error)
}

var listKinds = []listKind{
	{
		name: "agents", prefix: ids.Agent,
		insert: func(t *testing.T, f fixture, r listRow) {
			ctx := t.Context()
			require.NoError(t, f.st.InsertAgent(ctx, r.ID, f.ws, json.RawMessage(`{"name":"a"}`), r.CreatedAt))
			if r.archived {
				require.NoError(t, f.st.ArchiveAgent(ctx, r.ID, r.CreatedAt))
			}
		},
		list: func(ctx context.Context, f fixture, p ListParams) ([]Keyset, bool, error) {
			rows, more, err := f.st.ListAgents(ctx, f.ws, p)
			return keysets(rows, func(r AgentRecord) Keyset { return Keyset{r.CreatedAt, r.ID} }), more, err
		},
	},
	{
		name: "environments", prefix: ids.Environment,
		insert: func(t *testing.T, f fixture, r listRow) {
			ctx := t.Context()
			rec := EnvironmentRecord{ID: r.ID, WorkspaceID: f.ws, Name: r.ID, Config: json.RawMessage(`{}`), Scope: "workspace", CreatedAt: r.CreatedAt}
			require.NoError(t, f.st.InsertEnvironment(ctx, rec))
			if r.archived {
				rec.UpdatedAt, rec.ArchivedAt = r.CreatedAt, &r.CreatedAt
				require.NoError(t, f.st.UpdateEnvironment(ctx, rec))
			}
		},
		list: func(ctx context.Context, f fixture, p ListParams) ([]Keyset, bool, error) {
			rows, more, err := f.st.ListEnvironments(ctx, f.ws, p)
			return keysets(rows, func(r EnvironmentRecord) Keyset { return Keyset{r.CreatedAt, r.ID} }), more, err
		},
	},
	{
		name: "sessions", prefix: ids.Session,
		insert: func(t *testing.T, f fixture, r listRow) {
			ctx := t.Context()
			rec := f.sessionRecord(r.ID, r.CreatedAt)
			require.NoError(t, f.st.InsertSession(ctx, rec))
			if r.archived {
				rec.UpdatedAt, rec.ArchivedAt = r.CreatedAt, &r.CreatedAt
				require.NoError(t, f.st.UpdateSession(ctx, rec))
			}
		},
		list: func(ctx context.Context, f fixture, p ListParams) ([]Keyset, bool, error) {
			rows, more, err := f.st.ListSessions(ctx, f.ws, SessionListParams{ListParams: p})
			return keysets(rows, func(r SessionRecord) Keyset { return Keyset{r.CreatedAt, r.ID} }), more, err
		},
	},
	{
		name: "vaults", prefix: ids.Vault,
		insert: func(t *testing.T, f fixture, r listRow) {
			ctx := t.Context()
			rec := VaultRecord{ID: r.ID, WorkspaceID: f.ws, DisplayName: r.ID, CreatedAt: r.CreatedAt}
			require.NoError(t, f.st.InsertVault(ctx, rec))
			if r.archived {
				rec.UpdatedAt, rec.ArchivedAt = r.CreatedAt, &r.CreatedAt
				require.NoError(t, f.st.UpdateVault(ctx, rec))
			}
		},
		list: func(ctx context.Context, f fixture, p ListParams) ([]Keyset, bool, error) {
			rows, more, err := f.st.ListVaults(ctx, f.ws, p)
			return keysets(rows, func(r VaultRecord) Keyset { return Keyset{r.CreatedAt, r.ID} }), more, err
		},
	},
	{
		name: "credentials", prefix: ids.Credential,
		insert: func(t *testing.T, f fixture, r listRow) {
			ctx := t.Context()
			vaultID := listVault(t, f)
			rec := CredentialRecord{ID: r.ID, VaultID: vaultID, AuthType: "environment_variable", Auth: json.RawMessage(`{}`), Sealed: []byte{1}, CreatedAt: r.CreatedAt}
			require.NoError(t, f.st.InsertCredential(ctx, rec))
			if r.archived {
				rec.UpdatedAt, rec.ArchivedAt = r.CreatedAt, &r.CreatedAt
				require.NoError(t, f.st.UpdateCredential(ctx, rec))
			}
		},
		list: func(ctx context.Context, f fixture, p ListParams) ([]Keyset, bool, error) {
			rows, more, err := f.st.ListCredentials(ctx, "vlt_list_"+f.ws, p)
			return keysets(rows, func(r CredentialRecord) Keyset { return Keyset{r.CreatedAt, r.ID} }), more, err
		},
	},
}

// listVault is the fixture's vault the credentials list test fills, made on first use.
func listVault(t *testing.T, f fixture) string {
	id := "vlt_list_" + f.ws
	err := f.st.InsertVault(t.Context(), VaultRecord{ID: id, WorkspaceID: f.ws, DisplayName: "list", CreatedAt: time.Now()})
	if err != nil {
		require.ErrorIs(t, err, ErrDuplicate)
	}
	return id
}

func keysets[T any](rows []T, key func(T) Keyset) []Keyset {
	out := make([]Keyset, len(rows))
	for i, r := range rows {
		out[i] = key(r)
	}
	return out
}

// listModel is a workspace's rows of one kind: timestamps in groups of three equal ones so
// the id decides their order, ids in shuffled order so insertion order is not the answer,
// and every fourth row archived.
type listModel struct {
	rows  []listRow
	times []time.Time // the distinct created_at values, ascending
}

func newListModel(prefix string, n int) listModel {
	base := micros(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	var m listModel
	for i, p := range rand.Perm(n) {
		at := base.Add(time.Duration(i/3) * time.Second)
		if i%3 == 0 {
			m.times = append(m.times, at)
		}
		// Digits sort the same under every collation, so the model's byte order is the
		// database's order whatever locale the test server was created with.
		id := fmt.Sprintf("%s011C%04d", prefix, p)
		m.rows = append(m.rows, listRow{Keyset: Keyset{CreatedAt: at, ID: id}, archived: i%4 == 1})
	}
	return m
}

func (m listModel) expect(p ListParams) []Keyset {
	var out []Keyset
	for _, r := range m.rows {
		if r.archived && !p.IncludeArchived {
			continue
		}
		if !inWindow(&r.CreatedAt, p.CreatedGT, p.CreatedGTE, p.CreatedLT, p.CreatedLTE) {
			continue
		}
		out = append(out, r.Keyset)
	}
	slices.SortFunc(out, func(a, b Keyset) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmpString(a.ID, b.ID)
	})
	if p.Desc {
		slices.Reverse(out)
	}
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestKeysetPagination(t *testing.T) {
	t.Parallel()
	const n = 14
	for _, kind := range listKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			// The fixture's own environment would be a fifteenth row of that list.
			f.ws = mustWorkspace(t, f)
			model := newListModel(kind.prefix, n)
			for _, r := range model.rows {
				kind.insert(t, f, r)
			}
			tm := model.times
			cases := []struct {
				name string
				p    ListParams
			}{
				{"desc", ListParams{Desc: true}},
				{"asc", ListParams{}},
				{"desc include archived", ListParams{Desc: true, IncludeArchived: true}},
				{"asc include archived", ListParams{IncludeArchived: true}},
				{"desc gte lt", ListParams{Desc: true, CreatedGTE: &tm[1], CreatedLT: &tm[4]}},
				{"asc gt lte include archived", ListParams{IncludeArchived: true, CreatedGT: &tm[0], CreatedLTE: &tm[3]}},
				{"empty window", ListParams{CreatedGT: &tm[2], CreatedLT: &tm[3]}},
			}
			for _, tc := range cases {
				for _, limit := range []int{1, 2, 3, 4, 100} {
					t.Run(fmt.Sprintf("%s/limit=%d", tc.name, limit), func(t *testing.T) {
						t.Parallel()
						p := tc.p
						p.Limit = limit
						checkWalks(t, kind, f, p, model.expect(p))
					})
				}
			}
		})
	}
}

// mustWorkspace is a second, empty workspace of the fixture's store: the fixture's parent
// rows live in the first one and must not show up in the lists under test.
func mustWorkspace(t *testing.T, f fixture) string {
	t.Helper()
	ws, err := f.st.CreateWorkspace(t.Context(), "lists")
	require.NoError(t, err)
	return ws
}

// checkWalks walks the list forward to the end, then backward from its last page to the
// first, and checks both walks see every row exactly once, in order, in the same pages.
func checkWalks(t *testing.T, kind listKind, f fixture, p ListParams, want []Keyset) {
	t.Helper()
	ctx := t.Context()
	var forward [][]Keyset
	for {
		page, more, err := kind.list(ctx, f, p)
		require.NoError(t, err)
		forward = append(forward, page)
		seen := len(slices.Concat(forward...))
		require.Equal(t, seen < len(want), more, "forward page %d: more", len(forward))
		if !more {
			break
		}
		require.Len(t, page, p.Limit, "only the last page is short")
		p.After = &page[len(page)-1]
	}
	requireSameKeysets(t, want, slices.Concat(forward...))

	// Backward from the first row of the last page retraces the forward pages.
	for i := len(forward) - 1; i > 0; i-- {
		if len(forward[i]) == 0 {
			continue
		}
		back := p
		back.After, back.Backward = &forward[i][0], true
		page, more, err := kind.list(ctx, f, back)
		require.NoError(t, err)
		requireSameKeysets(t, forward[i-1], page)
		require.Equal(t, i-1 > 0, more, "backward to page %d: more says whether earlier rows exist", i-1)
	}

	// Backward with no position is the tail of the list.
	back := p
	back.After, back.Backward = nil, true
	page, more, err := kind.list(ctx, f, back)
	require.NoError(t, err)
	requireSameKeysets(t, want[max(0, len(want)-p.Limit):], page)
	require.Equal(t, len(want) > p.Limit, more)
}

func requireSameKeysets(t *testing.T, want, got []Keyset) {
	t.Helper()
	require.Equal(t, idsOf(want), idsOf(got))
	for i := range want {
		require.True(t, want[i].CreatedAt.Equal(got[i].CreatedAt), "row %d created_at", i)
	}
}

func idsOf(ks []Keyset) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.ID
	}
	return out
}

func TestListSessionsFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	agent2 := ids.New(ids.Agent)
	require.NoError(t, f.st.InsertAgent(ctx, agent2, f.ws, json.RawMessage(`{}`), time.Now()))
	require.NoError(t, f.st.InsertAgentVersion(ctx, agent2, 2, json.RawMessage(`{}`), time.Now()))

	type row struct {
		id, agent, status string
		version           int64
	}
	base := micros(time.Now())
	var rows []row
	for i := range 12 {
		r := row{id: ids.New(ids.Session), agent: f.agentID, version: 1, status: []string{"idle", "running", "terminated"}[i%3]}
		if i%2 == 1 {
			r.agent, r.version = agent2, int64(1+i%4/2)
		}
		rec := f.sessionRecord(r.id, base.Add(time.Duration(i)*time.Millisecond))
		rec.AgentID, rec.AgentVersion, rec.Status = r.agent, r.version, r.status
		require.NoError(t, f.st.InsertSession(ctx, rec))
		rows = append(rows, r)
	}

	cases := []struct {
		name string
		p    SessionListParams
	}{
		{"agent", SessionListParams{AgentID: agent2}},
		{"agent version", SessionListParams{AgentID: agent2, AgentVersion: 2}},
		{"statuses", SessionListParams{Statuses: []string{"idle", "terminated"}}},
		{"agent and status", SessionListParams{AgentID: f.agentID, Statuses: []string{"running"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for _, r := range rows {
				if (tc.p.AgentID == "" || r.agent == tc.p.AgentID) && (tc.p.AgentVersion == 0 || r.version == tc.p.AgentVersion) &&
					(len(tc.p.Statuses) == 0 || slices.Contains(tc.p.Statuses, r.status)) {
					want = append(want, r.id)
				}
			}
			require.NotEmpty(t, want, "the case selects something")
			p := tc.p
			p.Limit = 2
			var got []string
			for {
				page, more, err := f.st.ListSessions(ctx, f.ws, p)
				require.NoError(t, err)
				for _, s := range page {
					got = append(got, s.ID)
				}
				if !more {
					break
				}
				p.After = &Keyset{page[len(page)-1].CreatedAt, page[len(page)-1].ID}
			}
			require.Equal(t, want, got)
		})
	}
}
