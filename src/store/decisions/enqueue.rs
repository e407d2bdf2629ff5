//! Storing jobs: one job (with or without an idempotency key), a batch (with or without a
//! batch key), a job handed straight to a delivery.

use crate::model::JobId;
use crate::model::QueueName;
use crate::store::dialect::{KeyClaim, Tx};
use crate::store::error::StoreResult;
use crate::store::records::{BatchEnqueued, BatchKey, Enqueued, NewJob};

/// Store `job` unless its idempotency key still stands for a job of `queue`. The key is
/// claimed before the job is stored, in the same transaction: of two enqueues with one key
/// at once, the second waits for the first's key (PostgreSQL's row lock; SQLite's single
/// writer) and then answers with its job.
pub async fn enqueue(tx: &impl Tx, queue: &QueueName, job: &NewJob) -> StoreResult<Enqueued> {
    if let Some(key) = &job.idempotency
        && let KeyClaim::Taken(first) = tx
            .claim_idempotency_key(queue, key, job.id, job.created_at)
            .await?
    {
        return Ok(Enqueued::Duplicate(first));
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
