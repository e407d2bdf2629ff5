-- Each queue's attempts per minute over the last day, as on SQLite
-- (migrations/0014_activity_minutes.sql).
CREATE TABLE activity_minutes (
    queue     TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    minute    BIGINT NOT NULL,
    delivered BIGINT NOT NULL,
    failed    BIGINT NOT NULL,
    PRIMARY KEY (queue, minute)
);
CREATE INDEX activity_minutes_by_minute ON activity_minutes (minute);
