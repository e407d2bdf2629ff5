-- hookq schema v3: a job's requested start (`delay` / `runAt` at enqueue), shown back as its
-- runAt. NULL: delivered as soon as it can be. A delayed job's time to live counts from it
-- (ttl_from is set to the same time), not from its creation.
ALTER TABLE jobs ADD COLUMN not_before INTEGER;
