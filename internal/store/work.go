package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/managed-agents/managed-agents/internal/ids"
)

// Work item states (API.md §2.3).
const (
	WorkQueued   = "queued"
	WorkStarting = "starting"
	WorkActive   = "active"
	WorkStopping = "stopping"
	WorkStopped  = "stopped"
)

// Work item kinds: a session's tool calls, or a healthcheck an operator queues to see that a
// worker answers.
const (
	WorkKindSession     = "session"
	WorkKindHealthcheck = "healthcheck"
)

// NoHeartbeat is the expected_last_heartbeat of a lease no heartbeat has extended yet.
const NoHeartbeat = "NO_HEARTBEAT"

// WorkItem is a work_items row.
type WorkItem struct {
	ID                string
	WorkspaceID       string
	EnvironmentID     string
	Kind              string
	SessionID         string
	State             string
	Metadata          map[string]string
	CreatedAt         time.Time
	ClaimedAt         *time.Time
	AcknowledgedAt    *time.Time
	StartedAt         *time.Time
	LatestHeartbeatAt *time.Time
	// LastHeartbeat is the lease's version: the value a worker echoes as expected_last_heartbeat.
	LastHeartbeat   *string
	LeaseExpiresAt  *time.Time
	StopRequestedAt *time.Time
	StoppedAt       *time.Time
	WorkerID        string
	// Claims counts the polls that handed the item out (more than one: it was reclaimed).
	Claims int
}

// Live reports whether the item still holds (or waits for) a worker.
func (w WorkItem) Live() bool { return w.State != WorkStopped }

const workColumns = `w.id, w.workspace_id, w.environment_id, w.kind, coalesce(w.session_id, ''), w.state, w.metadata,
	w.created_at, w.claimed_at, w.acknowledged_at, w.started_at, w.latest_heartbeat_at, w.last_heartbeat,
	w.lease_expires_at, w.stop_requested_at, w.stopped_at, w.worker_id, w.claims`

func scanWork(row pgx.Row) (WorkItem, error) {
	var w WorkItem
	err := row.Scan(&w.ID, &w.WorkspaceID, &w.EnvironmentID, &w.Kind, &w.SessionID, &w.State, &w.Metadata,
		&w.CreatedAt, &w.ClaimedAt, &w.AcknowledgedAt, &w.StartedAt, &w.LatestHeartbeatAt, &w.LastHeartbeat,
		&w.LeaseExpiresAt, &w.StopRequestedAt, &w.StoppedAt, &w.WorkerID, &w.Claims)
	return w, err
}

// notifyWork wakes the long polls of an environment (TopicWork) when its transaction commits.
func (q *Queries) notifyWork(ctx context.Context, environmentID string) error {
	if _, err := q.db.Exec(ctx, `SELECT pg_notify($1, $2)`, string(TopicWork), environmentID); err != nil {
		return fmt.Errorf("notify work: %w", err)
	}
	return nil
}

// notifyTokenVoided tells every API process that a work item's session token stopped working
// (TopicKeys, with the item's id as the key id): streams it authorised end at once.
func (q *Queries) notifyTokenVoided(ctx context.Context, workID string) error {
	if _, err := q.db.Exec(ctx, `SELECT pg_notify($1, $2)`, string(TopicKeys), workID); err != nil {
		return fmt.Errorf("notify token voided: %w", err)
	}
	return nil
}

