package stream

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

const filterSession = "sesn_filter"

func msgStart(id string) Frame   { return startFrame(filterSession, wire.EventAgentMessage, id) }
func thinkStart(id string) Frame { return startFrame(filterSession, wire.EventAgentThinking, id) }
func delta(id string, seq int) Frame {
	return deltaFrame(filterSession, id, seq, fmt.Sprintf("t%d", seq))
}

// inRequest puts f in the model request whose span.model_request_start is startID at seq.
func inRequest(f Frame, startID string, seq int64) Frame {
	f.RequestStartID, f.RequestStartSeq = startID, seq
	return f
}

func onThread(f Frame, threadID string) Frame {
	f.ThreadID = threadID
	return f
}

func label(f Frame) string {
	switch f.Type {
	case FrameEventStart:
		return "start " + f.EventID
	case FrameEventEnd:
		return "end " + f.EventID
	}
	return fmt.Sprintf("delta %s #%d", f.EventID, f.Seq)
}

func labels(fs []Frame) []string {
	var out []string
	for _, f := range fs {
		out = append(out, label(f))
	}
	return out
}

// filterStep gives the filter a frame from the hub or a committed event the connection
// wrote, and names the frames that are then to be written.
type filterStep struct {
	frame *Frame
	event *wire.Event
	want  []string
}

func admit(f Frame) filterStep { return filterStep{frame: &f, want: []string{label(f)}} }
func drop(f Frame) filterStep  { return filterStep{frame: &f} }

func commit(ev wire.Event, released ...Frame) filterStep {
	return filterStep{event: &ev, want: labels(released)}
}

func message(id string, seq int64) wire.Event {
	return committed(id, wire.EventAgentMessage, seq, "")
}

func requestStart(id string, seq int64) wire.Event {
	return committed(id, "span.model_request_start", seq, "")
}

func requestEnd(startID string, seq int64) wire.Event {
	return committed(newEventID(), wire.EventSpanModelRequestEnd, seq, fmt.Sprintf(`{"model_request_start_id":%q,"is_error":true}`, startID))
}

