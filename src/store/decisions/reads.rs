//! Reads that take more than one statement, run in one snapshot by both backends so that
//! a job moving between tables meanwhile (a replay, a delivery) is seen in exactly one.

use std::collections::HashMap;

use crate::model::{JobId, MessageId, QueueName, UnixMillis};
use crate::store::dialect::Tx;
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{
    AttemptRecord, DeadLetter, DlqState, FoundJob, HeldLease, JobLife, JobPlace, JobRecord,
    MessageFate, Position, QueueCounts, ReplayFates,
};

/// Job `id` of `queue`, wherever it is: live, delivered and kept, or dead-lettered, with
/// its attempt history.
pub async fn get_job(
    tx: &impl Tx,
    queue: &QueueName,
    id: JobId,
) -> StoreResult<(JobRecord, Vec<AttemptRecord>)> {
    let record = match tx.live_job(queue, id).await? {
        Some(record) => record,
        None => match tx.delivered_job(queue, id).await? {
            Some(record) => record,
            // A `replayed` record is only audit: its job is live again (found above) or
            // delivered since.
            None => tx
                .dead_letter(queue, id)
                .await?
                .filter(|letter| letter.status != DlqState::Replayed)
                .ok_or(StoreError::JobNotFound)?
                .into_job_record(),
        },
    };
    Ok((record, tx.history(id).await?))
}

/// Job `id` of `queue` with everything known of its life: [`get_job`]'s record and
/// attempts, its dead-letter record in any state (a replayed job's shows when it died and
/// was put back), and the dead letter it was resent from.
pub async fn job_life(tx: &impl Tx, queue: &QueueName, id: JobId) -> StoreResult<JobLife> {
    let (record, history) = get_job(tx, queue, id).await?;
    let letter: Option<DeadLetter> = tx.dead_letter(queue, id).await?;
    Ok(JobLife {
        record,
        history,
        letter,
        resent_from: tx.resent_from(id).await?,
    })
}

/// Up to `limit` leases held at `now`, of jobs and of dead letters (Forq's `{queue}-dlq`),
/// of `queue` or of every queue, soonest expiry first after `after`: each table's first
/// `limit`, merged. Ids are unique across both, so one (expiry, id) cursor pages them.
pub async fn held_leases(
    tx: &impl Tx,
    queue: Option<&QueueName>,
    after: Position,
    limit: usize,
    now: UnixMillis,
) -> StoreResult<Vec<HeldLease>> {
    let mut held = tx.held_leases(queue, after, limit).await?;
    held.extend(tx.held_dead_letter_leases(queue, after, limit, now).await?);
    held.sort_by_key(|lease| (lease.leased_until, lease.id));
    held.truncate(limit);
    Ok(held)
}

/// Up to `limit` places of the jobs whose ids lie from `first` to `last`, whichever queue
/// holds them, by id; a dead-letter record comes with the record (so a replayed job that
/// has left its queue since still shows where it failed).
pub async fn find_jobs(
    tx: &impl Tx,
    first: JobId,
    last: JobId,
    limit: usize,
) -> StoreResult<Vec<FoundJob>> {
    let mut found = Vec::new();
    for (id, queue, place) in tx.jobs_with_ids_between(first, last, limit).await? {
        let letter = match place {
            JobPlace::DeadLetter => tx.dead_letter(&queue, id).await?,
            JobPlace::Live | JobPlace::Delivered => None,
        };
        found.push(FoundJob {
            id,
            queue,
            place,
            letter,
        });
    }
    Ok(found)
}

/// What became of message `id`: its row while it is kept, and up to `limit` of its jobs in
/// every subscriber queue, by queue then id.
pub async fn message_fate(tx: &impl Tx, id: MessageId, limit: usize) -> StoreResult<MessageFate> {
    Ok(MessageFate {
        message: tx.message(id).await?,
        jobs: tx.jobs_of_message(id, limit).await?,
    })
}

/// What became of replayed jobs (`ids`, each once), read from where each is kept: live
/// again (waiting, scheduled or in flight), dead again (its record open: pending, being
/// replayed, or acknowledged since), gone from its queue after the replay (delivered, kept
/// in the delivery log or not; or cancelled: both leave only the `replayed` record), or kept
/// nowhere any more (its record deleted or past its retention).
pub async fn replay_fates(tx: &impl Tx, ids: &[JobId]) -> StoreResult<ReplayFates> {
    let mut places: HashMap<JobId, (bool, bool, Option<DlqState>)> = HashMap::new();
    for (id, place, state) in tx.places_of(ids).await? {
        let (live, delivered, letter) = places.entry(id).or_default();
        match place {
            JobPlace::Live => *live = true,
            JobPlace::Delivered => *delivered = true,
            JobPlace::DeadLetter => *letter = state,
        }
    }
    let mut fates = ReplayFates::default();
    for id in ids {
        match places.get(id) {
            Some((true, _, _)) => fates.waiting += 1,
            Some((false, _, Some(state))) if *state != DlqState::Replayed => {
                fates.failed_again += 1
            }
            Some((false, true, _)) | Some((false, false, Some(_))) => fates.delivered += 1,
            Some((false, false, None)) | None => fates.unknown += 1,
        }
    }
    Ok(fates)
}

/// Where `queue`'s jobs stand at `now`: due, scheduled, blocked, in flight, dead.
pub async fn queue_counts(
    tx: &impl Tx,
    queue: &QueueName,
    now: UnixMillis,
) -> StoreResult<QueueCounts> {
    tx.require_queue(queue).await?;
    let mut counts = tx
        .live_counts(Some(queue), now)
        .await?
        .remove(queue)
        .unwrap_or_default();
    counts.dead = tx
        .pending_dead_letters(Some(queue))
        .await?
        .first()
        .map_or(0, |(_, dead)| *dead);
    Ok(counts)
}

/// [`queue_counts`] of every queue, in name order.
pub async fn all_queue_counts(
    tx: &impl Tx,
    now: UnixMillis,
) -> StoreResult<Vec<(QueueName, QueueCounts)>> {
    let mut live = tx.live_counts(None, now).await?;
    Ok(tx
        .pending_dead_letters(None)
        .await?
        .into_iter()
        .map(|(queue, dead)| {
            let counts = live.remove(&queue).unwrap_or_default();
            (queue, QueueCounts { dead, ..counts })
        })
        .collect())
}
