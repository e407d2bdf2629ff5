//! A pull worker's answers to the lease it holds: ack, nack (both an attempt's outcome),
//! extend, and a lease handed back unused. Each names the queue the worker leased from and
//! is fenced by its lease: a job of another queue is not found, and a lease lost (expired
//! and taken over, replayed, cancelled) changes nothing.

use super::outcomes::record_outcome;
use crate::model::{JobId, QueueName, UnixMillis};
use crate::store::dialect::Tx;
use crate::store::error::StoreResult;
use crate::store::records::{Lease, LeaseAnswer, Outbox, Outcome};

/// Record `outcome` (an ack or a nack) of job `id` of `queue`, leased under `lease`.
pub async fn settle(
    tx: &impl Tx,
    queue: &QueueName,
    id: JobId,
    lease: Lease,
    outcome: &Outcome,
    outbox: Outbox,
) -> StoreResult<LeaseAnswer> {
    // The queue first: the fence names the job by id alone.
    if tx.live_status(queue, id).await?.is_none() {
        return Ok(LeaseAnswer::NotFound);
    }
    if record_outcome(tx, id, lease, outcome, outbox).await? {
        Ok(LeaseAnswer::Done)
    } else {
        Ok(LeaseAnswer::LeaseLost)
    }
}

/// Move the expiry of job `id`'s lease to `until`.
pub async fn extend(
    tx: &impl Tx,
    queue: &QueueName,
    id: JobId,
    lease: Lease,
    until: UnixMillis,
) -> StoreResult<LeaseAnswer> {
    if tx.live_status(queue, id).await?.is_none() {
        return Ok(LeaseAnswer::NotFound);
    }
    if tx.extend_lease(id, lease, until).await? {
        Ok(LeaseAnswer::Done)
    } else {
        Ok(LeaseAnswer::LeaseLost)
    }
}

/// Hand leased jobs back unused (their lease request's client went away): each ready again
/// at once, its attempt not counted. How many were still leased.
pub async fn release(tx: &impl Tx, leases: &[(JobId, Lease)]) -> StoreResult<usize> {
    let mut released = 0;
    for &(id, lease) in leases {
        if tx.release_lease(id, lease).await? {
            released += 1;
        }
    }
    Ok(released)
}
