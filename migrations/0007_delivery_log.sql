-- hookq schema v7: the delivery log. A queue may keep its delivered jobs for a while
-- (`keepDelivered`, or the server's `HOOKQ_KEEP_DELIVERED`): a delivered job then moves
-- here, with the answer that acknowledged it, instead of being deleted. Its failed attempts
-- stay in `job_attempts` until the record is swept. Nothing is written here while no queue
-- keeps its deliveries.
ALTER TABLE queues ADD COLUMN keep_delivered_ms INTEGER;

CREATE TABLE delivered (
    id              BLOB PRIMARY KEY,
    queue           TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    payload         TEXT NOT NULL,
    attempts        INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    not_before      INTEGER,
    priority        INTEGER NOT NULL DEFAULT 0,
    ordering_key    TEXT,
    schedule        TEXT,
    schedule_tick   INTEGER,
    delivered_at    INTEGER NOT NULL,
    -- The worker's 2xx status and how long its answer took.
    response_status INTEGER NOT NULL,
    latency_ms      INTEGER NOT NULL
);
-- A queue's log, newest first (the listing's cursor is (delivered_at, id)), and the
-- retention sweep (a queue's records delivered before its cutoff).
CREATE INDEX delivered_by_queue ON delivered(queue, delivered_at, id);
