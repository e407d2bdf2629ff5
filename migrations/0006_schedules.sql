-- hookq schema v6: recurring jobs. A schedule enqueues its job on its queue at each tick of
-- a cron expression read in a time zone. `next_run_at` is the tick to fire next: firing it
-- stores the job and moves `next_run_at` on in one transaction, and only while it still
-- holds the tick fired (compare-and-set), so a tick enqueues at most one job.
CREATE TABLE schedules (
    queue        TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    cron         TEXT NOT NULL,
    timezone     TEXT NOT NULL,
    -- The job, canonical JSON, and the enqueue options it is stored with.
    payload      TEXT NOT NULL,
    priority     INTEGER NOT NULL DEFAULT 0,
    ordering_key TEXT,
    paused       INTEGER NOT NULL DEFAULT 0,
    -- Unix ms of the next tick; NULL when the expression never fires again.
    next_run_at  INTEGER,
    -- The last tick fired and the job it stored.
    last_run_at  INTEGER,
    last_job_id  BLOB,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (queue, name)
) WITHOUT ROWID;

-- The scheduler's question: which active schedules are due, and when is the next one.
CREATE INDEX schedules_due ON schedules(next_run_at) WHERE paused = 0;

-- A job stored by a schedule names it and its tick; its deliveries carry both as headers,
-- and a dead letter keeps them for a replay.
ALTER TABLE jobs ADD COLUMN schedule TEXT;
ALTER TABLE jobs ADD COLUMN schedule_tick INTEGER;
ALTER TABLE dead_letters ADD COLUMN schedule TEXT;
ALTER TABLE dead_letters ADD COLUMN schedule_tick INTEGER;
