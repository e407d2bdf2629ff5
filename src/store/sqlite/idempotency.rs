//! SQL for the `idempotency_keys` and `batch_keys` tables: which job (or which batch) a
//! queue's `Idempotency-Key` stands for, until the key expires.

use rusqlite::{Connection, OptionalExtension, params};

use super::jobs::id_from_row;
use super::tx::SqliteTx;
use crate::model::{JobId, QueueName, UnixMillis};
use crate::store::dialect::{KeyClaim, KeyRows};
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{BatchKey, IdempotencyKey, RecordedBatch};

/// The job `key` stands for on `queue`, unless it has expired.
pub fn find(
    conn: &Connection,
    queue: &QueueName,
    key: &IdempotencyKey,
) -> StoreResult<Option<(JobId, Option<Vec<u8>>)>> {
    Ok(conn
        .prepare_cached(
            "SELECT job_id, fingerprint FROM idempotency_keys
             WHERE queue = ?1 AND key = ?2 AND created_at >= ?3",
        )?
        .query_row(params![queue.as_str(), key.key, key.valid_since], |row| {
            Ok((id_from_row(row, 0)?, row.get(1)?))
        })
        .optional()?)
}

/// Record that `key` stands for `job` from `now` on (replacing an expired record).
/// `QueueNotFound` if the queue is gone.
pub fn record(
    conn: &Connection,
    queue: &QueueName,
    key: &IdempotencyKey,
    job: JobId,
    fingerprint: &[u8; 32],
    now: UnixMillis,
) -> StoreResult<()> {
    let recorded = conn
        .prepare_cached(
            "INSERT INTO idempotency_keys(queue, key, job_id, created_at, fingerprint)
             SELECT name, ?2, ?3, ?4, ?5 FROM queues WHERE name = ?1
             ON CONFLICT(queue, key) DO UPDATE SET job_id = excluded.job_id,
                                                   created_at = excluded.created_at,
                                                   fingerprint = excluded.fingerprint",
        )?
        .execute(params![
            queue.as_str(),
            key.key,
            &job.as_bytes()[..],
            now,
            &fingerprint[..]
        ])?;
    if recorded == 0 {
        return Err(StoreError::QueueNotFound);
    }
    Ok(())
}

/// The batch `key` stands for on `queue`, unless it has expired.
pub fn find_batch(
    conn: &Connection,
    queue: &QueueName,
    key: &BatchKey,
) -> StoreResult<Option<RecordedBatch>> {
    let found = conn
        .prepare_cached(
            "SELECT fingerprint, job_ids FROM batch_keys
             WHERE queue = ?1 AND key = ?2 AND created_at >= ?3",
        )?
        .query_row(
            params![queue.as_str(), key.key.key, key.key.valid_since],
            |row| Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, Vec<u8>>(1)?)),
        )
        .optional()?;
    let Some((fingerprint, packed)) = found else {
        return Ok(None);
    };
    let ids = packed
        .chunks_exact(16)
        .filter_map(|chunk| <[u8; 16]>::try_from(chunk).ok())
        .map(JobId::from_bytes)
        .collect();
    Ok(Some(RecordedBatch { fingerprint, ids }))
}

/// Record that `key` stands for the batch of `ids` (replacing an expired record).
pub fn record_batch(
    conn: &Connection,
    queue: &QueueName,
    key: &BatchKey,
    ids: &[JobId],
) -> StoreResult<()> {
    let packed: Vec<u8> = ids.iter().flat_map(|id| *id.as_bytes()).collect();
    let recorded = conn
        .prepare_cached(
            "INSERT INTO batch_keys(queue, key, fingerprint, job_ids, created_at)
             SELECT name, ?2, ?3, ?4, ?5 FROM queues WHERE name = ?1
             ON CONFLICT(queue, key) DO UPDATE SET fingerprint = excluded.fingerprint,
                                                   job_ids = excluded.job_ids,
                                                   created_at = excluded.created_at",
        )?
        .execute(params![
            queue.as_str(),
            key.key.key,
            &key.fingerprint[..],
            packed,
            key.created_at
        ])?;
    if recorded == 0 {
        return Err(StoreError::QueueNotFound);
    }
    Ok(())
}

impl KeyRows for SqliteTx<'_> {
    async fn claim_idempotency_key(
        &self,
        queue: &QueueName,
        key: &IdempotencyKey,
        id: JobId,
        fingerprint: &[u8; 32],
        created_at: UnixMillis,
    ) -> StoreResult<KeyClaim> {
        // One writer: the look and the record cannot be split by another enqueue.
        if let Some((first, fingerprint)) = find(self.0, queue, key)? {
            return Ok(KeyClaim::Taken { first, fingerprint });
        }
        record(self.0, queue, key, id, fingerprint, created_at)?;
        Ok(KeyClaim::Claimed)
    }

    async fn claim_batch_key(
        &self,
        queue: &QueueName,
        key: &BatchKey,
        ids: &[JobId],
    ) -> StoreResult<Option<RecordedBatch>> {
        if let Some(recorded) = find_batch(self.0, queue, key)? {
            return Ok(Some(recorded));
        }
        record_batch(self.0, queue, key, ids)?;
        Ok(None)
    }

    /// Delete up to `limit` keys (single-job and batch keys each) recorded before `before`.
    /// Returns how many.
    async fn purge_idempotency_keys(&self, before: UnixMillis, limit: usize) -> StoreResult<usize> {
        let mut purged = 0;
        for sql in [
            "DELETE FROM idempotency_keys WHERE (queue, key) IN (
                 SELECT queue, key FROM idempotency_keys WHERE created_at < ?1 LIMIT ?2)",
            "DELETE FROM batch_keys WHERE (queue, key) IN (
                 SELECT queue, key FROM batch_keys WHERE created_at < ?1 LIMIT ?2)",
            "DELETE FROM topic_keys WHERE (topic, batch, key) IN (
                 SELECT topic, batch, key FROM topic_keys WHERE created_at < ?1 LIMIT ?2)",
        ] {
            purged += self
                .0
                .prepare_cached(sql)?
                .execute(params![before, limit as i64])?;
        }
        Ok(purged)
    }
}
