-- hookq schema v24: who holds a pull lease and since when, for the operator's view of
-- pull workers (`GET /admin/leases`). Written by the very UPDATE that claims, so a lease
-- costs no statement more. Every claim sets `leased_at`; a pull worker's lease also names
-- its holder as the audit log names an actor (`key:<id>`, `master` or `open`, and the name
-- for people); a push delivery leaves the holder NULL (the dispatcher holds it). Values
-- left on a job no longer in flight mean nothing: readers look at in-flight jobs only.
ALTER TABLE jobs ADD COLUMN leased_at INTEGER;
ALTER TABLE jobs ADD COLUMN lease_holder TEXT;
ALTER TABLE jobs ADD COLUMN lease_holder_name TEXT;
