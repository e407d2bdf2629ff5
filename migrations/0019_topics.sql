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

-- Published messages: kept while a job, dead letter or delivery-log record refers to one
-- (`refs`, counted by the triggers below), and until `retain_until` for replays. A rowid
-- table, as `jobs`: payloads may be hundreds of KiB.
CREATE TABLE topic_messages (
    id           BLOB NOT NULL UNIQUE,
    topic        TEXT NOT NULL,
    payload      TEXT NOT NULL,
    published_at INTEGER NOT NULL,
    retain_until INTEGER NOT NULL,
    refs         INTEGER NOT NULL DEFAULT 0,
    -- The publish's options, for replays.
    priority     INTEGER NOT NULL DEFAULT 0,
    ordering_key TEXT,
    traceparent  TEXT,
    tracestate   TEXT
);
-- A replay: a topic's messages in publish order.
CREATE INDEX topic_messages_by_topic ON topic_messages(topic, published_at, id);
-- The sweep: messages nothing refers to, by the end of their retention.
CREATE INDEX topic_messages_free ON topic_messages(retain_until) WHERE refs = 0;

ALTER TABLE jobs ADD COLUMN message_id BLOB;
ALTER TABLE dead_letters ADD COLUMN message_id BLOB;
ALTER TABLE delivered ADD COLUMN message_id BLOB;

-- Each row naming a message counts once in its `refs`. A job moving between tables (to
-- the dead letters, to the delivery log, back from a replay) is counted in where it lands
-- and out where it leaves; an upsert onto a record of the same job changes nothing.
-- Cascades (a queue's deletion) fire the delete triggers too. Rows without a message pay
-- only the WHEN test.
CREATE TRIGGER jobs_message_in AFTER INSERT ON jobs WHEN new.message_id IS NOT NULL BEGIN
    UPDATE topic_messages SET refs = refs + 1 WHERE id = new.message_id;
END;
CREATE TRIGGER jobs_message_out AFTER DELETE ON jobs WHEN old.message_id IS NOT NULL BEGIN
    UPDATE topic_messages SET refs = refs - 1 WHERE id = old.message_id;
END;
CREATE TRIGGER dead_letters_message_in AFTER INSERT ON dead_letters
WHEN new.message_id IS NOT NULL BEGIN
    UPDATE topic_messages SET refs = refs + 1 WHERE id = new.message_id;
END;
CREATE TRIGGER dead_letters_message_out AFTER DELETE ON dead_letters
WHEN old.message_id IS NOT NULL BEGIN
    UPDATE topic_messages SET refs = refs - 1 WHERE id = old.message_id;
END;
CREATE TRIGGER delivered_message_in AFTER INSERT ON delivered
WHEN new.message_id IS NOT NULL BEGIN
    UPDATE topic_messages SET refs = refs + 1 WHERE id = new.message_id;
END;
CREATE TRIGGER delivered_message_out AFTER DELETE ON delivered
WHEN old.message_id IS NOT NULL BEGIN
    UPDATE topic_messages SET refs = refs - 1 WHERE id = old.message_id;
END;

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
