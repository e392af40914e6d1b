//go:build integration

package store

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/pgtest"
)

func newKey() string { return "sk-ant-test-" + ids.New("") }

func TestAPIKeysAreStoredHashed(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := t.Context()
	ws, err := st.CreateWorkspace(ctx, "hashed")
	require.NoError(t, err)
	require.True(t, ids.HasPrefix(ws, ids.Workspace))
	key := newKey()
	require.NoError(t, st.CreateAPIKey(ctx, ws, key))

	var row string
	var hash []byte
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT row_to_json(k)::text, key_hash FROM api_keys k WHERE workspace_id = $1`, ws).Scan(&row, &hash))
	require.NotContains(t, row, key, "the stored row does not hold the key")
	require.False(t, bytes.Contains(hash, []byte(key)))
	sum := sha256.Sum256([]byte(key))
	require.Equal(t, sum[:], hash, "the key is stored as its SHA-256 digest")

	got, err := st.WorkspaceForKey(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ws, got)
}

func TestWorkspaceForKeyErrors(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := t.Context()
	ws, err := st.CreateWorkspace(ctx, "w")
	require.NoError(t, err)
	key := newKey()
	require.NoError(t, st.CreateAPIKey(ctx, ws, key))

	cases := []struct {
		name string
		key  string
	}{
		{"unknown key", newKey()},
		{"empty key", ""},
		{"prefix of a key", key[:len(key)-1]},
		{"key in another case", strings.ToUpper(key)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := st.WorkspaceForKey(ctx, tc.key)
			require.ErrorIs(t, err, ErrNotFound)
		})
	}

	t.Run("a key can be registered once", func(t *testing.T) {
		other, err := st.CreateWorkspace(ctx, "other")
		require.NoError(t, err)
		require.ErrorIs(t, st.CreateAPIKey(ctx, other, key), ErrDuplicate)
	})
}

func TestEnsureAPIKeyIsIdempotent(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := t.Context()
	key := newKey()

	first, err := st.EnsureAPIKey(ctx, NewAPIKey{Secret: key}, "dev")
	require.NoError(t, err)
	again, err := st.EnsureAPIKey(ctx, NewAPIKey{Secret: key}, "dev")
	require.NoError(t, err)
	require.Equal(t, first, again)
	found, err := st.WorkspaceForKey(ctx, key)
	require.NoError(t, err)
	require.Equal(t, first, found)

	// A changed configured key reaches the same workspace, and the key it replaces ends.
	replacement := newKey()
	other, err := st.EnsureAPIKey(ctx, NewAPIKey{Secret: replacement}, "dev")
	require.NoError(t, err)
	require.Equal(t, first, other, "a changed configured key keeps the workspace's data")
	_, err = st.WorkspaceForKey(ctx, key)
	require.ErrorIs(t, err, ErrNotFound, "the replaced configured key no longer works")
	_, err = st.EnsureAPIKey(ctx, NewAPIKey{Secret: key}, "dev")
	require.ErrorIs(t, err, ErrKeyEnded, "a replaced key is not brought back by configuring it again")
	require.Equal(t, 1, countRows(t, st, "workspaces"))
	require.Equal(t, 2, countRows(t, st, "api_keys"))

	// A key made by an operator is not a configured key: configuring another key leaves it.
	made := newKey()
	_, err = st.InsertAPIKey(ctx, NewAPIKey{WorkspaceID: first, Secret: made, CreatedBy: "admin"})
	require.NoError(t, err)
	_, err = st.EnsureAPIKey(ctx, NewAPIKey{Secret: newKey()}, "dev")
	require.NoError(t, err)
	found, err = st.WorkspaceForKey(ctx, made)
	require.NoError(t, err)
	require.Equal(t, first, found)
}

// Several replicas starting at once with the same configured key must agree on one workspace.
func TestEnsureAPIKeyConcurrentlyCreatesOneWorkspace(t *testing.T) {
	t.Parallel()
	const replicas, callsEach = 4, 3
	url := migratedURL(t)
	key := newKey()

	var mu sync.Mutex
	got := map[string]int{}
	errs := make([]error, replicas*callsEach)
	var wg sync.WaitGroup
	for r := range replicas {
		st := openStore(t, url)
		for c := range callsEach {
			wg.Go(func() {
				ws, err := st.EnsureAPIKey(t.Context(), NewAPIKey{Secret: key}, "dev")
				errs[r*callsEach+c] = err
				mu.Lock()
				got[ws]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "call %d", i)
	}
	require.Len(t, got, 1, "every call returned the same workspace: %v", got)

	st := openStore(t, url)
	require.Equal(t, 1, countRows(t, st, "workspaces"))
	require.Equal(t, 1, countRows(t, st, "api_keys"))
}

func countRows(t *testing.T, st *Store, table string) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool().QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&n))
	return n
}

// The controller's per-namespace workspaces: concurrent first uses of one name agree on one
// workspace, another name gets another, and WorkspaceExists tells them from unknown ids.
func TestEnsureWorkspace(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := t.Context()
	const n = 8
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ws, err := st.EnsureWorkspace(ctx, "kubernetes namespace a")
			require.NoError(t, err)
			got[i] = ws
		})
	}
	wg.Wait()
	for _, ws := range got {
		require.Equal(t, got[0], ws)
	}
	other, err := st.EnsureWorkspace(ctx, "kubernetes namespace b")
	require.NoError(t, err)
	require.NotEqual(t, got[0], other)
	again, err := st.EnsureWorkspace(ctx, "kubernetes namespace a")
	require.NoError(t, err)
	require.Equal(t, got[0], again)

	ok, err := st.WorkspaceExists(ctx, other)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = st.WorkspaceExists(ctx, "wrkspc_unknown")
	require.NoError(t, err)
	require.False(t, ok)
}

func TestEndAPIKey(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := t.Context()
	ws, err := st.CreateWorkspace(ctx, "ending")
	require.NoError(t, err)
	key := newKey()
	k, err := st.InsertAPIKey(ctx, NewAPIKey{WorkspaceID: ws, Secret: key, Label: "l", Hint: "sk-…x"})
	require.NoError(t, err)
	require.Nil(t, k.ExpiresAt)

	// A grace period sets the end; a later, longer one never pushes it back.
	soon := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	ended, err := st.EndAPIKey(ctx, k.ID, soon, false, "test")
	require.NoError(t, err)
	require.True(t, soon.Equal(*ended.ExpiresAt))
	ended, err = st.EndAPIKey(ctx, k.ID, soon.Add(time.Hour), false, "test")
	require.NoError(t, err)
	require.True(t, soon.Equal(*ended.ExpiresAt), "an end is never pushed back")
	got, err := st.WorkspaceForKey(ctx, key)
	require.NoError(t, err, "within the grace the key works")
	require.Equal(t, ws, got)

	revoked, err := st.EndAPIKey(ctx, k.ID, time.Now(), true, "test")
	require.NoError(t, err)
	require.NotNil(t, revoked.RevokedAt)
	again, err := st.EndAPIKey(ctx, k.ID, time.Now().Add(time.Minute), true, "test")
	require.NoError(t, err)
	require.True(t, revoked.RevokedAt.Equal(*again.RevokedAt), "revoking twice keeps the first time")
	require.Equal(t, "test", again.EndedBy, "who ended the key is kept")
	_, err = st.WorkspaceForKey(ctx, key)
	require.ErrorIs(t, err, ErrNotFound)
	found, err := st.KeyBySecret(ctx, key)
	require.NoError(t, err, "a revoked key is still found by its secret, for the caller to refuse")
	require.Equal(t, k.ID, found.ID)

	_, err = st.EndAPIKey(ctx, "apikey_missing", time.Now(), true, "test")
	require.ErrorIs(t, err, ErrNotFound)

	// Admin keys belong to no workspace, and a workspace key must name one.
	admin, err := st.InsertAPIKey(ctx, NewAPIKey{Secret: newKey(), Admin: true})
	require.NoError(t, err)
	require.Empty(t, admin.WorkspaceID)
	_, err = st.InsertAPIKey(ctx, NewAPIKey{Secret: newKey()})
	require.Error(t, err, "a workspace key without a workspace is refused by the schema")
	all, err := st.ListAPIKeys(ctx, "")
	require.NoError(t, err)
	require.Len(t, all, 2)
	mine, err := st.ListAPIKeys(ctx, ws)
	require.NoError(t, err)
	require.Len(t, mine, 1)
}

// A database from before keys were manageable (migration 00008): its keys all came from
// MANAGED_AGENT_API_KEY, so a changed configured key must end them, and configuring one
// again fills in its hint.
func TestKeysFromBeforeMigration8(t *testing.T) {
	t.Parallel()
	st := openStore(t, pgtest.URL(t))
	ctx := t.Context()
	provider, closeDB, err := st.migrations()
	require.NoError(t, err)
	_, err = provider.UpTo(ctx, 7)
	closeDB()
	require.NoError(t, err)
	old := newKey()
	_, err = st.Pool().Exec(ctx, `INSERT INTO workspaces (id, name) VALUES ('wrkspc_old', 'default')`)
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `INSERT INTO api_keys (id, workspace_id, key_hash) VALUES ('apikey_old', 'wrkspc_old', $1)`, hashKey(old))
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx, discardLogger()))

	ws, err := st.EnsureAPIKey(ctx, NewAPIKey{Secret: old, Hint: "sk-ant-…old"}, "default")
	require.NoError(t, err)
	require.Equal(t, "wrkspc_old", ws)
	k, err := st.KeyBySecret(ctx, old)
	require.NoError(t, err)
	require.Equal(t, ConfiguredKey, k.CreatedBy)
	require.Equal(t, "sk-ant-…old", k.Hint, "the hint is filled in by the next start")

	_, err = st.EnsureAPIKey(ctx, NewAPIKey{Secret: newKey()}, "default")
	require.NoError(t, err)
	_, err = st.WorkspaceForKey(ctx, old)
	require.ErrorIs(t, err, ErrNotFound, "a changed configured key ends the key from before the upgrade")
}
