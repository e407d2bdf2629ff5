//! SQL for the `jobs` table: insert, claim, outcomes, listing, cancel/retry and lease recovery.
//! Every function runs on a connection it is handed: writes on the writer thread, reads on
//! the reader pool.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::dead_letters::{self, FailureReason};
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
    /// The number of this attempt (1 for the first).
    pub attempt: u32,
    pub created_at: UnixMillis,
    pub leased_until: UnixMillis,
}

impl ClaimedJob {
    pub fn lease(&self) -> Lease {
        Lease {
            attempt: self.attempt,
            until: self.leased_until,
        }
    }
}

/// The fencing token of one claim: an outcome is recorded only while the job is still in
/// flight under exactly this lease. The attempt number alone is not enough: a replay resets
/// attempts, so a lease lost before a replay could otherwise match a later claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lease {
    pub attempt: u32,
    pub until: UnixMillis,
}

/// Why an attempt failed, as recorded in the job's history.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The worker's response body (capped) or the transport error.
    pub error: String,
    pub status: Option<u16>,
    pub latency_ms: u64,
    pub at: UnixMillis,
}

/// What a delivery attempt ended in.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// 2xx: the job is done and removed.
    Delivered,
    /// Failed, attempts remain: back to ready at `run_at`.
    Retry {
        run_at: UnixMillis,
        failure: Failure,
    },
    /// Failed for the last time: moved to the dead letters.
    Dead { failure: Failure },
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

/// Insert a job already leased for its first attempt (a direct hand-off: see
/// `dispatch::deliveries`), as if [`insert`] and [`claim`] had run back to back.
pub fn insert_leased(
    conn: &Connection,
    queue: &QueueName,
    id: JobId,
    payload: &str,
    now: UnixMillis,
    leased_until: UnixMillis,
) -> StoreResult<()> {
    let inserted = conn
        .prepare_cached(
            "INSERT INTO jobs(id, queue, status, payload, attempts, run_at, created_at, leased_until)
             SELECT ?1, name, 1, ?3, 1, ?4, ?4, ?5 FROM queues WHERE name = ?2",
        )?
        .execute(params![
            &id.as_bytes()[..],
            queue.as_str(),
            payload,
            now,
            leased_until
        ])?;
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
         RETURNING id, payload, attempts, created_at, leased_until",
    )?;
    let rows = stmt.query_map(
        params![queue.as_str(), now, leased_until, limit as i64],
        |row| {
            Ok(ClaimedJob {
                id: id_from_row(row, 0)?,
                payload: row.get(1)?,
                attempt: row.get(2)?,
                created_at: row.get(3)?,
                leased_until: row.get(4)?,
            })
        },
    )?;
    let mut claimed = rows.collect::<Result<Vec<_>, _>>()?;
    // RETURNING gives no order guarantee; deliver oldest first.
    claimed.sort_by_key(|job| job.id);
    Ok(claimed)
}

/// Record the outcome of job `id` under `lease`. Returns false (and changes nothing) if the
/// lease was lost in the meantime: the job was recovered, cancelled, replayed or its queue
/// deleted.
pub fn record_outcome(
    conn: &Connection,
    id: JobId,
    lease: Lease,
    outcome: &Outcome,
) -> StoreResult<bool> {
    let key = &id.as_bytes()[..];
    let Lease { attempt, until } = lease;
    match outcome {
        Outcome::Delivered => {
            let had_failures: Option<bool> = conn
                .prepare_cached(
                    "DELETE FROM jobs
                     WHERE id = ?1 AND status = 1 AND attempts = ?2 AND leased_until = ?3
                     RETURNING last_error IS NOT NULL",
                )?
                .query_row(params![key, attempt, until], |row| row.get(0))
                .optional()?;
            // Only a job that failed before has history to drop: a first-time success
            // writes nothing beyond its claim and this delete.
            if had_failures == Some(true) {
                delete_history(conn, id)?;
            }
            Ok(had_failures.is_some())
        }
        Outcome::Retry { run_at, failure } => {
            let changed = conn
                .prepare_cached(
                    "UPDATE jobs SET status = 0, run_at = ?4, leased_until = NULL,
                            last_error = ?5, last_status = ?6
                     WHERE id = ?1 AND status = 1 AND attempts = ?2 AND leased_until = ?3",
                )?
                .execute(params![
                    key,
                    attempt,
                    until,
                    run_at,
                    failure.error,
                    failure.status
                ])?;
            if changed == 1 {
                record_attempt(conn, id, attempt, failure)?;
            }
            Ok(changed == 1)
        }
        Outcome::Dead { failure } => {
            let changed = conn
                .prepare_cached(
                    "UPDATE jobs SET last_error = ?4, last_status = ?5
                     WHERE id = ?1 AND status = 1 AND attempts = ?2 AND leased_until = ?3",
                )?
                .execute(params![key, attempt, until, failure.error, failure.status])?;
            if changed == 1 {
                record_attempt(conn, id, attempt, failure)?;
                dead_letters::bury(conn, id, FailureReason::MaxAttemptsReached, failure.at)?;
            }
            Ok(changed == 1)
        }
    }
}

