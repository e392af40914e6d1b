-- +goose Up
-- The workspace quota on running sessions (docs/operations.md#rate-limits-and-quotas) counts a
-- session whose parked turn a client's answer resumes from the moment the answer commits. The
-- answer is processed on receipt, so nothing is queued, and the session stays idle until a
-- worker marks it running: without a mark, answers to other parked sessions sent in that window
-- would all be admitted. The send that admits the answer copies the session's stop reason here;
-- the session counts while it is idle with that same stop reason. A worker's next transition
-- changes the row (running, or idle with another stop reason: the calls waited on are answered
-- and never waited on again), so the mark lapses by itself and nothing has to clear it.
ALTER TABLE sessions ADD COLUMN resuming_from jsonb;

-- The count looks only at the sessions that hold such a mark, not at every idle one.
CREATE INDEX sessions_workspace_resuming ON sessions (workspace_id)
    WHERE status = 'idle' AND resuming_from = stop_reason;

-- +goose Down
DROP INDEX sessions_workspace_resuming;
ALTER TABLE sessions DROP COLUMN resuming_from;
