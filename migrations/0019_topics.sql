-- hookq schema v19: topics. A topic routes, a queue delivers: a publish stores one message
-- and, in the same transaction, one job in each subscribed queue whose filter matches it.
-- The payload is stored once, in `topic_messages`; each job of a message refers to it by
-- `message_id` and keeps an empty `payload` of its own.

CREATE TABLE topics (
    name       TEXT PRIMARY KEY NOT NULL,
    -- How long each published message is kept for replays (0: not kept past its jobs).
    retain_ms  INTEGER NOT NULL DEFAULT 0,
    -- Bumped by every change of the topic's subscriptions (the triggers below): a node
    -- keeps each topic's filters compiled and rebuilds them when the version it compiled
    -- is not the one a publish reads, so a subscription is used at once on every node.
    version    INTEGER NOT NULL DEFAULT 0,
    -- Messages published (duplicates not counted), added up by the maintenance sweep.
    published  INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE topic_subscriptions (
    topic      TEXT NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
    queue      TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    -- The content filter (JSON), NULL: every message.
    filter     TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (topic, queue)
) WITHOUT ROWID;
-- A queue's topics (its page; its deletion).
CREATE INDEX topic_subscriptions_by_queue ON topic_subscriptions(queue);

CREATE TRIGGER topic_subscription_added AFTER INSERT ON topic_subscriptions BEGIN
    UPDATE topics SET version = version + 1 WHERE name = new.topic;
END;
CREATE TRIGGER topic_subscription_changed AFTER UPDATE ON topic_subscriptions BEGIN
    UPDATE topics SET version = version + 1 WHERE name = new.topic;
END;
-- Also when a queue's deletion cascades to its subscriptions.
CREATE TRIGGER topic_subscription_removed AFTER DELETE ON topic_subscriptions BEGIN
    UPDATE topics SET version = version + 1 WHERE name = old.topic;
END;

-- Published messages, kept while a job, dead letter or delivery-log record refers to one,
-- and until `retain_until` for replays. No reference count: a trigger on `jobs` would run
-- a sub-program for every job inserted or deleted, topic or not (it doubled the cost of a
-- plain insert and delete, even with a WHEN clause that is false). Instead the sweep looks
-- at a message once its retention is over (`check_at`) and deletes it when no row refers to
-- it (the partial indexes below answer that, and plain jobs never enter them); a message
-- still referred to is looked at again later, the longer it has lived the later (at most
-- an hour). A rowid table, as `jobs`: payloads may be hundreds of KiB.
CREATE TABLE topic_messages (
    id           BLOB NOT NULL UNIQUE,
    topic        TEXT NOT NULL,
    payload      TEXT NOT NULL,
    published_at INTEGER NOT NULL,
    retain_until INTEGER NOT NULL,
    -- When the sweep looks at it next (from the end of its retention on).
    check_at     INTEGER NOT NULL,
    -- The publish's options, for replays.
    priority     INTEGER NOT NULL DEFAULT 0,
    ordering_key TEXT,
    traceparent  TEXT,
    tracestate   TEXT
);
-- A replay: a topic's messages in publish order.
CREATE INDEX topic_messages_by_topic ON topic_messages(topic, published_at, id);
-- The sweep: messages by when to look at them next.
CREATE INDEX topic_messages_to_check ON topic_messages(check_at);

ALTER TABLE jobs ADD COLUMN message_id BLOB;
ALTER TABLE dead_letters ADD COLUMN message_id BLOB;
ALTER TABLE delivered ADD COLUMN message_id BLOB;
-- Whether a row still refers to a message. Partial: a job without a message costs nothing.
CREATE INDEX jobs_by_message ON jobs(message_id) WHERE message_id IS NOT NULL;
CREATE INDEX dead_letters_by_message ON dead_letters(message_id) WHERE message_id IS NOT NULL;
CREATE INDEX delivered_by_message ON delivered(message_id) WHERE message_id IS NOT NULL;

-- A publish's Idempotency-Key: `batch` 0 for one message, 1 for a `_batch` (a key space of
-- its own, as batch_keys is for queues). `ids`: the message ids, 16 bytes each, in order.
CREATE TABLE topic_keys (
    topic       TEXT NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
    batch       INTEGER NOT NULL,
    key         TEXT NOT NULL,
    fingerprint BLOB NOT NULL,
    ids         BLOB NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (topic, batch, key)
) WITHOUT ROWID;
CREATE INDEX topic_keys_by_age ON topic_keys(created_at);
