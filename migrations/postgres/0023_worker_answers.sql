-- A job's whole life (issue 44), as SQLite's 0025: the headers of each failed attempt's
-- answer, the delivering answer of a kept job, the job a dead letter was resent as, and
-- who holds a dead letter leased through Forq's `{queue}-dlq` (cleared by a nack).
ALTER TABLE job_attempts ADD COLUMN response_headers TEXT;
ALTER TABLE delivered ADD COLUMN response_headers TEXT;
ALTER TABLE delivered ADD COLUMN response_body TEXT;
ALTER TABLE dead_letters ADD COLUMN resent_as UUID;
CREATE INDEX dead_letters_by_resent_as ON dead_letters (resent_as) WHERE resent_as IS NOT NULL;
ALTER TABLE dead_letters ADD COLUMN leased_at BIGINT;
ALTER TABLE dead_letters ADD COLUMN lease_holder TEXT;
ALTER TABLE dead_letters ADD COLUMN lease_holder_name TEXT;
CREATE INDEX dead_letters_leased ON dead_letters (leased_until, id) WHERE lease_holder IS NOT NULL;
