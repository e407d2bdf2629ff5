//! Enqueues committed in groups ([`super::groups`]), as SQLite's writer groups its writes:
//! the enqueues that arrive while a group commits are stored together, in one multi-row
//! insert and one durable commit, each answered once that commit is done. Under load a job
//! costs a share of one transaction instead of a transaction of its own.
//!
//! Only jobs without an ordering key or an idempotency key are grouped: those take locks
//! (a key's, a key row's) that two nodes' groups could take in opposite orders. Rows are
//! sorted by queue, so the counter rows of capped queues are locked in one order on every
//! node. A group that fails (a queue at its cap, a lost connection) is rolled back and
//! each of its jobs retried in a transaction of its own, so one bad job fails only itself.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use super::Runner;
use super::groups::{Groups, stopped};
use super::jobs::{UnkeyedRow, insert_unkeyed};
use crate::model::{JobId, QueueName, UnixMillis};
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::NewJob;
use crate::store::{AfterCommit, BatchStats};

/// Whether `job` may be grouped with others.
pub fn groupable(job: &NewJob) -> bool {
    job.ordering_key.is_none() && job.idempotency.is_none()
}

/// Sees each committed group (its jobs, its commit time).
pub type OnGroup = Arc<dyn Fn(BatchStats) + Send + Sync>;

/// The way in: hands an enqueue to the committers and waits for its answer.
#[derive(Clone)]
pub struct GroupCommit {
    groups: Groups<Entry>,
}

/// One enqueue waiting for its group's commit: the row to insert and whom to answer.
struct Entry {
    row: JobRow,
    reply: Reply,
}

/// Whom to answer once an entry's row is committed, and what to start then.
struct Reply {
    /// A hand-off's delivery, started once the job is stored.
    after_commit: Option<AfterCommit>,
    answer: oneshot::Sender<StoreResult<()>>,
}

/// A job to insert: into `queue`, leased to this node until `leased_until` if handed off.
#[derive(Clone)]
struct JobRow {
    queue: QueueName,
    job: NewJob,
    leased_until: Option<UnixMillis>,
}

impl GroupCommit {
    /// Start the committers on `runner`'s transactions.
    pub(super) fn start(runner: Runner, on_group: OnGroup) -> Self {
        let groups = Groups::start(move |group| {
            let (runner, on_group) = (runner.clone(), on_group.clone());
            async move { commit(group, &runner, &on_group).await }
        });
        Self { groups }
    }

    /// Store `job` (see [`groupable`]) with the next group; with `lease`, already in flight
    /// on its first attempt and `AfterCommit` run once it is stored.
    pub async fn enqueue(
        &self,
        queue: QueueName,
        job: NewJob,
        lease: Option<(UnixMillis, AfterCommit)>,
    ) -> StoreResult<()> {
        debug_assert!(groupable(&job));
        let (answer, answered) = oneshot::channel();
        let (leased_until, after_commit) = match lease {
            Some((until, after_commit)) => (Some(until), Some(after_commit)),
            None => (None, None),
        };
        let entry = Entry {
            row: JobRow {
                queue,
                job,
                leased_until,
            },
            reply: Reply {
                after_commit,
                answer,
            },
        };
        self.groups.hand(entry)?;
        answered.await.map_err(|_| stopped())?
    }
}

/// Commit `group` in one transaction and answer each entry; if that fails, each entry in
/// a transaction of its own.
async fn commit(mut group: Vec<Entry>, runner: &Runner, on_group: &OnGroup) {
    group.sort_by(|a, b| a.row.queue.cmp(&b.row.queue));
    let (rows, replies): (Vec<JobRow>, Vec<Reply>) = group
        .into_iter()
        .map(|entry| (entry.row, entry.reply))
        .unzip();
    let rows: Arc<[JobRow]> = rows.into();
    let started = Instant::now();
    match insert(runner, rows.clone()).await {
        Ok(stored) => {
            on_group(BatchStats::since(rows.len(), started));
            for (row, reply) in rows.iter().zip(replies) {
                answer(reply, Ok(stored.contains(&row.job.id)));
            }
        }
        Err(_) if rows.len() > 1 => {
            for (row, reply) in rows.iter().zip(replies) {
                let stored = insert(runner, Arc::new([row.clone()])).await;
                answer(reply, stored.map(|stored| stored.contains(&row.job.id)));
            }
        }
        Err(error) => {
            for reply in replies {
                answer(reply, Err(error.clone()));
            }
        }
    }
}

/// Answer an entry: stored (its hand-off started), its queue gone, or the commit failed.
fn answer(reply: Reply, stored: StoreResult<bool>) {
    let answer = match stored {
        Ok(true) => {
            if let Some(after_commit) = reply.after_commit {
                after_commit();
            }
            Ok(())
        }
        Ok(false) => Err(StoreError::QueueNotFound),
        Err(error) => Err(error),
    };
    let _ = reply.answer.send(answer);
}

/// Insert `rows` in one durable statement, committed on its own; the ids stored (a job
/// whose queue is gone is not).
async fn insert(runner: &Runner, rows: Arc<[JobRow]>) -> StoreResult<HashSet<JobId>> {
    runner
        .one_statement(move |client, node| {
            Box::pin(async move {
                let rows: Vec<UnkeyedRow<'_>> = rows
                    .iter()
                    .map(|row| UnkeyedRow {
                        queue: &row.queue,
                        job: &row.job,
                        leased_until: row.leased_until,
                    })
                    .collect();
                let stored = insert_unkeyed(client, node, &rows).await?;
                Ok(stored.into_iter().collect())
            })
        })
        .await
}
