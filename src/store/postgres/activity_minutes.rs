//! SQL for the `activity_minutes` and `activity_hours` tables on PostgreSQL: each queue's
//! attempts per minute over the last day and per hour over the last 7 days, as on SQLite. What is written when, and how long it is kept, is in
//! `store::decisions::activity`.

use super::tx::PgTx;
use crate::latency::LatencyHistogram;
use crate::model::{QueueName, UnixMillis};
use crate::store::dialect::ActivityRows;
use crate::store::error::StoreResult;
use crate::store::records::{ActivityHour, ActivityMinute};

impl ActivityRows for PgTx<'_> {
    async fn put_activity_minutes(&self, rows: &[ActivityMinute]) -> StoreResult<()> {
        let queues: Vec<&str> = rows.iter().map(|r| r.queue.as_str()).collect();
        let minutes: Vec<i64> = rows.iter().map(|r| r.minute).collect();
        let delivered: Vec<i64> = rows.iter().map(|r| stored(r.delivered)).collect();
        let failed: Vec<i64> = rows.iter().map(|r| stored(r.failed)).collect();
        let latency: Vec<String> = rows.iter().map(|r| r.latency.to_stored()).collect();
        // One statement for every row; the join skips a queue deleted meanwhile.
        self.tx
            .execute(
                "INSERT INTO activity_minutes (queue, minute, delivered, failed, latency)
                 SELECT q.name, f.minute, f.delivered, f.failed, f.latency
                 FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[])
                     AS f(queue, minute, delivered, failed, latency)
                 JOIN queues q ON q.name = f.queue
                 ON CONFLICT (queue, minute) DO UPDATE SET
                     delivered = EXCLUDED.delivered, failed = EXCLUDED.failed,
                     latency = EXCLUDED.latency",
                &[&queues, &minutes, &delivered, &failed, &latency],
            )
            .await?;
        Ok(())
    }

    async fn purge_activity_before(&self, before: UnixMillis) -> StoreResult<usize> {
        let gone = self
            .tx
            .execute("DELETE FROM activity_minutes WHERE minute < $1", &[&before])
            .await?;
        Ok(usize::try_from(gone).unwrap_or(usize::MAX))
    }

    async fn activity_minutes_since(
        &self,
        since: UnixMillis,
        queue: Option<&QueueName>,
    ) -> StoreResult<Vec<ActivityMinute>> {
        let rows = self
            .tx
            .query(
                "SELECT queue, minute, delivered, failed, latency FROM activity_minutes
                 WHERE minute >= $1 AND ($2::text IS NULL OR queue = $2)
                 ORDER BY queue, minute",
                &[&since, &queue.map(QueueName::as_str)],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| ActivityMinute {
                queue: QueueName::from_stored(row.get(0)),
                minute: row.get(1),
                delivered: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
                failed: u64::try_from(row.get::<_, i64>(3)).unwrap_or(0),
                latency: LatencyHistogram::from_stored(row.get(4)),
            })
            .collect())
    }

    async fn put_activity_hours(&self, rows: &[ActivityHour]) -> StoreResult<()> {
        let queues: Vec<&str> = rows.iter().map(|r| r.queue.as_str()).collect();
        let hours: Vec<i64> = rows.iter().map(|r| r.hour).collect();
        let delivered: Vec<i64> = rows.iter().map(|r| stored(r.delivered)).collect();
        let failed: Vec<i64> = rows.iter().map(|r| stored(r.failed)).collect();
        let latency: Vec<String> = rows.iter().map(|r| r.latency.to_stored()).collect();
        // One statement for every row; the join skips a queue deleted meanwhile.
        self.tx
            .execute(
                "INSERT INTO activity_hours (queue, hour, delivered, failed, latency)
                 SELECT q.name, f.hour, f.delivered, f.failed, f.latency
                 FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[])
                     AS f(queue, hour, delivered, failed, latency)
                 JOIN queues q ON q.name = f.queue
                 ON CONFLICT (queue, hour) DO UPDATE SET
                     delivered = EXCLUDED.delivered, failed = EXCLUDED.failed,
                     latency = EXCLUDED.latency",
                &[&queues, &hours, &delivered, &failed, &latency],
            )
            .await?;
        Ok(())
    }

    async fn purge_activity_hours_before(&self, before: UnixMillis) -> StoreResult<usize> {
        let gone = self
            .tx
            .execute("DELETE FROM activity_hours WHERE hour < $1", &[&before])
            .await?;
        Ok(usize::try_from(gone).unwrap_or(usize::MAX))
    }

    async fn activity_hours_since(
        &self,
        since: UnixMillis,
        queue: Option<&QueueName>,
    ) -> StoreResult<Vec<ActivityHour>> {
        let rows = self
            .tx
            .query(
                "SELECT queue, hour, delivered, failed, latency FROM activity_hours
                 WHERE hour >= $1 AND ($2::text IS NULL OR queue = $2)
                 ORDER BY queue, hour",
                &[&since, &queue.map(QueueName::as_str)],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| ActivityHour {
                queue: QueueName::from_stored(row.get(0)),
                hour: row.get(1),
                delivered: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
                failed: u64::try_from(row.get::<_, i64>(3)).unwrap_or(0),
                latency: LatencyHistogram::from_stored(row.get(4)),
            })
            .collect())
    }
}

fn stored(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}
