//! SQL for the delivery log on PostgreSQL (`delivered`): delivered jobs a queue keeps,
//! read back, listed newest first, and swept by age.

use deadpool_postgres::Transaction;
use tokio_postgres::Row;

use super::dead_letters;
use super::jobs::{attempt_of, job_id, uuid};
use super::tx::PgTx;
use crate::json::CanonicalJson;
use crate::model::{JobId, QueueName, UnixMillis};
use crate::sql_once;
use crate::store::dialect::DeliveryRows;
use crate::store::error::StoreResult;
use crate::store::postgres::jobs::{attempt_param, prepared};
use crate::store::records::{
    Delivery, JobRecord, JobState, JobsPage, Lease, MESSAGE_PAYLOAD, MESSAGE_TOPIC, MessageRef,
    Position, ScheduleTick, WorkerAnswer,
};
use crate::store::status::codes::IN_FLIGHT;

/// The columns of a delivered job, in the order [`delivered_from_row`] reads them.
fn delivered_columns() -> &'static str {
    sql_once!(
        "id, queue, {MESSAGE_PAYLOAD}, attempts, created_at, not_before, priority, ordering_key,
         schedule, schedule_tick, delivered_at, response_status, latency_ms, message_id,
         {MESSAGE_TOPIC}"
    )
}

fn delivered_from_row(row: &Row) -> JobRecord {
    let delivered_at = row.get(10);
    let status = dead_letters::status_of(row.get(11));
    JobRecord {
        id: job_id(row.get(0)),
        queue: QueueName::from_stored(row.get(1)),
        state: JobState::Delivered,
        payload: CanonicalJson::from_stored(row.get(2)),
        attempts: attempt_of(row.get(3)),
        created_at: row.get(4),
        run_at: delivered_at,
        last_error: None,
        last_status: status,
        not_before: row.get(5),
        priority: row.get(6),
        ordering_key: row.get(7),
        schedule: ScheduleTick::from_columns(row.get(8), row.get(9)),
        lease_expires_at: None,
        trace: None,
        message: MessageRef::from_columns(
            row.get::<_, Option<uuid::Uuid>>(13).map(job_id),
            row.get(14),
        ),
        delivery: Some(Delivery {
            at: delivered_at,
            status: status.unwrap_or_default(),
            latency_ms: u64::try_from(row.get::<_, i64>(12)).unwrap_or(0),
            answer: WorkerAnswer::default(),
        }),
        dead: None,
    }
}

/// A delivered job of `queue` still in the log, with its delivering answer (which listings
/// leave out: up to 16 KiB a row).
pub(super) async fn get(
    tx: &Transaction<'_>,
    queue: &QueueName,
    id: JobId,
) -> StoreResult<Option<JobRecord>> {
    Ok(tx
        .query_opt(
            &format!(
                "SELECT {}, response_headers, response_body FROM delivered
                 WHERE id = $1 AND queue = $2",
                delivered_columns()
            ),
            &[&uuid(id), &queue.as_str()],
        )
        .await?
        .map(|row| {
            let mut record = delivered_from_row(&row);
            if let Some(delivery) = &mut record.delivery {
                delivery.answer = WorkerAnswer {
                    headers: row.get(15),
                    body: row.get(16),
                };
            }
            record
        }))
}

impl DeliveryRows for PgTx<'_> {
    async fn keep_delivered(
        &self,
        id: JobId,
        lease: Lease,
        delivery: &Delivery,
    ) -> StoreResult<bool> {
        let kept = prepared::execute(
            self.tx,
            sql_once!(
                "INSERT INTO delivered (id, queue, payload, attempts, created_at, not_before,
                        priority, ordering_key, schedule, schedule_tick, delivered_at,
                        response_status, latency_ms, message_id, response_headers,
                        response_body)
                 SELECT id, queue, payload, attempts, created_at, not_before, priority,
                        ordering_key, schedule, schedule_tick, $4::bigint, $5::integer,
                        $6::bigint, message_id, $7::text, $8::text
                 FROM jobs WHERE id = $1 AND status = {IN_FLIGHT} AND attempts = $2
                             AND coalesce(lease_id, leased_until) = $3
                 ON CONFLICT (id) DO UPDATE SET
                     queue = excluded.queue, payload = excluded.payload,
                     attempts = excluded.attempts, delivered_at = excluded.delivered_at,
                     response_status = excluded.response_status,
                     latency_ms = excluded.latency_ms, message_id = excluded.message_id,
                     response_headers = excluded.response_headers,
                     response_body = excluded.response_body"
            ),
            &[
                &uuid(id),
                &attempt_param(lease.attempt),
                &lease.until,
                &delivery.at,
                &i32::from(delivery.status),
                &i64::try_from(delivery.latency_ms).unwrap_or(i64::MAX),
                &delivery.answer.headers,
                &delivery.answer.body,
            ],
        )
        .await?;
        Ok(kept == 1)
    }

    async fn delivered_job(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<JobRecord>> {
        get(self.tx, queue, id).await
    }

    /// Retention: delete up to `limit` records of `queue` delivered before `before` (through
    /// `delivered_by_queue`), skipping rows another transaction holds. Returns the ids deleted
    /// (their history is the caller's to drop).
    async fn purge_delivered(
        &self,
        queue: &QueueName,
        before: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        Ok(self
            .tx
            .query(
                "DELETE FROM delivered WHERE id IN (
                     SELECT id FROM delivered WHERE queue = $1 AND delivered_at < $2
                     LIMIT $3 FOR UPDATE SKIP LOCKED)
                 RETURNING id",
                &[&queue.as_str(), &before, &super::jobs::limit_param(limit)],
            )
            .await?
            .iter()
            .map(|row| job_id(row.get(0)))
            .collect())
    }

    /// One page of `queue`'s delivery log, newest delivery first, after `before`, through
    /// `delivered_by_queue` (read backwards).
    /// The page is one range of `delivered_by_queue` ([`JobsPage::start`]).
    async fn list_delivered(
        &self,
        queue: &QueueName,
        page: &JobsPage<Position>,
    ) -> StoreResult<Vec<JobRecord>> {
        let (direction, compare) = page.keyset();
        let after = page.start();
        let rows = prepared::query(
            self.tx,
            &format!(
                "SELECT {columns} FROM delivered
                 WHERE queue = $1 AND (delivered_at, id) {compare} ($2::bigint, $3::uuid)
                   AND ($4::text IS NULL OR {MESSAGE_PAYLOAD} ILIKE $4::text ESCAPE '\\')
                 ORDER BY delivered_at {direction}, id {direction} LIMIT $5",
                columns = delivered_columns()
            ),
            &[
                &queue.as_str(),
                &after.at,
                &uuid(after.id),
                &page.pattern(),
                &super::jobs::limit_param(page.limit),
            ],
        )
        .await?;
        Ok(rows.iter().map(delivered_from_row).collect())
    }
}
