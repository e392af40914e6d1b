package stream

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// notifyLimit is PostgreSQL's: a payload must be shorter than this many bytes.
const notifyLimit = 8000

func TestEncodePartsFitNotifyLimit(t *testing.T) {
	t.Parallel()
	sid, eid := newSessionID(), newEventID()
	src := Source{SessionID: sid, ThreadID: "sthr_1", RequestStartID: newEventID(), RequestStartSeq: 1 << 40}
	tests := []struct {
		name string
		text string
	}{
		{name: "empty", text: ""},
		{name: "one word", text: "Hello"},
		{name: "just below one chunk", text: strings.Repeat("a", partChunk-200)},
		{name: "just above one chunk", text: strings.Repeat("a", partChunk+1)},
		{name: "100 KB ASCII", text: strings.Repeat("0123456789", 10_000)},
		{name: "100 KB multibyte and escapes", text: longText(100_000)},
		{name: "only four-byte characters", text: strings.Repeat("🙂", 5000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := Frame{Source: src, Type: FrameEventDelta, EventID: eid, Index: 1, Text: tt.text, Seq: 9}
			parts, size, err := encodeParts(f, "0123456789ab.zz")
			require.NoError(t, err)
			total, r := 0, reassembler{}
			var data []byte
			for i, p := range parts {
				total += len(p)
				require.Less(t, len(p), notifyLimit, "part %d", i)
				require.Equal(t, -1, strings.IndexFunc(p, func(c rune) bool { return c >= 0x80 }), "part %d is ASCII", i)
				pp, err := parsePart(p)
				require.NoError(t, err)
				require.Equal(t, len(parts), pp.count)
				var complete bool
				data, complete = r.add(pp, time.Now())
				require.Equal(t, i == len(parts)-1, complete, "complete after the last part only")
			}
			require.Equal(t, total, size)
			got, err := decodeFrame(data)
			require.NoError(t, err)
			require.Equal(t, f, got)
			require.Empty(t, r.pending)
			require.Zero(t, r.bytes)
		})
	}
}

func TestEncodePartsRejectsHugeFrames(t *testing.T) {
	t.Parallel()
	f := deltaFrame(newSessionID(), newEventID(), 1, strings.Repeat("a", maxParts*partChunk))
	_, _, err := encodeParts(f, "x.1")
	require.ErrorIs(t, err, ErrInvalidFrame)
}

func TestASCIIJSON(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", "é", "日本語", "🙂 and 🚀", "\u2028\u2029", "mixed é\n\"🙂\"\\"} {
		enc, err := json.Marshal(map[string]string{"k": s})
		require.NoError(t, err)
		out := asciiJSON(enc)
		require.Equal(t, -1, strings.IndexFunc(string(out), func(c rune) bool { return c >= 0x80 }), "%q", s)
		var back map[string]string
		require.NoError(t, json.Unmarshal(out, &back))
		require.Equal(t, s, back["k"])
	}
}

func TestParsePart(t *testing.T) {
	t.Parallel()
	p, err := parsePart(`1:ab.1:2:3:{"d":"a:b"}`)
	require.NoError(t, err)
	require.Equal(t, part{frameID: "ab.1", index: 2, count: 3, data: `{"d":"a:b"}`}, p, "the chunk may hold colons")

	for _, bad := range []string{
		"", "hello", "sesn_1:12", // not ours (the committed-events channel's shape, say)
		"2:ab.1:0:1:{}",   // unknown version
		"1::0:1:{}",       // no frame id
		"1:ab.1:0:1:",     // no data
		"1:ab.1:1:1:{}",   // index out of range
		"1:ab.1:-1:2:{}",  // negative index
		"1:ab.1:0:0:{}",   // no parts
		"1:ab.1:0:257:{}", // more parts than any frame has
		"1:ab.1:x:2:{}",   // not a number
	} {
		_, err := parsePart(bad)
		require.ErrorIs(t, err, errBadPart, "%q", bad)
	}
}

// splitFrame encodes a frame big enough for several parts and parses them.
func splitFrame(t *testing.T, frameID string, size int) (Frame, []part) {
	t.Helper()
	f := deltaFrame(newSessionID(), newEventID(), 1, longText(size))
	payloads, _, err := encodeParts(f, frameID)
	require.NoError(t, err)
	parts := make([]part, len(payloads))
	for i, p := range payloads {
		parts[i], err = parsePart(p)
		require.NoError(t, err)
	}
	return f, parts
}

