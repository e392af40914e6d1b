//go:build integration

package app

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/pgtest"
	"github.com/managed-agents/managed-agents/internal/store"
)

func listenQueries(t *testing.T, st *store.Store) []string {
	t.Helper()
	rows, err := st.Pool().Query(t.Context(), `SELECT query FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%' ORDER BY query`)
	require.NoError(t, err)
	qs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return qs
}

// The API listens to committed events, key changes and queued work at once and to previews from the first stream that
// wants them, each on its own connection; Close releases both, and a second Close is harmless.
func TestAPIListensPerTopic(t *testing.T) {
	t.Parallel()
	api, err := NewAPI(t.Context(), Config{DatabaseURL: pgtest.URL(t)}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	defer api.Close()
	require.Eventually(t, func() bool {
		return slices.Equal(listenQueries(t, api.Store), []string{"LISTEN " + string(store.TopicEvents), "LISTEN " + string(store.TopicKeys), "LISTEN " + string(store.TopicWork)})
	}, 15*time.Second, 10*time.Millisecond, "the events, keys and work topics only, before any preview subscriber")

	_, unsubscribe := api.Previews.Subscribe("sesn_x")
	defer unsubscribe()
	require.Eventually(t, func() bool {
		return slices.Equal(listenQueries(t, api.Store), []string{"LISTEN " + string(store.TopicEvents), "LISTEN " + string(store.TopicKeys),
			"LISTEN " + string(store.TopicPreviews), "LISTEN " + string(store.TopicWork)})
	}, 15*time.Second, 10*time.Millisecond, "a preview subscriber adds the previews topic")

	// A second API on the same database shows the first one's connections are gone after Close.
	other, err := NewAPI(context.Background(), Config{DatabaseURL: api.Store.Pool().Config().ConnString()}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	defer other.Close()
	api.Close()
	api.Close()
	require.Eventually(t, func() bool {
		return slices.Equal(listenQueries(t, other.Store), []string{"LISTEN " + string(store.TopicEvents), "LISTEN " + string(store.TopicKeys), "LISTEN " + string(store.TopicWork)})
	}, 15*time.Second, 10*time.Millisecond, "only the other API's listeners are left")
}