/// Append a failed attempt to the job's history.
fn record_attempt(
    conn: &Connection,
    id: JobId,
    attempt: u32,
    failure: &Failure,
) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO job_attempts(job_id, queue, attempt, at, status, latency_ms, error)
         SELECT id, queue, ?2, ?3, ?4, ?5, ?6 FROM jobs WHERE id = ?1",
    )?
    .execute(params![
        &id.as_bytes()[..],
        attempt,
        failure.at,
        failure.status,
        failure.latency_ms as i64,
        failure.error
    ])?;
    Ok(())
}

pub fn delete_history(conn: &Connection, id: JobId) -> StoreResult<()> {
    conn.prepare_cached("DELETE FROM job_attempts WHERE job_id = ?1")?
        .execute([&id.as_bytes()[..]])?;
    Ok(())
}

/// One failed attempt, as the job's history shows it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptRecord {
    pub attempt: u32,
    pub at: UnixMillis,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    pub latency_ms: u64,
    pub error: String,
}

/// The failed attempts of a job, oldest first.
pub fn history(conn: &Connection, id: JobId) -> StoreResult<Vec<AttemptRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT attempt, at, status, latency_ms, error FROM job_attempts
         WHERE job_id = ?1 ORDER BY rowid",
    )?;
    let rows = stmt.query_map([&id.as_bytes()[..]], |row| {
        Ok(AttemptRecord {
            attempt: row.get(0)?,
            at: row.get(1)?,
            status: row.get(2)?,
            latency_ms: row.get::<_, i64>(3)?.max(0) as u64,
            error: row.get(4)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
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

/// One page of a queue's live (READY) jobs, in id (creation) order, after `after`.
pub fn list(
    conn: &Connection,
    queue: &QueueName,
    after: Option<JobId>,
    limit: usize,
) -> StoreResult<Vec<JobRecord>> {
    let after: &[u8] = after.as_ref().map_or(&[], |id| &id.as_bytes()[..]);
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RECORD_COLUMNS} FROM jobs
         WHERE queue = ?1 AND id > ?2
         ORDER BY id LIMIT ?3"
    ))?;
    let rows = stmt.query_map(
        params![queue.as_str(), after, limit as i64],
        record_from_row,
    )?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A live job of `queue`, if there is one with that id.
pub fn get(conn: &Connection, queue: &QueueName, id: JobId) -> StoreResult<Option<JobRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {RECORD_COLUMNS} FROM jobs WHERE id = ?1 AND queue = ?2"
        ))?
        .query_row(params![&id.as_bytes()[..], queue.as_str()], record_from_row)
        .optional()?)
}

fn state_of(conn: &Connection, queue: &QueueName, id: JobId) -> StoreResult<Option<JobState>> {
    let code: Option<i64> = conn
        .prepare_cached("SELECT status FROM jobs WHERE id = ?1 AND queue = ?2")?
        .query_row(params![&id.as_bytes()[..], queue.as_str()], |row| {
            row.get(0)
        })
        .optional()?;
    Ok(code.map(JobState::from_code).transpose()?)
}

