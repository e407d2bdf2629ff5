//! SQL for the delivery log on PostgreSQL (`delivered`): delivered jobs a queue keeps,
//! read back, listed newest first, and swept by age.

use deadpool_postgres::Transaction;
use tokio_postgres::Row;

use super::dead_letters;
use super::jobs::{attempt_of, job_id, uuid};
use crate::json::CanonicalJson;
use crate::model::{JobId, QueueName, UnixMillis};
use crate::store::error::StoreResult;
use crate::store::records::{Delivery, JobRecord, JobState, Position, ScheduleTick};

/// The columns of a delivered job, in the order [`delivered_from_row`] reads them.
const DELIVERED_COLUMNS: &str = "id, queue, payload, attempts, created_at, not_before, \
     priority, ordering_key, schedule, schedule_tick, delivered_at, response_status, latency_ms";

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
        delivery: Some(Delivery {
            at: delivered_at,
            status: status.unwrap_or_default(),
            latency_ms: u64::try_from(row.get::<_, i64>(12)).unwrap_or(0),
        }),
    }
}

/// A delivered job of `queue` still in the log.
pub(super) async fn get(
    tx: &Transaction<'_>,
    queue: &QueueName,
    id: JobId,
) -> StoreResult<Option<JobRecord>> {
    Ok(tx
        .query_opt(
            &format!("SELECT {DELIVERED_COLUMNS} FROM delivered WHERE id = $1 AND queue = $2"),
            &[&uuid(id), &queue.as_str()],
        )
        .await?
        .as_ref()
        .map(delivered_from_row))
}

/// One page of `queue`'s delivery log, newest delivery first, after `before`, through
/// `delivered_by_queue` (read backwards).
pub(super) async fn list(
    tx: &Transaction<'_>,
    queue: &QueueName,
    before: Option<Position>,
    limit: usize,
) -> StoreResult<Vec<JobRecord>> {
    let limit = super::jobs::limit_param(limit);
    let rows = match before {
        Some(before) => {
            tx.query(
                &format!(
                    "SELECT {DELIVERED_COLUMNS} FROM delivered
                     WHERE queue = $1 AND (delivered_at, id) < ($2::bigint, $3::uuid)
                     ORDER BY delivered_at DESC, id DESC LIMIT $4"
                ),
                &[&queue.as_str(), &before.at, &uuid(before.id), &limit],
            )
            .await?
        }
        None => {
            tx.query(
                &format!(
                    "SELECT {DELIVERED_COLUMNS} FROM delivered WHERE queue = $1
                     ORDER BY delivered_at DESC, id DESC LIMIT $2"
                ),
                &[&queue.as_str(), &limit],
            )
            .await?
        }
    };
    Ok(rows.iter().map(delivered_from_row).collect())
}

/// Retention: delete up to `limit` records of `queue` delivered before `before` (through
/// `delivered_by_queue`), skipping rows another transaction holds. Returns the ids deleted
/// (their history is the caller's to drop).
pub(super) async fn purge(
    tx: &Transaction<'_>,
    queue: &QueueName,
    before: UnixMillis,
    limit: usize,
) -> StoreResult<Vec<JobId>> {
    Ok(tx
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
