-- Topics (SQLite's 0019): a publish stores one message and, in the same transaction, one
-- job in each subscribed queue whose filter matches it. The payload is stored once, in
-- `topic_messages`; each job of a message refers to it by `message_id` and keeps an empty
-- `payload` of its own.
CREATE TABLE topics (
    name       TEXT PRIMARY KEY,
    retain_ms  BIGINT NOT NULL DEFAULT 0,
    -- Bumped by every change of the topic's subscriptions (the trigger below): each node
    -- keeps the filters compiled per version, so a subscription is used at once everywhere.
    version    BIGINT NOT NULL DEFAULT 0,
    -- Messages published, added up by each node's maintenance sweep.
    published  BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);

CREATE TABLE topic_subscriptions (
    topic      TEXT NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
    queue      TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    filter     TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (topic, queue)
);
CREATE INDEX topic_subscriptions_by_queue ON topic_subscriptions (queue);

CREATE FUNCTION hookq_topic_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE topics SET version = version + 1
    WHERE name = CASE WHEN TG_OP = 'DELETE' THEN OLD.topic ELSE NEW.topic END;
    RETURN NULL;
END $$;
-- Also when a queue's deletion cascades to its subscriptions.
CREATE TRIGGER topic_subscriptions_version AFTER INSERT OR UPDATE OR DELETE
    ON topic_subscriptions FOR EACH ROW EXECUTE FUNCTION hookq_topic_version();

-- Kept while a job, dead letter or delivery-log record refers to it, and until
-- `retain_until` for replays; no reference count (SQLite's 0019 says why): the sweep looks
-- at a message from `check_at` on and deletes it when no row refers to it.
CREATE TABLE topic_messages (
    id           UUID PRIMARY KEY,
    topic        TEXT NOT NULL,
    payload      TEXT NOT NULL,
    published_at BIGINT NOT NULL,
    retain_until BIGINT NOT NULL,
    check_at     BIGINT NOT NULL,
    priority     INTEGER NOT NULL DEFAULT 0,
    ordering_key TEXT,
    traceparent  TEXT,
    tracestate   TEXT
);
CREATE INDEX topic_messages_by_topic ON topic_messages (topic, published_at, id);
CREATE INDEX topic_messages_to_check ON topic_messages (check_at);

ALTER TABLE jobs ADD COLUMN message_id UUID;
ALTER TABLE dead_letters ADD COLUMN message_id UUID;
ALTER TABLE delivered ADD COLUMN message_id UUID;
CREATE INDEX jobs_by_message ON jobs (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX dead_letters_by_message ON dead_letters (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX delivered_by_message ON delivered (message_id) WHERE message_id IS NOT NULL;

CREATE TABLE topic_keys (
    topic       TEXT NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
    batch       BOOLEAN NOT NULL,
    key         TEXT NOT NULL,
    fingerprint BYTEA NOT NULL,
    ids         UUID[] NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (topic, batch, key)
);
CREATE INDEX topic_keys_by_age ON topic_keys (created_at);
