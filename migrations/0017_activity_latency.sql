-- hookq schema v17: how long each stored minute's attempts took, as a histogram (the bucket
-- counts of `latency::BOUNDS_MS`, comma-separated; '' for none), so the health view can give
-- latency percentiles over any range of the last day.
ALTER TABLE activity_minutes ADD COLUMN latency TEXT NOT NULL DEFAULT '';
