//! SQL for idempotency and batch keys on PostgreSQL ([`KeyRows`]). A key is claimed by
//! inserting its row first (or taking over an expired one): a concurrent second enqueue
//! with the same key waits on that row, then answers with the first job.

use uuid::Uuid;

use super::tx::PgTx;
use crate::model::{JobId, QueueName, UnixMillis};
use crate::store::dialect::{KeyClaim, KeyRows};
use crate::store::error::{StoreError, StoreResult};
use crate::store::postgres::jobs::{job_id, prepared, uuid};
use crate::store::records::{BatchKey, IdempotencyKey, RecordedBatch};

impl KeyRows for PgTx<'_> {
    /// Claim idempotency key `key` of `queue` for job `id` by inserting its row (or taking
    /// over an expired one): a concurrent enqueue with the same key waits on that row, then
    /// finds it taken.
    async fn claim_idempotency_key(
        &self,
        queue: &QueueName,
        key: &IdempotencyKey,
        id: JobId,
        fingerprint: &[u8; 32],
        created_at: UnixMillis,
    ) -> StoreResult<KeyClaim> {
        let claimed = prepared::query_opt(
            self.tx,
            "INSERT INTO idempotency_keys (queue, key, job_id, created_at, fingerprint)
                 SELECT name, $2::text, $3::uuid, $4::bigint, $6::bytea FROM queues WHERE name = $1
                 ON CONFLICT (queue, key) DO UPDATE
                     SET job_id = excluded.job_id, created_at = excluded.created_at,
                         fingerprint = excluded.fingerprint
                     WHERE idempotency_keys.created_at < $5
                 RETURNING job_id",
            &[
                &queue.as_str(),
                &key.key,
                &uuid(id),
                &created_at,
                &key.valid_since,
                &&fingerprint[..],
            ],
        )
        .await?;
        if claimed.is_some() {
            return Ok(KeyClaim::Claimed);
        }
        let first = prepared::query_opt(
            self.tx,
            "SELECT job_id, fingerprint FROM idempotency_keys WHERE queue = $1 AND key = $2",
            &[&queue.as_str(), &key.key],
        )
        .await?;
        match first {
            Some(row) => Ok(KeyClaim::Taken {
                first: job_id(row.get(0)),
                fingerprint: row.get(1),
            }),
            None => Err(StoreError::QueueNotFound),
        }
    }

    /// Claim batch key `key` of `queue` for the batch of `ids`, as a single job's key is
    /// claimed; `Some` (the batch it stands for) if it is taken.
    async fn claim_batch_key(
        &self,
        queue: &QueueName,
        key: &BatchKey,
        ids: &[JobId],
    ) -> StoreResult<Option<RecordedBatch>> {
        let ids: Vec<Uuid> = ids.iter().map(|id| uuid(*id)).collect();
        let claimed = prepared::query_opt(
            self.tx,
            "INSERT INTO batch_keys (queue, key, fingerprint, job_ids, created_at)
                 SELECT name, $2::text, $3::bytea, $4::uuid[], $5::bigint FROM queues
                 WHERE name = $1
                 ON CONFLICT (queue, key) DO UPDATE
                     SET fingerprint = excluded.fingerprint, job_ids = excluded.job_ids,
                         created_at = excluded.created_at
                     WHERE batch_keys.created_at < $6
                 RETURNING 1",
            &[
                &queue.as_str(),
                &key.key.key,
                &&key.fingerprint[..],
                &ids,
                &key.created_at,
                &key.key.valid_since,
            ],
        )
        .await?;
        if claimed.is_some() {
            return Ok(None);
        }
        let first = prepared::query_opt(
            self.tx,
            "SELECT fingerprint, job_ids FROM batch_keys WHERE queue = $1 AND key = $2",
            &[&queue.as_str(), &key.key.key],
        )
        .await?;
        let Some(row) = first else {
            return Err(StoreError::QueueNotFound);
        };
        let ids: Vec<Uuid> = row.get(1);
        Ok(Some(RecordedBatch {
            fingerprint: row.get(0),
            ids: ids.into_iter().map(job_id).collect(),
        }))
    }

    async fn purge_idempotency_keys(&self, before: UnixMillis, limit: usize) -> StoreResult<usize> {
        let purged: i64 = prepared::query_one(
            self.tx,
            "WITH single AS (
                 DELETE FROM idempotency_keys WHERE (queue, key) IN (
                     SELECT queue, key FROM idempotency_keys WHERE created_at < $1
                     ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
                 RETURNING 1),
             batch AS (
                 DELETE FROM batch_keys WHERE (queue, key) IN (
                     SELECT queue, key FROM batch_keys WHERE created_at < $1
                     ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
                 RETURNING 1),
             topic AS (
                 DELETE FROM topic_keys WHERE (topic, batch, key) IN (
                     SELECT topic, batch, key FROM topic_keys WHERE created_at < $1
                     ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
                 RETURNING 1)
             SELECT (SELECT count(*) FROM single) + (SELECT count(*) FROM batch)
                  + (SELECT count(*) FROM topic)",
            &[&before, &i64::try_from(limit).unwrap_or(i64::MAX)],
        )
        .await?
        .get(0);
        Ok(usize::try_from(purged).unwrap_or(usize::MAX))
    }
}
