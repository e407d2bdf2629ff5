-- hookq schema v14: each queue's attempts per minute over the last day, so the UI's charts
-- outlive a restart. One row per queue and minute with an attempt (`minute`: the minute's
-- start, unix ms), written once a minute; rows older than 24 h are deleted as it is.
CREATE TABLE activity_minutes (
    queue     TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    minute    INTEGER NOT NULL,
    delivered INTEGER NOT NULL,
    failed    INTEGER NOT NULL,
    PRIMARY KEY (queue, minute)
) WITHOUT ROWID;
CREATE INDEX activity_minutes_by_minute ON activity_minutes (minute);
