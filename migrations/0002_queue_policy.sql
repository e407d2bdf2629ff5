-- hookq schema v2: each queue's own delivery policy. NULL: the setting follows the
-- server's (and keeps following it when the server's changes).
ALTER TABLE queues ADD COLUMN max_attempts INTEGER;
-- Comma-separated milliseconds, e.g. '500,5000'.
ALTER TABLE queues ADD COLUMN backoff_ms TEXT;
ALTER TABLE queues ADD COLUMN timeout_ms INTEGER;
ALTER TABLE queues ADD COLUMN concurrency INTEGER;
ALTER TABLE queues ADD COLUMN rate_per_second REAL;
ALTER TABLE queues ADD COLUMN burst INTEGER;
ALTER TABLE queues ADD COLUMN max_queued INTEGER;
-- 1: accepts jobs, delivers none.
ALTER TABLE queues ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