// OfferSessionWork makes sure a session has a live work item: the live one if there is one,
// else a new queued item (created true). A stopping item is stopped first and replaced: it
// was asked to stop (an interrupt, whose turn is over), and the worker still holding it would
// cut the new run's calls short when its next heartbeat tells it so.
func (q *Queries) OfferSessionWork(ctx context.Context, workspaceID, environmentID, sessionID string, now time.Time) (WorkItem, bool, error) {
	rows, err := q.db.Query(ctx, `UPDATE work_items SET state = 'stopped', stopped_at = $2
		WHERE session_id = $1 AND state = 'stopping' RETURNING id`, sessionID, now)
	if err != nil {
		return WorkItem{}, false, fmt.Errorf("stop the stopping work of session %s: %w", sessionID, classify(err))
	}
	stopped, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return WorkItem{}, false, fmt.Errorf("stop the stopping work of session %s: %w", sessionID, classify(err))
	}
	for _, id := range stopped {
		if err := q.notifyTokenVoided(ctx, id); err != nil {
			return WorkItem{}, false, err
		}
	}
	w, err := scanWork(q.db.QueryRow(ctx, `INSERT INTO work_items AS w (id, workspace_id, environment_id, kind, session_id, state, created_at)
		VALUES ($1, $2, $3, 'session', $4, 'queued', $5)
		ON CONFLICT (session_id) WHERE state <> 'stopped' DO NOTHING
		RETURNING `+workColumns, ids.New(ids.Work), workspaceID, environmentID, sessionID, now))
	if err == nil {
		return w, true, q.notifyWork(ctx, environmentID)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return WorkItem{}, false, fmt.Errorf("queue work for session %s: %w", sessionID, classify(err))
	}
	w, err = scanWork(q.db.QueryRow(ctx, `SELECT `+workColumns+` FROM work_items w WHERE w.session_id = $1 AND w.state <> 'stopped'`, sessionID))
	if err != nil {
		return WorkItem{}, false, fmt.Errorf("read the live work of session %s: %w", sessionID, classify(err))
	}
	return w, false, nil
}

// Claim is one poll's claim of a work item.
type Claim struct {
	EnvironmentID string
	WorkerID      string
	// Token is the session token the claim issues; only its digest is stored.
	Token string
	// KeyID is the key that polled: the token works only while it does.
	KeyID string
	// ReclaimOlderThan: an item claimed but not acknowledged for this long goes to the next
	// poll (its poll's answer was lost, or its worker died before the ack).
	ReclaimOlderThan time.Duration
	// Lease is how long the claim holds before its first heartbeat.
	Lease time.Duration
	Now   time.Time
}

