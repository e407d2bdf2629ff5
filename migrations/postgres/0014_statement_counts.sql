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

-- One function for both triggers: INSERT reads the statement's new rows, DELETE its old.
CREATE FUNCTION hookq_count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    counted RECORD;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM queue_sizes) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        FOR counted IN
            SELECT s.queue, s.live, s.cap, n.jobs, n.fresh
            FROM (SELECT queue, count(*) AS jobs,
                         count(*) FILTER (WHERE replay_count = 0) AS fresh
                  FROM new_jobs GROUP BY queue) n
            JOIN queue_sizes s ON s.queue = n.queue
            ORDER BY s.queue
            FOR UPDATE OF s
        LOOP
            IF counted.fresh > 0 AND counted.live + counted.fresh > counted.cap THEN
                RAISE EXCEPTION 'queue % holds its maxQueued jobs', counted.queue
                    USING ERRCODE = 'HQ001';
            END IF;
            UPDATE queue_sizes SET live = live + counted.jobs WHERE queue = counted.queue;
        END LOOP;
    ELSE
        FOR counted IN
            SELECT s.queue, n.jobs
            FROM (SELECT queue, count(*) AS jobs FROM old_jobs GROUP BY queue) n
            JOIN queue_sizes s ON s.queue = n.queue
            ORDER BY s.queue
            FOR UPDATE OF s
        LOOP
            UPDATE queue_sizes SET live = live - counted.jobs WHERE queue = counted.queue;
        END LOOP;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_counted_in AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION hookq_count_jobs();
CREATE TRIGGER jobs_counted_out AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION hookq_count_jobs();
