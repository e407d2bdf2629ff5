-- How a queue signs its deliveries, and a secret being rotated out, as on SQLite
-- (migrations/0011_signature_schemes.sql). `previous_secret` is sealed like `secret`.
ALTER TABLE queues ADD COLUMN signature_scheme TEXT NOT NULL DEFAULT 'hyper'
    CHECK (signature_scheme IN ('hyper', 'standard', 'both'));
ALTER TABLE queues ADD COLUMN previous_secret TEXT;
ALTER TABLE queues ADD COLUMN previous_secret_expires_at BIGINT;
