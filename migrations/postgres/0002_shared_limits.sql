-- Per-queue limits held across every node of the cluster (store::postgres::limits).

-- A queue's deliveries in flight, counted at each claim of a queue with its own
-- `concurrency`: the count reads only that queue's leased jobs.
CREATE INDEX jobs_in_flight ON jobs (queue) WHERE status = 1;

-- The cluster-wide start schedule of each rate-limited queue (the generic cell rate
-- algorithm, as dispatch::rate keeps it in memory on SQLite): the next start is due at
-- `next_start_us`, microseconds since the Unix epoch. Claims on every node take starts from
-- it, one claim of the queue at a time.
CREATE TABLE queue_rates (
    queue         TEXT PRIMARY KEY REFERENCES queues(name) ON DELETE CASCADE,
    next_start_us BIGINT NOT NULL
);

-- Circuit breakers opened by one node, so that every node rests the target: a node that
-- opens a queue's breaker writes until when; every node reads the open ones each second.
CREATE TABLE queue_breakers (
    queue      TEXT PRIMARY KEY REFERENCES queues(name) ON DELETE CASCADE,
    open_until BIGINT NOT NULL
);
