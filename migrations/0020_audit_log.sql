-- hookq schema v20: the audit log. Who (`actor`: `key:<id>` for a scoped key, `ui:<session>`
-- for a UI session, `master` for a configured key, `open` on a keyless server; its name for
-- people in `actor_name`) did what (`action`, e.g. `dlq.replay`, `queue.pause`) to what
-- (`queue` when one is concerned, `target`: the queue, key, topic or subscription), when
-- (`at`, unix ms), with a short `detail` and, for actions on many records, how many
-- (`count`). Written in the transaction of the action where the store allows it; pruned
-- after HOOKQ_AUDIT_RETENTION by the maintenance loop. Listed newest first by `id`.
CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         INTEGER NOT NULL,
    actor      TEXT NOT NULL,
    actor_name TEXT NOT NULL,
    action     TEXT NOT NULL,
    queue      TEXT,
    target     TEXT NOT NULL,
    detail     TEXT NOT NULL,
    count      INTEGER
);
CREATE INDEX audit_log_at ON audit_log(at);
CREATE INDEX audit_log_queue ON audit_log(queue, id) WHERE queue IS NOT NULL;
CREATE INDEX audit_log_actor ON audit_log(actor, id);
CREATE INDEX audit_log_action ON audit_log(action, id);
