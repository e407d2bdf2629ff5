//! SQL for the `dead_letters` table: jobs whose attempts were spent (or that expired), with
//! their admin lifecycle `pending → replaying → replayed` or `pending → acknowledged`.
//! Replayed and acknowledged records are kept for audit until the retention sweep.

use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};
use serde::Serialize;

use super::error::{StoreError, StoreResult};
use super::jobs::{JobRecord, JobState, delete_history};
use crate::model::{JobId, QueueName, UnixMillis};

/// Why a job was dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    MaxAttemptsReached,
    Expired,
}

impl FailureReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MaxAttemptsReached => "max_attempts_reached",
            Self::Expired => "expired",
        }
    }

    fn parse(raw: &str) -> rusqlite::Result<Self> {
        match raw {
            "max_attempts_reached" => Ok(Self::MaxAttemptsReached),
            "expired" => Ok(Self::Expired),
            _ => Err(rusqlite::Error::InvalidColumnType(
                0,
                "failure_reason".into(),
                rusqlite::types::Type::Text,
            )),
        }
    }
}

/// Where a dead letter stands in its admin lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DlqState {
    /// Awaiting action.
    Pending,
    /// Claimed by a replay in progress.
    Replaying,
    /// Put back on its queue (kept for audit).
    Replayed,
    /// Dismissed by an operator (kept for audit).
    Acknowledged,
}

impl DlqState {
    pub const ALL: [Self; 4] = [
        Self::Pending,
        Self::Replaying,
        Self::Replayed,
        Self::Acknowledged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Replaying => "replaying",
            Self::Replayed => "replayed",
            Self::Acknowledged => "acknowledged",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == raw)
    }
}

/// A dead letter as the admin API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct DeadLetter {
    #[serde(serialize_with = "crate::model::serialize_display")]
    pub id: JobId,
    #[serde(serialize_with = "crate::model::serialize_display")]
    pub queue: QueueName,
    pub target: String,
    pub created_at: UnixMillis,
    pub failed_at: UnixMillis,
    pub attempts: u32,
    pub failure_reason: FailureReason,
    pub last_error: Option<String>,
    pub last_status: Option<u16>,
    pub status: DlqState,
    pub replay_count: u32,
    pub replayed_at: Option<UnixMillis>,
    pub acknowledged_at: Option<UnixMillis>,
    /// The job's canonical JSON, only when asked for.
    #[serde(skip)]
    pub payload: Option<String>,
}

impl DeadLetter {
    /// The hyper API's view: an `ERROR` job.
    pub fn into_job_record(self) -> JobRecord {
        JobRecord {
            id: self.id,
            queue: self.queue,
            state: JobState::Dead,
            payload: self.payload.unwrap_or_else(|| "{}".into()),
            attempts: self.attempts,
            created_at: self.created_at,
            run_at: self.failed_at,
            last_error: self.last_error,
            last_status: self.last_status,
        }
    }
}

const COLUMNS: &str = "id, queue, target, created_at, failed_at, attempts, failure_reason, \
     last_error, last_status, state, replay_count, replayed_at, acknowledged_at";

fn from_row(row: &Row<'_>, payload: bool) -> rusqlite::Result<DeadLetter> {
    let id: Vec<u8> = row.get(0)?;
    let state: String = row.get(9)?;
    Ok(DeadLetter {
        id: JobId::from_slice(&id).ok_or(rusqlite::Error::InvalidColumnType(
            0,
            "id".into(),
            rusqlite::types::Type::Blob,
        ))?,
        queue: QueueName::from_stored(row.get(1)?),
        target: row.get(2)?,
        created_at: row.get(3)?,
        failed_at: row.get(4)?,
        attempts: row.get(5)?,
        failure_reason: FailureReason::parse(&row.get::<_, String>(6)?)?,
        last_error: row.get(7)?,
        last_status: row.get(8)?,
        status: DlqState::parse(&state).ok_or(rusqlite::Error::InvalidColumnType(
            9,
            "state".into(),
            rusqlite::types::Type::Text,
        ))?,
        replay_count: row.get(10)?,
        replayed_at: row.get(11)?,
        acknowledged_at: row.get(12)?,
        payload: if payload { Some(row.get(13)?) } else { None },
    })
}

