-- `maxQueued` counts kept once per statement instead of once per row. The row-level
-- triggers of 0001 ran a PL/pgSQL function for every job inserted and deleted, capped
-- queue or not: ~12% of PostgreSQL's CPU under load (perf, issue 24). These run once per
-- statement over its transition table, and return at once when no queue has a cap.
--
-- Same rules as before: the counter row of each capped queue is locked in queue order
-- (as the grouped statements already sort their rows), a statement's new jobs fit whole
-- or not at all (`live` + its jobs not replayed <= `cap`, else SQLSTATE HQ001, "queue
-- full", and nothing of the statement is stored), and replayed jobs
-- (replay_count > 0) are counted but never refused. (No statement mixes the two.)
DROP TRIGGER jobs_counted_in ON jobs;
DROP TRIGGER jobs_counted_out ON jobs;
DROP FUNCTION hookq_count_job_in();
DROP FUNCTION hookq_count_job_out();

CREATE FUNCTION hookq_count_jobs_in() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    added RECORD;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM queue_sizes) THEN
        RETURN NULL;
    END IF;
    FOR added IN
        SELECT s.queue, s.live, s.cap, n.jobs, n.fresh
        FROM (SELECT queue, count(*) AS jobs,
                     count(*) FILTER (WHERE replay_count = 0) AS fresh
              FROM new_jobs GROUP BY queue) n
        JOIN queue_sizes s ON s.queue = n.queue
        ORDER BY s.queue
        FOR UPDATE OF s
    LOOP
        IF added.fresh > 0 AND added.live + added.fresh > added.cap THEN
            RAISE EXCEPTION 'queue % holds its maxQueued jobs', added.queue
                USING ERRCODE = 'HQ001';
        END IF;
        UPDATE queue_sizes SET live = live + added.jobs WHERE queue = added.queue;
    END LOOP;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_counted_in AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION hookq_count_jobs_in();

CREATE FUNCTION hookq_count_jobs_out() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    removed RECORD;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM queue_sizes) THEN
        RETURN NULL;
    END IF;
    FOR removed IN
        SELECT s.queue, n.jobs
        FROM (SELECT queue, count(*) AS jobs FROM old_jobs GROUP BY queue) n
        JOIN queue_sizes s ON s.queue = n.queue
        ORDER BY s.queue
        FOR UPDATE OF s
    LOOP
        UPDATE queue_sizes SET live = live - removed.jobs WHERE queue = removed.queue;
    END LOOP;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_counted_out AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION hookq_count_jobs_out();