func TestPreviewFilter(t *testing.T) {
	t.Parallel()
	both := []string{wire.EventAgentMessage, wire.EventAgentThinking}
	tests := []struct {
		name   string
		wanted []string
		after  int64
		steps  []filterStep
	}{
		{
			name:  "without event_deltas nothing is written",
			steps: []filterStep{drop(msgStart("m1")), drop(delta("m1", 1)), drop(thinkStart("t1"))},
		},
		{
			name:   "a message preview, then its committed event is the last thing for its id",
			wanted: []string{wire.EventAgentMessage},
			steps: []filterStep{
				admit(msgStart("m1")), admit(delta("m1", 1)), admit(delta("m1", 2)),
				commit(message("m1", 5)),
				drop(delta("m1", 3)), drop(msgStart("m1")),
			},
		},
		{
			name:   "at most one event_start per event id",
			wanted: both,
			steps:  []filterStep{admit(msgStart("m1")), drop(msgStart("m1")), admit(delta("m1", 1)), admit(thinkStart("t1")), drop(thinkStart("t1"))},
		},
		{
			name:   "no delta before its event_start",
			wanted: both,
			steps:  []filterStep{drop(delta("m1", 1)), admit(msgStart("m1")), drop(delta("m1", 2)), drop(delta("m1", 3))},
		},
		{
			name:   "a preview that lost a frame stops",
			wanted: both,
			steps: []filterStep{
				admit(msgStart("m1")), admit(delta("m1", 1)), drop(delta("m1", 3)), drop(delta("m1", 2)), drop(delta("m1", 4)),
				admit(msgStart("m2")), admit(delta("m2", 1)),
			},
		},
		{
			name:   "only the event types asked for",
			wanted: []string{wire.EventAgentThinking},
			steps:  []filterStep{drop(msgStart("m1")), drop(delta("m1", 1)), admit(thinkStart("t1"))},
		},
		{
			name:   "thinking previews are start-only",
			wanted: both,
			steps:  []filterStep{admit(thinkStart("t1")), drop(delta("t1", 1)), drop(delta("t1", 2))},
		},
		{
			name:   "nothing for an event already committed",
			wanted: both,
			steps: []filterStep{
				commit(message("m1", 5)), drop(msgStart("m1")), drop(delta("m1", 1)),
				commit(committed("t1", wire.EventAgentThinking, 6, "")), drop(thinkStart("t1")),
			},
		},
		{
			name:   "other committed events do not end a preview",
			wanted: both,
			steps: []filterStep{
				admit(msgStart("m1")),
				commit(committed("u1", wire.EventUserMessage, 3, "")),
				commit(committed("m1", wire.EventAgentToolUse, 4, "")), // an id is a message's only
				admit(delta("m1", 1)),
			},
		},
		{
			name:   "span.model_request_end closes the preview and its request",
			wanted: both,
			after:  3,
			steps: []filterStep{
				admit(inRequest(msgStart("m1"), "r1", 3)), admit(inRequest(delta("m1", 1), "r1", 3)),
				admit(inRequest(thinkStart("t1"), "r1", 3)),
				commit(requestEnd("r1", 9)),
				drop(inRequest(delta("m1", 2), "r1", 3)),
				drop(inRequest(msgStart("m2"), "r1", 3)), // a late frame of the ended request
				admit(inRequest(msgStart("m3"), "r2", 8)),
			},
		},
		{
			name:   "span.model_request_end closes previews without request, like the SDK",
			wanted: both,
			steps: []filterStep{
				admit(msgStart("m1")),
				commit(committed(newEventID(), wire.EventSpanModelRequestEnd, 9, `{}`)),
				drop(delta("m1", 1)),
				admit(msgStart("m2")),
			},
		},
		{
			name:   "the session stream previews the primary thread only",
			wanted: both,
			steps:  []filterStep{drop(onThread(msgStart("m1"), "sthr_child")), drop(onThread(thinkStart("t1"), "sthr_child"))},
		},
		{
			name:   "frames that overtake their span.model_request_start wait for it",
			wanted: both,
			after:  10,
			steps: []filterStep{
				drop(inRequest(thinkStart("t1"), "r1", 12)),
				drop(inRequest(msgStart("m1"), "r1", 12)),
				drop(inRequest(delta("m1", 1), "r1", 12)),
				commit(committed("u1", wire.EventUserMessage, 11, "")),
				commit(requestStart("r1", 12), inRequest(thinkStart("t1"), "r1", 12), inRequest(msgStart("m1"), "r1", 12), inRequest(delta("m1", 1), "r1", 12)),
				admit(inRequest(delta("m1", 2), "r1", 12)),
				commit(message("m1", 13)),
			},
		},
		{
			name:   "held frames of an event committed meanwhile are dropped",
			wanted: both,
			after:  10,
			steps: []filterStep{
				drop(inRequest(msgStart("m1"), "r1", 12)),
				drop(inRequest(delta("m1", 1), "r1", 12)),
				commit(message("m1", 13)),
			},
		},
		{
			name:   "held frames of a request that ended meanwhile are dropped",
			wanted: both,
			after:  10,
			steps: []filterStep{
				drop(inRequest(msgStart("m1"), "r1", 12)),
				commit(requestEnd("r1", 14)),
				drop(inRequest(delta("m1", 1), "r1", 12)),
			},
		},
		{
			name:   "a request started before the connection opened previews at once",
			wanted: both,
			after:  10,
			steps:  []filterStep{admit(inRequest(msgStart("m1"), "r1", 10)), admit(inRequest(delta("m1", 1), "r1", 10))},
		},
		{
			name:   "frames without their request's position are never held",
			wanted: both,
			after:  10,
			steps:  []filterStep{admit(inRequest(msgStart("m1"), "r1", 0)), admit(delta("m1", 1))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pf := NewPreviewFilter(tt.wanted, tt.after, tt.after)
			require.Equal(t, len(tt.wanted) > 0, pf.Enabled())
			for i, s := range tt.steps {
				var got []string
				if s.frame != nil {
					if pf.Admit(*s.frame) {
						got = []string{label(*s.frame)}
					}
				} else {
					got = labels(pf.Committed(*s.event))
				}
				require.Equal(t, s.want, got, "step %d", i)
			}
		})
	}
}