/// Move job `id` from `jobs` into the dead letters (as `pending`). A job that was replayed
/// and failed again reopens its existing record, keeping its replay count.
pub fn bury(
    conn: &Connection,
    id: JobId,
    reason: FailureReason,
    now: UnixMillis,
) -> StoreResult<()> {
    let key = &id.as_bytes()[..];
    conn.prepare_cached(
        "INSERT INTO dead_letters(id, queue, target, payload, created_at, attempts,
                failure_reason, last_error, last_status, failed_at, state, replay_count,
                updated_at)
         SELECT j.id, j.queue, q.target, j.payload, j.created_at, j.attempts, ?2,
                j.last_error, j.last_status, ?3, 'pending', j.replay_count, ?3
         FROM jobs j JOIN queues q ON q.name = j.queue
         WHERE j.id = ?1
         ON CONFLICT(id) DO UPDATE SET
             queue = excluded.queue, target = excluded.target, payload = excluded.payload,
             attempts = excluded.attempts, failure_reason = excluded.failure_reason,
             last_error = excluded.last_error, last_status = excluded.last_status,
             failed_at = excluded.failed_at, state = 'pending',
             replay_count = excluded.replay_count, acknowledged_at = NULL,
             updated_at = excluded.updated_at",
    )?
    .execute(params![key, reason.as_str(), now])?;
    conn.prepare_cached("DELETE FROM jobs WHERE id = ?1")?
        .execute([key])?;
    Ok(())
}

/// Whether `queue` has a dead letter `id` that still stands for the job: any state but
/// `replayed` (that record is only audit; the job is live again or delivered since).
pub fn is_open(conn: &Connection, queue: &QueueName, id: JobId) -> StoreResult<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT 1 FROM dead_letters WHERE id = ?1 AND queue = ?2 AND state != 'replayed'",
        )?
        .query_row(params![&id.as_bytes()[..], queue.as_str()], |_| Ok(()))
        .optional()?
        .is_some())
}

/// A dead letter by id, with its payload; limited to `queue` when given.
pub fn get(
    conn: &Connection,
    queue: Option<&QueueName>,
    id: JobId,
) -> StoreResult<Option<DeadLetter>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS}, payload FROM dead_letters
             WHERE id = ?1 AND (?2 IS NULL OR queue = ?2)"
        ))?
        .query_row(
            params![&id.as_bytes()[..], queue.map(QueueName::as_str)],
            |row| from_row(row, true),
        )
        .optional()?)
}

/// A position in a listing ordered by failure time: the last record of the previous page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub failed_at: UnixMillis,
    pub id: JobId,
}

/// Which dead letters a listing shows.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub queue: Option<QueueName>,
    /// `None` means every state.
    pub state: Option<DlqState>,
}

impl Filter {
    fn where_clause(&self) -> (String, Vec<rusqlite::types::Value>) {
        let mut conditions = Vec::new();
        let mut values: Vec<rusqlite::types::Value> = Vec::new();
        if let Some(queue) = &self.queue {
            conditions.push("queue = ?");
            values.push(queue.as_str().to_owned().into());
        }
        if let Some(state) = self.state {
            conditions.push("state = ?");
            values.push(state.as_str().to_owned().into());
        }
        let clause = if conditions.is_empty() {
            "1".to_owned()
        } else {
            conditions.join(" AND ")
        };
        (clause, values)
    }
}

