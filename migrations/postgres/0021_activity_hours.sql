-- Each queue's attempts per hour over the last 7 days, rolled up from activity_minutes, as on
-- SQLite (migrations/0023_activity_hours.sql).
CREATE TABLE activity_hours (
    queue     TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    hour      BIGINT NOT NULL,
    delivered BIGINT NOT NULL,
    failed    BIGINT NOT NULL,
    latency   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (queue, hour)
);
CREATE INDEX activity_hours_by_hour ON activity_hours (hour);
