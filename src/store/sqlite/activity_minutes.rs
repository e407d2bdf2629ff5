//! SQL for the `activity_minutes` and `activity_hours` tables: each queue's attempts per
//! minute over the last day, and per hour over the last 7 days. What is written when, and
//! how long it is kept, is in `store::decisions::activity`.

use rusqlite::params;

use super::tx::SqliteTx;
use crate::latency::LatencyHistogram;
use crate::model::{QueueName, UnixMillis};
use crate::store::dialect::ActivityRows;
use crate::store::error::StoreResult;
use crate::store::records::{ActivityHour, ActivityMinute};

impl ActivityRows for SqliteTx<'_> {
    async fn put_activity_minutes(&self, rows: &[ActivityMinute]) -> StoreResult<()> {
        // Through `queues`, so a queue deleted since its figures were taken is skipped.
        let mut put = self.0.prepare_cached(
            "INSERT INTO activity_minutes (queue, minute, delivered, failed, latency)
             SELECT name, ?2, ?3, ?4, ?5 FROM queues WHERE name = ?1
             ON CONFLICT (queue, minute) DO UPDATE SET
                 delivered = excluded.delivered, failed = excluded.failed,
                 latency = excluded.latency",
        )?;
        for row in rows {
            put.execute(params![
                row.queue.as_str(),
                row.minute,
                stored(row.delivered),
                stored(row.failed),
                row.latency.to_stored(),
            ])?;
        }
        Ok(())
    }

    async fn purge_activity_before(&self, before: UnixMillis) -> StoreResult<usize> {
        Ok(self
            .0
            .prepare_cached("DELETE FROM activity_minutes WHERE minute < ?1")?
            .execute([before])?)
    }

    async fn activity_minutes_since(
        &self,
        since: UnixMillis,
        queue: Option<&QueueName>,
    ) -> StoreResult<Vec<ActivityMinute>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT queue, minute, delivered, failed, latency FROM activity_minutes
             WHERE minute >= ?1 AND (?2 IS NULL OR queue = ?2) ORDER BY queue, minute",
        )?;
        let queue = queue.map(QueueName::as_str);
        let rows = stmt.query_map(rusqlite::params![since, queue], |row| {
            Ok(ActivityMinute {
                queue: QueueName::from_stored(row.get(0)?),
                minute: row.get(1)?,
                delivered: u64::try_from(row.get::<_, i64>(2)?).unwrap_or(0),
                failed: u64::try_from(row.get::<_, i64>(3)?).unwrap_or(0),
                latency: LatencyHistogram::from_stored(&row.get::<_, String>(4)?),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    async fn put_activity_hours(&self, rows: &[ActivityHour]) -> StoreResult<()> {
        // Through `queues`, so a queue deleted since its minutes were read is skipped.
        let mut put = self.0.prepare_cached(
            "INSERT INTO activity_hours (queue, hour, delivered, failed, latency)
             SELECT name, ?2, ?3, ?4, ?5 FROM queues WHERE name = ?1
             ON CONFLICT (queue, hour) DO UPDATE SET
                 delivered = excluded.delivered, failed = excluded.failed,
                 latency = excluded.latency",
        )?;
        for row in rows {
            put.execute(params![
                row.queue.as_str(),
                row.hour,
                stored(row.delivered),
                stored(row.failed),
                row.latency.to_stored(),
            ])?;
        }
        Ok(())
    }

    async fn purge_activity_hours_before(&self, before: UnixMillis) -> StoreResult<usize> {
        Ok(self
            .0
            .prepare_cached("DELETE FROM activity_hours WHERE hour < ?1")?
            .execute([before])?)
    }

    async fn activity_hours_since(
        &self,
        since: UnixMillis,
        queue: Option<&QueueName>,
    ) -> StoreResult<Vec<ActivityHour>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT queue, hour, delivered, failed, latency FROM activity_hours
             WHERE hour >= ?1 AND (?2 IS NULL OR queue = ?2) ORDER BY queue, hour",
        )?;
        let queue = queue.map(QueueName::as_str);
        let rows = stmt.query_map(rusqlite::params![since, queue], |row| {
            Ok(ActivityHour {
                queue: QueueName::from_stored(row.get(0)?),
                hour: row.get(1)?,
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