func TestReassemblerInterleavedFrames(t *testing.T) {
	t.Parallel()
	var all []part
	want := map[string]Frame{}
	for i, id := range []string{"a.1", "a.2", "b.1", "c.9"} {
		f, parts := splitFrame(t, id, 20_000+i*9_000)
		require.Greater(t, len(parts), 2)
		want[f.EventID] = f
		all = append(all, parts...)
	}
	// Any order: parts of different frames interleave, and the reassembler does not even
	// rely on one frame's parts being in order.
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })

	var r reassembler
	got := map[string]Frame{}
	for _, p := range all {
		if data, complete := r.add(p, time.Now()); complete {
			f, err := decodeFrame(data)
			require.NoError(t, err)
			got[f.EventID] = f
		}
	}
	require.Equal(t, want, got)
	require.Empty(t, r.pending)
	require.Zero(t, r.bytes)
}

func TestReassemblerDropsStaleFrames(t *testing.T) {
	t.Parallel()
	_, stale := splitFrame(t, "a.1", 20_000)
	_, other := splitFrame(t, "a.2", 20_000)
	var r reassembler
	t0 := time.Now()
	_, complete := r.add(stale[0], t0)
	require.False(t, complete)
	_, complete = r.add(other[0], t0.Add(partTimeout))
	require.False(t, complete)
	require.NotContains(t, r.pending, "a.1", "a frame incomplete for partTimeout lost a part")
	require.Contains(t, r.pending, "a.2")

	for _, p := range stale[1:] {
		_, complete = r.add(p, t0.Add(partTimeout))
		require.False(t, complete, "the rest of a dropped frame never completes it")
	}
}

func TestReassemblerBoundsPendingFrames(t *testing.T) {
	t.Parallel()
	var r reassembler
	t0 := time.Now()
	frames := make([][]part, maxPendingFrames+5)
	for i := range frames {
		_, frames[i] = splitFrame(t, fmt.Sprintf("f.%d", i), 9_000)
		_, complete := r.add(frames[i][0], t0.Add(time.Duration(i)*time.Millisecond))
		require.False(t, complete)
		require.LessOrEqual(t, len(r.pending), maxPendingFrames)
	}
	_, complete := r.add(frames[0][1], t0)
	require.False(t, complete, "the oldest incomplete frames made room for newer ones")
	_, complete = r.add(frames[len(frames)-1][1], t0)
	require.True(t, complete, "the newest completes")
}

func TestReassemblerBoundsPendingBytes(t *testing.T) {
	t.Parallel()
	var r reassembler
	t0 := time.Now()
	// Frames of maxParts parts, each holding all but its last part, exceed the byte bound
	// long before the frame bound.
	n := maxPendingBytes/((maxParts-1)*partChunk) + 2
	require.Less(t, n, maxPendingFrames)
	for i := range n {
		id := fmt.Sprintf("big.%d", i)
		for idx := range maxParts - 1 {
			r.add(part{frameID: id, index: idx, count: maxParts, data: strings.Repeat("x", partChunk)}, t0.Add(time.Duration(i)*time.Millisecond))
			require.LessOrEqual(t, r.bytes, maxPendingBytes)
		}
	}
	require.NotContains(t, r.pending, "big.0", "the oldest went first")
	require.Contains(t, r.pending, fmt.Sprintf("big.%d", n-1))
}

func TestReassemblerDropsFramesWithConflictingParts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		second part
	}{
		{name: "repeated part", second: part{frameID: "a.1", index: 0, count: 3, data: "x"}},
		{name: "different count", second: part{frameID: "a.1", index: 1, count: 4, data: "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var r reassembler
			r.add(part{frameID: "a.1", index: 0, count: 3, data: "x"}, time.Now())
			_, complete := r.add(tt.second, time.Now())
			require.False(t, complete)
			require.Empty(t, r.pending)
			require.Zero(t, r.bytes)
		})
	}
}

func TestDecodeFrameRejectsInvalidFrames(t *testing.T) {
	t.Parallel()
	_, err := decodeFrame([]byte(`{"s":"sesn_1","t":"event_start","i":"sevt_1","e":"agent.tool_use"}`))
	require.ErrorIs(t, err, ErrInvalidFrame)
	_, err = decodeFrame([]byte(`{"s":`))
	require.Error(t, err)
	f, err := decodeFrame([]byte(`{"s":"sesn_1","t":"event_start","i":"sevt_1","e":"agent.message","future":1}`))
	require.NoError(t, err, "fields added by a newer publisher are ignored")
	require.Equal(t, startFrame("sesn_1", wire.EventAgentMessage, "sevt_1"), f)
}
