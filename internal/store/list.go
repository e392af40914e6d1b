package store

import (
	"fmt"
	"strings"
	"time"
)

// Keyset is a position in a (created_at, id) ordered list.
type Keyset struct {
	CreatedAt time.Time
	ID        string
}

// ListParams selects one page of a (created_at, id) ordered list.
type ListParams struct {
	Limit int
	// Desc lists newest first.
	Desc bool
	// After continues strictly after this position in the list's order; with Backward it
	// selects the page strictly before it instead.
	After    *Keyset
	Backward bool

	IncludeArchived bool
	CreatedGT       *time.Time
	CreatedGTE      *time.Time
	CreatedLT       *time.Time
	CreatedLTE      *time.Time
}

// sqlBuilder accumulates WHERE conditions and positional arguments.
type sqlBuilder struct {
	conds []string
	args  []any
}

func (b *sqlBuilder) arg(v any) string {
	b.args = append(b.args, v)
	return fmt.Sprintf("$%d", len(b.args))
}

func (b *sqlBuilder) where(cond string, vals ...any) {
	ph := make([]any, len(vals))
	for i, v := range vals {
		ph[i] = b.arg(v)
	}
	b.conds = append(b.conds, fmt.Sprintf(cond, ph...))
}

func (b *sqlBuilder) clause() string {
	if len(b.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(b.conds, " AND ")
}

// page adds the common filters, keyset and ORDER BY/LIMIT of a created_at-ordered list
// over table alias t. It returns the suffix and whether rows come back reversed.
func (b *sqlBuilder) page(p ListParams, archivedCol string) (suffix string, reversed bool) {
	if !p.IncludeArchived && archivedCol != "" {
		b.conds = append(b.conds, archivedCol+" IS NULL")
	}
	for _, f := range []struct {
		op string
		t  *time.Time
	}{{">", p.CreatedGT}, {">=", p.CreatedGTE}, {"<", p.CreatedLT}, {"<=", p.CreatedLTE}} {
		if f.t != nil {
			b.where("t.created_at "+f.op+" %s", *f.t)
		}
	}
	// Walking backward is walking forward in the opposite order.
	desc := p.Desc != p.Backward
	if p.After != nil {
		op := ">"
		if desc {
			op = "<"
		}
		b.where("(t.created_at, t.id) "+op+" (%s, %s)", p.After.CreatedAt, p.After.ID)
	}
	dir := "ASC"
	if desc {
		dir = "DESC"
	}
	return fmt.Sprintf("%s ORDER BY t.created_at %s, t.id %s LIMIT %d", b.clause(), dir, dir, p.Limit+1), p.Backward
}

// trim cuts the probe row used to detect a further page and restores list order.
func trim[T any](rows []T, limit int, reversed bool) ([]T, bool) {
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	if reversed {
		for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
			rows[i], rows[j] = rows[j], rows[i]
		}
	}
	return rows, more
}
