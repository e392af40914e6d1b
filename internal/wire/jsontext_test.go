package wire

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLogSafeJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{name: "plain text unchanged", in: `{"a":"hello \u003c\u00e9\n"}`, want: `{"a":"hello \u003c\u00e9\n"}`},
		{name: "NUL escape", in: `{"a":"a\u0000b"}`, want: `{"a":"a\ufffdb"}`},
		{name: "NUL escape in a key and nested", in: `{"k\u0000":["\u0000",{"x":"\u0000\u0000"}]}`, want: `{"k\ufffd":["\ufffd",{"x":"\ufffd\ufffd"}]}`},
		{name: "escaped backslash before u0000 is text", in: `{"a":"\\u0000"}`, want: `{"a":"\\u0000"}`},
		{name: "valid surrogate pair kept", in: `{"a":"\ud83d\ude00"}`, want: `{"a":"\ud83d\ude00"}`},
		{name: "upper-case pair kept", in: `{"a":"\uD83D\uDE00"}`, want: `{"a":"\uD83D\uDE00"}`},
		{name: "lone high surrogate", in: `{"a":"\ud800x"}`, want: `{"a":"\ufffdx"}`},
		{name: "high surrogate then non-low escape", in: `{"a":"\ud800\u0041"}`, want: `{"a":"\ufffd\u0041"}`},
		{name: "lone low surrogate", in: `{"a":"\udc00"}`, want: `{"a":"\ufffd"}`},
		{name: "invalid UTF-8 byte", in: "{\"a\":\"a\xffb\"}", want: "{\"a\":\"a\uFFFDb\"}"},
		{name: "truncated multi-byte sequence", in: "{\"a\":\"\xe2\x82\"}", want: "{\"a\":\"\uFFFD\uFFFD\"}"},
		{name: "valid multi-byte kept next to invalid", in: "{\"a\":\"é\xff€\"}", want: "{\"a\":\"é\uFFFD€\"}"},
		{name: "quote inside string does not flip state", in: `{"a":"x\"\u0000"}`, want: `{"a":"x\"\ufffd"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := string(LogSafeJSON([]byte(tc.in)))
			require.Equal(t, tc.want, got)
			require.True(t, json.Valid([]byte(got)), "the result is JSON")
			require.Equal(t, got, string(LogSafeJSON([]byte(got))), "idempotent")
		})
	}
}

func TestLogSafeJSONOfEncodedBody(t *testing.T) {
	t.Parallel()
	// What a tool result with a NUL and a broken byte encodes to, and what the log keeps.
	raw, err := EncodeBody("agent.tool_result", map[string]string{"text": "a\x00b\xffc"})
	require.NoError(t, err)
	var got map[string]string
	require.NoError(t, json.Unmarshal(LogSafeJSON(raw), &got))
	require.Equal(t, "a"+Replacement+"b"+Replacement+"c", got["text"])
}

// BenchmarkLogSafeJSON is what every append pays per body: the scan of a safe 1 MB tool
// result, and the rewrite of one with NULs.
func BenchmarkLogSafeJSON(b *testing.B) {
	text := make([]byte, 1<<20)
	for i := range text {
		text[i] = 'a' + byte(i%26)
	}
	safe, err := EncodeBody("agent.tool_result", map[string]string{"text": string(text)})
	require.NoError(b, err)
	for i := 0; i < len(text); i += 64 {
		text[i] = 0
	}
	unsafe, err := EncodeBody("agent.tool_result", map[string]string{"text": string(text)})
	require.NoError(b, err)
	for _, bc := range []struct {
		name string
		raw  []byte
	}{{"safe-1MB", safe}, {"nul-every-64-bytes-1MB", unsafe}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.raw)))
			for b.Loop() {
				LogSafeJSON(bc.raw)
			}
		})
	}
}
