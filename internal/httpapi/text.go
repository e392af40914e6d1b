package httpapi

import (
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// maxMessageBytes bounds an error message: validators quote offending input, and a client
// that sent a megabyte must not get it back (nor the log a copy of it).
const maxMessageBytes = 1024

// maxQuoted bounds one quoted input inside a message.
const maxQuoted = 64

// textChecked wraps a route's handler with the check of everything that reaches the service
// outside the JSON body: the path id, every query parameter (names and values) and the
// headers the service reads. A NUL or invalid UTF-8 there is a 400 naming the parameter, not
// a database error; bodies get the same check in decodeBody.
func textChecked(pattern string, h apiHandler) apiHandler {
	idField := pathIDField(pattern)
	return func(w http.ResponseWriter, r *http.Request) error {
		if idField != "" {
			if err := wire.CheckString(idField, r.PathValue("id")); err != nil {
				return badRequest(err.Error())
			}
		}
		for _, name := range []string{"credential_id", "work_id"} {
			if !strings.Contains(pattern, "{"+name+"}") {
				continue
			}
			if err := wire.CheckString(name, r.PathValue(name)); err != nil {
				return badRequest(err.Error())
			}
		}
		q := r.URL.Query()
		names := make([]string, 0, len(q))
		for name := range q {
			names = append(names, name)
		}
		slices.Sort(names) // the first problem reported is the same every time
		for _, name := range names {
			if wire.CheckString("", name) != nil {
				return badRequest("query parameter names must be valid UTF-8 without NUL")
			}
			for _, v := range q[name] {
				if err := wire.CheckString(wire.Excerpt(name, maxQuoted), v); err != nil {
					return badRequest(err.Error())
				}
			}
		}
		for _, header := range []string{"Last-Event-ID", idempotencyKeyHeader, "Anthropic-Worker-ID"} {
			if err := wire.CheckString(header, r.Header.Get(header)); err != nil {
				return badRequest(err.Error())
			}
		}
		return h(w, r)
	}
}

// pathIDField names a route's {id} the way API.md does: /v1/agents/{id} → agent_id.
func pathIDField(pattern string) string {
	before, _, ok := strings.Cut(pattern, "/{id}")
	if !ok {
		return ""
	}
	return strings.TrimSuffix(path.Base(before), "s") + "_id"
}

// uncleanPath reports a path that http.ServeMux would answer with a redirect to its cleaned
// form (an empty segment, "." or ".."): the redirect is a 307 with an HTML body, and no API
// route has such a path, so the server answers 404 in the error envelope instead.
func uncleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return true
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean != p
}

// capMessage cuts a message to maxMessageBytes on a rune boundary.
func capMessage(msg string) string {
	if len(msg) <= maxMessageBytes {
		return msg
	}
	return wire.Excerpt(msg, maxMessageBytes) + " (message truncated)"
}
