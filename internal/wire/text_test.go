package wire

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckText(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name, doc, want string // want "" means accepted
	}{
		{"plain", `{"a":"b","n":[1,2.5e3,true,null],"o":{}}`, ""},
		{"escapes and non-ASCII", `{"a":"\"\\\/\b\f\n\r\t\u00e9 é 😀 \ud83d\ude00"}`, ""},
		{"NUL escape", `{"a":{"b":["x","\u0000"]}}`, "a.b[1]: must not contain NUL"},
		{"upper-case NUL escape", `{"a":"\U0000"}`, ""}, // not an escape JSON knows: the decoder refuses it
		{"invalid UTF-8", "{\"a\":\"\xff\"}", "a: must be valid UTF-8"},
		{"truncated UTF-8", "{\"a\":\"\xe2\x82\"}", "a: must be valid UTF-8"},
		{"lone high surrogate", `{"a":"\ud800x"}`, "a: must be valid UTF-8"},
		{"lone low surrogate", `{"a":"\udc00"}`, "a: must be valid UTF-8"},
		{"NUL in a key", `{"m":{"k\u0000":"v"}}`, "m: keys must not contain NUL"},
		{"invalid UTF-8 in a key", "{\"m\":{\"\xc3\":1}}", "m: keys must be valid UTF-8"},
		{"escaped key in the path", `{"\u0061":"\u0000"}`, "a: must not contain NUL"},
		{"top-level string", `"\u0000"`, "request body: must not contain NUL"},
		{"depth at the limit", deep(MaxDepth), ""},
		{"depth over the limit", deep(MaxDepth + 1), "[0][0]"},
		{"objects over the limit", strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), "nesting is deeper than 64 levels"},
		{"malformed JSON is the decoder's", `{"a":`, ""},
		{"long key cut in the path", `{"` + strings.Repeat("k", 1000) + `":"\u0000"}`, strings.Repeat("k", maxPathSegment) + "…: must not contain NUL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckText([]byte(tc.doc))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.Less(t, len(err.Error()), 200+MaxDepth*3)
		})
	}
}

func TestCheckString(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckString("id", "sesn_é"))
	require.EqualError(t, CheckString("id", "a\x00"), `id: must not contain NUL (\u0000)`)
	require.EqualError(t, CheckString("id", "a\xff"), "id: must be valid UTF-8")
}

func TestExcerpt(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc", Excerpt("abc", 3))
	require.Equal(t, "ab…", Excerpt("abcd", 2))
	require.Equal(t, "a…", Excerpt("aéb", 2)) // never cuts a rune in half
}

func TestValidateContentBase64(t *testing.T) {
	t.Parallel()
	block := func(src string) []ContentBlock {
		return []ContentBlock{{Type: ContentTypeImage, Source: []byte(src)}}
	}
	tests := []struct{ name, src, want string }{
		{"valid png", `{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}`, ""},
		{"not base64", `{"type":"base64","media_type":"image/png","data":"!!!"}`, "c[0].source.data: must be non-empty standard base64"},
		{"empty data", `{"type":"base64","media_type":"image/png","data":""}`, "c[0].source.data"},
		{"url-safe alphabet", `{"type":"base64","media_type":"image/png","data":"-_-_"}`, "c[0].source.data"},
		{"not an image type", `{"type":"base64","media_type":"application/pdf","data":"aGk="}`, "c[0].source.media_type: must be image/jpeg"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateContent("c", block(tc.src), UserMessageBlocks)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}