/// One page of dead letters in failure order (`newest_first` or oldest first), after
/// `after`; plus the total number matching the filter.
pub fn list(
    conn: &Connection,
    filter: &Filter,
    after: Option<Position>,
    limit: usize,
    newest_first: bool,
    with_payload: bool,
) -> StoreResult<(Vec<DeadLetter>, u64)> {
    let (clause, mut values) = filter.where_clause();
    let total: i64 = conn
        .prepare_cached(&format!("SELECT count(*) FROM dead_letters WHERE {clause}"))?
        .query_row(params_from_iter(values.iter()), |row| row.get(0))?;
    let (direction, compare) = if newest_first {
        ("DESC", "<")
    } else {
        ("ASC", ">")
    };
    let mut sql = format!(
        "SELECT {COLUMNS}{} FROM dead_letters WHERE {clause}",
        if with_payload { ", payload" } else { "" }
    );
    if let Some(position) = after {
        sql.push_str(&format!(" AND (failed_at, id) {compare} (?, ?)"));
        values.push(position.failed_at.into());
        values.push(position.id.as_bytes().to_vec().into());
    }
    sql.push_str(&format!(
        " ORDER BY failed_at {direction}, id {direction} LIMIT ?"
    ));
    values.push((limit as i64).into());
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params_from_iter(values.iter()), |row| {
        from_row(row, with_payload)
    })?;
    Ok((rows.collect::<Result<_, _>>()?, total.max(0) as u64))
}

/// Which dead letters an admin action applies to.
#[derive(Debug, Clone)]
pub enum Selection {
    Ids(Vec<JobId>),
    /// Every pending dead letter of a queue.
    Queue(QueueName),
}

/// Claim up to `limit` pending records for a replay: `pending → replaying`. Only one replay
/// can claim a record, so two concurrent replays never send a job twice.
pub fn claim_for_replay(
    conn: &Connection,
    selection: &Selection,
    now: UnixMillis,
    limit: usize,
) -> StoreResult<Vec<JobId>> {
    let mut claimed = Vec::new();
    match selection {
        Selection::Ids(ids) => {
            let mut stmt = conn.prepare_cached(
                "UPDATE dead_letters SET state = 'replaying', updated_at = ?2
                 WHERE id = ?1 AND state = 'pending'",
            )?;
            for id in ids.iter().take(limit) {
                if stmt.execute(params![&id.as_bytes()[..], now])? == 1 {
                    claimed.push(*id);
                }
            }
        }
        Selection::Queue(queue) => {
            let mut stmt = conn.prepare_cached(
                "UPDATE dead_letters SET state = 'replaying', updated_at = ?2
                 WHERE rowid IN (SELECT rowid FROM dead_letters
                                 WHERE queue = ?1 AND state = 'pending'
                                 ORDER BY failed_at LIMIT ?3)
                 RETURNING id",
            )?;
            let rows = stmt.query_map(params![queue.as_str(), now, limit as i64], |row| {
                row.get::<_, Vec<u8>>(0)
            })?;
            for bytes in rows {
                if let Some(id) = JobId::from_slice(&bytes?) {
                    claimed.push(id);
                }
            }
        }
    }
    Ok(claimed)
}

/// What a replay did with the records it claimed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayReport {
    pub replayed: Vec<JobId>,
    /// Records that could not be put back (e.g. the job is live again); rolled back to pending.
    pub failed: Vec<JobId>,
}

/// Put claimed records back on their queues as READY jobs with fresh attempts, due at
/// `run_at`, and mark them `replayed`. Each record is its own savepoint: one that fails is
/// rolled back to `pending` without undoing the others.
pub fn replay_claimed(
    conn: &Connection,
    ids: &[JobId],
    now: UnixMillis,
    run_at: UnixMillis,
) -> StoreResult<ReplayReport> {
    let mut report = ReplayReport::default();
    for id in ids {
        let key = &id.as_bytes()[..];
        conn.execute_batch("SAVEPOINT replay_one")?;
        let attempt = (|| -> StoreResult<bool> {
            let inserted = conn
                .prepare_cached(
                    "INSERT INTO jobs(id, queue, status, payload, attempts, run_at, created_at,
                            last_error, last_status, replay_count, ttl_from)
                     SELECT id, queue, 0, payload, 0, ?2, created_at, last_error, last_status,
                            replay_count + 1, ?2
                     FROM dead_letters WHERE id = ?1 AND state = 'replaying'",
                )?
                .execute(params![key, run_at])?;
            if inserted != 1 {
                return Ok(false);
            }
            conn.prepare_cached(
                "UPDATE dead_letters SET state = 'replayed', replayed_at = ?2,
                        replay_count = replay_count + 1, updated_at = ?2
                 WHERE id = ?1",
            )?
            .execute(params![key, now])?;
            Ok(true)
        })();
        match attempt {
            Ok(true) => {
                conn.execute_batch("RELEASE replay_one")?;
                report.replayed.push(*id);
            }
            Ok(false) | Err(_) => {
                if let Err(err) = &attempt {
                    tracing::warn!(job_id = %id, error = %err, "replay failed; record back to pending");
                }
                conn.execute_batch("ROLLBACK TO replay_one; RELEASE replay_one")?;
                conn.prepare_cached(
                    "UPDATE dead_letters SET state = 'pending', updated_at = ?2
                     WHERE id = ?1 AND state = 'replaying'",
                )?
                .execute(params![key, now])?;
                report.failed.push(*id);
            }
        }
    }
    Ok(report)
}

