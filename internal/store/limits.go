package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// RateDecision is what the request limiter answered for one request.
type RateDecision struct {
	Allowed bool
	// RetryAfter is how long until the key may make its next request (when not Allowed).
	RetryAfter time.Duration
}

// TakeRequest counts one request of the key against its GCRA bucket (interval between
// requests at the sustained rate, burst requests at once) and reports whether it may pass.
// It is one statement, so one round trip, and the database's clock is the only clock: API
// replicas with skewed clocks still share one limit. A refused request does not move the
// bucket.
func (q *Queries) TakeRequest(ctx context.Context, keyID string, interval time.Duration, burst int) (RateDecision, error) {
	// tat is when the bucket is full again; a request moves it one interval later, and is
	// allowed while that stays within burst intervals of now. Every SET expression reads the
	// row as it was, so allowed and tat agree.
	var d RateDecision
	var retryMicros int64
	err := q.db.QueryRow(ctx, `INSERT INTO key_request_buckets AS b (key_id, tat, allowed)
		VALUES ($1, now() + $2::interval, true)
		ON CONFLICT (key_id) DO UPDATE SET
			allowed = greatest(b.tat, now()) + $2::interval <= now() + $3::interval,
			tat = CASE WHEN greatest(b.tat, now()) + $2::interval <= now() + $3::interval
				THEN greatest(b.tat, now()) + $2::interval ELSE b.tat END
		RETURNING allowed, ceil(extract(epoch FROM tat + $2::interval - $3::interval - now()) * 1000000)::bigint`,
		keyID, interval, interval*time.Duration(burst)).Scan(&d.Allowed, &retryMicros)
	if err != nil {
		return RateDecision{}, fmt.Errorf("take a request of key %s: %w", keyID, classify(err))
	}
	if !d.Allowed {
		d.RetryAfter = time.Duration(retryMicros) * time.Microsecond
	}
	return d, nil
}

