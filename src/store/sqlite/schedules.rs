//! SQL for the `schedules` table: a queue's recurring jobs, each with the tick it fires next.
//! What a tick, a put or a pause decides is in `store::decisions::schedules`.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::jobs::id_from_row;
use super::tx::SqliteTx;
use crate::json::CanonicalJson;
use crate::model::{JobId, QueueName, ScheduleName, UnixMillis};
use crate::store::dialect::ScheduleRows;
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{NewSchedule, Schedule};

const COLUMNS: &str = "queue, name, cron, timezone, payload, priority, ordering_key, paused, \
     next_run_at, last_run_at, last_job_id, created_at, updated_at";

fn from_row(row: &Row<'_>) -> rusqlite::Result<Schedule> {
    let has_run = row.get_ref(10)?.as_bytes_or_null()?.is_some();
    Ok(Schedule {
        queue: QueueName::from_stored(row.get(0)?),
        name: ScheduleName::from_stored(row.get(1)?),
        cron: row.get(2)?,
        timezone: row.get(3)?,
        payload: CanonicalJson::from_stored(row.get(4)?),
        priority: row.get(5)?,
        ordering_key: row.get(6)?,
        paused: row.get(7)?,
        next_run_at: row.get(8)?,
        last_run_at: row.get(9)?,
        last_job_id: has_run.then(|| id_from_row(row, 10)).transpose()?,
        created_at: row.get(11)?,
        updated_at: row.get(12)?,
    })
}

/// How many schedules `queue` has.
pub fn count(conn: &Connection, queue: &QueueName) -> StoreResult<u64> {
    let count: i64 = conn
        .prepare_cached("SELECT count(*) FROM schedules WHERE queue = ?1")?
        .query_row([queue.as_str()], |row| row.get(0))?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// Run `sql`, which writes a schedule's row from `?1`…`?10` (queue, name, expression, time
/// zone, payload, priority, ordering key, paused, next tick, now). Rows changed.
fn write_row(
    conn: &Connection,
    sql: &str,
    (queue, schedule, next_run_at, now): (&QueueName, &NewSchedule, Option<UnixMillis>, UnixMillis),
) -> StoreResult<usize> {
    let spec = &schedule.spec;
    Ok(conn.prepare_cached(sql)?.execute(params![
        queue.as_str(),
        schedule.name.as_str(),
        spec.expression(),
        spec.timezone(),
        schedule.payload.as_str(),
        schedule.priority,
        schedule.ordering_key,
        schedule.paused,
        next_run_at,
        now,
    ])?)
}

pub fn get(
    conn: &Connection,
    queue: &QueueName,
    name: &ScheduleName,
) -> StoreResult<Option<Schedule>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM schedules WHERE queue = ?1 AND name = ?2"
        ))?
        .query_row(params![queue.as_str(), name.as_str()], from_row)
        .optional()?)
}

impl ScheduleRows for SqliteTx<'_> {
    async fn due_schedules(&self, now: UnixMillis, limit: usize) -> StoreResult<Vec<Schedule>> {
        let mut stmt = self.0.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM schedules
             WHERE paused = 0 AND next_run_at <= ?1
             ORDER BY next_run_at LIMIT ?2"
        ))?;
        let rows = stmt.query_map(params![now, limit as i64], from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    async fn claim_tick(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        planned: UnixMillis,
        next: Option<UnixMillis>,
    ) -> StoreResult<bool> {
        let changed = self
            .0
            .prepare_cached(
                "UPDATE schedules SET next_run_at = ?4
                 WHERE queue = ?1 AND name = ?2 AND next_run_at = ?3 AND paused = 0",
            )?
            .execute(params![queue.as_str(), name.as_str(), planned, next])?;
        Ok(changed == 1)
    }

    async fn record_run(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        tick: UnixMillis,
        job: JobId,
    ) -> StoreResult<()> {
        self.0.prepare_cached(
            "UPDATE schedules SET last_run_at = ?3, last_job_id = ?4 WHERE queue = ?1 AND name = ?2",
        )?
        .execute(params![
            queue.as_str(),
            name.as_str(),
            tick,
            &job.as_bytes()[..]
        ])?;
        Ok(())
    }

    async fn next_schedule_due(&self) -> StoreResult<Option<UnixMillis>> {
        Ok(self
            .0
            .prepare_cached("SELECT min(next_run_at) FROM schedules WHERE paused = 0")?
            .query_row([], |row| row.get(0))?)
    }

    async fn schedule(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
    ) -> StoreResult<Option<Schedule>> {
        get(self.0, queue, name)
    }

    async fn schedule_for_update(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
    ) -> StoreResult<Option<Schedule>> {
        get(self.0, queue, name)
    }

    async fn schedules(&self, queue: &QueueName) -> StoreResult<Vec<Schedule>> {
        let mut stmt = self.0.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM schedules WHERE queue = ?1 ORDER BY name"
        ))?;
        let rows = stmt.query_map([queue.as_str()], from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    async fn count_schedules(&self, queue: &QueueName) -> StoreResult<u64> {
        count(self.0, queue)
    }

    async fn schedule_summaries(&self) -> StoreResult<Vec<(QueueName, u64, Option<UnixMillis>)>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT queue, count(*), min(CASE WHEN paused = 0 THEN next_run_at END)
             FROM schedules GROUP BY queue ORDER BY queue",
        )?;
        let rows = stmt.query_map([], |row| {
            let count: i64 = row.get(1)?;
            Ok((
                QueueName::from_stored(row.get(0)?),
                u64::try_from(count).unwrap_or(0),
                row.get(2)?,
            ))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    async fn insert_schedule(
        &self,
        queue: &QueueName,
        schedule: &NewSchedule,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        let inserted = write_row(
            self.0,
            "INSERT INTO schedules(queue, name, cron, timezone, payload, priority, ordering_key,
                                   paused, next_run_at, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)
             ON CONFLICT(queue, name) DO NOTHING",
            (queue, schedule, next_run_at, now),
        )?;
        Ok(inserted == 1)
    }

    async fn replace_schedule(
        &self,
        queue: &QueueName,
        schedule: &NewSchedule,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<()> {
        write_row(
            self.0,
            "UPDATE schedules SET cron = ?3, timezone = ?4, payload = ?5, priority = ?6,
                    ordering_key = ?7, paused = ?8, next_run_at = ?9, updated_at = ?10
             WHERE queue = ?1 AND name = ?2",
            (queue, schedule, next_run_at, now),
        )?;
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
        self.0
            .prepare_cached(
                "UPDATE schedules SET paused = ?3, next_run_at = ?4, updated_at = ?5
             WHERE queue = ?1 AND name = ?2",
            )?
            .execute(params![
                queue.as_str(),
                name.as_str(),
                paused,
                next_run_at,
                now
            ])?;
        Ok(())
    }

    async fn delete_schedule(&self, queue: &QueueName, name: &ScheduleName) -> StoreResult<()> {
        let deleted = self
            .0
            .prepare_cached("DELETE FROM schedules WHERE queue = ?1 AND name = ?2")?
            .execute(params![queue.as_str(), name.as_str()])?;
        match deleted {
            0 => Err(StoreError::ScheduleNotFound),
            _ => Ok(()),
        }
    }
}
