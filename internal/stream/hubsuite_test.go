package stream

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// hubHarness is a running hub under test.
type hubHarness struct {
	hub Hub
	// subscribe subscribes and returns once frames published from now on reach the channel.
	subscribe func(t *testing.T, sessionID string) (<-chan Frame, func())
}

// runHubSuite checks what every Hub must do. newHarness gives each subtest its own hub.
func runHubSuite(t *testing.T, newHarness func(t *testing.T) hubHarness) {
	t.Run("RoutesBySession", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		a, b := newSessionID(), newSessionID()
		aCh, unsubA := h.subscribe(t, a)
		defer unsubA()
		bCh, unsubB := h.subscribe(t, b)
		defer unsubB()

		forA, forB := startFrame(a, wire.EventAgentMessage, newEventID()), startFrame(b, wire.EventAgentMessage, newEventID())
		publishAll(t, h.hub, []Frame{forA, forB})
		require.Equal(t, forB, recv(t, bCh), "b's first frame is its own: a's never came")
		require.Equal(t, forA, recv(t, aCh))
		// Frames of one publisher arrive in order, so a marker after b's frame proves that
		// a was never sent it.
		marker := startFrame(a, wire.EventAgentThinking, newEventID())
		publishAll(t, h.hub, []Frame{marker})
		require.Equal(t, marker, recv(t, aCh), "a's next frame is the marker: b's never came")
	})

	t.Run("ManySubscribersGetEveryFrameInOrder", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		sid, eid := newSessionID(), newEventID()
		subs := make([]<-chan Frame, 20)
		for i := range subs {
			ch, unsub := h.subscribe(t, sid)
			defer unsub()
			subs[i] = ch
		}
		frames := append([]Frame{startFrame(sid, wire.EventAgentMessage, eid)}, numbered(sid, eid, 50)...)
		publishAll(t, h.hub, frames)
		for i, ch := range subs {
			require.Equal(t, frames, recvN(t, ch, len(frames)), "subscriber %d", i)
		}
	})

	t.Run("SlowSubscriberLosesFramesWithoutBlocking", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		sid, eid := newSessionID(), newEventID()
		slow, unsubSlow := h.subscribe(t, sid) // never read until the end
		defer unsubSlow()
		fast, unsubFast := h.subscribe(t, sid)
		defer unsubFast()

		const rounds = 3
		frames := numbered(sid, eid, rounds*subscriberBuffer)
		for r := range rounds {
			// A round fits the fast subscriber's buffer, so it loses nothing however the
			// scheduler runs it; the slow one is full after the first round.
			round := frames[r*subscriberBuffer : (r+1)*subscriberBuffer]
			publishUnblocked(t, h.hub, round)
			require.Equal(t, round, recvN(t, fast, len(round)), "round %d", r)
		}
		require.Len(t, slow, subscriberBuffer, "the slow subscriber's buffer is full")
		require.Equal(t, frames[:subscriberBuffer], recvN(t, slow, subscriberBuffer), "it kept the first frames and lost the rest")
	})

	t.Run("UnsubscribeStopsDelivery", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		sid := newSessionID()
		gone, unsubGone := h.subscribe(t, sid)
		stays, unsubStays := h.subscribe(t, sid)
		defer unsubStays()
		unsubGone()
		unsubGone() // a second call is harmless

		f := startFrame(sid, wire.EventAgentMessage, newEventID())
		publishAll(t, h.hub, []Frame{f})
		require.Equal(t, f, recv(t, stays))
		require.Empty(t, gone, "the frame was fanned out without the unsubscribed channel")
	})

	t.Run("RejectsInvalidFrames", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		sid := newSessionID()
		ch, unsub := h.subscribe(t, sid)
		defer unsub()

		bad := startFrame(sid, wire.EventAgentToolUse, newEventID())
		require.ErrorIs(t, h.hub.Publish(context.Background(), bad), ErrInvalidFrame)
		good := startFrame(sid, wire.EventAgentMessage, newEventID())
		publishAll(t, h.hub, []Frame{good})
		require.Equal(t, good, recv(t, ch), "the invalid frame was not sent")
	})

	t.Run("CarriesLargeFrames", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		sid, eid := newSessionID(), newEventID()
		ch, unsub := h.subscribe(t, sid)
		defer unsub()

		big := deltaFrame(sid, eid, 1, longText(100_000))
		big.Index = 3
		big.Source = Source{SessionID: sid, ThreadID: "sthr_x", RequestStartID: newEventID(), RequestStartSeq: 42}
		after := deltaFrame(sid, eid, 2, "and more")
		publishAll(t, h.hub, []Frame{big, after})
		require.Equal(t, big, recv(t, ch))
		require.Equal(t, after, recv(t, ch))
	})

	t.Run("CanceledContext", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, h.hub.Publish(ctx, startFrame(newSessionID(), wire.EventAgentMessage, newEventID())), context.Canceled)
	})
}

// publishUnblocked publishes fs and fails if Publish hangs, as it would if it waited for a
// subscriber.
func publishUnblocked(t *testing.T, hub Hub, fs []Frame) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for _, f := range fs {
			if err := hub.Publish(context.Background(), f); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(waitFor):
		t.Fatal("Publish blocked on a subscriber")
	}
}
