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

	c.put("a", logOf(10, 1000))
	kept, upTo := c.get("a")
	require.Len(t, kept, 10, "the queued event is not kept")
	require.EqualValues(t, 10, upTo)

	c.put("b", logOf(10, 1000))
	c.get("a") // a is now the more recently used
	c.put("c", logOf(10, 1000))
	kept, _ = c.get("b")
	require.Nil(t, kept, "the least recently used session went first")
	for _, id := range []string{"a", "c"} {
		kept, _ = c.get(id)
		require.Len(t, kept, 10, id)
	}
	require.LessOrEqual(t, c.bytes, c.max)

	c.put("a", logOf(5, 1000)) // replaced, not added
	kept, upTo = c.get("a")
	require.Len(t, kept, 5)
	require.EqualValues(t, 5, upTo)

	c.put("huge", logOf(30, 1000))
	kept, _ = c.get("huge")
	require.Nil(t, kept, "a conversation over the whole bound is not kept")
	c.drop("c")
	kept, _ = c.get("c")
	require.Nil(t, kept)
	require.Equal(t, 5*perEvent, c.bytes, "only a's five events are counted")

	var none *conversations = newConversations(0)
	none.put("a", logOf(1, 10))
	kept, upTo = none.get("a")
	require.Nil(t, kept)
	require.Zero(t, upTo)
}
