//! SQL for the `jobs` table: insert, claim, outcomes, listing, cancel/retry and lease recovery.
//! Every function runs on a connection it is handed: writes on the writer thread, reads on
//! the reader pool.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::error::{StoreError, StoreResult};
use crate::model::{JobId, QueueName, UnixMillis};

const READY: i64 = 0;
const IN_FLIGHT: i64 = 1;
const DEAD: i64 = 2;

/// Where a job stands in storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Waiting for its `run_at` (new, or scheduled for a retry).
    Ready,
    /// Leased to a delivery.
    InFlight,
    /// Dead-lettered: attempts spent. Shown as `ERROR`.
    Dead,
}

impl JobState {
    fn from_code(code: i64) -> rusqlite::Result<Self> {
        match code {
            READY => Ok(Self::Ready),
            IN_FLIGHT => Ok(Self::InFlight),
            DEAD => Ok(Self::Dead),
            other => Err(rusqlite::Error::IntegralValueOutOfRange(2, other)),
        }
    }
}

/// A job as stored, for the API.
#[derive(Debug, Clone)]
pub struct JobRecord {
    pub id: JobId,
    pub queue: QueueName,
    pub state: JobState,
    /// Canonical JSON text.
    pub payload: String,
    pub attempts: u32,
    pub created_at: UnixMillis,
    pub run_at: UnixMillis,
    pub last_error: Option<String>,
    pub last_status: Option<u16>,
}

/// A job leased to one delivery attempt.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub id: JobId,
    pub payload: String,
    /// The number of this attempt (1 for the first). Also the lease's fencing token: an
    /// outcome is recorded only if the job is still in flight on this attempt.
    pub attempt: u32,
    pub created_at: UnixMillis,
}

/// What a delivery attempt ended in.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// 2xx: the job is done and removed.
    Delivered,
    /// Failed, attempts remain: back to ready at `run_at`.
    Retry {
        run_at: UnixMillis,
        error: String,
        status: Option<u16>,
    },
    /// Failed for the last time: dead-lettered.
    Dead {
        error: String,
        status: Option<u16>,
        failed_at: UnixMillis,
    },
}

fn id_from_row(row: &Row<'_>, index: usize) -> rusqlite::Result<JobId> {
    let bytes: Vec<u8> = row.get(index)?;
    JobId::from_slice(&bytes).ok_or(rusqlite::Error::InvalidColumnType(
        index,
        "id".into(),
        rusqlite::types::Type::Blob,
    ))
}

pub fn insert(
    conn: &Connection,
    queue: &QueueName,
    id: JobId,
    payload: &str,
    now: UnixMillis,
) -> StoreResult<()> {
    // Inserting through a SELECT on `queues` makes "queue exists" and "job stored" one step,
    // so a job can never land in a queue deleted a moment before.
    let inserted = conn
        .prepare_cached(
            "INSERT INTO jobs(id, queue, status, payload, attempts, run_at, created_at)
             SELECT ?1, name, 0, ?3, 0, ?4, ?4 FROM queues WHERE name = ?2",
        )?
        .execute(params![&id.as_bytes()[..], queue.as_str(), payload, now])?;
    if inserted == 0 {
        return Err(StoreError::QueueNotFound);
    }
    Ok(())
}

/// Lease up to `limit` due jobs of `queue`, oldest first, in one statement.
pub fn claim(
    conn: &Connection,
    queue: &QueueName,
    now: UnixMillis,
    leased_until: UnixMillis,
    limit: usize,
) -> StoreResult<Vec<ClaimedJob>> {
    let mut stmt = conn.prepare_cached(
        "UPDATE jobs SET status = 1, attempts = attempts + 1, leased_until = ?3
         WHERE rowid IN (
             SELECT rowid FROM jobs
             WHERE queue = ?1 AND status = 0 AND run_at <= ?2
             ORDER BY run_at LIMIT ?4)
         RETURNING id, payload, attempts, created_at",
    )?;
    let rows = stmt.query_map(
        params![queue.as_str(), now, leased_until, limit as i64],
        |row| {
            Ok(ClaimedJob {
                id: id_from_row(row, 0)?,
                payload: row.get(1)?,
                attempt: row.get(2)?,
                created_at: row.get(3)?,
            })
        },
    )?;
    let mut claimed = rows.collect::<Result<Vec<_>, _>>()?;
    // RETURNING gives no order guarantee; deliver oldest first.
    claimed.sort_by_key(|job| job.id);
    Ok(claimed)
}

