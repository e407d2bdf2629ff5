//! SQL for the `schedules` table on PostgreSQL: a queue's recurring jobs, each with the tick
//! it fires next, as on SQLite. What a put, a pause or a tick decides is in
//! `store::decisions::schedules`; here is its SQL.
//!
//! What makes a tick fire once across nodes: a round takes its due schedules with
//! `FOR UPDATE SKIP LOCKED` (a schedule another node is firing is left to it, not waited
//! for), and moves each one's tick with the same compare-and-set on `next_run_at` as SQLite
//! ([`claim_tick`]), in the transaction that stores the tick's job. Changes through the API
//! lock the row they change, so they take turns with a round firing it.

use deadpool_postgres::Transaction;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::jobs::{job_id, uuid};
use super::tx::PgTx;
use crate::json::CanonicalJson;
use crate::model::{JobId, QueueName, ScheduleName, UnixMillis};
use crate::store::dialect::ScheduleRows;
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{NewSchedule, Schedule};

/// The columns of a schedule, in the order [`from_row`] reads them.
const COLUMNS: &str = "queue, name, cron, timezone, payload, priority, ordering_key, paused, \
     next_run_at, last_run_at, last_job_id, created_at, updated_at";

fn from_row(row: &Row) -> Schedule {
    Schedule {
        queue: QueueName::from_stored(row.get(0)),
        name: ScheduleName::from_stored(row.get(1)),
        cron: row.get(2),
        timezone: row.get(3),
        payload: CanonicalJson::from_stored(row.get(4)),
        priority: row.get(5),
        ordering_key: row.get(6),
        paused: row.get(7),
        next_run_at: row.get(8),
        last_run_at: row.get(9),
        last_job_id: row.get::<_, Option<uuid::Uuid>>(10).map(job_id),
        created_at: row.get(11),
        updated_at: row.get(12),
    }
}

/// A schedule of `queue`; with `lock`, its row is locked until the transaction ends (a
/// change reads what it changes, as one write on SQLite does).
pub async fn get(
    tx: &Transaction<'_>,
    queue: &QueueName,
    name: &ScheduleName,
    lock: bool,
) -> StoreResult<Option<Schedule>> {
    Ok(tx
        .query_opt(
            &format!(
                "SELECT {COLUMNS} FROM schedules WHERE queue = $1 AND name = $2{}",
                if lock { " FOR UPDATE" } else { "" }
            ),
            &[&queue.as_str(), &name.as_str()],
        )
        .await?
        .as_ref()
        .map(from_row))
}

/// A schedule's row as the insert and the update both bind it (`$1`…`$10`).
struct BoundSchedule<'a> {
    queue: &'a str,
    name: &'a str,
    cron: &'a str,
    timezone: &'a str,
    payload: &'a str,
    schedule: &'a NewSchedule,
    next_run_at: Option<UnixMillis>,
    now: UnixMillis,
}

impl<'a> BoundSchedule<'a> {
    fn of(
        queue: &'a QueueName,
        schedule: &'a NewSchedule,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> Self {
        Self {
            queue: queue.as_str(),
            name: schedule.name.as_str(),
            cron: schedule.spec.expression(),
            timezone: schedule.spec.timezone(),
            payload: schedule.payload.as_str(),
            schedule,
            next_run_at,
            now,
        }
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 10] {
        [
            &self.queue,
            &self.name,
            &self.cron,
            &self.timezone,
            &self.payload,
            &self.schedule.priority,
            &self.schedule.ordering_key,
            &self.schedule.paused,
            &self.next_run_at,
            &self.now,
        ]
    }
}

/// How many schedules `queue` has.
pub async fn count(tx: &Transaction<'_>, queue: &QueueName) -> StoreResult<u64> {
    let count: i64 = tx
        .query_one(
            "SELECT count(*) FROM schedules WHERE queue = $1",
            &[&queue.as_str()],
        )
        .await?
        .get(0);
    Ok(u64::try_from(count).unwrap_or(0))
}

