package turns

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// logOf is n processed events of bodySize bytes each, then a queued one, seqs from 1.
func logOf(n, bodySize int) []agent.Decoded {
	at := time.Now()
	out := make([]wire.Event, 0, n+1)
	for i := range n {
		out = append(out, wire.Event{ID: fmt.Sprint("e", i), Type: "agent.message", Seq: int64(i + 1),
			Body: []byte(`"` + strings.Repeat("x", bodySize-2) + `"`), ProcessedAt: &at})
	}
	out = append(out, wire.Event{ID: "queued", Type: "user.message", Seq: int64(n + 1), Body: []byte(`{}`)})
	decoded := make([]agent.Decoded, len(out))
	for i, ev := range out {
		decoded[i] = agent.Decoded{Event: ev}
	}
	return decoded
}

func TestConversationsKeepProcessedEventsWithinTheirBound(t *testing.T) {
	t.Parallel()
	perEvent := 2*1000 + len("e0") + len("agent.message") + eventOverhead // ids e0…e9
	c := newConversations(25 * perEvent)

	c.put("a", logOf(10, 1000), nil)
	kept, upTo, _ := c.get("a")
	require.Len(t, kept, 10, "the queued event is not kept")
	require.EqualValues(t, 10, upTo)

	c.put("b", logOf(10, 1000), nil)
	c.get("a") // a is now the more recently used
	c.put("c", logOf(10, 1000), nil)
	kept, _, _ = c.get("b")
	require.Nil(t, kept, "the least recently used session went first")
	for _, id := range []string{"a", "c"} {
		kept, _, _ = c.get(id)
		require.Len(t, kept, 10, id)
	}
	require.LessOrEqual(t, c.bytes, c.max)

	c.put("a", logOf(5, 1000), nil) // replaced, not added
	kept, upTo, _ = c.get("a")
	require.Len(t, kept, 5)
	require.EqualValues(t, 5, upTo)

	c.put("huge", logOf(30, 1000), nil)
	kept, _, _ = c.get("huge")
	require.Nil(t, kept, "a conversation over the whole bound is not kept")
	c.drop("c")
	kept, _, _ = c.get("c")
	require.Nil(t, kept)
	require.Equal(t, 5*perEvent, c.bytes, "only a's five events are counted")

	var none *conversations = newConversations(0)
	none.put("a", logOf(1, 10), nil)
	kept, upTo, _ = none.get("a")
	require.Nil(t, kept)
	require.Zero(t, upTo)
}

// TestConversationsExtendInPlace checks that extending a kept conversation appends without
// touching what an earlier view of it shows, and refuses when the entry moved on or fresh
// holds what must be merged.
func TestConversationsExtendInPlace(t *testing.T) {
	t.Parallel()
	c := newConversations(64 << 20)
	all := logOf(30, 10)[:30] // processed events, seqs 1…30
	c.put("a", all[:10], nil)
	kept, _, _ := c.get("a")

	first, ok := c.extend("a", kept, all[10:20], nil)
	require.True(t, ok)
	require.Equal(t, all[:20], first)
	_, upTo, _ := c.get("a")
	require.EqualValues(t, 20, upTo)

	// A second request that read the same kept slice finds the entry moved on.
	_, ok = c.extend("a", kept, all[10:12], nil)
	require.False(t, ok, "the entry is no longer the slice it read")

	// Extending the current entry leaves the earlier view as it was.
	current, _, _ := c.get("a")
	second, ok := c.extend("a", current, all[20:30], nil)
	require.True(t, ok)
	require.Equal(t, all[:30], second)
	require.Equal(t, all[:20], first, "an earlier view is not written over")

	// One event at a time: after a reallocation there is room, and the appends go in place.
	more := logOf(60, 10)[:60]
	views := [][]agent.Decoded{second}
	inPlace := false
	for i := 30; i < 60; i++ {
		cur, _, _ := c.get("a")
		next, ok := c.extend("a", cur, more[i:i+1], nil)
		require.True(t, ok)
		inPlace = inPlace || &next[0] == &cur[0]
		views = append(views, next)
	}
	require.True(t, inPlace, "some extension appended in place")
	for _, v := range views {
		for i, d := range v {
			require.Equal(t, int64(i+1), d.Event.Seq, "view of %d events, position %d", len(v), i)
		}
	}

	queued := logOf(61, 10)[60:] // a queued event: merged by the caller
	latest, _, _ := c.get("a")
	_, ok = c.extend("a", latest, queued, nil)
	require.False(t, ok)
	_, ok = c.extend("a", latest, all[5:6], nil)
	require.False(t, ok, "an event at or below what is kept")

	// A put keeps no spare capacity, so a view it hands out is never written past.
	c.put("b", all[:10:20], nil)
	kb, _, _ := c.get("b")
	require.Equal(t, len(kb), cap(kb))
}
