//! The activity history: each queue's attempts per minute, written once a minute and kept
//! for a day, so the UI's charts outlive a restart. Written once here for every backend.

use crate::model::{QueueName, UnixMillis};
use crate::store::dialect::Tx;
use crate::store::error::StoreResult;
use crate::store::records::ActivityMinute;

/// How long a minute is kept: the last day.
pub const KEPT_MS: UnixMillis = 24 * 60 * 60 * 1000;

/// A minute, in unix ms.
pub const MINUTE_MS: UnixMillis = 60_000;

/// Record `rows` (each at the start of its minute), then forget the minutes that started a
/// day or more before `now`; how many were forgotten. Rows without an attempt are not
/// written: a missing minute reads as a quiet one, and quiet queues cost no rows.
pub async fn record(tx: &impl Tx, rows: &[ActivityMinute], now: UnixMillis) -> StoreResult<usize> {
    let busy: Vec<ActivityMinute> = rows
        .iter()
        .filter(|row| row.delivered + row.failed > 0)
        .map(|row| ActivityMinute {
            minute: row.minute - row.minute.rem_euclid(MINUTE_MS),
            ..row.clone()
        })
        .collect();
    if !busy.is_empty() {
        tx.put_activity_minutes(&busy).await?;
    }
    tx.purge_activity_before(now - KEPT_MS).await
}

/// The recorded minutes from `since` on (at most the day kept) of `queue` (or of every
/// queue), by queue then minute.
pub async fn since(
    tx: &impl Tx,
    since: UnixMillis,
    queue: Option<&QueueName>,
) -> StoreResult<Vec<ActivityMinute>> {
    tx.activity_minutes_since(since, queue).await
}
