-- hookq schema v1. Times are unix milliseconds; job ids are UUIDv7 as 16-byte blobs
-- (so they sort by creation time).

CREATE TABLE queues (
    name       TEXT PRIMARY KEY NOT NULL,
    target     TEXT NOT NULL,
    secret     TEXT,
    created_at INTEGER NOT NULL
);

-- Live jobs: waiting, scheduled for a retry, or in flight. A delivered job is deleted; a
-- job whose attempts are spent moves to dead_letters.
-- status: 0 = ready, 1 = in flight (leased until leased_until).
-- A rowid table, not WITHOUT ROWID: payloads may be hundreds of KiB.
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
    last_status  INTEGER,
    replay_count INTEGER NOT NULL DEFAULT 0,
    -- When a replayed job's time to live starts (its replay); NULL: at creation (the id).
    ttl_from     INTEGER
);

-- Claiming: the due ready jobs of one queue, oldest first. Partial, so it holds only what
-- may be claimed, and covering (rowid is implicit), so a claim never touches other rows.
CREATE INDEX jobs_ready ON jobs(queue, run_at) WHERE status = 0;

-- Stale-lease recovery: in-flight jobs by lease expiry.
CREATE INDEX jobs_leased ON jobs(leased_until) WHERE status = 1;

-- TTL expiry of replayed jobs (fresh jobs expire by id, which encodes their creation time).
-- Partial: a job that was never replayed costs nothing here.
CREATE INDEX jobs_ttl_replayed ON jobs(ttl_from) WHERE ttl_from IS NOT NULL;

-- Listing a queue's READY jobs in id (= creation) order.
CREATE INDEX jobs_by_queue ON jobs(queue, id);

-- Dead letters: jobs whose attempts were spent (or that expired), with an admin lifecycle:
-- pending -> replaying -> replayed, or pending -> acknowledged. Replayed and acknowledged
-- records stay for audit until the retention sweep removes them. Keyed by the job id.
CREATE TABLE dead_letters (
    id              BLOB NOT NULL UNIQUE,
    queue           TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    target          TEXT NOT NULL,
    payload         TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL,
    failure_reason  TEXT NOT NULL CHECK (failure_reason IN ('max_attempts_reached', 'expired')),
    last_error      TEXT,
    last_status     INTEGER,
    failed_at       INTEGER NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'replaying', 'replayed', 'acknowledged')),
    replay_count    INTEGER NOT NULL DEFAULT 0,
    replayed_at     INTEGER,
    acknowledged_at INTEGER,
    updated_at      INTEGER NOT NULL
);

-- Admin listing, newest failure first, across queues or within one.
CREATE INDEX dead_letters_by_state ON dead_letters(state, failed_at, id);
CREATE INDEX dead_letters_by_queue ON dead_letters(queue, state, failed_at, id);
CREATE INDEX dead_letters_by_time ON dead_letters(failed_at, id);
-- Retention sweep: closed (replayed, acknowledged) records by age.
CREATE INDEX dead_letters_by_age ON dead_letters(state, updated_at);

-- Failed delivery attempts, kept until the job is delivered or purged. A job delivered on
-- its first attempt never writes here.
CREATE TABLE job_attempts (
    job_id     BLOB NOT NULL,
    queue      TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    attempt    INTEGER NOT NULL,
    at         INTEGER NOT NULL,
    status     INTEGER,
    latency_ms INTEGER NOT NULL,
    error      TEXT NOT NULL
);
CREATE INDEX job_attempts_by_job ON job_attempts(job_id);
CREATE INDEX job_attempts_by_queue ON job_attempts(queue);
