-- hookq schema v21: scoped keys' last use and optional expiry. `last_used_at` (unix ms) is
-- written at most once a minute per key, off the request's path; `expires_at` (unix ms,
-- NULL: never) is set at creation, and from then on the key answers 401.
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