/// Records left `replaying` by a process that stopped mid-replay go back to `pending`
/// (their jobs were not put back, or the record would say `replayed`).
pub fn reset_interrupted_replays(conn: &Connection, now: UnixMillis) -> StoreResult<usize> {
    Ok(conn.execute(
        "UPDATE dead_letters SET state = 'pending', updated_at = ?1 WHERE state = 'replaying'",
        [now],
    )?)
}

/// Dismiss pending records: `pending → acknowledged`. Returns how many.
pub fn acknowledge(
    conn: &Connection,
    selection: &Selection,
    now: UnixMillis,
) -> StoreResult<usize> {
    match selection {
        Selection::Ids(ids) => {
            let mut stmt = conn.prepare_cached(
                "UPDATE dead_letters SET state = 'acknowledged', acknowledged_at = ?2,
                        updated_at = ?2
                 WHERE id = ?1 AND state = 'pending'",
            )?;
            let mut count = 0;
            for id in ids {
                count += stmt.execute(params![&id.as_bytes()[..], now])?;
            }
            Ok(count)
        }
        Selection::Queue(queue) => Ok(conn
            .prepare_cached(
                "UPDATE dead_letters SET state = 'acknowledged', acknowledged_at = ?2,
                        updated_at = ?2
                 WHERE queue = ?1 AND state = 'pending'",
            )?
            .execute(params![queue.as_str(), now])?),
    }
}

/// Remove dead letters for good (explicit admin action). Their attempt history goes too,
/// unless the job is live again after a replay.
pub fn delete(conn: &Connection, selection: &Selection) -> StoreResult<usize> {
    let ids: Vec<JobId> = match selection {
        Selection::Ids(ids) => ids.clone(),
        Selection::Queue(queue) => conn
            .prepare_cached("SELECT id FROM dead_letters WHERE queue = ?1")?
            .query_map([queue.as_str()], |row| row.get::<_, Vec<u8>>(0))?
            .filter_map(|bytes| bytes.ok().and_then(|b| JobId::from_slice(&b)))
            .collect(),
    };
    let mut deleted = 0;
    for id in &ids {
        let removed = conn
            .prepare_cached("DELETE FROM dead_letters WHERE id = ?1")?
            .execute([&id.as_bytes()[..]])?;
        if removed == 1 {
            deleted += 1;
            drop_history_unless_live(conn, *id)?;
        }
    }
    if matches!(selection, Selection::Ids(ids) if ids.len() == 1) && deleted == 0 {
        return Err(StoreError::JobNotFound);
    }
    Ok(deleted)
}

fn drop_history_unless_live(conn: &Connection, id: JobId) -> StoreResult<()> {
    let live = conn
        .prepare_cached("SELECT 1 FROM jobs WHERE id = ?1")?
        .query_row([&id.as_bytes()[..]], |_| Ok(()))
        .optional()?
        .is_some();
    if !live {
        delete_history(conn, id)?;
    }
    Ok(())
}

/// Retention: delete up to `limit` replayed or acknowledged records last changed before
/// `before`. Pending records are never deleted automatically.
pub fn purge_closed(conn: &Connection, before: UnixMillis, limit: usize) -> StoreResult<usize> {
    let ids: Vec<Vec<u8>> = conn
        .prepare_cached(
            "DELETE FROM dead_letters WHERE rowid IN (
                 SELECT rowid FROM dead_letters
                 WHERE state IN ('replayed', 'acknowledged') AND updated_at < ?1
                 LIMIT ?2)
             RETURNING id",
        )?
        .query_map(params![before, limit as i64], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for id in ids.iter().filter_map(|b| JobId::from_slice(b)) {
        drop_history_unless_live(conn, id)?;
    }
    Ok(ids.len())
}

