-- hookq schema v16: dead letters leased to a consumer (Forq's `{queue}-dlq` convention).
-- A pending dead letter with `leased_until` in the future is held by a consumer (or, after
-- its nack, hidden until then); its ack acknowledges it, fenced by that time. NULL: free.
ALTER TABLE dead_letters ADD COLUMN leased_until INTEGER;
