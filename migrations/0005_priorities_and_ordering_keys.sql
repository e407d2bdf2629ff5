-- hookq schema v5: priorities, ordering keys, and a cap on a queue's jobs.
--
-- Job statuses now: 0 = ready (due: claimable), 1 = in flight, 3 = scheduled (not due yet:
-- a delay or a retry's backoff), 4 = blocked (behind an earlier job of its ordering key).
-- Keeping not-yet-due jobs out of the ready index lets a claim take the first jobs of that
-- index in (priority, due time) order without stepping over jobs that are not due; the
-- claim promotes due scheduled jobs first (through their own index).
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
-- Jobs of one queue with one key are delivered one at a time, in enqueue order: only the
-- key's earliest live job (its head) is ever ready, in flight or scheduled; the others wait
-- blocked (status 4) until the head is delivered, dead-lettered or cancelled.
ALTER TABLE jobs ADD COLUMN ordering_key TEXT;

UPDATE jobs SET status = 3
WHERE status = 0 AND run_at > CAST(strftime('%s', 'now') AS INTEGER) * 1000;

-- Claiming: a queue's due jobs, higher priority first, then by due time (ties by rowid,
-- that is insertion order). Partial and covering, as before.
DROP INDEX jobs_ready;
CREATE INDEX jobs_ready ON jobs(queue, priority DESC, run_at) WHERE status = 0;

-- Promoting: a queue's scheduled jobs by due time.
CREATE INDEX jobs_scheduled ON jobs(queue, run_at) WHERE status = 3;

-- A key's head and its next job. Partial: a job without a key costs nothing here.
CREATE INDEX jobs_by_key ON jobs(queue, ordering_key, status, id)
    WHERE ordering_key IS NOT NULL;

-- A dead letter keeps its priority and key, so a replay puts them back.
ALTER TABLE dead_letters ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dead_letters ADD COLUMN ordering_key TEXT;

-- `maxQueued`: the live jobs of each queue that has a cap, counted exactly by two triggers
-- on `jobs` (AFTER INSERT / AFTER DELETE: `live` ± 1 for the row's queue). The store creates
-- those triggers while at least one queue has a cap and drops them when none has
-- (`store::sqlite::queues::sync_counting`), so a server without caps pays nothing for them.
CREATE TABLE queue_sizes (
    queue TEXT PRIMARY KEY NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    live  INTEGER NOT NULL,
    cap   INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO queue_sizes(queue, live, cap)
SELECT name, (SELECT count(*) FROM jobs WHERE jobs.queue = queues.name), max_queued
FROM queues WHERE max_queued IS NOT NULL;