// ClaimWork hands the oldest claimable item of an environment to a worker: a queued one, one
// claimed but not acknowledged for longer than ReclaimOlderThan, or one whose lease ran out
// (its worker stopped heartbeating). A reclaim issues a new token, which voids the old
// worker's, and resets the lease's version, so the old worker's next heartbeat fails.
// Concurrent polls never claim one item twice (SKIP LOCKED). ok is false with no item.
func (q *Queries) ClaimWork(ctx context.Context, c Claim) (w WorkItem, ok bool, err error) {
	w, err = scanWork(q.db.QueryRow(ctx, `WITH next AS (
			SELECT id FROM work_items
			WHERE environment_id = $1 AND (
				state = 'queued'
				OR (state = 'starting' AND acknowledged_at IS NULL AND claimed_at < $2::timestamptz - $3 * interval '1 millisecond')
				OR (state IN ('starting', 'active') AND lease_expires_at < $2))
			ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
		UPDATE work_items w SET state = 'starting', claimed_at = $2, acknowledged_at = NULL, last_heartbeat = NULL,
			lease_expires_at = $2::timestamptz + $4 * interval '1 millisecond', worker_id = $5, claims = w.claims + 1, token_hash = $6,
			claim_key_id = nullif($7, '')
		FROM next WHERE w.id = next.id
		RETURNING `+workColumns,
		c.EnvironmentID, c.Now, c.ReclaimOlderThan.Milliseconds(), c.Lease.Milliseconds(), c.WorkerID, hashKey(c.Token), c.KeyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return WorkItem{}, false, nil
	}
	if err != nil {
		return WorkItem{}, false, fmt.Errorf("claim work of environment %s: %w", c.EnvironmentID, classify(err))
	}
	if w.Claims > 1 {
		// The previous worker's token is void: end what it authorised.
		if err := q.notifyTokenVoided(ctx, w.ID); err != nil {
			return WorkItem{}, false, err
		}
	}
	return w, true, nil
}

// RecordPoller notes that a worker polled an environment (the statistics' workers_polling).
func (q *Queries) RecordPoller(ctx context.Context, environmentID, workerID string, now time.Time) error {
	if _, err := q.db.Exec(ctx, `INSERT INTO work_pollers (environment_id, worker_id, polled_at) VALUES ($1, $2, $3)
		ON CONFLICT (environment_id, worker_id) DO UPDATE SET polled_at = excluded.polled_at`, environmentID, workerID, now); err != nil {
		return fmt.Errorf("record poller: %w", classify(err))
	}
	// Forget pollers long gone, a few at a time, so the table stays the size of the fleet.
	if _, err := q.db.Exec(ctx, `DELETE FROM work_pollers WHERE ctid IN (
		SELECT ctid FROM work_pollers WHERE environment_id = $1 AND polled_at < $2 LIMIT 10)`, environmentID, now.Add(-time.Hour)); err != nil {
		return fmt.Errorf("forget old pollers: %w", classify(err))
	}
	return nil
}

// GetWork returns one item of an environment, optionally locked.
func (q *Queries) GetWork(ctx context.Context, environmentID, workID string, forUpdate bool) (WorkItem, error) {
	sql := `SELECT ` + workColumns + ` FROM work_items w WHERE w.id = $1 AND w.environment_id = $2`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	w, err := scanWork(q.db.QueryRow(ctx, sql, workID, environmentID))
	if err != nil {
		return WorkItem{}, fmt.Errorf("get work %s: %w", workID, classify(err))
	}
	return w, nil
}

// SaveWork writes an item's mutable columns (the caller holds its lock); voidToken tells every
// process that its session token no longer reaches the session (the item stopped).
func (q *Queries) SaveWork(ctx context.Context, w WorkItem, voidToken bool) error {
	_, err := q.db.Exec(ctx, `UPDATE work_items SET state = $2, metadata = $3, acknowledged_at = $4, started_at = $5,
		latest_heartbeat_at = $6, last_heartbeat = $7, lease_expires_at = $8, stop_requested_at = $9, stopped_at = $10
		WHERE id = $1`, w.ID, w.State, nonNilMap(w.Metadata), w.AcknowledgedAt, w.StartedAt, w.LatestHeartbeatAt, w.LastHeartbeat,
		w.LeaseExpiresAt, w.StopRequestedAt, w.StoppedAt)
	if err != nil {
		return fmt.Errorf("save work %s: %w", w.ID, classify(err))
	}
	if voidToken {
		return q.notifyTokenVoided(ctx, w.ID)
	}
	return nil
}

// LiveSessionWork returns the session's live item, locked, or ErrNotFound.
func (q *Queries) LiveSessionWork(ctx context.Context, sessionID string) (WorkItem, error) {
	w, err := scanWork(q.db.QueryRow(ctx, `SELECT `+workColumns+` FROM work_items w WHERE w.session_id = $1 AND w.state <> 'stopped' FOR UPDATE`, sessionID))
	if err != nil {
		return WorkItem{}, fmt.Errorf("get the live work of session %s: %w", sessionID, classify(err))
	}
	return w, nil
}

// StoppedTokenGrace is how long a stopped item's session token still reaches the item itself
// (its worker's last heartbeat and force-stop then get the item's answer, not a 401); the
// session it never reaches again.
const StoppedTokenGrace = 10 * time.Minute

// WorkByToken returns the item whose session token is token, or ErrNotFound (unknown,
// reclaimed by another claim, stopped longer than StoppedTokenGrace, or claimed by a key that
// has since been revoked or has expired). The caller decides
// what a stopped item's token may still do.
func (q *Queries) WorkByToken(ctx context.Context, token string) (WorkItem, error) {
	w, err := scanWork(q.db.QueryRow(ctx, `SELECT `+workColumns+` FROM work_items w
		LEFT JOIN api_keys k ON k.id = w.claim_key_id
		WHERE w.token_hash = $1
		AND (w.state <> 'stopped' OR w.stopped_at > now() - $2 * interval '1 second')
		AND (w.claim_key_id IS NULL OR (k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())))`,
		hashKey(token), int64(StoppedTokenGrace/time.Second)))
	if err != nil {
		return WorkItem{}, fmt.Errorf("look up session token: %w", classify(err))
	}
	return w, nil
}

// ListWork returns a page of an environment's items in p's order.
func (q *Queries) ListWork(ctx context.Context, environmentID string, p ListParams) ([]WorkItem, bool, error) {
	var b sqlBuilder
	b.where("t.environment_id = %s", environmentID)
	suffix, reversed := b.page(p, "")
	cols := strings.ReplaceAll(workColumns, "w.", "t.")
	rows, err := q.db.Query(ctx, `SELECT `+cols+` FROM work_items t`+suffix, b.args...)
	if err != nil {
		return nil, false, fmt.Errorf("list work of environment %s: %w", environmentID, classify(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WorkItem, error) { return scanWork(r) })
	if err != nil {
		return nil, false, fmt.Errorf("list work of environment %s: %w", environmentID, classify(err))
	}
	out, more := trim(out, p.Limit, reversed)
	return out, more, nil
}

// WorkStats are an environment queue's figures.
type WorkStats struct {
	// Depth counts items waiting for a worker; Pending those polled but not acknowledged.
	Depth, Pending int64
	// OldestQueuedAt is the creation of the oldest queued or pending item.
	OldestQueuedAt *time.Time
	// WorkersPolling counts the workers that polled in the last 30 seconds.
	WorkersPolling int64
}

// WorkQueueStats reads an environment queue's figures.
func (q *Queries) WorkQueueStats(ctx context.Context, environmentID string, now time.Time) (WorkStats, error) {
	var s WorkStats
	err := q.db.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE state = 'queued'),
			count(*) FILTER (WHERE state = 'starting' AND acknowledged_at IS NULL),
			min(created_at) FILTER (WHERE state = 'queued' OR (state = 'starting' AND acknowledged_at IS NULL)),
			(SELECT count(*) FROM work_pollers WHERE environment_id = $1 AND polled_at > $2)
		FROM work_items WHERE environment_id = $1 AND state IN ('queued', 'starting')`,
		environmentID, now.Add(-30*time.Second)).Scan(&s.Depth, &s.Pending, &s.OldestQueuedAt, &s.WorkersPolling)
	if err != nil {
		return WorkStats{}, fmt.Errorf("work queue stats of environment %s: %w", environmentID, classify(err))
	}
	return s, nil
}

// StopSessionWork stops a session's live item. Forced (the session was deleted or archived)
// it stops now: the worker's token stops working, and its next heartbeat says the lease is
// over. Otherwise (an interrupt) an item a worker holds becomes stopping, so the worker stops
// it after its next heartbeat, and a queued one stops at once.
func (q *Queries) StopSessionWork(ctx context.Context, sessionID string, force bool, now time.Time) error {
	rows, err := q.db.Query(ctx, `UPDATE work_items SET
			state = CASE WHEN $3 OR state = 'queued' THEN 'stopped' ELSE 'stopping' END,
			stopped_at = CASE WHEN $3 OR state = 'queued' THEN $2::timestamptz END,
			stop_requested_at = coalesce(stop_requested_at, $2)
		WHERE session_id = $1 AND state <> 'stopped' AND ($3 OR state <> 'stopping')
		RETURNING id, state`, sessionID, now, force)
	if err != nil {
		return fmt.Errorf("stop the work of session %s: %w", sessionID, classify(err))
	}
	type stopped struct{ ID, State string }
	items, err := pgx.CollectRows(rows, pgx.RowToStructByPos[stopped])
	if err != nil {
		return fmt.Errorf("stop the work of session %s: %w", sessionID, classify(err))
	}
	for _, it := range items {
		if it.State == WorkStopped {
			if err := q.notifyTokenVoided(ctx, it.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// WorkTarget is where a session's work goes: its workspace, its environment and that
// environment's config type.
type WorkTarget struct {
	WorkspaceID, EnvironmentID, ConfigType string
}

// SessionWorkTarget returns the session's WorkTarget, or ErrNotFound.
func (q *Queries) SessionWorkTarget(ctx context.Context, sessionID string) (WorkTarget, error) {
	var t WorkTarget
	err := q.db.QueryRow(ctx, `SELECT s.workspace_id, s.environment_id, coalesce(e.config->>'type', '')
		FROM sessions s JOIN environments e ON e.id = s.environment_id WHERE s.id = $1`, sessionID).
		Scan(&t.WorkspaceID, &t.EnvironmentID, &t.ConfigType)
	if err != nil {
		return WorkTarget{}, fmt.Errorf("get the environment of session %s: %w", sessionID, classify(err))
	}
	return t, nil
}