/// Record the outcome of attempt `attempt` of job `id`. A no-op if the lease was lost in
/// the meantime (the job was recovered, cancelled or its queue deleted).
pub fn record_outcome(
    conn: &Connection,
    id: JobId,
    attempt: u32,
    outcome: &Outcome,
) -> StoreResult<bool> {
    let id = &id.as_bytes()[..];
    let changed = match outcome {
        Outcome::Delivered => conn
            .prepare_cached("DELETE FROM jobs WHERE id = ?1 AND status = 1 AND attempts = ?2")?
            .execute(params![id, attempt])?,
        Outcome::Retry {
            run_at,
            error,
            status,
        } => conn
            .prepare_cached(
                "UPDATE jobs SET status = 0, run_at = ?3, leased_until = NULL,
                        last_error = ?4, last_status = ?5
                 WHERE id = ?1 AND status = 1 AND attempts = ?2",
            )?
            .execute(params![id, attempt, run_at, error, status])?,
        Outcome::Dead {
            error,
            status,
            failed_at,
        } => conn
            .prepare_cached(
                "UPDATE jobs SET status = 2, run_at = ?3, leased_until = NULL,
                        last_error = ?4, last_status = ?5
                 WHERE id = ?1 AND status = 1 AND attempts = ?2",
            )?
            .execute(params![id, attempt, failed_at, error, status])?,
    };
    Ok(changed == 1)
}

/// The earliest `run_at` among the ready jobs of `queue`.
pub fn next_due(conn: &Connection, queue: &QueueName) -> StoreResult<Option<UnixMillis>> {
    Ok(conn
        .prepare_cached("SELECT min(run_at) FROM jobs WHERE queue = ?1 AND status = 0")?
        .query_row([queue.as_str()], |row| row.get(0))?)
}

const RECORD_COLUMNS: &str =
    "id, queue, status, payload, attempts, created_at, run_at, last_error, last_status";

fn record_from_row(row: &Row<'_>) -> rusqlite::Result<JobRecord> {
    Ok(JobRecord {
        id: id_from_row(row, 0)?,
        queue: QueueName::from_stored(row.get(1)?),
        state: JobState::from_code(row.get(2)?)?,
        payload: row.get(3)?,
        attempts: row.get(4)?,
        created_at: row.get(5)?,
        run_at: row.get(6)?,
        last_error: row.get(7)?,
        last_status: row.get(8)?,
    })
}

/// One page of a queue's jobs, in id (creation) order, after `after` (exclusive).
/// `dead` selects dead-lettered jobs; otherwise ready and in-flight ones.
pub fn list(
    conn: &Connection,
    queue: &QueueName,
    dead: bool,
    after: Option<JobId>,
    limit: usize,
) -> StoreResult<Vec<JobRecord>> {
    let after: &[u8] = after.as_ref().map_or(&[], |id| &id.as_bytes()[..]);
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RECORD_COLUMNS} FROM jobs
         WHERE queue = ?1 AND (status = 2) = ?2 AND id > ?3
         ORDER BY id LIMIT ?4"
    ))?;
    let rows = stmt.query_map(
        params![queue.as_str(), dead, after, limit as i64],
        record_from_row,
    )?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn get(conn: &Connection, queue: &QueueName, id: JobId) -> StoreResult<JobRecord> {
    conn.prepare_cached(&format!(
        "SELECT {RECORD_COLUMNS} FROM jobs WHERE id = ?1 AND queue = ?2"
    ))?
    .query_row(params![&id.as_bytes()[..], queue.as_str()], record_from_row)
    .optional()?
    .ok_or(StoreError::JobNotFound)
}

fn state_of(conn: &Connection, queue: &QueueName, id: JobId) -> StoreResult<JobState> {
    let code: i64 = conn
        .prepare_cached("SELECT status FROM jobs WHERE id = ?1 AND queue = ?2")?
        .query_row(params![&id.as_bytes()[..], queue.as_str()], |row| {
            row.get(0)
        })
        .optional()?
        .ok_or(StoreError::JobNotFound)?;
    Ok(JobState::from_code(code)?)
}

/// Remove a ready job that is not being delivered.
pub fn cancel(conn: &Connection, queue: &QueueName, id: JobId) -> StoreResult<()> {
    match state_of(conn, queue, id)? {
        JobState::Ready => {
            conn.prepare_cached("DELETE FROM jobs WHERE id = ?1")?
                .execute([&id.as_bytes()[..]])?;
            Ok(())
        }
        JobState::InFlight => Err(StoreError::JobConflict(
            "job is being delivered right now and cannot be cancelled",
        )),
        JobState::Dead => Err(StoreError::JobConflict(
            "job is dead-lettered (ERROR), not READY: retry it or delete its queue",
        )),
    }
}