func end(id string, seq int) Frame {
	f := deltaFrame(filterSession, id, seq, "")
	f.Type = FrameEventEnd
	return f
}

func thinkingEvent(id string, seq int64) wire.Event {
	return committed(id, wire.EventAgentThinking, seq, "")
}

// TestPreviewFilterAwait: a committed event the connection asked previews of waits for its
// preview's end when the connection watched its model request from the start; nothing else
// waits.
func TestPreviewFilterAwait(t *testing.T) {
	t.Parallel()
	msgs := []string{wire.EventAgentMessage}
	type step struct {
		frame *Frame
		event *wire.Event // committed and written
		await *wire.Event // asked whether it waits
		want  bool
	}
	fr := func(f Frame) step { return step{frame: &f} }
	wrote := func(ev wire.Event) step { return step{event: &ev} }
	waits := func(ev wire.Event, want bool) step { return step{await: &ev, want: want} }
	tests := []struct {
		name      string
		wanted    []string
		after     int64
		live      int64
		steps     []step
		endFrames []string // labels admitted, in order
	}{
		{
			name: "a message overtaking its whole preview waits for it, then the preview is written first", wanted: msgs,
			steps: []step{
				wrote(requestStart("r1", 1)), waits(message("m1", 2), true),
				fr(inRequest(msgStart("m1"), "r1", 1)), waits(message("m1", 2), true),
				fr(inRequest(delta("m1", 1), "r1", 1)), waits(message("m1", 2), true),
				fr(inRequest(end("m1", 2), "r1", 1)), waits(message("m1", 2), false),
			},
			endFrames: []string{"start m1", "delta m1 #1"},
		},
		{
			name: "an end without its start (lost) stops the wait", wanted: msgs,
			steps: []step{wrote(requestStart("r1", 1)), fr(inRequest(end("m1", 1), "r1", 1)), waits(message("m1", 2), false)},
		},
		{
			name: "a hole in the preview stops the wait: the preview is over", wanted: msgs,
			steps: []step{
				wrote(requestStart("r1", 1)), fr(inRequest(msgStart("m1"), "r1", 1)), fr(inRequest(delta("m1", 2), "r1", 1)),
				waits(message("m1", 2), false),
			},
			endFrames: []string{"start m1"},
		},
		{
			name: "an end that overtook its request's start is held like the rest", wanted: msgs,
			steps: []step{
				fr(inRequest(msgStart("m1"), "r1", 1)), fr(inRequest(end("m1", 1), "r1", 1)),
				wrote(requestStart("r1", 1)), waits(message("m1", 2), false),
			},
			endFrames: []string{"start m1"},
		},
		{
			name:  "without previews asked for, nothing waits",
			steps: []step{wrote(requestStart("r1", 1)), waits(message("m1", 2), false)},
		},
		{
			name: "thinking waits only when its previews were asked for", wanted: msgs,
			steps: []step{wrote(requestStart("r1", 1)), waits(thinkingEvent("t1", 2), false), waits(message("m1", 3), true)},
		},
		{
			name: "a thinking preview is start-only: its end follows the start", wanted: []string{wire.EventAgentThinking},
			steps: []step{
				wrote(requestStart("r1", 1)), fr(inRequest(thinkStart("t1"), "r1", 1)), waits(thinkingEvent("t1", 2), true),
				fr(inRequest(end("t1", 1), "r1", 1)), waits(thinkingEvent("t1", 2), false),
			},
			endFrames: []string{"start t1"},
		},
		{
			name: "a request that started before the connection opened is not watched", wanted: msgs, after: 5, live: 5,
			steps: []step{waits(message("m1", 6), false)},
		},
		{
			name: "a replayed request (resumed stream) is not watched", wanted: msgs, after: 0, live: 10,
			steps: []step{wrote(requestStart("r1", 3)), waits(message("m1", 4), false), wrote(requestEnd("r1", 5)), wrote(requestStart("r2", 11)), waits(message("m2", 12), true)},
		},
		{
			name: "after the request's end nothing waits", wanted: msgs,
			steps: []step{wrote(requestStart("r1", 1)), wrote(requestEnd("r1", 2)), waits(message("m1", 3), false)},
		},
		{
			name: "a written message does not wait again", wanted: msgs,
			steps: []step{wrote(requestStart("r1", 1)), wrote(message("m1", 2)), waits(message("m1", 2), false)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pf := NewPreviewFilter(tt.wanted, tt.after, tt.live)
			var admitted []string
			for i, s := range tt.steps {
				switch {
				case s.frame != nil:
					if pf.Admit(*s.frame) {
						admitted = append(admitted, label(*s.frame))
					}
				case s.event != nil:
					admitted = append(admitted, labels(pf.Committed(*s.event))...)
				default:
					require.Equal(t, s.want, pf.Await(*s.await), "step %d", i)
				}
			}
			require.Equal(t, tt.endFrames, admitted, "an end frame is never written")
		})
	}
}

