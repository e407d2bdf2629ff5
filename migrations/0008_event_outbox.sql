-- hookq schema v8: the outbox of operational events (HOOKQ_EVENTS_TARGET). An event is
-- stored here in the transaction of what it reports (a job's dead-lettering) or right after
-- it (a breaker's change, an alert), then POSTed to the events target until it answers 2xx:
-- at least once, retried with backoff, never on the delivery path.
CREATE TABLE event_outbox (
    -- UUIDv7: the event's id (sent as `id`), in creation order.
    id              BLOB PRIMARY KEY,
    kind            TEXT NOT NULL,
    -- The JSON body to send, complete.
    body            TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT
);
CREATE INDEX event_outbox_due ON event_outbox(next_attempt_at);
