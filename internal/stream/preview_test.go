package stream

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestPreviewNumbersItsFrames(t *testing.T) {
	t.Parallel()
	hub := NewMemoryHub()
	src := Source{SessionID: newSessionID(), RequestStartID: newEventID(), RequestStartSeq: 4}
	ch, unsub := hub.Subscribe(src.SessionID)
	defer unsub()
	eid := newEventID()

	p, err := StartPreview(context.Background(), hub, src, wire.EventAgentMessage, eid)
	require.NoError(t, err)
	require.NoError(t, p.Delta(context.Background(), 0, "Hello"))
	require.NoError(t, p.Delta(context.Background(), 0, ", world"))
	require.NoError(t, p.Delta(context.Background(), 1, "Second block"))

	want := []Frame{
		{Source: src, Type: FrameEventStart, EventID: eid, EventType: wire.EventAgentMessage},
		{Source: src, Type: FrameEventDelta, EventID: eid, Index: 0, Text: "Hello", Seq: 1},
		{Source: src, Type: FrameEventDelta, EventID: eid, Index: 0, Text: ", world", Seq: 2},
		{Source: src, Type: FrameEventDelta, EventID: eid, Index: 1, Text: "Second block", Seq: 3},
	}
	got := recvN(t, ch, len(want))
	require.Equal(t, want, got)

	pf := NewPreviewFilter([]string{wire.EventAgentMessage}, src.RequestStartSeq, src.RequestStartSeq)
	for _, f := range got {
		require.True(t, pf.Admit(f), "a connection writes the whole preview: %s", label(f))
	}
}

// TestPreviewEndTellsTheConnectionToStopWaiting: End numbers its frame after the deltas, a
// connection that got every frame stops waiting for the preview at it, and one that missed a
// frame stops too (at the hole); the end is published even after a failure.
func TestPreviewEndTellsTheConnectionToStopWaiting(t *testing.T) {
	t.Parallel()
	hub := NewMemoryHub()
	src := Source{SessionID: newSessionID(), RequestStartID: newEventID(), RequestStartSeq: 4}
	ch, unsub := hub.Subscribe(src.SessionID)
	defer unsub()
	eid := newEventID()
	p, err := StartPreview(context.Background(), hub, src, wire.EventAgentMessage, eid)
	require.NoError(t, err)
	require.NoError(t, p.Delta(context.Background(), 0, "Hello"))
	require.NoError(t, p.End(context.Background()))
	got := recvN(t, ch, 3)
	require.Equal(t, Frame{Source: src, Type: FrameEventEnd, EventID: eid, Seq: 2}, got[2])

	msg := wire.Event{ID: eid, Type: wire.EventAgentMessage, Seq: 5}
	pf := NewPreviewFilter([]string{wire.EventAgentMessage}, 3, 3)
	pf.Committed(wire.Event{ID: src.RequestStartID, Type: wire.EventSpanModelRequestStart, Seq: 4})
	require.True(t, pf.Await(msg), "the message waits for its preview")
	require.True(t, pf.Admit(got[0]))
	require.True(t, pf.Admit(got[1]))
	require.True(t, pf.Await(msg), "the message waits for the preview's end")
	require.False(t, pf.Admit(got[2]), "an end is never written")
	require.False(t, pf.Await(msg))

	shed := &failingHub{n: 1}
	p, _ = StartPreview(context.Background(), shed, src, wire.EventAgentMessage, eid)
	_ = p.Delta(context.Background(), 0, "lost")
	shed.n = 100
	require.NoError(t, p.End(context.Background()))
	require.Equal(t, []string{FrameEventStart, FrameEventEnd}, []string{shed.published[0].Type, shed.published[1].Type})
	require.Equal(t, 2, shed.published[1].Seq, "numbered after the lost delta, so a connection sees the hole")
}

func TestPreviewOfThinkingIsStartOnly(t *testing.T) {
	t.Parallel()
	hub := NewMemoryHub()
	src := Source{SessionID: newSessionID()}
	ch, unsub := hub.Subscribe(src.SessionID)
	defer unsub()

	p, err := StartPreview(context.Background(), hub, src, wire.EventAgentThinking, newEventID())
	require.NoError(t, err)
	require.ErrorIs(t, p.Delta(context.Background(), 0, "hmm"), ErrInvalidFrame)
	require.Equal(t, FrameEventStart, recv(t, ch).Type)
	require.Empty(t, ch, "no delta was published")
}

// failingHub sheds every frame after the first n.
type failingHub struct {
	n         int
	published []Frame
}

func (h *failingHub) Publish(_ context.Context, f Frame) error {
	if len(h.published) >= h.n {
		return ErrShed
	}
	h.published = append(h.published, f)
	return nil
}

func (h *failingHub) Subscribe(string) (<-chan Frame, func()) { return nil, func() {} }

func TestPreviewStopsAfterAFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		n    int // frames the hub takes before it sheds
	}{
		{name: "start shed", n: 0},
		{name: "delta shed", n: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hub := &failingHub{n: tt.n}
			p, err := StartPreview(context.Background(), hub, Source{SessionID: newSessionID()}, wire.EventAgentMessage, newEventID())
			if tt.n == 0 {
				require.ErrorIs(t, err, ErrShed)
			}
			require.NotNil(t, p)
			for range 3 {
				_ = p.Delta(context.Background(), 0, "x")
			}
			hub.n = 100 // the hub recovers, but the preview has a hole now
			require.ErrorIs(t, p.Delta(context.Background(), 0, "y"), ErrShed)
			require.Len(t, hub.published, tt.n, "nothing after the first failure")
		})
	}
}

func TestPreviewRejectsInvalidStart(t *testing.T) {
	t.Parallel()
	_, err := StartPreview(context.Background(), NewMemoryHub(), Source{SessionID: newSessionID()}, wire.EventAgentToolUse, newEventID())
	require.ErrorIs(t, err, ErrInvalidFrame)
}
