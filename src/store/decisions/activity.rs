//! The activity history: each queue's attempts per minute, written once a minute and kept
//! for a day, and their roll-up per hour, kept for 7 days, so the UI's charts outlive a
//! restart and reach back a week. Written once here for every backend.
//!
//! The hours are derived, never counted on their own: each time minutes are written, every
//! hour they fall in is summed again from its minutes (which are still all kept: an hour
//! being written is at most an hour old). A minute written twice (the duty moved to another
//! node, the minute grew) therefore replaces its share of the hour rather than adding to it.

use std::collections::{BTreeMap, BTreeSet};

use crate::latency::LatencyHistogram;
use crate::model::{QueueName, UnixMillis};
use crate::store::dialect::Tx;
use crate::store::error::StoreResult;
use crate::store::records::{ActivityHour, ActivityMinute};

/// How long a minute is kept: the last day.
pub const KEPT_MS: UnixMillis = 24 * 60 * 60 * 1000;

/// How long an hour is kept: the last 7 days.
pub const HOURS_KEPT_MS: UnixMillis = 7 * KEPT_MS;

/// A minute, in unix ms.
pub const MINUTE_MS: UnixMillis = 60_000;

/// An hour, in unix ms.
pub const HOUR_MS: UnixMillis = 60 * MINUTE_MS;

/// Record `rows` (each at the start of its minute) and the hours they fall in, then forget
/// the minutes that started a day or more before `now` and the hours that started 7 days or
/// more before it; how many rows were forgotten. Rows without an attempt are not written: a
/// missing minute reads as a quiet one, and quiet queues cost no rows.
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
        // Each touched hour summed again from its minutes, in one read of them all.
        let touched: BTreeSet<(QueueName, UnixMillis)> = busy
            .iter()
            .map(|row| (row.queue.clone(), hour_of(row.minute)))
            .collect();
        let earliest = touched.iter().map(|(_, hour)| *hour).min().unwrap_or(now);
        let minutes = tx.activity_minutes_since(earliest, None).await?;
        let hours: Vec<ActivityHour> = roll_up(&minutes)
            .into_iter()
            .filter(|hour| touched.contains(&(hour.queue.clone(), hour.hour)))
            .collect();
        if !hours.is_empty() {
            tx.put_activity_hours(&hours).await?;
        }
    }
    let minutes = tx.purge_activity_before(now - KEPT_MS).await?;
    let hours = tx.purge_activity_hours_before(now - HOURS_KEPT_MS).await?;
    Ok(minutes + hours)
}

/// The start of the hour `at` falls in.
pub fn hour_of(at: UnixMillis) -> UnixMillis {
    at - at.rem_euclid(HOUR_MS)
}

/// `minutes` summed per queue and hour (their latency histograms merged), by queue then
/// hour.
pub fn roll_up(minutes: &[ActivityMinute]) -> Vec<ActivityHour> {
    let mut hours: BTreeMap<(QueueName, UnixMillis), ActivityHour> = BTreeMap::new();
    for minute in minutes {
        let hour = hour_of(minute.minute);
        let sum = hours
            .entry((minute.queue.clone(), hour))
            .or_insert_with(|| ActivityHour {
                queue: minute.queue.clone(),
                hour,
                delivered: 0,
                failed: 0,
                latency: LatencyHistogram::default(),
            });
        sum.delivered += minute.delivered;
        sum.failed += minute.failed;
        sum.latency.add(&minute.latency);
    }
    hours.into_values().collect()
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

/// The recorded hours from `since` on (at most the 7 days kept) of `queue` (or of every
/// queue), by queue then hour.
pub async fn hours_since(
    tx: &impl Tx,
    since: UnixMillis,
    queue: Option<&QueueName>,
) -> StoreResult<Vec<ActivityHour>> {
    tx.activity_hours_since(since, queue).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minute(
        queue: &str,
        at: UnixMillis,
        delivered: u64,
        failed: u64,
        ms: &[u64],
    ) -> ActivityMinute {
        let mut latency = LatencyHistogram::default();
        for &ms in ms {
            latency.record(ms);
        }
        ActivityMinute {
            queue: QueueName::parse(queue).expect("a valid name"),
            minute: at,
            delivered,
            failed,
            latency,
        }
    }

    #[test]
    fn minutes_roll_up_per_queue_and_hour_with_their_histograms_merged() {
        let h = 1_000 * HOUR_MS;
        let rolled = roll_up(&[
            minute("a", h, 3, 1, &[4, 4, 4, 900]),
            minute("a", h + 59 * MINUTE_MS, 2, 0, &[40, 40]),
            minute("a", h + HOUR_MS, 7, 0, &[]), // the next hour
            minute("b", h + 30 * MINUTE_MS, 0, 5, &[20_000; 5]),
        ]);
        assert_eq!(rolled.len(), 3);
        let first = &rolled[0];
        assert_eq!((first.hour, first.delivered, first.failed), (h, 5, 1));
        assert_eq!(first.latency.count(), 6);
        let mut merged = LatencyHistogram::default();
        for ms in [4, 4, 4, 900, 40, 40] {
            merged.record(ms);
        }
        assert_eq!(first.latency, merged, "the minutes' histograms merged");
        assert_eq!((rolled[1].hour, rolled[1].delivered), (h + HOUR_MS, 7));
        assert_eq!(
            (rolled[2].queue.as_str(), rolled[2].hour, rolled[2].failed),
            ("b", h, 5)
        );
        assert!(roll_up(&[]).is_empty());
    }

    #[test]
    fn an_hour_starts_on_the_hour() {
        assert_eq!(hour_of(HOUR_MS - 1), 0);
        assert_eq!(hour_of(HOUR_MS), HOUR_MS);
        assert_eq!(hour_of(5 * HOUR_MS + 59 * MINUTE_MS), 5 * HOUR_MS);
    }
}
