-- hookq's PostgreSQL schema, v1: the SQLite schema's eighth version, written for a database
-- that several hookq nodes share. Times are unix milliseconds (BIGINT), as on SQLite; job
-- ids are UUIDv7 (UUID), so they sort by creation time. Payloads are TEXT, not JSONB: the
-- canonical bytes a job was stored with are the bytes its delivery is signed over.
--
-- What differs from SQLite, and why:
-- - Claims run concurrently on every node (`FOR UPDATE SKIP LOCKED`), not through one
--   writer, so the ready index ends with the id: ties on (priority, run_at) go by id
--   (creation order) on every node, where SQLite used its rowid.
-- - A lease names the node that holds it (`leased_by`); recovery still goes by expiry only,
--   never by node, so no node releases a lease another node still holds.
-- - `queue_epoch`: nodes notice queue changes made elsewhere.
-- - `cluster_leases`: the periodic sweeps (stale leases, TTL, retention) run on one node
--   at a time, the one holding the sweep's row until its `until`.

CREATE TABLE queues (
    name              TEXT PRIMARY KEY,
    target            TEXT NOT NULL,
    -- Sealed (encrypted) under the master key when one is set.
    secret            TEXT,
    created_at        BIGINT NOT NULL,
    -- The queue's own policy; NULL: the server's setting.
    max_attempts      INTEGER,
    -- Comma-separated milliseconds, e.g. '500,5000'.
    backoff_ms        TEXT,
    timeout_ms        BIGINT,
    concurrency       INTEGER,
    rate_per_second   DOUBLE PRECISION,
    burst             INTEGER,
    max_queued        BIGINT,
    keep_delivered_ms BIGINT,
    paused            BOOLEAN NOT NULL DEFAULT FALSE
);

-- Bumped in the transaction of every queue change (create, update, delete): a node reloads
-- its queues when the epoch it saw last has moved, so it sees changes made on other nodes.
CREATE TABLE queue_epoch (epoch BIGINT NOT NULL);
INSERT INTO queue_epoch VALUES (0);

-- Live jobs. status: 0 = ready (due), 1 = in flight, 3 = scheduled (not due yet),
-- 4 = blocked (behind an earlier job of its ordering key).
CREATE TABLE jobs (
    id            UUID PRIMARY KEY,
    queue         TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    status        SMALLINT NOT NULL DEFAULT 0,
    payload       TEXT NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    run_at        BIGINT NOT NULL,
    leased_until  BIGINT,
    leased_by     UUID,
    created_at    BIGINT NOT NULL,
    last_error    TEXT,
    last_status   INTEGER,
    replay_count  INTEGER NOT NULL DEFAULT 0,
    ttl_from      BIGINT,
    not_before    BIGINT,
    priority      INTEGER NOT NULL DEFAULT 0,
    ordering_key  TEXT,
    schedule      TEXT,
    schedule_tick BIGINT
);

-- Claiming: a queue's due jobs, higher priority first, then due time, then creation.
CREATE INDEX jobs_ready ON jobs (queue, priority DESC, run_at, id) WHERE status = 0;
-- Promoting: a queue's scheduled jobs by due time.
CREATE INDEX jobs_scheduled ON jobs (queue, run_at) WHERE status = 3;
-- Stale-lease recovery: in-flight jobs by lease expiry.
CREATE INDEX jobs_leased ON jobs (leased_until) WHERE status = 1;
-- TTL expiry of replayed or delayed jobs.
CREATE INDEX jobs_ttl_from ON jobs (ttl_from) WHERE ttl_from IS NOT NULL;
-- Listing a queue's READY jobs in creation order.
CREATE INDEX jobs_by_queue ON jobs (queue, id);
-- A key's head and its next job; only one job of a key is ever ready, scheduled or in
-- flight, which this unique partial index makes a rule of the database, cluster-wide.
CREATE INDEX jobs_by_key ON jobs (queue, ordering_key, status, id) WHERE ordering_key IS NOT NULL;
CREATE UNIQUE INDEX jobs_one_head_per_key ON jobs (queue, ordering_key)
    WHERE ordering_key IS NOT NULL AND status IN (0, 1, 3);

CREATE TABLE job_attempts (
    job_id     UUID NOT NULL,
    queue      TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    attempt    INTEGER NOT NULL,
    at         BIGINT NOT NULL,
    status     INTEGER,
    latency_ms BIGINT NOT NULL,
    error      TEXT NOT NULL
);
CREATE INDEX job_attempts_by_job ON job_attempts (job_id);
CREATE INDEX job_attempts_by_queue ON job_attempts (queue);

