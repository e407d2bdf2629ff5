-- Scoped keys' last use and optional expiry, as on SQLite (migrations/0021_key_use_and_expiry.sql).
ALTER TABLE api_keys ADD COLUMN last_used_at BIGINT;
ALTER TABLE api_keys ADD COLUMN expires_at BIGINT;
