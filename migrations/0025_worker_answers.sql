-- hookq schema v25: a job's whole life (issue 44). What each worker answered, where a
-- resent dead letter went, and who holds a dead letter leased.
-- - `job_attempts.response_headers`: the headers of a failed attempt's answer, as JSON
--   `[[name, value], …]` (bounded and masked by `dispatch::answer`); NULL for a transport
--   failure, a pull worker's nack, or an attempt recorded before this schema.
-- - `delivered.response_headers` and `response_body`: the delivering answer of a job its
--   queue keeps (`keepDelivered`), bounded the same way. NULL for a pull worker's ack.
-- - `dead_letters.resent_as`: the job an edit-and-resend stored from this dead letter
--   (`POST /queue/{name}/{id}/_resend`), so each links to the other. The partial index
--   answers "which letter was this job resent from"; rows without a resend cost it nothing.
-- - `dead_letters.leased_at`, `lease_holder`, `lease_holder_name`: who holds a dead letter
--   leased through Forq's `{queue}-dlq`, and since when, as `jobs` records it for a pull
--   lease (0024), for the Workers page. A nack, which hides the letter until a time, clears
--   the holder: a hidden letter is not held. The partial index lists the held ones by
--   expiry; letters never leased are not in it.
ALTER TABLE job_attempts ADD COLUMN response_headers TEXT;
ALTER TABLE delivered ADD COLUMN response_headers TEXT;
ALTER TABLE delivered ADD COLUMN response_body TEXT;
ALTER TABLE dead_letters ADD COLUMN resent_as BLOB;
CREATE INDEX dead_letters_by_resent_as ON dead_letters(resent_as) WHERE resent_as IS NOT NULL;
ALTER TABLE dead_letters ADD COLUMN leased_at INTEGER;
ALTER TABLE dead_letters ADD COLUMN lease_holder TEXT;
ALTER TABLE dead_letters ADD COLUMN lease_holder_name TEXT;
CREATE INDEX dead_letters_leased ON dead_letters(leased_until, id) WHERE lease_holder IS NOT NULL;
