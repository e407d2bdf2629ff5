//! SQL for the `idempotency_keys` table: which job a queue's `Idempotency-Key` stands for,
//! until the key expires.

use rusqlite::{Connection, OptionalExtension, params};

use super::jobs::id_from_row;
use crate::model::{JobId, QueueName, UnixMillis};
use crate::store::error::StoreResult;
use crate::store::records::IdempotencyKey;

/// The job `key` stands for on `queue`, unless it has expired.
pub fn find(
    conn: &Connection,
    queue: &QueueName,
    key: &IdempotencyKey,
) -> StoreResult<Option<JobId>> {
    Ok(conn
        .prepare_cached(
            "SELECT job_id FROM idempotency_keys
             WHERE queue = ?1 AND key = ?2 AND created_at >= ?3",
        )?
        .query_row(params![queue.as_str(), key.key, key.valid_since], |row| {
            id_from_row(row, 0)
        })
        .optional()?)
}

/// Record that `key` stands for `job` from `now` on (replacing an expired record).
pub fn record(
    conn: &Connection,
    queue: &QueueName,
    key: &IdempotencyKey,
    job: JobId,
    now: UnixMillis,
) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO idempotency_keys(queue, key, job_id, created_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(queue, key) DO UPDATE SET job_id = excluded.job_id,
                                               created_at = excluded.created_at",
    )?
    .execute(params![queue.as_str(), key.key, &job.as_bytes()[..], now])?;
    Ok(())
}

/// Delete up to `limit` keys recorded before `before`. Returns how many.
pub fn purge(conn: &Connection, before: UnixMillis, limit: usize) -> StoreResult<usize> {
    Ok(conn
        .prepare_cached(
            "DELETE FROM idempotency_keys WHERE (queue, key) IN (
                 SELECT queue, key FROM idempotency_keys WHERE created_at < ?1 LIMIT ?2)",
        )?
        .execute(params![before, limit as i64])?)
}
