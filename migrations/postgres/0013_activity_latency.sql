-- How long each stored minute's attempts took (SQLite's 0017), and each node's histograms of
-- its previous and current minute beside its other recent figures, so the node writing the
-- history adds up every node's.
ALTER TABLE activity_minutes ADD COLUMN latency TEXT NOT NULL DEFAULT '';
ALTER TABLE queue_activity ADD COLUMN latency_previous TEXT NOT NULL DEFAULT '';
ALTER TABLE queue_activity ADD COLUMN latency_current TEXT NOT NULL DEFAULT '';
