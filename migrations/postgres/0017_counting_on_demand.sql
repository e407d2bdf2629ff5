-- The `maxQueued` counting triggers of 0014 only while some queue has a cap. Even when no
-- queue has one, each fired once per insert and delete statement on `jobs`: PostgreSQL
-- keeps the statement's rows as a transition table for them and runs the PL/pgSQL function,
-- which then returns at once: 5-9 % of PostgreSQL's CPU with four nodes under load (perf,
-- issue 43). The first cap set creates them again through `hookq_start_counting()`
-- (called by `store::postgres::queues`); they stay from then on.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM queue_sizes) THEN
        DROP TRIGGER jobs_counted_in ON jobs;
        DROP TRIGGER jobs_counted_out ON jobs;
    END IF;
END $$;

-- Create the counting triggers if they are not there. Once they are, it returns at once,
-- taking no lock. Otherwise, first in its transaction: the lock on `jobs` waits until
-- every write in progress is committed and holds off new ones until the transaction ends,
-- so a count of a queue's jobs taken after it misses none; looked for again under the
-- lock, two nodes creating them at once cannot both do it.
CREATE FUNCTION hookq_start_counting() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger
               WHERE tgrelid = 'jobs'::regclass AND tgname = 'jobs_counted_in') THEN
        RETURN;
    END IF;
    LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgrelid = 'jobs'::regclass AND tgname = 'jobs_counted_in') THEN
        CREATE TRIGGER jobs_counted_in AFTER INSERT ON jobs
            REFERENCING NEW TABLE AS new_jobs
            FOR EACH STATEMENT EXECUTE FUNCTION hookq_count_jobs();
        CREATE TRIGGER jobs_counted_out AFTER DELETE ON jobs
            REFERENCING OLD TABLE AS old_jobs
            FOR EACH STATEMENT EXECUTE FUNCTION hookq_count_jobs();
    END IF;
END $$;
