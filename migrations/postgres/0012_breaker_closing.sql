-- An operator may close a queue's circuit breaker (POST /queue/{name}/_close-breaker): the
-- node that answers closes its own and records when, and the other nodes, which read this
-- table every second, close theirs if they opened before then. 0: never closed by hand.
ALTER TABLE queue_breakers ADD COLUMN closed_at BIGINT NOT NULL DEFAULT 0;