/// Put a dead-lettered job back to ready, due now, with fresh attempts.
pub fn retry_dead(
    conn: &Connection,
    queue: &QueueName,
    id: JobId,
    now: UnixMillis,
) -> StoreResult<()> {
    match state_of(conn, queue, id)? {
        JobState::Dead => {
            conn.prepare_cached(
                "UPDATE jobs SET status = 0, attempts = 0, run_at = ?2, leased_until = NULL
                 WHERE id = ?1",
            )?
            .execute(params![&id.as_bytes()[..], now])?;
            Ok(())
        }
        JobState::Ready | JobState::InFlight => Err(StoreError::JobConflict(
            "job is not in ERROR: only dead-lettered jobs can be retried",
        )),
    }
}

/// At start-up nothing can be in flight: every lease belongs to a process that is gone.
/// Those jobs go back to ready, due now, and the interrupted attempt is not counted.
pub fn release_all_leases(conn: &Connection, now: UnixMillis) -> StoreResult<usize> {
    Ok(conn.execute(
        "UPDATE jobs SET status = 0, attempts = max(attempts - 1, 0), leased_until = NULL,
                run_at = ?1
         WHERE status = 1",
        [now],
    )?)
}

/// Leases that outlived the lease timeout (a delivery that hung past every timeout): the
/// attempt counts; the job retries now, or is dead-lettered if it was the last attempt.
pub fn recover_stale_leases(
    conn: &Connection,
    now: UnixMillis,
    max_attempts: u32,
) -> StoreResult<usize> {
    const ERROR: &str = "delivery interrupted: the lease expired before an outcome was recorded";
    let dead = conn
        .prepare_cached(
            "UPDATE jobs SET status = 2, run_at = ?1, leased_until = NULL,
                    last_error = ?3, last_status = NULL
             WHERE status = 1 AND leased_until < ?1 AND attempts >= ?2",
        )?
        .execute(params![now, max_attempts, ERROR])?;
    let retried = conn
        .prepare_cached(
            "UPDATE jobs SET status = 0, run_at = ?1, leased_until = NULL,
                    last_error = ?2, last_status = NULL
             WHERE status = 1 AND leased_until < ?1",
        )?
        .execute(params![now, ERROR])?;
    Ok(dead + retried)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Synchronous;
    use crate::store::connection::{migrate, open_writer};

    fn plan(conn: &Connection, sql: &str) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let rows = stmt
            .query_map([], |row| row.get::<_, String>(3))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        rows.join("\n")
    }

    /// The plans are recorded in docs/architecture.md; this keeps them from silently
    /// degrading into table scans.
    #[test]
    fn hot_queries_use_their_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open_writer(&dir.path().join("p.db"), Synchronous::Normal).unwrap();
        migrate(&mut conn).unwrap();
        let claim = plan(
            &conn,
            "SELECT rowid FROM jobs WHERE queue = 'q' AND status = 0 AND run_at <= 5 ORDER BY run_at LIMIT 10",
        );
        assert!(claim.contains("USING COVERING INDEX jobs_ready"), "{claim}");
        assert!(!claim.contains("TEMP B-TREE"), "{claim}");
        let next_due = plan(&conn, "SELECT min(run_at) FROM jobs WHERE queue = 'q' AND status = 0");
        assert!(next_due.contains("jobs_ready"), "{next_due}");
        let list = plan(
            &conn,
            "SELECT * FROM jobs WHERE queue = 'q' AND (status = 2) = 0 AND id > x'' ORDER BY id LIMIT 10",
        );
        assert!(list.contains("USING INDEX jobs_listing"), "{list}");
        assert!(!list.contains("TEMP B-TREE"), "{list}");
        let stale = plan(&conn, "SELECT id FROM jobs WHERE status = 1 AND leased_until < 5");
        assert!(stale.contains("jobs_leased"), "{stale}");
        let by_id = plan(&conn, "SELECT * FROM jobs WHERE id = x'00' AND queue = 'q'");
        assert!(by_id.contains("sqlite_autoindex_jobs_1"), "{by_id}");
        for (name, p) in [("claim", &claim), ("next_due", &next_due), ("list", &list), ("stale", &stale), ("by_id", &by_id)] {
            println!("{name}:\n{p}\n");
        }
    }
}
