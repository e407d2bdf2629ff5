-- hookq schema v18: keys the server makes for itself, once per database, so every node and
-- every restart shares them. `lease`: the HMAC key that signs the lease ids and Forq receipts
-- handed to pull workers (a lease id is then unforgeable, and names only a lease `_lease` or
-- a Forq consume handed out).
CREATE TABLE server_keys (
    name TEXT PRIMARY KEY,
    key  BLOB NOT NULL
) WITHOUT ROWID;
