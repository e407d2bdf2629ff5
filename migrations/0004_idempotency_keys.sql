-- hookq schema v4: idempotency keys. A second enqueue to the same queue with the same
-- `Idempotency-Key` within HOOKQ_IDEMPOTENCY_TTL answers with the first job's id and stores
-- nothing. A key older than the TTL counts as absent; the sweep deletes such keys.
CREATE TABLE idempotency_keys (
    queue      TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    key        TEXT NOT NULL,
    job_id     BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (queue, key)
) WITHOUT ROWID;

-- The sweep: keys by age.
CREATE INDEX idempotency_keys_by_age ON idempotency_keys(created_at);
