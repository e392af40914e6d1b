-- +goose Up
-- What the worker keeps of an event that clients never see (a thinking block and its
-- signature, a compaction's summary, a response's stop reason): NULL for most events.
ALTER TABLE events ADD COLUMN private jsonb;

-- +goose Down
ALTER TABLE events DROP COLUMN private;