func TestPreviewFilterIgnoresUnknownWantedTypes(t *testing.T) {
	t.Parallel()
	pf := NewPreviewFilter([]string{wire.EventAgentToolUse}, 0, 0)
	require.False(t, pf.Enabled(), "the handler validates event_deltas[]; the filter never previews other types")
}

func TestPreviewFilterBoundsMemory(t *testing.T) {
	t.Parallel()
	pf := NewPreviewFilter([]string{wire.EventAgentMessage}, 0, 0)

	for i := range 3 * maxClosedIDs {
		pf.Committed(message(fmt.Sprintf("m%d", i), int64(i+1)))
	}
	require.Equal(t, maxClosedIDs, len(pf.closed.ids))
	require.Equal(t, maxClosedIDs, len(pf.closed.ring))
	require.False(t, pf.Admit(msgStart(fmt.Sprintf("m%d", 3*maxClosedIDs-1))), "recent ids are remembered")

	for i := range maxOpenPreviews + 1 {
		require.True(t, pf.Admit(msgStart(fmt.Sprintf("open%d", i))))
	}
	require.Equal(t, maxOpenPreviews, len(pf.open))
	require.False(t, pf.Admit(delta("open0", 1)), "the oldest open preview was closed to make room")
	require.True(t, pf.Admit(delta(fmt.Sprintf("open%d", maxOpenPreviews), 1)))

	for i := range 2 * maxEndedRequests {
		pf.Committed(requestEnd(fmt.Sprintf("r%d", i), int64(10*maxClosedIDs+i)))
	}
	require.Equal(t, maxEndedRequests, len(pf.ended.ids))
}

func TestPreviewFilterBoundsHeldFrames(t *testing.T) {
	t.Parallel()
	big := longText(100_000)
	tests := []struct {
		name     string
		text     string
		wantHeld int
	}{
		{name: "by count", text: "x", wantHeld: maxHeldFrames},
		{name: "by size", text: big, wantHeld: 1 + maxHeldBytes/len(big)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pf := NewPreviewFilter([]string{wire.EventAgentMessage}, 0, 0)
			require.False(t, pf.Admit(inRequest(msgStart("m1"), "r1", 5)))
			for i := range 2 * maxHeldFrames {
				f := inRequest(delta("m1", i+1), "r1", 5)
				f.Text = tt.text
				require.False(t, pf.Admit(f))
			}
			require.Equal(t, tt.wantHeld, len(pf.held), "the start and as many deltas as fit")
			released := pf.Committed(requestStart("r1", 5))
			require.Equal(t, tt.wantHeld, len(released), "every held frame, in order")
			require.Equal(t, "start m1", label(released[0]))
			require.Equal(t, fmt.Sprintf("delta m1 #%d", tt.wantHeld-1), label(released[len(released)-1]))
			require.False(t, pf.Admit(inRequest(delta("m1", 2*maxHeldFrames+1), "r1", 5)), "the preview lost frames, so it stopped")
			require.Empty(t, pf.held)
			require.Zero(t, pf.heldBytes)
		})
	}
}
