package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// decodeTargets are the request bodies the handlers decode, one fresh value per call.
var decodeTargets = map[string]func() any{
	"agent create":       func() any { return new(wire.AgentCreateParams) },
	"agent update":       func() any { return new(wire.AgentUpdateParams) },
	"environment create": func() any { return new(wire.EnvironmentCreateParams) },
	"environment update": func() any { return new(wire.EnvironmentUpdateParams) },
	"session create":     func() any { return new(wire.SessionCreateParams) },
	"session update":     func() any { return new(wire.SessionUpdateParams) },
	"send events":        func() any { return new(sendEventsBody) },
}

// FuzzDecodeBody feeds arbitrary bodies to every request decoder. Invariants: no panic; a
// rejection is a 4xx apiError whose message fits the envelope's cap; an accepted body encodes
// again as valid UTF-8 without NUL, so nothing it carries can fail in PostgreSQL's jsonb.
//
//	go test -run '^$' -fuzz FuzzDecodeBody -fuzztime 5m ./internal/httpapi/
func FuzzDecodeBody(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a","model":"claude-opus-5"}`,
		`{"name":"a\u0000b","model":"claude-opus-5"}`,
		"{\"name\":\"a\xffb\"}",
		`{"name":"\ud800"}`,
		`{"metadata":{"k\u0000":"v"}}`,
		`{"title":"t","metadata":{"k":null}}`,
		`{"tools":[{"type":"custom","name":"t","description":"d","input_schema":{"type":"object","properties":{"x":{"description":"\u0000"}}}}]}`,
		`{"tools":[{"type":"custom","input_schema":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}]}`,
		`{"name":"e","config":{"type":"cloud","packages":{"pip":["numpy\u0000"]}}}`,
		`{"events":[{"type":"user.message","content":[{"type":"text","text":"a\u0000b"}]}]}`,
		`{"events":[{"type":"user.message","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"!!!"}}]}]}`,
		`{"agent":"agent_\u0000","environment_id":"env_1"}`,
		`null`, ``, `[]`, `{"a":`, `{"\u0061":1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for name, target := range decodeTargets {
			v := target()
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			err := decodeBody(r, v)
			if err != nil {
				var ae *apiError
				if !errors.As(err, &ae) || ae.status < 400 || ae.status > 499 || ae.msg == "" {
					t.Fatalf("%s: rejection %v is not a 4xx apiError", name, err)
				}
				if n := len(capMessage(ae.msg)); n > maxMessageBytes+len(" (message truncated)")+len("…") {
					t.Fatalf("%s: message of %d bytes", name, n)
				}
				continue
			}
			out, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("%s: accepted body does not encode: %v", name, err)
			}
			if !utf8.Valid(out) || bytes.Contains(out, []byte(`\u0000`)) || bytes.IndexByte(out, 0) >= 0 {
				t.Fatalf("%s: accepted body re-encodes with NUL or invalid UTF-8: %q", name, out)
			}
			if err := wire.CheckText(out); err != nil {
				t.Fatalf("%s: accepted body fails the text check when encoded again: %v", name, err)
			}
		}
	})
}
