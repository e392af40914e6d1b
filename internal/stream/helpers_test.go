package stream

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// waitFor bounds every wait for something asynchronous. It is a deadline for a hang, not a
// speed assertion.
const waitFor = 15 * time.Second

func startFrame(sessionID, eventType, eventID string) Frame {
	return Frame{Source: Source{SessionID: sessionID}, Type: FrameEventStart, EventType: eventType, EventID: eventID}
}

func deltaFrame(sessionID, eventID string, seq int, text string) Frame {
	return Frame{Source: Source{SessionID: sessionID}, Type: FrameEventDelta, EventID: eventID, Seq: seq, Text: text}
}

// numbered returns n deltas of one event, numbered from 1, with distinct texts.
func numbered(sessionID, eventID string, n int) []Frame {
	fs := make([]Frame, n)
	for i := range fs {
		fs[i] = deltaFrame(sessionID, eventID, i+1, fmt.Sprintf("word%d ", i+1))
	}
	return fs
}

func recv(t testing.TB, ch <-chan Frame) Frame {
	t.Helper()
	select {
	case f := <-ch:
		return f
	case <-time.After(waitFor):
		t.Fatal("no frame arrived")
		return Frame{}
	}
}

// recvN receives n frames, failing on a hang.
func recvN(t testing.TB, ch <-chan Frame, n int) []Frame {
	t.Helper()
	out := make([]Frame, n)
	for i := range out {
		out[i] = recv(t, ch)
	}
	return out
}

func publishAll(t testing.TB, hub Hub, fs []Frame) {
	t.Helper()
	for _, f := range fs {
		require.NoError(t, hub.Publish(context.Background(), f))
	}
}

func newSessionID() string { return ids.New(ids.Session) }
func newEventID() string   { return ids.New(ids.Event) }

// longText is up to n bytes of text mixing ASCII with two-, three- and four-byte
// characters, quotes, backslashes and control characters.
func longText(n int) string {
	const pattern = "preview é 日本語 🙂 \"quoted\" \\ \n\t"
	var b strings.Builder
	for {
		for _, r := range pattern {
			if b.Len()+utf8.RuneLen(r) > n {
				return b.String()
			}
			b.WriteRune(r)
		}
	}
}

func committed(id, typ string, seq int64, body string) wire.Event {
	if body == "" {
		body = "{}"
	}
	return wire.Event{ID: id, Type: typ, Seq: seq, Body: []byte(body)}
}
