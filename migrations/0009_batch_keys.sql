-- hookq schema v9: a batch's Idempotency-Key, in a key space of its own. A batch keyed K
-- once stored its jobs under the single-job keys K/0, K/1, …, where a single job keyed
-- K/5 could make a batch lose its job 5. Now the key names the batch as a whole: the same
-- key with the same batch (same fingerprint) answers with the first batch's ids and stores
-- nothing; with another batch it is refused. Expired like single-job keys.
CREATE TABLE batch_keys (
    queue       TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    -- SHA-256 of the batch's jobs (payloads, priority, ordering key), in order.
    fingerprint BLOB NOT NULL,
    -- The batch's job ids, 16 bytes each, in the batch's order.
    job_ids     BLOB NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (queue, key)
) WITHOUT ROWID;

CREATE INDEX batch_keys_by_age ON batch_keys(created_at);
