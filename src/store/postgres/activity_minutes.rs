//! SQL for the `activity_minutes` and `activity_hours` tables on PostgreSQL: each queue's
//! attempts per minute over the last day and per hour over the last 7 days, as on SQLite,
//! the same statements for either (the table and its start column named by the bucket's
//! [`ActivityWidth`]). What is written when, and how long it is kept, is in
//! `store::decisions::activity`.

use super::tx::PgTx;
use crate::latency::LatencyHistogram;
use crate::model::{QueueName, UnixMillis};
use crate::store::dialect::ActivityRows;
use crate::store::error::StoreResult;
use crate::store::records::{ActivityBucket, ActivityWidth};

impl ActivityRows for PgTx<'_> {
    async fn put_activity(&self, width: ActivityWidth, rows: &[ActivityBucket]) -> StoreResult<()> {
        let (table, start) = (width.table(), width.start_column());
        let queues: Vec<&str> = rows.iter().map(|r| r.queue.as_str()).collect();
        let starts: Vec<i64> = rows.iter().map(|r| r.start).collect();
        let delivered: Vec<i64> = rows.iter().map(|r| stored(r.delivered)).collect();
        let failed: Vec<i64> = rows.iter().map(|r| stored(r.failed)).collect();
        let latency: Vec<String> = rows.iter().map(|r| r.latency.to_stored()).collect();
        // One statement for every row; the join skips a queue deleted meanwhile.
        self.tx
            .execute(
                &format!(
                    "INSERT INTO {table} (queue, {start}, delivered, failed, latency)
                     SELECT q.name, f.start, f.delivered, f.failed, f.latency
                     FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[],
                                 $5::text[])
                         AS f(queue, start, delivered, failed, latency)
                     JOIN queues q ON q.name = f.queue
                     ON CONFLICT (queue, {start}) DO UPDATE SET
                         delivered = EXCLUDED.delivered, failed = EXCLUDED.failed,
                         latency = EXCLUDED.latency"
                ),
                &[&queues, &starts, &delivered, &failed, &latency],
            )
            .await?;
        Ok(())
    }

    async fn purge_activity(&self, width: ActivityWidth, before: UnixMillis) -> StoreResult<usize> {
        let (table, start) = (width.table(), width.start_column());
        let gone = self
            .tx
            .execute(
                &format!("DELETE FROM {table} WHERE {start} < $1"),
                &[&before],
            )
            .await?;
        Ok(usize::try_from(gone).unwrap_or(usize::MAX))
    }

    async fn activity_since(
        &self,
        width: ActivityWidth,
        since: UnixMillis,
        queue: Option<&QueueName>,
    ) -> StoreResult<Vec<ActivityBucket>> {
        let (table, start) = (width.table(), width.start_column());
        let rows = self
            .tx
            .query(
                &format!(
                    "SELECT queue, {start}, delivered, failed, latency FROM {table}
                     WHERE {start} >= $1 AND ($2::text IS NULL OR queue = $2)
                     ORDER BY queue, {start}"
                ),
                &[&since, &queue.map(QueueName::as_str)],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| ActivityBucket {
                queue: QueueName::from_stored(row.get(0)),
                start: row.get(1),
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
