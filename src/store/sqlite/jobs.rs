//! SQL for the `jobs` table (live jobs: insert, claim, listing, lease release) and its
//! `job_attempts` history. Moves to and from the dead letters are in `moves`.
//! Every function runs on a connection it is handed: writes on the writer thread, reads on
//! the reader pool.

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::json::CanonicalJson;
use crate::model::{JobId, QueueName, UnixMillis};
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{
    AttemptRecord, ClaimedJob, Failure, JobRecord, JobState, NewJob, QueueCounts,
};

const READY: i64 = 0;
const IN_FLIGHT: i64 = 1;
const DEAD: i64 = 2;

fn state_from_code(code: i64) -> rusqlite::Result<JobState> {
    match code {
        READY => Ok(JobState::Ready),
        IN_FLIGHT => Ok(JobState::InFlight),
        DEAD => Ok(JobState::Dead),
        other => Err(rusqlite::Error::IntegralValueOutOfRange(2, other)),
    }
}

pub(super) fn id_from_row(row: &Row<'_>, index: usize) -> rusqlite::Result<JobId> {
    let bytes: Vec<u8> = row.get(index)?;
    JobId::from_slice(&bytes).ok_or(rusqlite::Error::InvalidColumnType(
        index,
        "id".into(),
        rusqlite::types::Type::Blob,
    ))
}

pub fn insert(conn: &Connection, queue: &QueueName, job: &NewJob) -> StoreResult<()> {
    // Inserting through a SELECT on `queues` makes "queue exists" and "job stored" one step,
    // so a job can never land in a queue deleted a moment before. A delayed job's time to
    // live starts when it is due (`ttl_from`).
    let inserted = conn
        .prepare_cached(
            "INSERT INTO jobs(id, queue, status, payload, attempts, run_at, created_at,
                              not_before, ttl_from)
             SELECT ?1, name, 0, ?3, 0, ?4, ?5, ?6, ?6 FROM queues WHERE name = ?2",
        )?
        .execute(params![
            &job.id.as_bytes()[..],
            queue.as_str(),
            job.payload.as_str(),
            job.due_at(),
            job.created_at,
            job.not_before
        ])?;
    if inserted == 0 {
        return Err(StoreError::QueueNotFound);
    }
    Ok(())
}

/// Insert a job already leased for its first attempt (a direct hand-off: see
/// `dispatch::pool`), as if [`insert`] and [`claim`] had run back to back.
/// Only for a job due at once.
pub fn insert_leased(
    conn: &Connection,
    queue: &QueueName,
    job: &NewJob,
    leased_until: UnixMillis,
) -> StoreResult<()> {
    let inserted = conn
        .prepare_cached(
            "INSERT INTO jobs(id, queue, status, payload, attempts, run_at, created_at, leased_until)
             SELECT ?1, name, 1, ?3, 1, ?4, ?4, ?5 FROM queues WHERE name = ?2",
        )?
        .execute(params![
            &job.id.as_bytes()[..],
            queue.as_str(),
            job.payload.as_str(),
            job.created_at,
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
                payload: CanonicalJson::from_stored(row.get(1)?),
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

/// Append a failed attempt to the job's history.
pub(super) fn record_attempt(
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

/// Due, scheduled and in-flight jobs of `queue` at `now`, and the earliest due time; each
/// count walks only its own index entries.
pub fn counts(conn: &Connection, queue: &QueueName, now: UnixMillis) -> StoreResult<QueueCounts> {
    let (ready, oldest_due_at): (i64, Option<i64>) = conn
        .prepare_cached(
            "SELECT count(*), min(run_at) FROM jobs WHERE queue = ?1 AND status = 0 AND run_at <= ?2",
        )?
        .query_row(params![queue.as_str(), now], |row| Ok((row.get(0)?, row.get(1)?)))?;
    let scheduled: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM jobs WHERE queue = ?1 AND status = 0 AND run_at > ?2",
        )?
        .query_row(params![queue.as_str(), now], |row| row.get(0))?;
    // Through the small index of in-flight jobs (all queues), not the queue's every job.
    let in_flight: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM jobs INDEXED BY jobs_leased WHERE status = 1 AND queue = ?1",
        )?
        .query_row([queue.as_str()], |row| row.get(0))?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(QueueCounts {
        ready: count(ready),
        scheduled: count(scheduled),
        in_flight: count(in_flight),
        dead: 0,
        oldest_due_at,
    })
}

/// The earliest `run_at` among the ready jobs of `queue`.
pub fn next_due(conn: &Connection, queue: &QueueName) -> StoreResult<Option<UnixMillis>> {
    Ok(conn
        .prepare_cached("SELECT min(run_at) FROM jobs WHERE queue = ?1 AND status = 0")?
        .query_row([queue.as_str()], |row| row.get(0))?)
}

const RECORD_COLUMNS: &str = "id, queue, status, payload, attempts, created_at, run_at, \
     last_error, last_status, not_before";

fn record_from_row(row: &Row<'_>) -> rusqlite::Result<JobRecord> {
    Ok(JobRecord {
        id: id_from_row(row, 0)?,
        queue: QueueName::from_stored(row.get(1)?),
        state: state_from_code(row.get(2)?)?,
        payload: CanonicalJson::from_stored(row.get(3)?),
        attempts: row.get(4)?,
        created_at: row.get(5)?,
        run_at: row.get(6)?,
        last_error: row.get(7)?,
        last_status: row.get(8)?,
        not_before: row.get(9)?,
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

pub(super) fn state_of(
    conn: &Connection,
    queue: &QueueName,
    id: JobId,
) -> StoreResult<Option<JobState>> {
    let code: Option<i64> = conn
        .prepare_cached("SELECT status FROM jobs WHERE id = ?1 AND queue = ?2")?
        .query_row(params![&id.as_bytes()[..], queue.as_str()], |row| {
            row.get(0)
        })
        .optional()?;
    Ok(code.map(state_from_code).transpose()?)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::Synchronous;
    use crate::store::sqlite::connection::{migrate, open_writer};

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
        let ready_count = plan(
            &conn,
            "SELECT count(*), min(run_at) FROM jobs WHERE queue = 'q' AND status = 0 AND run_at <= 5",
        );
        assert!(
            ready_count.contains("COVERING INDEX jobs_ready"),
            "{ready_count}"
        );
        let in_flight_count = plan(
            &conn,
            "SELECT count(*) FROM jobs INDEXED BY jobs_leased WHERE status = 1 AND queue = 'q'",
        );
        assert!(in_flight_count.contains("jobs_leased"), "{in_flight_count}");
        for (name, p) in [
            ("ready_count", &ready_count),
            ("in_flight_count", &in_flight_count),
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
