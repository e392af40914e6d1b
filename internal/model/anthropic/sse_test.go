package anthropic

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSSEReader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream string
		want   []sseEvent
	}{
		{name: "named events", stream: "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n",
			want: []sseEvent{{name: "a", data: []byte("1")}, {name: "b", data: []byte("2")}}},
		{name: "CRLF line ends", stream: "event: a\r\ndata: {}\r\n\r\n",
			want: []sseEvent{{name: "a", data: []byte("{}")}}},
		{name: "data lines are joined", stream: "data: x\ndata:y\ndata\n\n",
			want: []sseEvent{{data: []byte("x\ny\n")}}},
		{name: "comments, unknown fields and only the first space dropped", stream: ": keep-alive\nid: 7\nretry: 10\nevent:a\ndata:  two\n\n",
			want: []sseEvent{{name: "a", data: []byte(" two")}}},
		{name: "an event without data is skipped and forgets its name", stream: "event: a\n\ndata: 1\n\n",
			want: []sseEvent{{data: []byte("1")}}},
		{name: "an event cut off by the end is dropped", stream: "event: a\ndata: 1\n\nevent: b\ndata: 2\n",
			want: []sseEvent{{name: "a", data: []byte("1")}}},
		{name: "a line longer than the read buffer", stream: "data: " + strings.Repeat("x", 200_000) + "\n\n",
			want: []sseEvent{{data: []byte(strings.Repeat("x", 200_000))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newSSEReader(strings.NewReader(tt.stream))
			var got []sseEvent
			for {
				ev, err := r.next()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				got = append(got, ev)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestSSEReaderLineLimit(t *testing.T) {
	t.Parallel()
	r := newSSEReader(strings.NewReader("data: " + strings.Repeat("x", maxSSELine+1) + "\n\n"))
	_, err := r.next()
	require.ErrorContains(t, err, "event stream line longer than")
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{name: "none", want: 0},
		{name: "seconds", header: map[string]string{"retry-after": "30"}, want: 30 * time.Second},
		{name: "fractional seconds", header: map[string]string{"retry-after": "0.5"}, want: 500 * time.Millisecond},
		{name: "milliseconds win", header: map[string]string{"retry-after-ms": "250", "retry-after": "30"}, want: 250 * time.Millisecond},
		{name: "bad milliseconds fall back", header: map[string]string{"retry-after-ms": "soon", "retry-after": "3"}, want: 3 * time.Second},
		{name: "HTTP date", header: map[string]string{"retry-after": now.Add(90 * time.Second).Format(http.TimeFormat)}, want: 90 * time.Second},
		{name: "HTTP date in the past", header: map[string]string{"retry-after": now.Add(-time.Minute).Format(http.TimeFormat)}, want: 0},
		{name: "negative", header: map[string]string{"retry-after": "-1"}, want: 0},
		{name: "NaN", header: map[string]string{"retry-after": "NaN"}, want: 0},
		{name: "absurdly long", header: map[string]string{"retry-after": "1e12"}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			require.Equal(t, tt.want, retryAfter(h, now))
		})
	}
}
