//! The business decisions of the store, written once over the primitives of
//! [`Tx`](super::dialect::Tx) and run by both backends inside one of their transactions:
//!
//! - [`enqueue`]: store a job or a batch, honouring idempotency and batch keys.
//! - [`outcomes`]: what an attempt's outcome, an expired lease, a job's time to live or a
//!   cancel does to a job (deliver, keep, retry, bury, let its key's next job go).
//! - [`dead_letters`]: replay, deletion and retention of dead letters and of the delivery
//!   log, with the attempt history nothing shows any more.
//! - [`schedules`]: a scheduler round (each due tick stores at most one job).
//! - [`pull`]: a pull worker's ack, nack and extend of its lease, and leases handed back.
//! - [`bulk`]: a bulk action on a queue's waiting jobs (run now, cancel, change priority),
//!   a chunk per transaction, never touching a job in flight.
//! - [`reads`]: the job lookup across live jobs, the delivery log and the dead letters.
//! - [`search`]: a search across every queue's jobs, walked in bounded reads.
//! - [`topics`]: a publish routed to every matching subscriber in one transaction; a replay
//!   of a topic's retained messages into one subscriber.
//!
//! Nothing here knows SQL; nothing in `sqlite/` or `postgres/` decides.

pub mod activity;
pub mod bulk;
pub mod dead_letters;
pub mod enqueue;
pub mod outcomes;
pub mod pull;
pub mod reads;
pub mod schedules;
pub mod search;
pub mod topics;

use super::dialect::{Left, Tx};
use super::error::StoreResult;
use crate::model::UnixMillis;

/// A job left `jobs` (delivered, buried, cancelled): if it was its key's head, the key's
/// next job goes next.
async fn hand_over_key(tx: &impl Tx, left: &Left, now: UnixMillis) -> StoreResult<()> {
    if let Some((queue, key)) = &left.key {
        tx.promote_next_of_key(queue, key, now).await?;
    }
    Ok(())
}
