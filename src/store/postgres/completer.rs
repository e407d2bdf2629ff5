//! Deliveries completed in groups, as River's completer does: the `Delivered` outcomes of
//! jobs not kept in the delivery log that arrive while a group commits are recorded
//! together, one `DELETE … USING unnest(…)` for the group, committed on its own on a
//! relaxed session (as every outcome: a lost one means a delivery again), one round trip.
//! Under load an outcome costs a share of one transaction instead of a transaction of its
//! own.
//!
//! The statement deletes only jobs still leased as the outcome says and without an ordering
//! key. The rest go through the whole decision ([`decisions::outcomes::record_outcome`]),
//! each in a transaction of its own, beside the next groups: a keyed job hands its key over
//! (its lock taken alone, never in a group's order), and a job whose lease was lost is
//! answered `false` there. The counter rows of capped queues are locked first, in queue
//! order, so two nodes' groups (and their grouped enqueues, which insert in queue order)
//! cannot deadlock.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use tokio::sync::oneshot;

use super::Runner;
use super::group_commit::OnGroup;
use super::groups::{Groups, stopped};
use super::jobs::delete_delivered;
use crate::model::JobId;
use crate::store::BatchStats;
use crate::store::decisions;
use crate::store::dialect::Durability;
use crate::store::error::StoreResult;
use crate::store::records::{Lease, Outbox, Outcome};

/// The way in: hands a delivery's outcome to the completers and waits for its answer.
#[derive(Clone)]
pub struct Completer {
    groups: Groups<Entry>,
}

/// One outcome waiting for its group.
struct Entry {
    id: JobId,
    lease: Lease,
    /// A `Delivered` outcome of a job not kept, for the whole decision if the group's
    /// statement leaves the job.
    outcome: Outcome,
    outbox: Outbox,
    /// Whether the outcome was recorded (false: the lease was lost).
    answer: oneshot::Sender<StoreResult<bool>>,
}

impl Completer {
    /// Start the completers on `runner`'s transactions; `on_group` sees each group.
    pub(super) fn start(runner: Runner, on_group: OnGroup) -> Self {
        let groups = Groups::start(move |group| {
            let (runner, on_group) = (runner.clone(), on_group.clone());
            async move { complete(group, &runner, &on_group).await }
        });
        Self { groups }
    }

    /// Record `outcome` (see [`Outcome::is_plain_delivery`]) of job `id` under `lease` with the
    /// next group.
    /// False if the lease was lost meanwhile.
    pub async fn record(
        &self,
        id: JobId,
        lease: Lease,
        outcome: Outcome,
        outbox: Outbox,
    ) -> StoreResult<bool> {
        debug_assert!(outcome.is_plain_delivery());
        let (answer, answered) = oneshot::channel();
        self.groups.hand(Entry {
            id,
            lease,
            outcome,
            outbox,
            answer,
        })?;
        answered.await.map_err(|_| stopped())?
    }
}

/// Delete the group's jobs in one transaction and answer each; a job the statement left
/// (keyed, lease lost) or a group that failed goes through the whole decision alone, in a
/// transaction of its own, all of them at once.
async fn complete(mut group: Vec<Entry>, runner: &Runner, on_group: &OnGroup) {
    group.sort_by_key(|entry| entry.id);
    let leases: Arc<[(JobId, Lease)]> = group.iter().map(|e| (e.id, e.lease)).collect();
    let started = Instant::now();
    let deleted = match delete(runner, leases).await {
        Ok(deleted) => {
            on_group(BatchStats::since(group.len(), started));
            deleted
        }
        // Each alone, where its error (or its success) is its own.
        Err(_) => HashSet::new(),
    };
    let mut left = Vec::new();
    for entry in group {
        if deleted.contains(&entry.id) {
            let _ = entry.answer.send(Ok(true));
        } else {
            left.push(entry);
        }
    }
    if left.is_empty() {
        return;
    }
    // Independent transactions, each on a connection of its own, as they were before
    // grouping: a keyed queue's deliveries do not wait for each other here. They run beside
    // the next groups, which do not wait for them either (one group commits at a time).
    let runner = runner.clone();
    tokio::spawn(async move {
        join_all(left.into_iter().map(|entry| alone(&runner, entry))).await;
    });
}

/// Delete the unkeyed jobs of `leases` still leased so, and their attempt history: one
/// statement on a relaxed session.
async fn delete(runner: &Runner, leases: Arc<[(JobId, Lease)]>) -> StoreResult<HashSet<JobId>> {
    runner
        .one_relaxed_statement(move |client, _| {
            Box::pin(async move { delete_delivered(client, &leases).await })
        })
        .await
}

/// Record one entry's outcome through the whole decision, in a transaction of its own.
async fn alone(runner: &Runner, entry: Entry) {
    let Entry {
        id,
        lease,
        outcome,
        outbox,
        answer,
    } = entry;
    let recorded = runner
        .write(Durability::Relaxed, move |pg| {
            Box::pin(async move {
                decisions::outcomes::record_outcome(&pg, id, lease, &outcome, outbox).await
            })
        })
        .await;
    let _ = answer.send(recorded);
}
