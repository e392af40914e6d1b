package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestPermanent(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("append events: %w", &pgconn.PgError{Code: code}) }
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"NUL in jsonb 22P05", pg("22P05"), true},
		{"malformed json 22P02", pg("22P02"), true},
		{"invalid byte sequence 22021", pg("22021"), true},
		{"not null violation 23502", pg("23502"), true},
		{"check violation 23514", pg("23514"), true},
		{"duplicate via classify", classify(&pgconn.PgError{Code: "23505"}), true},
		{"foreign key via classify", classify(&pgconn.PgError{Code: "23503"}), true},
		{"undefined column 42703", pg("42703"), true},
		{"feature not supported 0A000", pg("0A000"), true},
		{"serialization failure 40001", pg("40001"), false},
		{"deadlock 40P01", pg("40P01"), false},
		{"connection failure 08006", pg("08006"), false},
		{"too many connections 53300", pg("53300"), false},
		{"lock not available 55P03", pg("55P03"), false},
		{"admin shutdown 57P01", pg("57P01"), false},
		{"query canceled 57014", pg("57014"), false},
		{"internal error XX000", pg("XX000"), false},
		{"context deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{"network", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, false},
		{"not found", ErrNotFound, false},
		{"nil", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, Permanent(tc.err))
		})
	}
}
