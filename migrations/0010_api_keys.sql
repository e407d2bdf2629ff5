-- hookq schema v10: scoped API keys. A key is stored as its SHA-256 only (the key is 256
-- random bits, shown once at creation); a request's key is looked up by that hash.
-- `queues` is a JSON array of queue names and `prefix*` patterns. A revoked key keeps its
-- row (for the list) with `revoked_at` set, and is refused from that commit on.
CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY,
    hash       BLOB NOT NULL UNIQUE,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL,
    queues     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) WITHOUT ROWID;
