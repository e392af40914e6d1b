package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// query reads the API's query conventions (API.md §1.5): bracketed arrays and range keys,
// RFC 3339 times with optional fractions.
type query struct{ v url.Values }

func newQuery(u *url.URL) query { return query{u.Query()} }

// list returns name[] values, also accepting bare repeated name=.
func (q query) list(name string) []string {
	return append(append([]string(nil), q.v[name+"[]"]...), q.v[name]...)
}

func (q query) limit(def, max int) (int, error) {
	s := q.v.Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, badRequest(fmt.Sprintf("limit: must be an integer from 1 to %d", max))
	}
	return n, nil
}

func (q query) boolean(name string) (bool, error) {
	s := q.v.Get(name)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, badRequest(name + ": must be true or false")
	}
	return b, nil
}

func (q query) time(name string) (*time.Time, error) {
	s := q.v.Get(name)
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, badRequest(name + ": must be an RFC 3339 timestamp")
	}
	return &t, nil
}

// createdRange reads created_at[gt|gte|lt|lte].
func (q query) createdRange() (gt, gte, lt, lte *time.Time, err error) {
	if gt, err = q.time("created_at[gt]"); err != nil {
		return
	}
	if gte, err = q.time("created_at[gte]"); err != nil {
		return
	}
	if lt, err = q.time("created_at[lt]"); err != nil {
		return
	}
	lte, err = q.time("created_at[lte]")
	return
}

// order reads order=asc|desc.
func (q query) order(def string) (string, error) {
	o := q.v.Get("order")
	if o == "" {
		return def, nil
	}
	if o != "asc" && o != "desc" {
		return "", badRequest("order: must be asc or desc")
	}
	return o, nil
}

// cursor is the decoded form of a page token. It records the order it was issued under so
// a token cannot be reused with the other order.
type cursor struct {
	// Kind names the list that issued the cursor; another list refuses it.
	Kind     string    `json:"k"`
	Order    string    `json:"o"`
	Time     time.Time `json:"t,omitzero"`
	ID       string    `json:"i,omitempty"`
	Seq      int64     `json:"s,omitempty"`
	Version  int64     `json:"v,omitempty"`
	Backward bool      `json:"b,omitempty"`
}

const cursorPrefix = "page_"

func (c cursor) encode() string {
	b, _ := json.Marshal(c) // a cursor always marshals
	return cursorPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// pageCursor decodes ?page= for the list kind; nil when absent.
func (q query) pageCursor(kind, order string) (*cursor, error) {
	s := q.v.Get("page")
	if s == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, cursorPrefix))
	var c cursor
	// Every cursor we issue names its order; one without is not ours. A forged one must not
	// carry a NUL or invalid UTF-8 to the database either.
	if err != nil || !strings.HasPrefix(s, cursorPrefix) || wire.CheckText(raw) != nil || json.Unmarshal(raw, &c) != nil || (c.Order != "asc" && c.Order != "desc") {
		return nil, badRequest("invalid page cursor")
	}
	if c.Kind != kind {
		return nil, badRequest("invalid page cursor")
	}
	if c.Order != order {
		return nil, badRequest("page token order does not match request")
	}
	return &c, nil
}

// listParams reads the parameters shared by created_at-ordered lists.
func (q query) listParams(kind, defOrder string, defLimit, maxLimit int, withOrder bool) (sessions.ListParams, error) {
	var p sessions.ListParams
	var err error
	order := defOrder
	if withOrder {
		if order, err = q.order(defOrder); err != nil {
			return p, err
		}
	}
	if p.Limit, err = q.limit(defLimit, maxLimit); err != nil {
		return p, err
	}
	if p.IncludeArchived, err = q.boolean("include_archived"); err != nil {
		return p, err
	}
	if p.CreatedGT, p.CreatedGTE, p.CreatedLT, p.CreatedLTE, err = q.createdRange(); err != nil {
		return p, err
	}
	p.Desc = order == "desc"
	c, err := q.pageCursor(kind, order)
	if err != nil {
		return p, err
	}
	if c != nil {
		p.After = &sessions.Keyset{CreatedAt: c.Time, ID: c.ID}
		p.Backward = c.Backward
	}
	return p, nil
}

func orderName(desc bool) string {
	if desc {
		return "desc"
	}
	return "asc"
}
