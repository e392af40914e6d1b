package store

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// Permanent reports whether a database error would fail again however often the same
// statement is retried: the data or the statement is wrong, not the connection. Callers that
// retry (the durable worker) stop at once on these instead of retrying a step that can never
// heal. By SQLSTATE class (PostgreSQL Appendix A):
//
//   - permanent: 22 data exception (e.g. 22P05 a NUL in jsonb, 22P02 malformed JSON),
//     23 integrity constraint violation, 42 syntax error or access rule violation (a
//     programming error), 0A feature not supported, 21 cardinality violation, 2F/38/39 routine
//     exceptions, and ErrDuplicate / ErrReferenced, which classify makes of 23505 / 23503;
//   - transient, and everything else: 08 connection exception, 40 transaction rollback
//     (serialization failure, deadlock), 53 insufficient resources, 55 object not in
//     prerequisite state (lock not available), 57 operator intervention (admin shutdown,
//     query canceled), 58 system error, XX internal error, and errors without a SQLSTATE
//     (network, timeouts, context), which a retry may well cure.
func Permanent(err error) bool {
	if errors.Is(err, ErrDuplicate) || errors.Is(err, ErrReferenced) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "42", "0A", "21", "2F", "38", "39":
		return true
	}
	return false
}
