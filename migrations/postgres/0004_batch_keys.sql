-- A batch's Idempotency-Key, in a key space of its own (see the SQLite migration
-- 0009_batch_keys.sql for why): the same key with the same batch answers with the first
-- batch's ids; with another batch it is refused. Expired like single-job keys.
CREATE TABLE batch_keys (
    queue       TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    -- SHA-256 of the batch's jobs (payloads, priority, ordering key), in order.
    fingerprint BYTEA NOT NULL,
    -- The batch's job ids, in the batch's order.
    job_ids     UUID[] NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (queue, key)
);

CREATE INDEX batch_keys_by_age ON batch_keys (created_at);