/// Figures for `GET /admin/dlq/stats` and the alert signals.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DlqStats {
    pub by_status: std::collections::BTreeMap<&'static str, u64>,
    /// Pending dead letters per queue.
    pub by_queue: std::collections::BTreeMap<String, u64>,
    pub oldest_pending_failed_at: Option<UnixMillis>,
    pub oldest_pending_age_ms: Option<i64>,
    /// Queues with the most pending dead letters, most first (at most 10).
    pub top_failing_queues: Vec<CountOf<String>>,
    /// Last HTTP statuses among pending dead letters (`null` = transport error), most first.
    pub top_status_codes: Vec<CountOf<Option<u16>>>,
    /// Pending dead letters that were already replayed more than twice.
    pub repeat_failures: u64,
    pub last_24h: Last24h,
}

#[derive(Debug, Clone, Serialize)]
pub struct CountOf<T> {
    pub key: T,
    pub count: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Last24h {
    pub new_failures: u64,
    pub replayed: u64,
    pub acknowledged: u64,
}

pub fn stats(conn: &Connection, now: UnixMillis) -> StoreResult<DlqStats> {
    let mut stats = DlqStats::default();
    for state in DlqState::ALL {
        stats.by_status.insert(state.as_str(), 0);
    }
    let mut stmt =
        conn.prepare_cached("SELECT state, count(*) FROM dead_letters GROUP BY state")?;
    for row in stmt.query_map([], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
    })? {
        let (state, count) = row?;
        if let Some(state) = DlqState::parse(&state) {
            stats.by_status.insert(state.as_str(), count as u64);
        }
    }
    let mut stmt = conn.prepare_cached(
        "SELECT queue, count(*) AS n FROM dead_letters WHERE state = 'pending'
         GROUP BY queue ORDER BY n DESC, queue",
    )?;
    for row in stmt.query_map([], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
    })? {
        let (queue, count) = row?;
        if stats.top_failing_queues.len() < 10 {
            stats.top_failing_queues.push(CountOf {
                key: queue.clone(),
                count: count as u64,
            });
        }
        stats.by_queue.insert(queue, count as u64);
    }
    stats.oldest_pending_failed_at = conn
        .prepare_cached("SELECT min(failed_at) FROM dead_letters WHERE state = 'pending'")?
        .query_row([], |row| row.get(0))?;
    stats.oldest_pending_age_ms = stats.oldest_pending_failed_at.map(|at| (now - at).max(0));
    let mut stmt = conn.prepare_cached(
        "SELECT last_status, count(*) AS n FROM dead_letters WHERE state = 'pending'
         GROUP BY last_status ORDER BY n DESC LIMIT 10",
    )?;
    for row in stmt.query_map([], |row| {
        Ok((row.get::<_, Option<u16>>(0)?, row.get::<_, i64>(1)?))
    })? {
        let (status, count) = row?;
        stats.top_status_codes.push(CountOf {
            key: status,
            count: count as u64,
        });
    }
    let day_ago = now - 24 * 3600 * 1000;
    let (repeat, new_failures, replayed, acknowledged): (i64, i64, i64, i64) = conn
        .prepare_cached(
            "SELECT
                 coalesce(sum(state = 'pending' AND replay_count > 2), 0),
                 coalesce(sum(failed_at >= ?1), 0),
                 coalesce(sum(replayed_at >= ?1), 0),
                 coalesce(sum(acknowledged_at >= ?1), 0)
             FROM dead_letters",
        )?
        .query_row([day_ago], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })?;
    stats.repeat_failures = repeat as u64;
    stats.last_24h = Last24h {
        new_failures: new_failures as u64,
        replayed: replayed as u64,
        acknowledged: acknowledged as u64,
    };
    Ok(stats)
}
