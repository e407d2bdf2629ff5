-- What each idempotency key's job was, as on SQLite (migrations/0012_idempotency_fingerprints.sql):
-- a second enqueue under a key is a duplicate only when it repeats the first job; another
-- job is refused with 409. Keys recorded before have no fingerprint and stay duplicates.
ALTER TABLE idempotency_keys ADD COLUMN fingerprint BYTEA;
