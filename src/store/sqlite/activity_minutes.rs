//! SQL for the `activity_minutes` and `activity_hours` tables: each queue's attempts per
//! minute over the last day, and per hour over the last 7 days, the same statements for
//! either (the table and its start column named by the bucket's [`ActivityWidth`]). What is
//! written when, and how long it is kept, is in `store::decisions::activity`.

use rusqlite::params;

use super::tx::SqliteTx;
use crate::latency::LatencyHistogram;
use crate::model::{QueueName, UnixMillis};
use crate::store::dialect::ActivityRows;
use crate::store::error::StoreResult;
use crate::store::records::{ActivityBucket, ActivityWidth};

impl ActivityRows for SqliteTx<'_> {
    async fn put_activity(&self, width: ActivityWidth, rows: &[ActivityBucket]) -> StoreResult<()> {
        let (table, start) = (width.table(), width.start_column());
        // Through `queues`, so a queue deleted since its figures were taken is skipped.
        let mut put = self.0.prepare_cached(&format!(
            "INSERT INTO {table} (queue, {start}, delivered, failed, latency)
             SELECT name, ?2, ?3, ?4, ?5 FROM queues WHERE name = ?1
             ON CONFLICT (queue, {start}) DO UPDATE SET
                 delivered = excluded.delivered, failed = excluded.failed,
                 latency = excluded.latency"
        ))?;
        for row in rows {
            put.execute(params![
                row.queue.as_str(),
                row.start,
                stored(row.delivered),
                stored(row.failed),
                row.latency.to_stored(),
            ])?;
        }
        Ok(())
    }

    async fn purge_activity(&self, width: ActivityWidth, before: UnixMillis) -> StoreResult<usize> {
        let (table, start) = (width.table(), width.start_column());
        Ok(self
            .0
            .prepare_cached(&format!("DELETE FROM {table} WHERE {start} < ?1"))?
            .execute([before])?)
    }

    async fn activity_since(
        &self,
        width: ActivityWidth,
        since: UnixMillis,
        queue: Option<&QueueName>,
    ) -> StoreResult<Vec<ActivityBucket>> {
        let (table, start) = (width.table(), width.start_column());
        let mut stmt = self.0.prepare_cached(&format!(
            "SELECT queue, {start}, delivered, failed, latency FROM {table}
             WHERE {start} >= ?1 AND (?2 IS NULL OR queue = ?2) ORDER BY queue, {start}"
        ))?;
        let queue = queue.map(QueueName::as_str);
        let rows = stmt.query_map(params![since, queue], |row| {
            Ok(ActivityBucket {
                queue: QueueName::from_stored(row.get(0)?),
                start: row.get(1)?,
                delivered: u64::try_from(row.get::<_, i64>(2)?).unwrap_or(0),
                failed: u64::try_from(row.get::<_, i64>(3)?).unwrap_or(0),
                latency: LatencyHistogram::from_stored(&row.get::<_, String>(4)?),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

fn stored(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}
