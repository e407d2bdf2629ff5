-- Scoped API keys, as on SQLite (migrations/0010_api_keys.sql): only each key's SHA-256 is
-- stored; `queues` is a JSON array of queue names and `prefix*` patterns. Every node looks a
-- key up here on each request, so a revocation holds on every node from its commit on.
CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY,
    hash       BYTEA NOT NULL UNIQUE,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL,
    queues     TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
