//! What happens to a live job: an attempt's outcome (delivered, kept, retried,
//! dead-lettered), a lease that outlived its time, a time to live that ran out, a cancel.
//! Every way out of `jobs` hands the job's ordering key over to its next job.

use super::hand_over_key;
use crate::event::{Event, excerpt};
use crate::model::{EventId, JobId, QueueName, UnixMillis};
use crate::store::dialect::Tx;
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{FailureReason, Lease, LeaseExpiry, Outbox, Outcome};
use crate::store::status::JobStatus;

/// Record the outcome of job `id` under `lease`. False (nothing changed) if the lease was
/// lost meanwhile: the job was recovered, cancelled, replayed or its queue deleted.
pub async fn record_outcome(
    tx: &impl Tx,
    id: JobId,
    lease: Lease,
    outcome: &Outcome,
    outbox: Outbox,
) -> StoreResult<bool> {
    match outcome {
        Outcome::Delivered { delivery, keep } => {
            // A job to keep is copied to the delivery log first, with its history.
            if *keep && !tx.keep_delivered(id, lease, delivery).await? {
                return Ok(false);
            }
            let Some(left) = tx.delete_leased(id, lease).await? else {
                return Ok(false);
            };
            hand_over_key(tx, &left, delivery.at).await?;
            // Only a job that failed before has history to drop: a first-time success
            // writes nothing beyond its claim and this delete. A replayed job's dead-letter
            // record still shows its history: kept until that record goes.
            if left.had_failures && !keep {
                tx.drop_unreferenced_history(&[id]).await?;
            }
            Ok(true)
        }
        Outcome::Retry { run_at, failure } => {
            let changed = tx.reschedule_leased(id, lease, *run_at, failure).await?;
            if changed {
                tx.record_attempt(id, lease.attempt, failure).await?;
            }
            Ok(changed)
        }
        Outcome::Dead { failure } => {
            if !tx.note_last_failure(id, lease, failure).await? {
                return Ok(false);
            }
            tx.record_attempt(id, lease.attempt, failure).await?;
            bury(
                tx,
                id,
                FailureReason::MaxAttemptsReached,
                failure.at,
                outbox,
            )
            .await?;
            Ok(true)
        }
    }
}

/// Move live job `id` to the dead letters (as `pending`; a job replayed before reopens its
/// record) and let its key's next job go. With `outbox.dead_letters`, its
/// `job.dead_lettered` event is stored in the same transaction.
pub async fn bury(
    tx: &impl Tx,
    id: JobId,
    reason: FailureReason,
    now: UnixMillis,
    outbox: Outbox,
) -> StoreResult<()> {
    let Some(buried) = tx.copy_to_dead_letters(id, reason, now).await? else {
        return Ok(());
    };
    if outbox.dead_letters {
        let event = Event::JobDeadLettered {
            queue: buried.queue,
            id,
            attempts: buried.attempts,
            last_status: buried.last_status,
            error: buried.last_error.as_deref().map(excerpt),
            reason: reason.as_str().to_owned(),
        };
        tx.insert_event(EventId::new(), &event, now).await?;
    }
    if let Some(left) = tx.delete_job(id).await? {
        hand_over_key(tx, &left, now).await?;
    }
    Ok(())
}

/// Remove a READY job that is not being delivered; its key's next job goes next.
pub async fn cancel(
    tx: &impl Tx,
    queue: &QueueName,
    id: JobId,
    now: UnixMillis,
) -> StoreResult<()> {
    match tx.live_status(queue, id).await? {
        Some(JobStatus::InFlight) => Err(StoreError::JobConflict(
            "job is being delivered right now and cannot be cancelled",
        )),
        Some(JobStatus::Ready | JobStatus::Scheduled | JobStatus::Blocked) => {
            if let Some(left) = tx.delete_job(id).await? {
                hand_over_key(tx, &left, now).await?;
            }
            tx.drop_unreferenced_history(&[id]).await
        }
        Some(JobStatus::Dead) | None => Err(if tx.dead_letter_is_open(queue, id).await? {
            StoreError::JobConflict(
                "job is dead-lettered (ERROR), not READY: replay or acknowledge it instead",
            )
        } else {
            StoreError::JobNotFound
        }),
    }
}

/// Up to `limit` leases that outlived their time (a delivery that hung past every timeout,
/// or a node that died): the attempt counts; the job retries now, or is dead-lettered if it
/// was its queue's last attempt. Returns how many.
pub async fn recover_stale_leases(
    tx: &impl Tx,
    now: UnixMillis,
    expiry: &LeaseExpiry,
    limit: usize,
    outbox: Outbox,
) -> StoreResult<usize> {
    let stale = tx
        .stale_leases(now, expiry.default_max_attempts, limit)
        .await?;
    for lease in &stale {
        let backoff = expiry.pull_backoff(&lease.queue, lease.lease.attempt);
        let outcome = Outcome::of_expired_lease(lease.lease, lease.max_attempts, now, backoff);
        record_outcome(tx, lease.id, lease.lease, &outcome, outbox).await?;
    }
    Ok(stale.len())
}

/// Dead-letter (reason `expired`) up to `limit` jobs not in flight whose time to live
/// started before `cutoff`: a job not delivered in time is never silently dropped. Returns
/// the queue of each.
pub async fn expire(
    tx: &impl Tx,
    cutoff: UnixMillis,
    now: UnixMillis,
    limit: usize,
    outbox: Outbox,
) -> StoreResult<Vec<QueueName>> {
    let expired = tx.expired_jobs(cutoff, limit).await?;
    for (id, _) in &expired {
        tx.note_expired(*id).await?;
        bury(tx, *id, FailureReason::Expired, now, outbox).await?;
    }
    Ok(expired.into_iter().map(|(_, queue)| queue).collect())
}
