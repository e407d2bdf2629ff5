-- Keys the server makes for itself (SQLite's 0018), once per database, shared by every node:
-- `lease` signs the lease ids and Forq receipts handed to pull workers.
CREATE TABLE server_keys (
    name TEXT PRIMARY KEY,
    key  BYTEA NOT NULL
);
