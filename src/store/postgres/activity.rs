//! Each node's recent attempts per queue (`queue_activity`), so that a queue's `_stats`
//! (attempts over the last minute, per minute over the last hour) count every node's
//! deliveries, not only those of the node that answers. A node rewrites its row of a busy
//! queue about once a second; a reader adds up the other nodes' rows, each aged by the
//! minutes since it was written, and its own figures, live.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use crate::latency::LatencyHistogram;
use crate::model::{QueueName, UnixMillis};
use crate::store::error::StoreResult;
use crate::store::records::{ACTIVITY_MINUTES, ActivityFigures};

/// A row's last-minute figures count only this long after it was written: a node that
/// stopped writing (it died, or the queue went quiet, which its next write would say) no
/// longer speaks for the last minute. Busy nodes write every second.
const LAST_MINUTE_FRESH_MS: i64 = 5_000;
const HOUR_MS: i64 = 3_600_000;

/// Write `node`'s figures of each queue in `busy`, taken at `at` (one statement each,
/// pipelined on one connection).
pub async fn publish(
    client: &impl GenericClient,
    node: Uuid,
    at: UnixMillis,
    busy: &[(QueueName, ActivityFigures)],
) -> StoreResult<()> {
    let statement = client
        .prepare_cached(
            "INSERT INTO queue_activity (queue, node, at, last_minute_delivered,
                                         last_minute_failed, hour_delivered, hour_failed,
                                         latency_previous, latency_current)
             SELECT name, $2, $3, $4, $5, $6, $7, $8, $9 FROM queues WHERE name = $1
             ON CONFLICT (queue, node) DO UPDATE SET
                 at = EXCLUDED.at,
                 last_minute_delivered = EXCLUDED.last_minute_delivered,
                 last_minute_failed = EXCLUDED.last_minute_failed,
                 hour_delivered = EXCLUDED.hour_delivered,
                 hour_failed = EXCLUDED.hour_failed,
                 latency_previous = EXCLUDED.latency_previous,
                 latency_current = EXCLUDED.latency_current",
        )
        .await?;
    let rows: Vec<_> = busy
        .iter()
        .map(|(queue, figures)| {
            (
                queue.as_str(),
                count(figures.last_minute_delivered),
                count(figures.last_minute_failed),
                figures.hour_delivered.map(count).to_vec(),
                figures.hour_failed.map(count).to_vec(),
                figures.latency.map(|minute| minute.to_stored()),
            )
        })
        .collect();
    let writes = rows
        .iter()
        .map(|(queue, delivered, failed, hour_d, hour_f, latency)| {
            let statement = &statement;
            async move {
                client
                    .execute(
                        statement,
                        &[
                            queue,
                            &node,
                            &at,
                            delivered,
                            failed,
                            hour_d,
                            hour_f,
                            &latency[0],
                            &latency[1],
                        ],
                    )
                    .await
            }
        });
    futures_util::future::try_join_all(writes).await?;
    Ok(())
}

/// The figures every node but `node` wrote, of `queue` or of every queue, added up per
/// queue and aged to `now`: one statement whether one queue's figures are wanted (a
/// queue's `_stats`) or every queue's (the dashboard, the minute's history).
pub async fn of_other_nodes(
    client: &impl GenericClient,
    node: Uuid,
    queue: Option<&QueueName>,
    now: UnixMillis,
) -> StoreResult<HashMap<QueueName, ActivityFigures>> {
    let rows = client
        .query(
            "SELECT queue, at, last_minute_delivered, last_minute_failed, hour_delivered,
                    hour_failed, latency_previous, latency_current
             FROM queue_activity
             WHERE node <> $1 AND at > $2 AND ($3::text IS NULL OR queue = $3)",
            &[&node, &(now - HOUR_MS), &queue.map(QueueName::as_str)],
        )
        .await?;
    let mut sums: HashMap<QueueName, ActivityFigures> = HashMap::new();
    for row in rows {
        let at: i64 = row.get(1);
        let fresh = now - at <= LAST_MINUTE_FRESH_MS;
        let figures = ActivityFigures {
            last_minute_delivered: if fresh { uncount(row.get(2)) } else { 0 },
            last_minute_failed: if fresh { uncount(row.get(3)) } else { 0 },
            hour_delivered: hour(row.get(4)),
            hour_failed: hour(row.get(5)),
            latency: [
                LatencyHistogram::from_stored(row.get(6)),
                LatencyHistogram::from_stored(row.get(7)),
            ],
        };
        let minutes = (now.div_euclid(60_000) - at.div_euclid(60_000)).max(0);
        sums.entry(QueueName::from_stored(row.get(0)))
            .or_default()
            .add(&figures.aged(usize::try_from(minutes).unwrap_or(usize::MAX)));
    }
    Ok(sums)
}

/// Forget rows nobody wrote for an hour (nodes gone, queues quiet).
pub async fn purge_stale(client: &impl GenericClient, now: UnixMillis) -> StoreResult<u64> {
    Ok(client
        .execute(
            "DELETE FROM queue_activity WHERE at <= $1",
            &[&(now - HOUR_MS)],
        )
        .await?)
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn uncount(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn hour(stored: Vec<i64>) -> [u64; ACTIVITY_MINUTES] {
    let mut minutes = [0; ACTIVITY_MINUTES];
    // A row is always 60 long; were it not, its newest minutes still line up at the end.
    let skip = stored.len().saturating_sub(ACTIVITY_MINUTES);
    let start = ACTIVITY_MINUTES.saturating_sub(stored.len());
    for (slot, n) in minutes[start..]
        .iter_mut()
        .zip(stored.into_iter().skip(skip))
    {
        *slot = uncount(n);
    }
    minutes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_hours_line_up_at_the_current_minute() {
        let full: Vec<i64> = (1..=60).collect();
        assert_eq!(hour(full)[59], 60);
        let short = vec![7, 8];
        let minutes = hour(short);
        assert_eq!((minutes[57], minutes[58], minutes[59]), (0, 7, 8));
        assert_eq!(hour(vec![-3])[59], 0);
    }

    #[test]
    fn figures_age_by_whole_minutes() {
        let mut figures = ActivityFigures::default();
        figures.hour_delivered[59] = 5;
        figures.hour_delivered[0] = 9;
        let aged = figures.aged(2);
        assert_eq!(aged.hour_delivered[57], 5);
        assert_eq!(aged.hour_delivered[59], 0);
        assert_eq!(
            aged.hour_delivered.iter().sum::<u64>(),
            5,
            "the oldest minute fell out"
        );
        assert_eq!(
            figures.aged(60),
            ActivityFigures {
                last_minute_delivered: 0,
                ..ActivityFigures::default()
            }
        );
    }
}
