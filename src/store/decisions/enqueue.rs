//! Storing jobs: one job (with or without an idempotency key), a batch (with or without a
//! batch key), a job handed straight to a delivery.

use crate::model::JobId;
use crate::model::QueueName;
use crate::store::dialect::{KeyClaim, Tx};
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{BatchEnqueued, BatchKey, Enqueued, NewJob, fingerprint};

/// Store `job` unless its idempotency key still stands for a job of `queue`: the same job
/// again (same fingerprint) is a duplicate answered with the first job's id, another job
/// under the key is refused. The key is claimed before the job is stored, in the same
/// transaction: of two enqueues with one key at once, the second waits for the first's key
/// (PostgreSQL's row lock; SQLite's single writer) and then answers.
pub async fn enqueue(tx: &impl Tx, queue: &QueueName, job: &NewJob) -> StoreResult<Enqueued> {
    if let Some(key) = &job.idempotency {
        let mine = fingerprint(std::slice::from_ref(job));
        let claim = tx
            .claim_idempotency_key(queue, key, job.id, &mine, job.created_at)
            .await?;
        if let KeyClaim::Taken { first, fingerprint } = claim {
            // A key recorded before fingerprints were kept answers as it always did.
            if fingerprint.is_some_and(|theirs| theirs != mine) {
                return Err(StoreError::IdempotencyKeyReused);
            }
            return Ok(Enqueued::Duplicate(first));
        }
    }
    tx.insert_jobs(queue, std::slice::from_ref(job)).await?;
    Ok(Enqueued::Stored)
}

/// Store every job of a batch, unless `key` stands for a batch already: the same batch is a
/// duplicate (nothing stored, the first batch's ids), another one is refused. The jobs'
/// own idempotency keys are not consulted: a batch is keyed as a whole.
pub async fn enqueue_batch(
    tx: &impl Tx,
    queue: &QueueName,
    batch: &[NewJob],
    key: Option<&BatchKey>,
) -> StoreResult<BatchEnqueued> {
    if let Some(key) = key {
        let ids: Vec<JobId> = batch.iter().map(|job| job.id).collect();
        if let Some(recorded) = tx.claim_batch_key(queue, key, &ids).await? {
            return recorded.answer(key);
        }
    }
    tx.insert_jobs(queue, batch).await?;
    Ok(BatchEnqueued::Stored)
}