/// Remove a ready job that is not being delivered.
pub fn cancel(conn: &Connection, queue: &QueueName, id: JobId) -> StoreResult<()> {
    match state_of(conn, queue, id)? {
        Some(JobState::Ready) => {
            conn.prepare_cached("DELETE FROM jobs WHERE id = ?1")?
                .execute([&id.as_bytes()[..]])?;
            delete_history(conn, id)?;
            Ok(())
        }
        Some(JobState::InFlight) => Err(StoreError::JobConflict(
            "job is being delivered right now and cannot be cancelled",
        )),
        Some(JobState::Dead) | None if dead_letters::is_open(conn, queue, id)? => {
            Err(StoreError::JobConflict(
                "job is dead-lettered (ERROR), not READY: replay or acknowledge it instead",
            ))
        }
        _ => Err(StoreError::JobNotFound),
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
    let stale: Vec<(JobId, Lease)> = conn
        .prepare_cached(
            "SELECT id, attempts, leased_until FROM jobs WHERE status = 1 AND leased_until < ?1",
        )?
        .query_map([now], |row| {
            Ok((
                id_from_row(row, 0)?,
                Lease {
                    attempt: row.get(1)?,
                    until: row.get(2)?,
                },
            ))
        })?
        .collect::<Result<_, _>>()?;
    for (id, lease) in &stale {
        let failure = Failure {
            error: ERROR.to_owned(),
            status: None,
            latency_ms: 0,
            at: now,
        };
        let outcome = if lease.attempt >= max_attempts {
            Outcome::Dead { failure }
        } else {
            Outcome::Retry {
                run_at: now,
                failure,
            }
        };
        record_outcome(conn, *id, *lease, &outcome)?;
    }
    Ok(stale.len())
}

/// Dead-letter (reason `expired`) up to `limit` ready jobs created before `cutoff`: a job
/// not delivered within its time to live is never silently dropped. Returns the queue of
/// each expired job.
pub fn expire(
    conn: &Connection,
    cutoff: UnixMillis,
    now: UnixMillis,
    limit: usize,
) -> StoreResult<Vec<QueueName>> {
    // Ids are UUIDv7: every id below the first possible id of `cutoff` was created before it,
    // so the unique index on id finds them without a scan.
    // A replayed job's time to live starts at its replay (`ttl_from`), found through its own
    // small partial index.
    let bound = JobId::first_of_millis(cutoff);
    let row = |row: &Row<'_>| Ok((id_from_row(row, 0)?, QueueName::from_stored(row.get(1)?)));
    let mut expired: Vec<(JobId, QueueName)> = conn
        .prepare_cached(
            "SELECT id, queue FROM jobs
             WHERE id < ?1 AND status = 0 AND ttl_from IS NULL LIMIT ?2",
        )?
        .query_map(params![&bound.as_bytes()[..], limit as i64], row)?
        .collect::<Result<_, _>>()?;
    let room = limit.saturating_sub(expired.len());
    if room > 0 {
        let replayed = conn
            .prepare_cached(
                "SELECT id, queue FROM jobs WHERE ttl_from < ?1 AND status = 0 LIMIT ?2",
            )?
            .query_map(params![cutoff, room as i64], row)?
            .collect::<Result<Vec<_>, _>>()?;
        expired.extend(replayed);
    }
    for (id, _) in &expired {
        conn.prepare_cached(
            "UPDATE jobs SET last_error = coalesce(last_error, 'expired: not delivered within the job TTL')
             WHERE id = ?1",
        )?
        .execute([&id.as_bytes()[..]])?;
        dead_letters::bury(conn, *id, FailureReason::Expired, now)?;
    }
    Ok(expired.into_iter().map(|(_, queue)| queue).collect())
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
        let next_due = plan(
            &conn,
            "SELECT min(run_at) FROM jobs WHERE queue = 'q' AND status = 0",
        );
        assert!(next_due.contains("jobs_ready"), "{next_due}");
        let list = plan(
            &conn,
            "SELECT * FROM jobs WHERE queue = 'q' AND id > x'' ORDER BY id LIMIT 10",
        );
        assert!(list.contains("USING INDEX jobs_by_queue"), "{list}");
        assert!(!list.contains("TEMP B-TREE"), "{list}");
        let stale = plan(
            &conn,
            "SELECT id FROM jobs WHERE status = 1 AND leased_until < 5",
        );
        assert!(stale.contains("jobs_leased"), "{stale}");
        let by_id = plan(&conn, "SELECT * FROM jobs WHERE id = x'00' AND queue = 'q'");
        assert!(by_id.contains("sqlite_autoindex_jobs_1"), "{by_id}");
        let expire = plan(
            &conn,
            "SELECT id FROM jobs WHERE id < x'01' AND status = 0 AND ttl_from IS NULL LIMIT 10",
        );
        assert!(
            expire.contains("sqlite_autoindex_jobs_1 (id<?)"),
            "{expire}"
        );
        let expire_replayed = plan(
            &conn,
            "SELECT id FROM jobs WHERE ttl_from < 5 AND status = 0 LIMIT 10",
        );
        assert!(
            expire_replayed.contains("jobs_ttl_replayed"),
            "{expire_replayed}"
        );
        let dlq_pending = plan(
            &conn,
            "SELECT * FROM dead_letters WHERE queue = 'q' AND state = 'pending' AND (failed_at, id) > (1, x'00') ORDER BY failed_at, id LIMIT 10",
        );
        assert!(
            dlq_pending.contains("dead_letters_by_queue"),
            "{dlq_pending}"
        );
        assert!(!dlq_pending.contains("TEMP B-TREE"), "{dlq_pending}");
        let dlq_all = plan(
            &conn,
            "SELECT * FROM dead_letters WHERE state = 'pending' ORDER BY failed_at DESC, id DESC LIMIT 10",
        );
        assert!(dlq_all.contains("dead_letters_by_state"), "{dlq_all}");
        assert!(!dlq_all.contains("TEMP B-TREE"), "{dlq_all}");
        let retention = plan(
            &conn,
            "SELECT rowid FROM dead_letters WHERE state IN ('replayed', 'acknowledged') AND updated_at < 5 LIMIT 10",
        );
        assert!(
            retention.contains("dead_letters_by_age (state=? AND updated_at<?)"),
            "{retention}"
        );
        for (name, p) in [
            ("claim", &claim),
            ("next_due", &next_due),
            ("list", &list),
            ("stale", &stale),
            ("by_id", &by_id),
            ("expire", &expire),
            ("dlq_pending", &dlq_pending),
            ("dlq_all", &dlq_all),
            ("retention", &retention),
        ] {
            println!("{name}:\n{p}\n");
        }
    }
}
