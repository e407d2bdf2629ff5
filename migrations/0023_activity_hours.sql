-- hookq schema v23: each queue's attempts per hour over the last 7 days, rolled up from
-- `activity_minutes` (kept a day) as each minute is written, so the charts reach back a week.
-- One row per queue and hour with an attempt (`hour`: the hour's start, unix ms): delivered,
-- failed, and the hour's latency histogram (its minutes' merged, as `activity_minutes.latency`
-- stores it); rows older than 7 days are deleted by the same sweep.
CREATE TABLE activity_hours (
    queue     TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    hour      INTEGER NOT NULL,
    delivered INTEGER NOT NULL,
    failed    INTEGER NOT NULL,
    latency   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (queue, hour)
) WITHOUT ROWID;
CREATE INDEX activity_hours_by_hour ON activity_hours (hour);
