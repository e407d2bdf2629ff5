-- hookq schema v11: how a queue signs its deliveries, and a secret being rotated out.
-- `signature_scheme`: 'hyper' (X-HYPER-SIGNATURE, as before), 'standard' (Standard
-- Webhooks) or 'both'. `previous_secret` (sealed like `secret`) keeps signing Standard
-- Webhooks deliveries beside the new secret until `previous_secret_expires_at` (unix ms).
ALTER TABLE queues ADD COLUMN signature_scheme TEXT NOT NULL DEFAULT 'hyper'
    CHECK (signature_scheme IN ('hyper', 'standard', 'both'));
ALTER TABLE queues ADD COLUMN previous_secret TEXT;
ALTER TABLE queues ADD COLUMN previous_secret_expires_at INTEGER;
