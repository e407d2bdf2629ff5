//! A bulk action on a queue's waiting jobs (run now, cancel, change priority), one chunk
//! per transaction: which jobs a chunk selects, what the backend's one statement changes,
//! how each job left alone is accounted for, and the keys a cancel hands over. Written once
//! over [`Tx`]; each backend's `act_on_waiting` is one statement of its dialect.
//!
//! Ordering keys keep their order whatever the action, because only a key's head is ever
//! claimable and a blocked job is promoted in id order (`promote_next_of_key`), never by
//! priority or due time: a new priority only orders a key's head among the queue's other
//! due jobs, and a blocked job run "now" drops its wait but stays blocked until the jobs
//! before it in its key are gone. A cancelled head hands its key over, as a single cancel
//! does.

use std::collections::BTreeSet;

use super::hand_over_key;
use crate::model::{JobId, QueueName, UnixMillis};
use crate::store::audit::{self, AuditEntry};
use crate::store::dialect::Tx;
use crate::store::error::StoreResult;
use crate::store::records::{BulkReport, JobAction, LiveSelection};
use crate::store::status::JobStatus;

/// One chunk of a bulk action's walk.
pub struct Chunk<'a> {
    pub queue: &'a QueueName,
    pub selection: &'a LiveSelection,
    /// The last id the previous chunk of a filter's walk selected.
    pub after: Option<JobId>,
    pub action: JobAction,
    pub now: UnixMillis,
    /// The most jobs a chunk selects.
    pub limit: usize,
    /// Jobs changed by the chunks before this one, for the audit entry's count.
    pub changed_before: usize,
}

/// What one chunk did, and where the walk goes on from (`None`: it is over).
pub struct ChunkDone {
    pub report: BulkReport,
    pub next: Option<JobId>,
}

/// Act on one chunk. The last chunk writes the action's audit entry (`audit`, counting
/// every job changed) in its own transaction, so the entry commits with the action's end.
pub async fn act_chunk(
    tx: &impl Tx,
    chunk: &Chunk<'_>,
    audit_entry: Option<&AuditEntry>,
) -> StoreResult<ChunkDone> {
    let queue = chunk.queue;
    if chunk.after.is_none() {
        tx.require_queue(queue).await?;
    }
    let (ids, next) = match chunk.selection {
        LiveSelection::Ids(ids) => (ids.clone(), None),
        LiveSelection::Matching(filter) => {
            // Only jobs created before the action began: a walk never chases new enqueues.
            let before = JobId::first_of_millis(chunk.now + 1);
            let ids = tx
                .live_ids_matching(queue, chunk.after, before, filter, chunk.now, chunk.limit)
                .await?;
            let next = (ids.len() >= chunk.limit)
                .then(|| ids.last().copied())
                .flatten();
            (ids, next)
        }
    };
    let changed = tx
        .act_on_waiting(queue, &ids, chunk.action, chunk.now)
        .await?;
    let mut report = BulkReport {
        matched: ids.len(),
        changed: changed.len(),
        ..BulkReport::default()
    };
    // Those left as they were: gone, in flight, or already as asked.
    let changed_ids: BTreeSet<JobId> = changed.iter().map(|(id, _)| *id).collect();
    let rest: Vec<JobId> = ids
        .iter()
        .copied()
        .filter(|id| !changed_ids.contains(id))
        .collect();
    if !rest.is_empty() {
        let live = tx.live_statuses(queue, &rest).await?;
        for id in rest {
            match live.iter().find(|(live_id, _)| *live_id == id) {
                None => report.gone.push(id),
                Some((_, JobStatus::InFlight)) => report.in_flight.push(id),
                Some(_) => report.unchanged += 1,
            }
        }
    }
    if chunk.action == JobAction::Cancel {
        // Each key once, after every delete of the chunk: its earliest job left goes next.
        let mut keys = BTreeSet::new();
        for (_, left) in &changed {
            if left.key.is_some() && keys.insert(left.key.clone()) {
                hand_over_key(tx, left, chunk.now).await?;
            }
        }
        if !changed.is_empty() {
            tx.drop_unreferenced_history(&changed_ids.iter().copied().collect::<Vec<_>>())
                .await?;
        }
    }
    if next.is_none() {
        let total = chunk.changed_before + report.changed;
        audit::write_pending(tx, audit_entry, Some(total)).await?;
    }
    Ok(ChunkDone { report, next })
}
