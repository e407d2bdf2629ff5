-- Dead letters leased to a consumer (Forq's `{queue}-dlq` convention; SQLite's 0016): a
-- pending dead letter with `leased_until` in the future is held (or hidden after a nack);
-- its ack acknowledges it, fenced by that time. NULL: free.
ALTER TABLE dead_letters ADD COLUMN leased_until BIGINT;