// AcquireStreamLease records stream leaseID of the key, unless the key already holds max
// unexpired leases: then it returns false and records nothing. The lease lapses after ttl
// unless renewed. A per-key transaction lock serialises acquisitions across replicas, so two
// of them never both take the last slot; the statements go as one batch, one round trip, in
// the implicit transaction of the batch.
func (s *Store) AcquireStreamLease(ctx context.Context, keyID, leaseID string, max int, ttl time.Duration) (bool, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock(hashtext('managed_agents.stream_leases'), hashtext($1))`, keyID)
	// A crashed replica's leases go here, on the next acquisition of their key.
	b.Queue(`DELETE FROM stream_leases WHERE key_id = $1 AND expires_at < now()`, keyID)
	var inserted pgconn.CommandTag
	b.Queue(`INSERT INTO stream_leases (id, key_id, expires_at)
		SELECT $2, $1, now() + $3::interval WHERE (SELECT count(*) FROM stream_leases WHERE key_id = $1) < $4`,
		keyID, leaseID, ttl, max).Exec(func(tag pgconn.CommandTag) error {
		inserted = tag
		return nil
	})
	// Close reads every result, and returns the first error.
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return false, fmt.Errorf("acquire a stream lease of key %s: %w", keyID, classify(err))
	}
	return inserted.RowsAffected() == 1, nil
}

// RenewStreamLease moves the lease's expiry ttl from now. A lease that lapsed meanwhile (the
// database was out of reach longer than its ttl) is recorded again: the stream is still open.
func (q *Queries) RenewStreamLease(ctx context.Context, keyID, leaseID string, ttl time.Duration) error {
	_, err := q.db.Exec(ctx, `INSERT INTO stream_leases (id, key_id, expires_at) VALUES ($1, $2, now() + $3::interval)
		ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at`, leaseID, keyID, ttl)
	if err != nil {
		return fmt.Errorf("renew stream lease %s: %w", leaseID, classify(err))
	}
	return nil
}

// ReleaseStreamLease removes the lease (no error if it is gone).
func (q *Queries) ReleaseStreamLease(ctx context.Context, leaseID string) error {
	if _, err := q.db.Exec(ctx, `DELETE FROM stream_leases WHERE id = $1`, leaseID); err != nil {
		return fmt.Errorf("release stream lease %s: %w", leaseID, classify(err))
	}
	return nil
}

// ActiveSessions takes the workspace's turn lock (q must be a transaction; it is held until
// the transaction ends) and counts the workspace's active sessions other than sessionID:
// running or rescheduling, with a queued user.message that a worker has not picked up yet, or
// with a parked turn that an admitted answer resumes (Writes.MarkResuming) and a worker has
// not marked running yet (a send commits before the worker marks the session running, so the
// status alone would let concurrent sends through). self reports whether sessionID is itself
// active. Every transaction that may start or resume a turn under a quota takes the lock
// first, so their counts see each other's commits.
func (q *Queries) ActiveSessions(ctx context.Context, workspaceID, sessionID string) (others int, self bool, err error) {
	if _, err := q.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('managed_agents.workspace_turns'), hashtext($1))`, workspaceID); err != nil {
		return 0, false, fmt.Errorf("lock the turns of workspace %s: %w", workspaceID, classify(err))
	}
	// The resuming mark counts only while the row is idle with the stop reason it was taken
	// from (index sessions_workspace_resuming): the worker's next transition ends it. An
	// archived session is never run again, so its mark must not hold a slot.
	err = q.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE id <> $2), coalesce(bool_or(id = $2), false) FROM (
			SELECT id FROM sessions WHERE workspace_id = $1 AND status IN ('running', 'rescheduling')
			UNION
			SELECT e.session_id FROM events e JOIN sessions s ON s.id = e.session_id
			WHERE e.processed_at IS NULL AND e.type = 'user.message' AND s.workspace_id = $1
			UNION
			SELECT id FROM sessions WHERE workspace_id = $1 AND status = 'idle' AND resuming_from = stop_reason
				AND archived_at IS NULL
		) active`, workspaceID, sessionID).Scan(&others, &self)
	if err != nil {
		return 0, false, fmt.Errorf("count the active sessions of workspace %s: %w", workspaceID, classify(err))
	}
	return others, self, nil
}

// AnsweredCalls returns which of callIDs the session's current turn already holds a client's
// answer to: a user.custom_tool_result, user.tool_result or user.tool_confirmation. The calls
// a parked turn waits on are all of that turn, so the log before it is not read.
func (q *Queries) AnsweredCalls(ctx context.Context, sessionID string, callIDs []string) (map[string]bool, error) {
	rows, err := q.db.Query(ctx, `SELECT DISTINCT a.call FROM events e,
			LATERAL (SELECT coalesce(e.body->>'custom_tool_use_id', e.body->>'tool_use_id') AS call) a
		WHERE e.session_id = $1 AND e.seq >= (SELECT turn_start_seq FROM sessions WHERE id = $1)
			AND e.type IN ('user.custom_tool_result', 'user.tool_result', 'user.tool_confirmation')
			AND a.call = ANY($2)`, sessionID, callIDs)
	if err != nil {
		return nil, fmt.Errorf("find the answered calls of session %s: %w", sessionID, classify(err))
	}
	calls, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find the answered calls of session %s: %w", sessionID, classify(err))
	}
	out := make(map[string]bool, len(calls))
	for _, c := range calls {
		out[c] = true
	}
	return out, nil
}

// QuotaError is a workspace quota that refused to record something.
type QuotaError struct {
	WorkspaceID string
	// What is counted ("sandboxes"), how many the workspace has, and its quota.
	What       string
	Count, Max int
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("workspace %s has %d %s, its quota", e.WorkspaceID, e.Count, e.What)
}

// InsertBindingWithin is InsertBinding under a quota: it fails with a *QuotaError when the session's workspace already has max sandboxes other than the
// session's own. Pending and ready bindings count, stopped sandboxes too (they restart
// without asking); expired ones do not. A per-workspace transaction lock makes the count
// and the insert one step across workers. max 0 is no quota.
func (s *Store) InsertBindingWithin(ctx context.Context, b Binding, max int) error {
	if max <= 0 {
		return s.InsertBinding(ctx, b)
	}
	return s.InTx(ctx, func(q *Queries) error {
		var ws string
		err := q.db.QueryRow(ctx, `SELECT workspace_id FROM sessions WHERE id = $1`, b.SessionID).Scan(&ws)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("insert sandbox binding: %w", ErrReferenced)
		}
		if err != nil {
			return fmt.Errorf("the workspace of session %s: %w", b.SessionID, classify(err))
		}
		if _, err := q.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('managed_agents.workspace_sandboxes'), hashtext($1))`, ws); err != nil {
			return fmt.Errorf("lock the sandboxes of workspace %s: %w", ws, classify(err))
		}
		var n int
		// The session's own binding is not counted: a concurrent attempt of the same
		// acquisition then meets the duplicate below and adopts it.
		err = q.db.QueryRow(ctx, `SELECT count(*) FROM sandbox_bindings sb JOIN sessions s ON s.id = sb.session_id
			WHERE s.workspace_id = $1 AND sb.state <> 'expired' AND sb.session_id <> $2`, ws, b.SessionID).Scan(&n)
		if err != nil {
			return fmt.Errorf("count the sandboxes of workspace %s: %w", ws, classify(err))
		}
		if n >= max {
			return &QuotaError{WorkspaceID: ws, What: "sandboxes", Count: n, Max: max}
		}
		return q.InsertBinding(ctx, b)
	})
}
