-- hookq schema v1: queues and their jobs.
-- Times are unix milliseconds. Job ids are UUIDv7 stored as 16-byte blobs.

CREATE TABLE queues (
    name       TEXT PRIMARY KEY NOT NULL,
    target     TEXT NOT NULL,
    secret     TEXT,
    created_at INTEGER NOT NULL
);

-- status: 0 = ready (waiting or scheduled for retry), 1 = in flight (leased), 2 = dead (ERROR).
-- A rowid table (not WITHOUT ROWID) because payloads may be up to hundreds of KiB.
CREATE TABLE jobs (
    id           BLOB NOT NULL UNIQUE,
    queue        TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    status       INTEGER NOT NULL DEFAULT 0,
    payload      TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    run_at       INTEGER NOT NULL,
    leased_until INTEGER,
    created_at   INTEGER NOT NULL,
    last_error   TEXT,
    last_status  INTEGER
);

-- Claiming: the due ready jobs of one queue, oldest first. Partial, so it holds only
-- what may be claimed and its cost stays flat however large the dead-letter set grows.
CREATE INDEX jobs_ready ON jobs(queue, run_at) WHERE status = 0;

-- Stale-lease recovery: in-flight jobs by lease expiry.
CREATE INDEX jobs_leased ON jobs(leased_until) WHERE status = 1;

-- Listing READY (status 0 or 1) and ERROR (status 2) jobs of a queue in id (= time) order.
CREATE INDEX jobs_listing ON jobs(queue, status = 2, id);
