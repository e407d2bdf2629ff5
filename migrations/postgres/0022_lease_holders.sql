-- Who holds a pull lease and since when (SQLite's 0024). Written by the very UPDATE that
-- claims: every claim sets `leased_at`; a pull worker's lease also names its holder as the
-- audit log names an actor (`key:<id>`, `master` or `open`, and the name for people); a
-- push delivery leaves it NULL (`leased_by` names its node).
ALTER TABLE jobs ADD COLUMN leased_at BIGINT;
ALTER TABLE jobs ADD COLUMN lease_holder TEXT;
ALTER TABLE jobs ADD COLUMN lease_holder_name TEXT;

-- The lease requests waiting on each node, per queue, for the other nodes' view of pull
-- workers. Each node rewrites its own rows every second while it has waiters (and once
-- more when it has none left); readers take rows written in the last 5 s, so a node that
-- stopped is dropped from the view within 5 s and its rows are deleted by the next node
-- that publishes.
CREATE TABLE lease_waiters (
    node     UUID NOT NULL,
    queue    TEXT NOT NULL,
    requests INTEGER NOT NULL,
    at       BIGINT NOT NULL,
    PRIMARY KEY (node, queue)
);
