package durable

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/stream"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// frameCountingEmitter records how many preview frames had been published when each Emit
// call reached the log.
type frameCountingEmitter struct {
	frames <-chan stream.Frame
	seen   []stream.Frame
	atEmit [][]string // frame types published before each Emit
}

func (e *frameCountingEmitter) Emit(_ context.Context, evs []agent.NewEvent) ([]wire.Event, error) {
	for len(e.frames) > 0 {
		e.seen = append(e.seen, <-e.frames)
	}
	var types []string
	for _, f := range e.seen {
		types = append(types, f.Type)
	}
	e.atEmit = append(e.atEmit, types)
	out := make([]wire.Event, len(evs))
	for i, ev := range evs {
		out[i] = wire.Event{ID: ev.ID, Type: ev.Type, Body: ev.Body, Seq: int64(len(e.atEmit)*10 + i)}
	}
	return out, nil
}

// TestPreviewEndsBeforeTheResponseCommits: every preview's end is published before the
// events of its model response are committed, so an SSE connection that waits for it never
// writes the committed event first.
func TestPreviewEndsBeforeTheResponseCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hub := stream.NewMemoryHub()
	frames, unsubscribe := hub.Subscribe("sesn_1")
	defer unsubscribe()
	sink := newPreviewSink(ctx, hub, slog.New(slog.DiscardHandler), "sesn_1", nil)
	next := &frameCountingEmitter{frames: frames}
	em := observingEmitter{next: next, sink: sink}

	_, err := em.Emit(ctx, []agent.NewEvent{{ID: "sevt_start", Type: wire.EventSpanModelRequestStart, Body: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	sink.Start("sevt_think", wire.EventAgentThinking)
	sink.Start("sevt_msg", wire.EventAgentMessage)
	sink.Delta("sevt_msg", 0, "hello")
	_, err = em.Emit(ctx, []agent.NewEvent{
		{ID: "sevt_think", Type: wire.EventAgentThinking, Body: json.RawMessage(`{}`)},
		{ID: "sevt_msg", Type: wire.EventAgentMessage, Body: json.RawMessage(`{"content":[]}`)},
		{ID: "sevt_end", Type: wire.EventSpanModelRequestEnd, Body: json.RawMessage(`{}`)},
	})
	require.NoError(t, err)

	require.Empty(t, next.atEmit[0], "nothing was previewed before the request started")
	require.ElementsMatch(t, []string{stream.FrameEventStart, stream.FrameEventStart, stream.FrameEventDelta, stream.FrameEventEnd, stream.FrameEventEnd}, next.atEmit[1],
		"both previews ended before their events were committed")
	for _, f := range next.seen {
		require.Equal(t, "sevt_start", f.RequestStartID, "frames name their request")
	}
	sink.Delta("sevt_msg", 0, "late")
	require.Empty(t, frames, "an ended preview publishes nothing more")
}