CREATE TABLE dead_letters (
    id              UUID PRIMARY KEY,
    queue           TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    target          TEXT NOT NULL,
    payload         TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    attempts        INTEGER NOT NULL,
    failure_reason  TEXT NOT NULL CHECK (failure_reason IN ('max_attempts_reached', 'expired')),
    last_error      TEXT,
    last_status     INTEGER,
    failed_at       BIGINT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'replaying', 'replayed', 'acknowledged')),
    replay_count    INTEGER NOT NULL DEFAULT 0,
    replayed_at     BIGINT,
    acknowledged_at BIGINT,
    updated_at      BIGINT NOT NULL,
    priority        INTEGER NOT NULL DEFAULT 0,
    ordering_key    TEXT,
    schedule        TEXT,
    schedule_tick   BIGINT
);
CREATE INDEX dead_letters_by_state ON dead_letters (state, failed_at, id);
CREATE INDEX dead_letters_by_queue ON dead_letters (queue, state, failed_at, id);
-- A queue's dead letters in every state (the admin listing's `status=all`), in failure order.
CREATE INDEX dead_letters_by_queue_time ON dead_letters (queue, failed_at, id);
CREATE INDEX dead_letters_by_time ON dead_letters (failed_at, id);
CREATE INDEX dead_letters_by_age ON dead_letters (state, updated_at);

-- Unique per queue, cluster-wide: the primary key is the rule.
CREATE TABLE idempotency_keys (
    queue      TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    key        TEXT NOT NULL,
    job_id     UUID NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (queue, key)
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);

-- `maxQueued`: the live jobs of each capped queue (a row only for a queue with a cap), kept
-- exact by the two triggers below in the transaction of every insert and delete. The
-- insert's trigger refuses a job beyond the cap (SQLSTATE HQ001, "queue full") under the
-- row's lock, so concurrent enqueues on several nodes cannot overshoot it; a replayed job
-- (replay_count > 0) is counted but never refused.
CREATE TABLE queue_sizes (
    queue TEXT PRIMARY KEY REFERENCES queues(name) ON DELETE CASCADE,
    live  BIGINT NOT NULL,
    cap   BIGINT NOT NULL
);

CREATE FUNCTION hookq_count_job_in() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE queue_sizes SET live = live + 1
    WHERE queue = NEW.queue AND (live < cap OR NEW.replay_count > 0);
    IF NOT FOUND AND EXISTS (SELECT 1 FROM queue_sizes WHERE queue = NEW.queue) THEN
        RAISE EXCEPTION 'queue % holds its maxQueued jobs', NEW.queue USING ERRCODE = 'HQ001';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_counted_in AFTER INSERT ON jobs
    FOR EACH ROW EXECUTE FUNCTION hookq_count_job_in();

CREATE FUNCTION hookq_count_job_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE queue_sizes SET live = live - 1 WHERE queue = OLD.queue;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_counted_out AFTER DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION hookq_count_job_out();

CREATE TABLE schedules (
    queue        TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    cron         TEXT NOT NULL,
    timezone     TEXT NOT NULL,
    payload      TEXT NOT NULL,
    priority     INTEGER NOT NULL DEFAULT 0,
    ordering_key TEXT,
    paused       BOOLEAN NOT NULL DEFAULT FALSE,
    next_run_at  BIGINT,
    last_run_at  BIGINT,
    last_job_id  UUID,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (queue, name)
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE NOT paused;

CREATE TABLE delivered (
    id              UUID PRIMARY KEY,
    queue           TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    payload         TEXT NOT NULL,
    attempts        INTEGER NOT NULL,
    created_at      BIGINT NOT NULL,
    not_before      BIGINT,
    priority        INTEGER NOT NULL DEFAULT 0,
    ordering_key    TEXT,
    schedule        TEXT,
    schedule_tick   BIGINT,
    delivered_at    BIGINT NOT NULL,
    response_status INTEGER NOT NULL,
    latency_ms      BIGINT NOT NULL
);
CREATE INDEX delivered_by_queue ON delivered (queue, delivered_at, id);

CREATE TABLE event_outbox (
    id              UUID PRIMARY KEY,
    kind            TEXT NOT NULL,
    body            TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    last_error      TEXT
);
CREATE INDEX event_outbox_due ON event_outbox (next_attempt_at);

-- One row per cluster-wide duty (a sweep, the scheduler): the node holding it until
-- `until` does it; another node takes it over only once `until` has passed.
CREATE TABLE cluster_leases (
    name   TEXT PRIMARY KEY,
    holder UUID NOT NULL,
    until  BIGINT NOT NULL
);
