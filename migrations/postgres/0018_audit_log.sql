-- The audit log, as on SQLite (migrations/0020_audit_log.sql): who did what to what, when,
-- written in the transaction of the action where the store allows it, pruned after
-- HOOKQ_AUDIT_RETENTION, listed newest first by `id`.
CREATE TABLE audit_log (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         BIGINT NOT NULL,
    actor      TEXT NOT NULL,
    actor_name TEXT NOT NULL,
    action     TEXT NOT NULL,
    queue      TEXT,
    target     TEXT NOT NULL,
    detail     TEXT NOT NULL,
    count      BIGINT
);
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_queue ON audit_log (queue, id) WHERE queue IS NOT NULL;
CREATE INDEX audit_log_actor ON audit_log (actor, id);
CREATE INDEX audit_log_action ON audit_log (action, id);
