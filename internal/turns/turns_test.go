package turns

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestMoveDeliveredMirrorsDeliverEvents(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	before := at.Add(-time.Minute)
	ev := func(id string, seq int64, processed *time.Time) wire.Event {
		return wire.Event{ID: id, Type: wire.EventUserMessage, Seq: seq, ProcessedAt: processed, CreatedAt: before}
	}
	cases := []struct {
		name    string
		history []wire.Event
		ids     []string
		lastSeq int64
		want    []wire.Event
	}{
		{
			name:    "one queued event moves to the end",
			history: []wire.Event{ev("a", 1, &before), ev("q", 2, nil), ev("b", 3, &before)},
			ids:     []string{"q"}, lastSeq: 3,
			want: []wire.Event{ev("a", 1, &before), ev("b", 3, &before), ev("q", 4, &at)},
		},
		{
			name:    "several move in the order given, not log order",
			history: []wire.Event{ev("q1", 1, nil), ev("a", 2, &before), ev("q2", 3, nil)},
			ids:     []string{"q2", "q1"}, lastSeq: 5,
			want: []wire.Event{ev("a", 2, &before), ev("q2", 6, &at), ev("q1", 7, &at)},
		},
		{
			name:    "already at the end",
			history: []wire.Event{ev("a", 1, &before), ev("q", 2, nil)},
			ids:     []string{"q"}, lastSeq: 2,
			want: []wire.Event{ev("a", 1, &before), ev("q", 3, &at)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			orig := append([]wire.Event(nil), tc.history...)
			got := moveDelivered(tc.history, tc.ids, tc.lastSeq, at)
			require.Equal(t, tc.want, got)
			require.Equal(t, orig, tc.history, "the input is left alone")
		})
	}
}

func TestStoredTimeIsWhatPostgreSQLKeeps(t *testing.T) {
	t.Parallel()
	in := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	got := storedTime(in)
	require.Equal(t, time.UTC, got.Location())
	require.Equal(t, time.Date(2026, 1, 2, 2, 4, 5, 123456000, time.UTC), got)
}
