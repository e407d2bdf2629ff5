//! Dead letters back to work, or gone for good: a replay's put-back, an admin's delete,
//! the retention sweeps of closed records and of the delivery log. Attempt history goes
//! with the last record that shows it.

use crate::model::{JobId, QueueName, UnixMillis};
use crate::store::dialect::Tx;
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{DlqState, NewJob, ReplayReport, Selection};

/// Put claimed records back on their queues as READY jobs with fresh attempts, due at
/// `run_at`, and mark them `replayed`. Each record is its own savepoint: one that fails is
/// rolled back to `pending` without undoing the others.
pub async fn replay_claimed(
    tx: &impl Tx,
    ids: &[JobId],
    now: UnixMillis,
    run_at: UnixMillis,
) -> StoreResult<ReplayReport> {
    let mut report = ReplayReport::default();
    for id in ids {
        tx.savepoint("replay_one").await?;
        let put = async {
            let Some(queue) = tx.put_back(*id, now, run_at).await? else {
                return StoreResult::Ok(None);
            };
            tx.mark_replayed(*id, now).await?;
            Ok(Some(queue))
        }
        .await;
        match put {
            Ok(Some(queue)) => {
                tx.release("replay_one").await?;
                report.replayed.push((*id, queue));
            }
            Ok(None) | Err(_) => {
                if let Err(err) = &put {
                    tracing::warn!(job_id = %id, error = %err, "replay failed; record back to pending");
                }
                tx.roll_back_to("replay_one").await?;
                tx.unclaim_replay(*id, now).await?;
                report.failed.push(*id);
            }
        }
    }
    Ok(report)
}

/// Delete dead letters for good (an admin's action), with the history nothing else shows.
/// `JobNotFound` when the one record asked for is not there.
pub async fn delete(tx: &impl Tx, selection: &Selection) -> StoreResult<usize> {
    let deleted = tx.delete_dead_letters(selection).await?;
    if matches!(selection, Selection::Ids(ids) if ids.len() == 1) && deleted.is_empty() {
        return Err(StoreError::JobNotFound);
    }
    tx.drop_unreferenced_history(&deleted).await?;
    Ok(deleted.len())
}

/// Retention: delete up to `limit` replayed or acknowledged records last changed before
/// `before`. Pending records are never deleted automatically.
pub async fn purge_closed(tx: &impl Tx, before: UnixMillis, limit: usize) -> StoreResult<usize> {
    let purged = tx.purge_closed_dead_letters(before, limit).await?;
    tx.drop_unreferenced_history(&purged).await?;
    Ok(purged.len())
}

/// Delivery-log retention: up to `limit` records in all, of each queue of `cutoffs` those
/// delivered before its cutoff, with their history. Returns how many.
pub async fn purge_delivered(
    tx: &impl Tx,
    cutoffs: &[(QueueName, UnixMillis)],
    limit: usize,
) -> StoreResult<usize> {
    let mut deleted = 0;
    for (queue, before) in cutoffs {
        if deleted >= limit {
            break;
        }
        let ids = tx.purge_delivered(queue, *before, limit - deleted).await?;
        tx.drop_unreferenced_history(&ids).await?;
        deleted += ids.len();
    }
    Ok(deleted)
}

/// One chunk of a replay: claim up to `limit` pending records of `chunk`
/// (`pending → replaying`; records another replay holds are skipped, so two replays never
/// send a job twice) and put them back. Returns how many were claimed, and what happened.
pub async fn replay_chunk(
    tx: &impl Tx,
    chunk: &Selection,
    now: UnixMillis,
    run_at: UnixMillis,
    limit: usize,
) -> StoreResult<(usize, ReplayReport)> {
    let claimed = tx.claim_for_replay(chunk, now, limit).await?;
    let report = replay_claimed(tx, &claimed, now, run_at).await?;
    Ok((claimed.len(), report))
}

/// Edit and resend pending dead letter `letter` of `queue`: store `job` (a new job of the
/// queue, its payload as edited) and acknowledge the letter naming that job, both or
/// neither. `JobNotFound` without such a letter; a conflict when it is not pending.
pub async fn resend(
    tx: &impl Tx,
    queue: &QueueName,
    letter: JobId,
    job: &NewJob,
    now: UnixMillis,
) -> StoreResult<()> {
    let Some(record) = tx.dead_letter(queue, letter).await? else {
        return Err(StoreError::JobNotFound);
    };
    if record.status != DlqState::Pending {
        return Err(StoreError::JobConflict(NOT_PENDING));
    }
    tx.insert_jobs(queue, std::slice::from_ref(job)).await?;
    if !tx.acknowledge_as_resent(letter, job.id, now).await? {
        // Acted on meanwhile (a replay or an acknowledge between the read and now): the
        // caller's transaction rolls the new job back with this error.
        return Err(StoreError::JobConflict(NOT_PENDING));
    }
    Ok(())
}

const NOT_PENDING: &str = "the dead letter is not pending (already replayed or acknowledged)";
