package sessions

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// FuzzClientEvent runs one client event through what a send does before anything is stored:
// the HTTP layer's text check of the body, then decodeClientEvent and buildClientEvent.
// Invariants: no panic; a rejection is a KindInvalid *Error naming the event's field; an
// accepted event's stored body is valid UTF-8 without NUL, within the depth limit.
//
//	go test -run '^$' -fuzz FuzzClientEvent -fuzztime 5m ./internal/sessions/
func FuzzClientEvent(f *testing.F) {
	for _, seed := range []string{
		`{"type":"user.message","content":[{"type":"text","text":"hi"}]}`,
		`{"type":"user.message","content":[{"type":"text","text":"a\u0000b"}]}`,
		"{\"type\":\"user.message\",\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]}",
		`{"type":"user.message","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"!!!"}}]}`,
		`{"type":"user.message","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGk="}}]}`,
		`{"type":"user.message","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}]}`,
		`{"type":"user.custom_tool_result","custom_tool_use_id":"sevt_1","content":[{"type":"search_result","source":"https://a","title":"t","content":[{"type":"text","text":"x"}]}]}`,
		`{"type":"user.tool_result","tool_use_id":"sevt_1","is_error":true}`,
		`{"type":"user.tool_confirmation","tool_use_id":"sevt_1","result":"deny","deny_message":"\ud800"}`,
		`{"type":"user.interrupt"}`,
		`{"type":"user.message` + "\x00" + `"}`,
		`{"type":"user.message","content":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
		`{}`, `null`, `[]`, `"x"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if wire.CheckText(raw) != nil {
			return // a 400 from the HTTP layer; FuzzDecodeBody covers that side
		}
		const field = "events[0]"
		ev, err := decodeClientEvent(field, raw)
		var p parsedEvent
		if err == nil {
			p, err = buildClientEvent(field, ev, true)
		}
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || se.Kind != KindInvalid || !strings.HasPrefix(se.Message, field) {
				t.Fatalf("rejection %v is not an invalid-request *Error naming %s", err, field)
			}
			return
		}
		if !utf8.Valid(p.Body) || bytes.Contains(p.Body, []byte(`\u0000`)) || bytes.IndexByte(p.Body, 0) >= 0 {
			t.Fatalf("accepted event stores NUL or invalid UTF-8: %q", p.Body)
		}
		if err := wire.CheckText(p.Body); err != nil {
			t.Fatalf("stored body fails the text check: %v", err)
		}
	})
}
