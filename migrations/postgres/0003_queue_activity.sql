-- What each node's attempts ended in recently, per queue, so that `_stats` shows the
-- cluster's figures on every node (dispatch::activity keeps each node's own in memory).
-- Each node rewrites its row of a queue about once a second while the queue is busy:
-- `at` is when it took the figures; `hour_*` are its attempts per minute, oldest first,
-- the last one the minute of `at`.
CREATE TABLE queue_activity (
    queue                 TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    node                  UUID NOT NULL,
    at                    BIGINT NOT NULL,
    last_minute_delivered BIGINT NOT NULL,
    last_minute_failed    BIGINT NOT NULL,
    hour_delivered        BIGINT[] NOT NULL,
    hour_failed           BIGINT[] NOT NULL,
    PRIMARY KEY (queue, node)
);
