package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pipelinedTx is the querier of an InTx transaction. Its BEGIN goes out with the
// transaction's first statement batch instead of in a round trip of its own, and writes
// handed to it (Writes.FlushAtCommit) go out with its COMMIT: a transaction that reads one
// batch and writes one — how every turn is opened and closed, and how an event is posted —
// takes two round trips instead of four.
type pipelinedTx struct {
	conn  *pgxpool.Conn
	begun bool
	// final are writes to send with the COMMIT.
	final *Writes
}

// ensureBegun sends BEGIN alone, for a first statement that is not a batch.
func (t *pipelinedTx) ensureBegun(ctx context.Context) error {
	if t.begun {
		return nil
	}
	t.begun = true
	if _, err := t.conn.Exec(ctx, "BEGIN"); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	return nil
}

func (t *pipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.ensureBegun(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

func (t *pipelinedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.ensureBegun(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *pipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.ensureBegun(ctx); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *pipelinedTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.ensureBegun(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, cols, src)
}

// SendBatch sends b, preceded by BEGIN when it is the transaction's first statement; the
// caller reads b's results as if b had been sent alone.
func (t *pipelinedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.begun {
		return t.conn.SendBatch(ctx, b)
	}
	t.begun = true
	withBegin := &pgx.Batch{QueuedQueries: append([]*pgx.QueuedQuery{{SQL: "BEGIN"}}, b.QueuedQueries...)}
	br := t.conn.SendBatch(ctx, withBegin)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return pgx.FailedBatchResults(b, fmt.Errorf("begin transaction: %w", err))
	}
	return br
}

// commit sends the final writes, if any, and COMMIT as one batch.
func (t *pipelinedTx) commit(ctx context.Context) error {
	if t.final == nil && !t.begun {
		return nil // nothing was sent: nothing to commit
	}
	var b pgx.Batch
	if !t.begun { // writes with no statement before them
		b.Queue("BEGIN")
		t.begun = true
	}
	if t.final != nil {
		b.QueuedQueries = append(b.QueuedQueries, t.final.batch.QueuedQueries...)
	}
	b.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
		// PostgreSQL answers COMMIT of a failed transaction with ROLLBACK.
		if tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	})
	if err := t.conn.SendBatch(ctx, &b).Close(); err != nil {
		if t.final != nil {
			return fmt.Errorf("write session %s: %w", t.final.sessionID, classify(err))
		}
		return fmt.Errorf("commit: %w", err)
	}
	if t.final != nil {
		t.final.done()
	}
	return nil
}

// rollback ends a transaction that failed; a connection it cannot bring back to idle is
// closed, as the pool drops it then.
func (t *pipelinedTx) rollback(ctx context.Context) {
	if !t.begun || t.conn.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	// The caller's context may be what failed the transaction.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	if _, err := t.conn.Exec(rctx, "ROLLBACK"); err != nil {
		_ = t.conn.Conn().Close(rctx)
	}
}

// errRow is a pgx.Row whose Scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// InTx runs fn in one transaction: committed if fn returns nil, rolled back otherwise, so a
// rejected request writes nothing.
func (s *Store) InTx(ctx context.Context, fn func(q *Queries) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	// A connection left in a transaction (a failed rollback) is closed by Release.
	defer conn.Release()
	var appended []string
	tx := &pipelinedTx{conn: conn}
	if err := fn(&Queries{db: tx, tx: tx, obs: s.obs, appended: &appended}); err != nil {
		tx.rollback(ctx)
		return err
	}
	if err := tx.commit(ctx); err != nil {
		tx.rollback(ctx)
		return err
	}
	if len(appended) > 0 {
		s.obs.EventsAppended(appended)
	}
	return nil
}

// rollbackTimeout bounds the ROLLBACK of a failed transaction.
const rollbackTimeout = 5 * time.Second
