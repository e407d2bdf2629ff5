-- Pull queues (SQLite's 0015): a queue without a target (an empty `target`) is leased by
-- workers over HTTP. `lease_id` keeps a lease's identity (the expiry its claim set) once
-- the lease is extended, so the worker's lease stays valid; NULL until then, reset by
-- every claim. Outcomes fence on `coalesce(lease_id, leased_until)`.
ALTER TABLE jobs ADD COLUMN lease_id BIGINT;
