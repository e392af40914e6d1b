package stream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestFrameMarshalJSON(t *testing.T) {
	t.Parallel()
	routed := Source{SessionID: "sesn_1", ThreadID: "sthr_1", RequestStartID: "sevt_start", RequestStartSeq: 7}
	tests := []struct {
		name  string
		frame Frame
		want  string
	}{
		{
			name:  "message start",
			frame: Frame{Source: routed, Type: FrameEventStart, EventType: wire.EventAgentMessage, EventID: "sevt_1"},
			want:  `{"type":"event_start","event":{"type":"agent.message","id":"sevt_1"}}`,
		},
		{
			name:  "thinking start",
			frame: Frame{Source: routed, Type: FrameEventStart, EventType: wire.EventAgentThinking, EventID: "sevt_2"},
			want:  `{"type":"event_start","event":{"type":"agent.thinking","id":"sevt_2"}}`,
		},
		{
			name:  "delta",
			frame: Frame{Source: routed, Type: FrameEventDelta, EventID: "sevt_1", Index: 2, Text: "Hello, 世界 \"x\"\n", Seq: 5},
			want:  `{"type":"event_delta","event_id":"sevt_1","delta":{"type":"content_delta","index":2,"content":{"type":"text","text":"Hello, 世界 \"x\"\n"}}}`,
		},
		{
			name:  "delta of the first block with empty text",
			frame: Frame{Source: routed, Type: FrameEventDelta, EventID: "sevt_1", Seq: 1},
			want:  `{"type":"event_delta","event_id":"sevt_1","delta":{"type":"content_delta","index":0,"content":{"type":"text","text":""}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(tt.frame)
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(got), "exactly the wire fields, no routing, no id or processed_at")
			require.NotContains(t, string(got), "\n", "an SSE data line holds it")
		})
	}
}

func TestFrameMarshalJSONRejectsUnknownType(t *testing.T) {
	t.Parallel()
	_, err := json.Marshal(Frame{Type: "event_stop", EventID: "sevt_1"})
	require.ErrorContains(t, err, `unknown type "event_stop"`)
}

func TestFrameValidate(t *testing.T) {
	t.Parallel()
	start := startFrame("sesn_1", wire.EventAgentMessage, "sevt_1")
	delta := deltaFrame("sesn_1", "sevt_1", 1, "x")
	with := func(f Frame, change func(*Frame)) Frame {
		change(&f)
		return f
	}
	tests := []struct {
		name    string
		frame   Frame
		wantErr string
	}{
		{name: "start", frame: start},
		{name: "thinking start", frame: startFrame("sesn_1", wire.EventAgentThinking, "sevt_1")},
		{name: "delta", frame: delta},
		{name: "no session", frame: with(start, func(f *Frame) { f.SessionID = "" }), wantErr: "SessionID is empty"},
		{name: "no event id", frame: with(delta, func(f *Frame) { f.EventID = "" }), wantErr: "EventID is empty"},
		{name: "end", frame: with(delta, func(f *Frame) { f.Type, f.Text = FrameEventEnd, "" })},
		{name: "unknown frame type", frame: with(start, func(f *Frame) { f.Type = "event_stop" }), wantErr: `Type "event_stop" is not event_start, event_delta or event_end`},
		{name: "unnumbered end", frame: with(delta, func(f *Frame) { f.Type, f.Seq = FrameEventEnd, 0 }), wantErr: "Seq of an event end is 0, want 1 or more"},
		{name: "event type without previews", frame: with(start, func(f *Frame) { f.EventType = wire.EventAgentToolUse }), wantErr: `EventType "agent.tool_use" is not agent.message or agent.thinking`},
		{name: "numbered start", frame: with(start, func(f *Frame) { f.Seq = 1 }), wantErr: "Seq of an event_start is 1, want 0"},
		{name: "unnumbered delta", frame: with(delta, func(f *Frame) { f.Seq = 0 }), wantErr: "Seq of an event_delta is 0, want 1 or more"},
		{name: "negative index", frame: with(delta, func(f *Frame) { f.Index = -1 }), wantErr: "Index -1 is negative"},
		{name: "every problem at once", frame: Frame{Type: FrameEventDelta}, wantErr: "SessionID is empty; EventID is empty; Seq of an event_delta is 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.frame.validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidFrame)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
