package httpapi

import (
	"time"

	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// keysetPage wraps one page of a created_at-ordered list with its cursors. prev_page is
// only produced for bidirectional lists (sessions) and is omitted on the first page.
func keysetPage[T any](kind string, items []T, more bool, p sessions.ListParams, key func(T) (time.Time, string), bidirectional bool) wire.Page[T] {
	page := wire.Page[T]{Data: items}
	if page.Data == nil {
		page.Data = []T{}
	}
	order := orderName(p.Desc)
	at := func(item T, backward bool) string {
		t, id := key(item)
		return cursor{Kind: kind, Order: order, Time: t, ID: id, Backward: backward}.encode()
	}
	if len(items) == 0 {
		return page
	}
	// Walking forward, "more" means a next page; walking backward we came from one.
	if (!p.Backward && more) || p.Backward {
		page.NextPage = at(items[len(items)-1], false)
	}
	if bidirectional && ((p.Backward && more) || (!p.Backward && p.After != nil)) {
		page.PrevPage = at(items[0], true)
	}
	return page
}

func agentKey(a wire.Agent) (time.Time, string) { return time.Time(a.CreatedAt), a.ID }

func environmentKey(e wire.Environment) (time.Time, string) { return time.Time(e.CreatedAt), e.ID }

func sessionKey(s wire.Session) (time.Time, string) { return time.Time(s.CreatedAt), s.ID }
