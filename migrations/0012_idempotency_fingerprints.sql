-- hookq schema v12: what each idempotency key's job was. A second enqueue under a key
-- answers `200 duplicate` only when it repeats the first job (same fingerprint: SHA-256 of
-- its canonical payload, priority and ordering key, see store::records::fingerprint);
-- another job under the key is refused with 409, as Stripe's API does. Keys recorded
-- before this version have no fingerprint and answer as duplicates, as they did.
ALTER TABLE idempotency_keys ADD COLUMN fingerprint BLOB;