impl ScheduleRows for PgTx<'_> {
    /// Up to `limit` active schedules whose next tick is at or before `now`, earliest first
    /// (through `schedules_due`), locked until the transaction ends. A schedule another
    /// transaction holds (another node's round firing it, an API change) is skipped: it is not
    /// due for this round, and the round never waits.
    async fn due_schedules(&self, now: UnixMillis, limit: usize) -> StoreResult<Vec<Schedule>> {
        Ok(self
            .tx
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM schedules
                     WHERE NOT paused AND next_run_at <= $1
                     ORDER BY next_run_at LIMIT $2
                     FOR UPDATE SKIP LOCKED"
                ),
                &[&now, &i64::try_from(limit).unwrap_or(i64::MAX)],
            )
            .await?
            .iter()
            .map(from_row)
            .collect())
    }

    async fn claim_tick(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        planned: UnixMillis,
        next: Option<UnixMillis>,
    ) -> StoreResult<bool> {
        let changed = self
            .tx
            .execute(
                "UPDATE schedules SET next_run_at = $4
                 WHERE queue = $1 AND name = $2 AND next_run_at = $3 AND NOT paused",
                &[&queue.as_str(), &name.as_str(), &planned, &next],
            )
            .await?;
        Ok(changed == 1)
    }

    async fn record_run(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        tick: UnixMillis,
        job: JobId,
    ) -> StoreResult<()> {
        self.tx.execute(
            "UPDATE schedules SET last_run_at = $3, last_job_id = $4 WHERE queue = $1 AND name = $2",
            &[&queue.as_str(), &name.as_str(), &tick, &uuid(job)],
        )
        .await?;
        Ok(())
    }

    async fn next_schedule_due(&self) -> StoreResult<Option<UnixMillis>> {
        Ok(self
            .tx
            .query_one(
                "SELECT min(next_run_at) FROM schedules WHERE NOT paused",
                &[],
            )
            .await?
            .get(0))
    }

    async fn schedule(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
    ) -> StoreResult<Option<Schedule>> {
        get(self.tx, queue, name, false).await
    }

    async fn schedule_for_update(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
    ) -> StoreResult<Option<Schedule>> {
        get(self.tx, queue, name, true).await
    }

    async fn schedules(&self, queue: &QueueName) -> StoreResult<Vec<Schedule>> {
        Ok(self
            .tx
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM schedules WHERE queue = $1 ORDER BY name COLLATE \"C\""
                ),
                &[&queue.as_str()],
            )
            .await?
            .iter()
            .map(from_row)
            .collect())
    }

    async fn count_schedules(&self, queue: &QueueName) -> StoreResult<u64> {
        count(self.tx, queue).await
    }

    async fn schedule_summaries(&self) -> StoreResult<Vec<(QueueName, u64, Option<UnixMillis>)>> {
        let rows = self
            .tx
            .query(
                "SELECT queue, count(*), min(next_run_at) FILTER (WHERE NOT paused)
                 FROM schedules GROUP BY queue ORDER BY queue",
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| {
                let count: i64 = row.get(1);
                (
                    QueueName::from_stored(row.get(0)),
                    u64::try_from(count).unwrap_or(0),
                    row.get(2),
                )
            })
            .collect())
    }

    /// Insert `schedule` on `queue` (through `queues`: none for a queue deleted a moment
    /// before), next ticking at `next_run_at`. False if it exists or the queue does not.
    async fn insert_schedule(
        &self,
        queue: &QueueName,
        schedule: &NewSchedule,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        let inserted = self
            .tx
            .execute(
                "INSERT INTO schedules (queue, name, cron, timezone, payload, priority,
                                        ordering_key, paused, next_run_at, created_at,
                                        updated_at)
                 SELECT name, $2::text, $3::text, $4::text, $5::text, $6::integer, $7::text,
                        $8::boolean, $9::bigint, $10::bigint, $10::bigint
                 FROM queues WHERE name = $1
                 ON CONFLICT (queue, name) DO NOTHING",
                &BoundSchedule::of(queue, schedule, next_run_at, now).params(),
            )
            .await?;
        Ok(inserted == 1)
    }

    async fn replace_schedule(
        &self,
        queue: &QueueName,
        schedule: &NewSchedule,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<()> {
        self.tx
            .execute(
                "UPDATE schedules SET cron = $3, timezone = $4, payload = $5, priority = $6,
                    ordering_key = $7, paused = $8, next_run_at = $9, updated_at = $10
             WHERE queue = $1 AND name = $2",
                &BoundSchedule::of(queue, schedule, next_run_at, now).params(),
            )
            .await?;
        Ok(())
    }

    async fn set_schedule_paused(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        paused: bool,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<()> {
        self.tx
            .execute(
                "UPDATE schedules SET paused = $3, next_run_at = $4, updated_at = $5
             WHERE queue = $1 AND name = $2",
                &[&queue.as_str(), &name.as_str(), &paused, &next_run_at, &now],
            )
            .await?;
        Ok(())
    }

    async fn delete_schedule(&self, queue: &QueueName, name: &ScheduleName) -> StoreResult<()> {
        let deleted = self
            .tx
            .execute(
                "DELETE FROM schedules WHERE queue = $1 AND name = $2",
                &[&queue.as_str(), &name.as_str()],
            )
            .await?;
        match deleted {
            0 => Err(StoreError::ScheduleNotFound),
            _ => Ok(()),
        }
    }
}
