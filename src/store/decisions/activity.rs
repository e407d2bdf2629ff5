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
use crate::store::records::ActivityBucket;
use crate::store::records::ActivityWidth::{Hour, Minute};

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
pub async fn record(tx: &impl Tx, rows: &[ActivityBucket], now: UnixMillis) -> StoreResult<usize> {
    let busy: Vec<ActivityBucket> = rows
        .iter()
        .filter(|row| row.delivered + row.failed > 0)
        .map(|row| ActivityBucket {
            start: row.start - row.start.rem_euclid(MINUTE_MS),
            ..row.clone()
        })
        .collect();
    if !busy.is_empty() {
        tx.put_activity(Minute, &busy).await?;
        // Each touched hour summed again from its minutes, in one read of them all.
        let touched: BTreeSet<(QueueName, UnixMillis)> = busy
            .iter()
            .map(|row| (row.queue.clone(), hour_of(row.start)))
            .collect();
        let earliest = touched.iter().map(|(_, hour)| *hour).min().unwrap_or(now);
        let minutes = tx.activity_since(Minute, earliest, None).await?;
        let hours: Vec<ActivityBucket> = roll_up(&minutes)
            .into_iter()
            .filter(|hour| touched.contains(&(hour.queue.clone(), hour.start)))
            .collect();
        if !hours.is_empty() {
            tx.put_activity(Hour, &hours).await?;
        }
    }
    let minutes = tx.purge_activity(Minute, now - KEPT_MS).await?;
    let hours = tx.purge_activity(Hour, now - HOURS_KEPT_MS).await?;
    Ok(minutes + hours)
}

/// The start of the hour `at` falls in.
pub fn hour_of(at: UnixMillis) -> UnixMillis {
    at - at.rem_euclid(HOUR_MS)
}

/// `minutes` summed per queue and hour (their latency histograms merged), by queue then
/// hour.
pub fn roll_up(minutes: &[ActivityBucket]) -> Vec<ActivityBucket> {
    let mut hours: BTreeMap<(QueueName, UnixMillis), ActivityBucket> = BTreeMap::new();
    for minute in minutes {
        let hour = hour_of(minute.start);
        let sum = hours
            .entry((minute.queue.clone(), hour))
            .or_insert_with(|| ActivityBucket {
                queue: minute.queue.clone(),
                start: hour,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn minute(
        queue: &str,
        at: UnixMillis,
        delivered: u64,
        failed: u64,
        ms: &[u64],
    ) -> ActivityBucket {
        let mut latency = LatencyHistogram::default();
        for &ms in ms {
            latency.record(ms);
        }
        ActivityBucket {
            queue: QueueName::parse(queue).expect("a valid name"),
            start: at,
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
        assert_eq!((first.start, first.delivered, first.failed), (h, 5, 1));
        assert_eq!(first.latency.count(), 6);
        let mut merged = LatencyHistogram::default();
        for ms in [4, 4, 4, 900, 40, 40] {
            merged.record(ms);
        }
        assert_eq!(first.latency, merged, "the minutes' histograms merged");
        assert_eq!((rolled[1].start, rolled[1].delivered), (h + HOUR_MS, 7));
        assert_eq!(
            (rolled[2].queue.as_str(), rolled[2].start, rolled[2].failed),
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
