//! SQL for the `delivered` table: the delivery log, read and swept. A job enters it in the
//! transaction that records its delivery (it leaves `jobs` in the same step).

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::jobs::{id_from_row, optional_id_from_row};
use super::tx::SqliteTx;
use crate::json::CanonicalJson;
use crate::model::{JobId, QueueName, UnixMillis};
use crate::sql_once;
use crate::store::dialect::DeliveryRows;
use crate::store::error::StoreResult;
use crate::store::records::{
    Delivery, JobRecord, JobState, JobsPage, Lease, MESSAGE_PAYLOAD, MESSAGE_TOPIC, MessageRef,
    Position, ScheduleTick, WorkerAnswer,
};

/// The columns of a record, in the order [`record_from_row`] reads them.
fn columns() -> &'static str {
    sql_once!(
        "id, queue, {MESSAGE_PAYLOAD}, attempts, created_at, not_before, priority, ordering_key,
         schedule, schedule_tick, delivered_at, response_status, latency_ms, message_id,
         {MESSAGE_TOPIC}"
    )
}

fn record_from_row(row: &Row<'_>) -> rusqlite::Result<JobRecord> {
    let delivered_at = row.get(10)?;
    Ok(JobRecord {
        id: id_from_row(row, 0)?,
        queue: QueueName::from_stored(row.get(1)?),
        state: JobState::Delivered,
        payload: CanonicalJson::from_stored(row.get(2)?),
        attempts: row.get(3)?,
        created_at: row.get(4)?,
        run_at: delivered_at,
        last_error: None,
        last_status: row.get(11)?,
        not_before: row.get(5)?,
        priority: row.get(6)?,
        ordering_key: row.get(7)?,
        schedule: ScheduleTick::from_columns(row.get(8)?, row.get(9)?),
        lease_expires_at: None,
        trace: None,
        message: MessageRef::from_columns(optional_id_from_row(row, 13)?, row.get(14)?),
        delivery: Some(Delivery {
            at: delivered_at,
            status: row.get(11)?,
            latency_ms: row.get::<_, i64>(12)?.max(0) as u64,
            answer: WorkerAnswer::default(),
        }),
        dead: None,
    })
}

/// A delivered job of `queue` still in the log, with its delivering answer (which listings
/// leave out: up to 16 KiB a row).
pub fn get(conn: &Connection, queue: &QueueName, id: JobId) -> StoreResult<Option<JobRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {columns}, response_headers, response_body FROM delivered
             WHERE id = ?1 AND queue = ?2",
            columns = columns()
        ))?
        .query_row(params![&id.as_bytes()[..], queue.as_str()], |row| {
            let mut record = record_from_row(row)?;
            if let Some(delivery) = &mut record.delivery {
                delivery.answer = WorkerAnswer {
                    headers: row.get(15)?,
                    body: row.get(16)?,
                };
            }
            Ok(record)
        })
        .optional()?)
}

impl DeliveryRows for SqliteTx<'_> {
    /// Copies the row; the caller deletes it from `jobs`.
    async fn keep_delivered(
        &self,
        id: JobId,
        lease: Lease,
        delivery: &Delivery,
    ) -> StoreResult<bool> {
        let kept = self
            .0
            .prepare_cached(crate::sql_once!(
"INSERT INTO delivered(id, queue, payload, attempts, created_at,
                        not_before, priority, ordering_key, schedule, schedule_tick, delivered_at,
                        response_status, latency_ms, message_id, response_headers, response_body)
                 SELECT id, queue, payload, attempts, created_at, not_before, priority,
                        ordering_key, schedule, schedule_tick, ?4, ?5, ?6, message_id, ?7, ?8
                 FROM jobs
                 WHERE id = ?1 AND status = {IN_FLIGHT} AND attempts = ?2 AND coalesce(lease_id, leased_until) = ?3
                 ON CONFLICT(id) DO UPDATE SET
                     queue = excluded.queue, payload = excluded.payload,
                     attempts = excluded.attempts, created_at = excluded.created_at,
                     not_before = excluded.not_before, priority = excluded.priority,
                     ordering_key = excluded.ordering_key, schedule = excluded.schedule,
                     schedule_tick = excluded.schedule_tick, delivered_at = excluded.delivered_at,
                     response_status = excluded.response_status,
                     latency_ms = excluded.latency_ms, message_id = excluded.message_id,
                     response_headers = excluded.response_headers,
                     response_body = excluded.response_body",
                IN_FLIGHT = crate::store::status::codes::IN_FLIGHT,
            ))?
            .execute(params![
                &id.as_bytes()[..],
                lease.attempt,
                lease.until,
                delivery.at,
                delivery.status,
                i64::try_from(delivery.latency_ms).unwrap_or(i64::MAX),
                delivery.answer.headers,
                delivery.answer.body
            ])?;
        Ok(kept == 1)
    }

    async fn delivered_job(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<JobRecord>> {
        get(self.0, queue, id)
    }

    /// Retention: delete up to `limit` records of `queue` delivered before `before`. Returns
    /// the ids deleted (their attempt history is the caller's to drop).
    async fn purge_delivered(
        &self,
        queue: &QueueName,
        before: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        Ok(self
            .0
            .prepare_cached(
                "DELETE FROM delivered WHERE rowid IN (
                     SELECT rowid FROM delivered WHERE queue = ?1 AND delivered_at < ?2 LIMIT ?3)
                 RETURNING id",
            )?
            .query_map(params![queue.as_str(), before, limit as i64], |row| {
                id_from_row(row, 0)
            })?
            .collect::<Result<_, _>>()?)
    }

    /// One page of `queue`'s log, newest delivery first, after `before` (the last record of the
    /// previous page).
    /// The page is one range of `delivered_by_queue` ([`JobsPage::start`]).
    async fn list_delivered(
        &self,
        queue: &QueueName,
        page: &JobsPage<Position>,
    ) -> StoreResult<Vec<JobRecord>> {
        let (direction, compare) = page.keyset();
        let after = page.start();
        let mut stmt = self.0.prepare_cached(&format!(
            "SELECT {columns} FROM delivered
             WHERE queue = ?1 AND (delivered_at, id) {compare} (?2, ?3)
               AND (?4 IS NULL OR {MESSAGE_PAYLOAD} LIKE ?4 ESCAPE '\\')
             ORDER BY delivered_at {direction}, id {direction} LIMIT ?5",
            columns = columns()
        ))?;
        let rows = stmt.query_map(
            params![
                queue.as_str(),
                after.at,
                &after.id.as_bytes()[..],
                page.pattern(),
                page.limit as i64
            ],
            record_from_row,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
