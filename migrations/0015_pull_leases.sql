-- hookq schema v15: pull queues. A queue without a target (stored as an empty `target`) is
-- leased by workers over HTTP instead of pushed to an endpoint.
--
-- A lease is fenced by (attempts, its identity): every outcome names both and changes the
-- job only while it is still in flight under that lease. The identity is the expiry the
-- claim set (`leased_until`); a worker may extend its lease, which moves `leased_until` but
-- must keep the lease it holds valid, so the first extension keeps the original expiry
-- here. NULL while the lease was never extended (the identity is then `leased_until`);
-- every claim resets it.
ALTER TABLE jobs ADD COLUMN lease_id INTEGER;
