-- hookq schema v22: searching every queue by ordering key (`GET /admin/search?key=`). Live
-- jobs have `jobs_by_key` (queue first: one range per queue); the dead letters and the
-- delivery log gain an index of their own, newest first under a key. Partial: a job without
-- a key costs nothing here, and neither table is on the claim's path.
CREATE INDEX dead_letters_by_key ON dead_letters(ordering_key, id) WHERE ordering_key IS NOT NULL;
CREATE INDEX delivered_by_key ON delivered(ordering_key, id) WHERE ordering_key IS NOT NULL;
