-- The `maxQueued` counting triggers of 0014 only while some queue has a cap. Even when no
-- queue has one, each fired once per insert and delete statement on `jobs`: PostgreSQL
-- keeps the statement's rows as a transition table for them and runs the PL/pgSQL function,
-- which then returns at once: 5-9 % of PostgreSQL's CPU with four nodes under load (perf,
-- issue 43). The first cap set creates them again (`store::postgres::queues`),
-- under a lock on `jobs` that waits out every write in progress, then counts the queue's
-- jobs; they stay from then on.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM queue_sizes) THEN
        DROP TRIGGER jobs_counted_in ON jobs;
        DROP TRIGGER jobs_counted_out ON jobs;
    END IF;
END $$;
