//! SQL for the `jobs` table (live jobs: insert, claim, listing, lease release) and its
//! `job_attempts` history. What a move between tables means is decided in `store::decisions`.
//! Every function runs on a connection it is handed: writes on the writer thread, reads on
//! the reader pool.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::tx::SqliteTx;
use crate::json::CanonicalJson;
use crate::model::{JobId, QueueName, UnixMillis};
use crate::sql_once;
use crate::store::dialect::{HistoryRows, JobRows, Left, StaleLease};
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{
    AttemptRecord, ClaimedJob, Failure, HeldLease, JobAction, JobRecord, JobsPage, Lease,
    LeaseHolder, LiveFilter, MESSAGE_PAYLOAD, MESSAGE_TOPIC, MessageRef, NewJob, Position,
    QueueCounts, ScheduleTick, payload_or_error_like,
};
use crate::store::status::JobStatus;
use crate::store::status::codes::{BLOCKED, IN_FLIGHT, READY, SCHEDULED};
use crate::trace_context::TraceContext;

fn status_from_code(code: i64) -> rusqlite::Result<JobStatus> {
    JobStatus::from_code(code).ok_or(rusqlite::Error::IntegralValueOutOfRange(2, code))
}

/// The status a job entering `jobs` starts in, as SQL over the placeholders (or columns)
/// named: blocked behind the live jobs of its ordering key `key` in `queue`, else scheduled
/// until `due`, else ready. `key` `None`: a job known to have no key, whose insert then
/// never looks at the key index (an uncorrelated `EXISTS` is evaluated whatever guards it,
/// at a cost of about half an insert).
pub(super) fn entry_status(queue: &str, key: Option<&str>, due: &str, now: &str) -> String {
    let behind_key = match key {
        Some(key) => format!(
            "WHEN {key} IS NOT NULL AND EXISTS (
                 SELECT 1 FROM jobs WHERE queue = {queue} AND ordering_key = {key})
             THEN {BLOCKED}"
        ),
        None => String::new(),
    };
    format!("CASE {behind_key} WHEN {due} > {now} THEN {SCHEDULED} ELSE {READY} END")
}

/// A nullable id column (`message_id`, `resent_as`).
pub(super) fn optional_id_from_row(row: &Row<'_>, index: usize) -> rusqlite::Result<Option<JobId>> {
    match row.get_ref(index)? {
        rusqlite::types::ValueRef::Null => Ok(None),
        _ => id_from_row(row, index).map(Some),
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
    // so a job can never land in a queue deleted a moment before; the same step refuses a
    // queue at its cap. A delayed job's time to live starts when it is due (`ttl_from`).
    macro_rules! insert_sql {
        ($key:expr) => {
            sql_once!(
                "INSERT INTO jobs(id, queue, status, payload, attempts, run_at, created_at,
                                  not_before, ttl_from, priority, ordering_key,
                                  traceparent, tracestate, message_id)
                 SELECT ?1, name, {status}, ?3, 0, ?4, ?5, ?6, ?6, ?7, ?8, ?9, ?10, ?11
                 FROM queues WHERE name = ?2 AND {ROOM}",
                status = entry_status("?2", $key, "?4", "?5"),
            )
        };
    }
    let sql = match job.ordering_key {
        Some(_) => insert_sql!(Some("?8")),
        None => insert_sql!(None),
    };
    let (traceparent, tracestate) = TraceContext::columns(job.trace.as_ref());
    let message_id = job
        .message
        .as_ref()
        .map(|message| &message.id.as_bytes()[..]);
    let inserted = conn.prepare_cached(sql)?.execute(params![
        &job.id.as_bytes()[..],
        queue.as_str(),
        job.stored_payload(),
        job.due_at(),
        job.created_at,
        job.not_before,
        job.priority,
        job.ordering_key,
        traceparent,
        tracestate,
        message_id,
    ])?;
    if inserted == 0 {
        return Err(missing_or_full(conn, queue)?);
    }
    Ok(())
}

/// The insert condition of a queue's cap (`queue_sizes` has a row only for a queue that
/// has one), with the queue's name as `?2`.
const ROOM: &str = "NOT EXISTS (SELECT 1 FROM queue_sizes WHERE queue = ?2 AND live >= cap)";

/// Why a job could not be inserted into `queue`: it does not exist, or it is full.
fn missing_or_full(conn: &Connection, queue: &QueueName) -> StoreResult<StoreError> {
    let exists = conn
        .prepare_cached("SELECT 1 FROM queues WHERE name = ?1")?
        .query_row([queue.as_str()], |_| Ok(()))
        .optional()?
        .is_some();
    Ok(if exists {
        StoreError::QueueFull
    } else {
        StoreError::QueueNotFound
    })
}

/// Insert a job already leased for its first attempt (a direct hand-off: see
/// `dispatch::pool`), as if [`insert`] and [`claim`] had run back to back.
/// Only for a job due at once, without an ordering key.
pub fn insert_leased(
    conn: &Connection,
    queue: &QueueName,
    job: &NewJob,
    leased_until: UnixMillis,
) -> StoreResult<()> {
    debug_assert!(job.ordering_key.is_none(), "a keyed job waits for its turn");
    debug_assert!(job.message.is_none(), "a publish hands nothing off");
    let (traceparent, tracestate) = TraceContext::columns(job.trace.as_ref());
    let inserted = conn
        .prepare_cached(sql_once!(
            "INSERT INTO jobs(id, queue, status, payload, attempts, run_at, created_at,
                              leased_until, priority, traceparent, tracestate)
             SELECT ?1, name, 1, ?3, 1, ?4, ?4, ?5, ?6, ?7, ?8
             FROM queues WHERE name = ?2 AND {ROOM}"
        ))?
        .execute(params![
            &job.id.as_bytes()[..],
            queue.as_str(),
            job.payload.as_str(),
            job.created_at,
            leased_until,
            job.priority,
            traceparent,
            tracestate,
        ])?;
    if inserted == 0 {
        return Err(missing_or_full(conn, queue)?);
    }
    Ok(())
}

/// How many scheduled jobs one claim promotes at most: a million delayed jobs falling due
/// at once are promoted over several claims, not in one long write.
const PROMOTE_BATCH: i64 = 1000;

/// Scheduled jobs of `queue` due at `now` become ready (at most [`PROMOTE_BATCH`], earliest
/// due first).
fn promote_due(conn: &Connection, queue: &QueueName, now: UnixMillis) -> StoreResult<usize> {
    // A read first: an UPDATE opens a write cursor on every index of `jobs`, which costs
    // more than the claim's share of most deliveries when there is nothing to promote.
    let any_due: bool = conn
        .prepare_cached(sql_once!(
            "SELECT EXISTS (SELECT 1 FROM jobs
                            WHERE queue = ?1 AND status = {SCHEDULED} AND run_at <= ?2)"
        ))?
        .query_row(params![queue.as_str(), now], |row| row.get(0))?;
    if !any_due {
        return Ok(0);
    }
    Ok(conn
        .prepare_cached(sql_once!(
            "UPDATE jobs SET status = {READY}
             WHERE rowid IN (
                 SELECT rowid FROM jobs
                 WHERE queue = ?1 AND status = {SCHEDULED} AND run_at <= ?2
                 ORDER BY run_at LIMIT ?3)"
        ))?
        .execute(params![queue.as_str(), now, PROMOTE_BATCH])?)
}

fn limit_param(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// Lease up to `limit` due jobs of `queue`: higher priority first, then the longest due.
/// Scheduled jobs that fell due are promoted first, in the same write.
pub fn claim(
    conn: &Connection,
    queue: &QueueName,
    now: UnixMillis,
    leased_until: UnixMillis,
    limit: usize,
    holder: Option<&LeaseHolder>,
) -> StoreResult<Vec<ClaimedJob>> {
    promote_due(conn, queue, now)?;
    // Only the columns a delivery needs: each one more costs every claimed job (RETURNING
    // buffers its rows; about 800 instructions a column, a NULL one too). So of a
    // schedule's job only the tick comes back here, and the schedule's name is read below
    // for the few jobs that have one.
    let mut stmt = conn.prepare_cached(sql_once!(
        "UPDATE jobs SET status = {IN_FLIGHT}, attempts = attempts + 1, leased_until = ?2,
                         lease_id = NULL, leased_at = ?4, lease_holder = ?5,
                         lease_holder_name = ?6
         WHERE rowid IN (
             SELECT rowid FROM jobs
             WHERE queue = ?1 AND status = {READY}
             ORDER BY priority DESC, run_at LIMIT ?3)
         RETURNING id, payload, attempts, created_at, leased_until, ordering_key, schedule_tick,
                   traceparent, tracestate, priority"
    ))?;
    let mut ticks = Vec::new();
    let mut messages = Vec::new();
    let (holder_id, holder_name) = holder.map(|h| (h.id.as_str(), h.name.as_str())).unzip();
    let params = params![
        queue.as_str(),
        leased_until,
        limit as i64,
        now,
        holder_id,
        holder_name
    ];
    let rows = stmt.query_map(params, |row| {
        let id = id_from_row(row, 0)?;
        if let Some(tick) = row.get::<_, Option<UnixMillis>>(6)? {
            ticks.push((id, tick));
        }
        // A message's job stores an empty payload (a job's own is a JSON object): its
        // message is read below, so a plain job's claim returns no column more than before.
        // Its length only: `as_str` would check the whole payload's UTF-8 once more.
        if row.get_ref(1)?.as_bytes()?.is_empty() {
            messages.push(id);
        }
        Ok(ClaimedJob {
            id,
            payload: CanonicalJson::from_stored(row.get(1)?),
            attempt: row.get(2)?,
            created_at: row.get(3)?,
            leased_until: row.get(4)?,
            priority: row.get(9)?,
            ordering_key: row.get(5)?,
            schedule: None,
            trace: TraceContext::from_columns(row.get(7)?, row.get(8)?),
            message: None,
        })
    })?;
    let mut claimed = rows.collect::<Result<Vec<_>, _>>()?;
    drop(stmt);
    // A message's job stores no payload of its own: it is the message's.
    for id in messages {
        let (message, topic, payload) = conn
            .prepare_cached(
                "SELECT m.id, m.topic, m.payload FROM jobs j
                 JOIN topic_messages m ON m.id = j.message_id WHERE j.id = ?1",
            )?
            .query_row([&id.as_bytes()[..]], |row| {
                Ok((id_from_row(row, 0)?, row.get(1)?, row.get(2)?))
            })?;
        if let Some(job) = claimed.iter_mut().find(|job| job.id == id) {
            job.payload = CanonicalJson::from_stored(payload);
            job.message = MessageRef::from_columns(Some(message), Some(topic));
        }
    }
    for (id, tick) in ticks {
        let schedule: Option<String> = conn
            .prepare_cached("SELECT schedule FROM jobs WHERE id = ?1")?
            .query_row([&id.as_bytes()[..]], |row| row.get(0))?;
        if let Some(job) = claimed.iter_mut().find(|job| job.id == id) {
            job.schedule = ScheduleTick::from_columns(schedule, Some(tick));
        }
    }
    // RETURNING gives no order guarantee. The jobs of one claim start together, so their
    // order among themselves hardly matters; oldest first.
    claimed.sort_by_key(|job| job.id);
    Ok(claimed)
}

/// Jobs of `queue` in flight, through the in-flight index (the jobs in flight of every
/// queue, a set the claims keep small).
pub fn in_flight_of(conn: &Connection, queue: &QueueName) -> StoreResult<usize> {
    let count: i64 = conn
        .prepare_cached(sql_once!(
            "SELECT count(*) FROM jobs INDEXED BY jobs_leased
             WHERE status = {IN_FLIGHT} AND leased_until IS NOT NULL AND queue = ?1"
        ))?
        .query_row([queue.as_str()], |row| row.get(0))?;
    Ok(usize::try_from(count).unwrap_or(0))
}

/// One row of a count by queue: how many jobs, how many of them due, the earliest time.
struct Tally {
    jobs: u64,
    due: u64,
    earliest: Option<UnixMillis>,
}

/// Delete job `id` if it is in flight under `lease`, has no ordering key and never failed
/// before (and belongs to `queue`, when one is named: a pull worker's ack): a delivered
/// job whose completion is this one statement (see `SqliteStore::delete_delivered`).
/// Whether it was deleted.
pub fn delete_delivered(
    conn: &Connection,
    queue: Option<&QueueName>,
    id: JobId,
    lease: Lease,
) -> StoreResult<bool> {
    let deleted = conn
        .prepare_cached(sql_once!(
            "DELETE FROM jobs
             WHERE id = ?1 AND status = {IN_FLIGHT} AND attempts = ?2
               AND coalesce(lease_id, leased_until) = ?3
               AND ordering_key IS NULL AND last_error IS NULL
               AND (?4 IS NULL OR queue = ?4)"
        ))?
        .execute(params![
            &id.as_bytes()[..],
            lease.attempt,
            lease.until,
            queue.map(QueueName::as_str)
        ])?;
    Ok(deleted == 1)
}

/// The earlier of two times, either of which may be missing.
fn min_of(a: Option<UnixMillis>, b: Option<UnixMillis>) -> Option<UnixMillis> {
    a.into_iter().chain(b).min()
}

/// When `queue` next has a job to claim: a ready job's due time (in the past), else the
/// earliest scheduled job's.
pub fn next_due(conn: &Connection, queue: &QueueName) -> StoreResult<Option<UnixMillis>> {
    Ok(conn
        .prepare_cached(sql_once!(
            "SELECT coalesce(
                 (SELECT run_at FROM jobs WHERE queue = ?1 AND status = {READY} LIMIT 1),
                 (SELECT min(run_at) FROM jobs WHERE queue = ?1 AND status = {SCHEDULED}))"
        ))?
        .query_row([queue.as_str()], |row| row.get(0))?)
}

/// The columns [`record_from_row`] reads.
fn record_columns() -> &'static str {
    sql_once!(
        "id, queue, status, {MESSAGE_PAYLOAD}, attempts, created_at, run_at, last_error,
         last_status, not_before, priority, ordering_key, schedule, schedule_tick,
         leased_until, traceparent, tracestate, message_id, {MESSAGE_TOPIC}"
    )
}

fn record_from_row(row: &Row<'_>) -> rusqlite::Result<JobRecord> {
    Ok(JobRecord {
        id: id_from_row(row, 0)?,
        queue: QueueName::from_stored(row.get(1)?),
        state: status_from_code(row.get(2)?)?.state(),
        payload: CanonicalJson::from_stored(row.get(3)?),
        attempts: row.get(4)?,
        created_at: row.get(5)?,
        run_at: row.get(6)?,
        last_error: row.get(7)?,
        last_status: row.get(8)?,
        not_before: row.get(9)?,
        priority: row.get(10)?,
        ordering_key: row.get(11)?,
        schedule: ScheduleTick::from_columns(row.get(12)?, row.get(13)?),
        lease_expires_at: row.get(14)?,
        trace: TraceContext::from_columns(row.get(15)?, row.get(16)?),
        message: MessageRef::from_columns(optional_id_from_row(row, 17)?, row.get(18)?),
        delivery: None,
        dead: None,
    })
}

/// A live job of `queue`, if there is one with that id.
pub fn get(conn: &Connection, queue: &QueueName, id: JobId) -> StoreResult<Option<JobRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {columns} FROM jobs WHERE id = ?1 AND queue = ?2",
            columns = record_columns()
        ))?
        .query_row(params![&id.as_bytes()[..], queue.as_str()], record_from_row)
        .optional()?)
}

/// The status of live job `id` of `queue`.
pub(super) fn status_of(
    conn: &Connection,
    queue: &QueueName,
    id: JobId,
) -> StoreResult<Option<JobStatus>> {
    let code: Option<i64> = conn
        .prepare_cached("SELECT status FROM jobs WHERE id = ?1 AND queue = ?2")?
        .query_row(params![&id.as_bytes()[..], queue.as_str()], |row| {
            row.get(0)
        })
        .optional()?;
    Ok(code.map(status_from_code).transpose()?)
}

/// At start-up no push delivery can be in flight: every such lease belongs to a process
/// that is gone. Those jobs go back to ready, due now, and the interrupted attempt is not
/// counted. A pull queue's leases are held by its workers, who outlive a restart: they stay,
/// so a worker's ack still lands, and run out as any lease does.
pub fn release_push_leases(conn: &Connection, now: UnixMillis) -> StoreResult<usize> {
    Ok(conn.execute(
        &format!(
            "UPDATE jobs SET status = {READY}, attempts = max(attempts - 1, 0),
                    leased_until = NULL, lease_id = NULL, run_at = ?1
             WHERE status = {IN_FLIGHT}
               AND queue IN (SELECT name FROM queues WHERE target <> '')"
        ),
        [now],
    )?)
}

/// A held lease as both listings read it: `id, queue, attempts, leased_at, leased_until,
/// lease_holder, lease_holder_name, extended` (a job's, or with `dead_letter` a letter's).
pub(super) fn held_lease(row: &Row<'_>, dead_letter: bool) -> rusqlite::Result<HeldLease> {
    Ok(HeldLease {
        id: id_from_row(row, 0)?,
        queue: QueueName::from_stored(row.get(1)?),
        attempt: row.get(2)?,
        leased_at: row.get(3)?,
        leased_until: row.get(4)?,
        holder: LeaseHolder {
            id: row.get(5)?,
            name: row.get::<_, Option<String>>(6)?.unwrap_or_default(),
        },
        extended: row.get(7)?,
        dead_letter,
    })
}

impl JobRows for SqliteTx<'_> {
    async fn held_leases(
        &self,
        queue: Option<&QueueName>,
        after: Position,
        limit: usize,
    ) -> StoreResult<Vec<HeldLease>> {
        let mut stmt = self.0.prepare_cached(sql_once!(
            "SELECT id, queue, attempts, leased_at, leased_until, lease_holder,
                    lease_holder_name, lease_id IS NOT NULL
             FROM jobs
             WHERE status = {IN_FLIGHT} AND lease_holder IS NOT NULL
               AND (?1 IS NULL OR queue = ?1) AND (leased_until, id) > (?2, ?3)
             ORDER BY leased_until, id LIMIT ?4"
        ))?;
        let rows = stmt.query_map(
            params![
                queue.map(QueueName::as_str),
                after.at,
                &after.id.as_bytes()[..],
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
            |row| held_lease(row, false),
        )?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    async fn insert_jobs(&self, queue: &QueueName, batch: &[NewJob]) -> StoreResult<()> {
        for job in batch {
            insert(self.0, queue, job)?;
        }
        Ok(())
    }

    /// One statement for every queue: the queues as a JSON array walked by `json_each`,
    /// the ids packed in one blob, 16 bytes each in the same order.
    async fn insert_message_jobs(
        &self,
        message: &NewJob,
        targets: &[(QueueName, JobId)],
    ) -> StoreResult<()> {
        if targets.is_empty() {
            return Ok(());
        }
        debug_assert!(
            message.ordering_key.is_none(),
            "a keyed job waits for its turn"
        );
        let names: Vec<&str> = targets.iter().map(|(queue, _)| queue.as_str()).collect();
        let names = serde_json::to_string(&names).map_err(anyhow::Error::from)?;
        let ids: Vec<u8> = targets
            .iter()
            .flat_map(|(_, id)| id.as_bytes().iter().copied())
            .collect();
        let (traceparent, tracestate) = TraceContext::columns(message.trace.as_ref());
        let inserted = self
            .0
            .prepare_cached(sql_once!(
                "INSERT INTO jobs(id, queue, status, payload, attempts, run_at, created_at,
                                  not_before, ttl_from, priority, traceparent, tracestate,
                                  message_id)
                 SELECT substr(?10, j.key * 16 + 1, 16), q.name,
                        CASE WHEN ?2 > ?3 THEN {SCHEDULED} ELSE {READY} END,
                        ?4, 0, ?2, ?3, ?5, ?5, ?6, ?7, ?8, ?9
                 FROM json_each(?1) j JOIN queues q ON q.name = j.value"
            ))?
            .execute(params![
                names,
                message.due_at(),
                message.created_at,
                message.stored_payload(),
                message.not_before,
                message.priority,
                traceparent,
                tracestate,
                message.message.as_ref().map(|m| &m.id.as_bytes()[..]),
                ids,
            ])?;
        if inserted < targets.len() {
            return Err(StoreError::QueueNotFound);
        }
        Ok(())
    }

    /// Mark job `id`, just inserted, as the job of a schedule's tick. A statement of its own
    /// rather than two more columns in [`insert`]: binding them costs every enqueue about 400
    /// instructions (1%), for the one job a tick stores.
    async fn mark_schedule_tick(&self, id: JobId, tick: &ScheduleTick) -> StoreResult<()> {
        self.0
            .prepare_cached("UPDATE jobs SET schedule = ?2, schedule_tick = ?3 WHERE id = ?1")?
            .execute(params![
                &id.as_bytes()[..],
                tick.schedule.as_str(),
                tick.tick
            ])?;
        Ok(())
    }

    async fn claim(
        &self,
        queue: &QueueName,
        now: UnixMillis,
        leased_until: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<ClaimedJob>> {
        // A push delivery: the dispatcher holds it, no worker to name.
        claim(self.0, queue, now, leased_until, limit, None)
    }

    async fn delete_leased(&self, id: JobId, lease: Lease) -> StoreResult<Option<Left>> {
        // The queue is read back only for a keyed job, the only kind with a next job to let go.
        let deleted: Option<(Option<String>, Option<String>, bool)> = self
            .0
            .prepare_cached(sql_once!(
                "DELETE FROM jobs
                 WHERE id = ?1 AND status = {IN_FLIGHT} AND attempts = ?2 AND coalesce(lease_id, leased_until) = ?3
                 RETURNING ordering_key, iif(ordering_key IS NULL, NULL, queue),
                           last_error IS NOT NULL"
            ))?
            .query_row(
                params![&id.as_bytes()[..], lease.attempt, lease.until],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()?;
        Ok(deleted.map(|(key, queue, had_failures)| Left {
            key: queue.zip(key),
            had_failures,
        }))
    }

    async fn delete_job(&self, id: JobId) -> StoreResult<Option<Left>> {
        let deleted: Option<(String, Option<String>, bool)> = self
            .0
            .prepare_cached(
                "DELETE FROM jobs WHERE id = ?1
                 RETURNING queue, ordering_key, last_error IS NOT NULL",
            )?
            .query_row([&id.as_bytes()[..]], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .optional()?;
        Ok(deleted.map(|(queue, key, had_failures)| Left {
            key: key.map(|key| (queue, key)),
            had_failures,
        }))
    }

    /// After a job of `key` left `jobs` (delivered, dead-lettered, cancelled, expired): if the
    /// key has no head any more, its earliest blocked job becomes the head: ready, or
    /// scheduled if it asked to start later. Returns whether one did.
    async fn promote_next_of_key(
        &self,
        queue: &str,
        key: &str,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        let promoted = self
            .0
            .prepare_cached(sql_once!(
                "UPDATE jobs SET status = CASE WHEN run_at > ?3 THEN {SCHEDULED} ELSE {READY} END
                 WHERE rowid = (
                     SELECT rowid FROM jobs
                     WHERE queue = ?1 AND ordering_key = ?2 AND status = {BLOCKED}
                     ORDER BY id LIMIT 1)
                 AND NOT EXISTS (
                     SELECT 1 FROM jobs
                     WHERE queue = ?1 AND ordering_key = ?2
                       AND status IN ({READY}, {IN_FLIGHT}, {SCHEDULED}))"
            ))?
            .execute(params![queue, key, now])?;
        Ok(promoted == 1)
    }

    /// It stays its key's head.
    async fn reschedule_leased(
        &self,
        id: JobId,
        lease: Lease,
        run_at: UnixMillis,
        failure: &Failure,
    ) -> StoreResult<bool> {
        let changed = self
            .0
            .prepare_cached(sql_once!(
                "UPDATE jobs SET status = CASE WHEN ?4 > ?5 THEN {SCHEDULED} ELSE {READY} END,
                        run_at = ?4, leased_until = NULL, last_error = ?6, last_status = ?7
                 WHERE id = ?1 AND status = {IN_FLIGHT} AND attempts = ?2 AND coalesce(lease_id, leased_until) = ?3"
            ))?
            .execute(params![
                &id.as_bytes()[..],
                lease.attempt,
                lease.until,
                run_at,
                failure.at,
                failure.error,
                failure.status
            ])?;
        Ok(changed == 1)
    }

    async fn note_last_failure(
        &self,
        id: JobId,
        lease: Lease,
        failure: &Failure,
    ) -> StoreResult<bool> {
        let changed = self
            .0
            .prepare_cached(sql_once!(
                "UPDATE jobs SET last_error = ?4, last_status = ?5
                 WHERE id = ?1 AND status = {IN_FLIGHT} AND attempts = ?2 AND coalesce(lease_id, leased_until) = ?3"
            ))?
            .execute(params![
                &id.as_bytes()[..],
                lease.attempt,
                lease.until,
                failure.error,
                failure.status
            ])?;
        Ok(changed == 1)
    }

    async fn extend_lease(&self, id: JobId, lease: Lease, until: UnixMillis) -> StoreResult<bool> {
        let changed = self
            .0
            .prepare_cached(sql_once!(
                "UPDATE jobs SET lease_id = coalesce(lease_id, leased_until), leased_until = ?4
                 WHERE id = ?1 AND status = {IN_FLIGHT} AND attempts = ?2
                   AND coalesce(lease_id, leased_until) = ?3"
            ))?
            .execute(params![
                &id.as_bytes()[..],
                lease.attempt,
                lease.until,
                until
            ])?;
        Ok(changed == 1)
    }

    async fn lease_of(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<Lease>> {
        Ok(self
            .0
            .prepare_cached(sql_once!(
                "SELECT attempts, coalesce(lease_id, leased_until) FROM jobs
                 WHERE id = ?1 AND queue = ?2 AND status = {IN_FLIGHT}"
            ))?
            .query_row(params![&id.as_bytes()[..], queue.as_str()], |row| {
                Ok(Lease {
                    attempt: row.get(0)?,
                    until: row.get(1)?,
                })
            })
            .optional()?)
    }

    async fn pull_lease_expiries(&self, limit: usize) -> StoreResult<Vec<UnixMillis>> {
        let mut statement = self.0.prepare_cached(sql_once!(
            "SELECT DISTINCT leased_until FROM jobs
             WHERE status = {IN_FLIGHT} AND leased_until IS NOT NULL
               AND queue IN (SELECT name FROM queues WHERE target = '')
             ORDER BY leased_until LIMIT ?1"
        ))?;
        let expiries = statement
            .query_map([limit as i64], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(expiries)
    }

    async fn release_lease(&self, id: JobId, lease: Lease) -> StoreResult<bool> {
        let changed = self
            .0
            .prepare_cached(sql_once!(
                "UPDATE jobs SET status = {READY}, attempts = attempts - 1, leased_until = NULL,
                                 lease_id = NULL
                 WHERE id = ?1 AND status = {IN_FLIGHT} AND attempts = ?2
                   AND coalesce(lease_id, leased_until) = ?3"
            ))?
            .execute(params![&id.as_bytes()[..], lease.attempt, lease.until])?;
        Ok(changed == 1)
    }

    async fn note_expired(&self, id: JobId) -> StoreResult<()> {
        self.0.prepare_cached(
            "UPDATE jobs SET last_error = coalesce(last_error, 'expired: not delivered within the job TTL')
             WHERE id = ?1",
        )?
        .execute([&id.as_bytes()[..]])?;
        Ok(())
    }

    async fn live_status(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<JobStatus>> {
        // One writer: nothing can claim the job between this read and the caller's write.
        status_of(self.0, queue, id)
    }

    /// Up to `limit` leases expired before `now`, oldest first, with the last attempt each
    /// job's queue allows (its `maxAttempts`, else `default_max_attempts`).
    async fn stale_leases(
        &self,
        now: UnixMillis,
        default_max_attempts: u32,
        limit: usize,
    ) -> StoreResult<Vec<StaleLease>> {
        let mut stmt = self.0.prepare_cached(sql_once!(
            "SELECT j.id, j.attempts, coalesce(j.lease_id, j.leased_until),
                    coalesce(q.max_attempts, ?2), j.queue
             FROM jobs j JOIN queues q ON q.name = j.queue
             WHERE j.status = {IN_FLIGHT} AND j.leased_until < ?1
             ORDER BY j.leased_until LIMIT ?3"
        ))?;
        let rows = stmt.query_map(
            params![now, default_max_attempts, limit_param(limit)],
            |row| {
                Ok(StaleLease {
                    id: id_from_row(row, 0)?,
                    queue: QueueName::from_stored(row.get(4)?),
                    lease: Lease {
                        attempt: row.get(1)?,
                        until: row.get(2)?,
                    },
                    max_attempts: row.get(3)?,
                })
            },
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    async fn expired_jobs(
        &self,
        cutoff: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<(JobId, QueueName)>> {
        // Ids are UUIDv7: every id below the first possible id of `cutoff` was created before it,
        // so the unique index on id finds them without a scan.
        // A replayed or delayed job's time to live starts later (`ttl_from`), found through its
        // own small partial index.
        let bound = JobId::first_of_millis(cutoff);
        let row = |row: &Row<'_>| Ok((id_from_row(row, 0)?, QueueName::from_stored(row.get(1)?)));
        let mut expired: Vec<(JobId, QueueName)> = self
            .0
            .prepare_cached(sql_once!(
                "SELECT id, queue FROM jobs
                 WHERE id < ?1 AND status <> {IN_FLIGHT} AND ttl_from IS NULL LIMIT ?2"
            ))?
            .query_map(params![&bound.as_bytes()[..], limit_param(limit)], row)?
            .collect::<Result<_, _>>()?;
        let room = limit.saturating_sub(expired.len());
        if room > 0 {
            let own_ttl = self.0
                .prepare_cached(sql_once!(
                    "SELECT id, queue FROM jobs WHERE ttl_from < ?1 AND status <> {IN_FLIGHT} LIMIT ?2"
                ))?
                .query_map(params![cutoff, limit_param(room)], row)?
                .collect::<Result<Vec<_>, _>>()?;
            expired.extend(own_ttl);
        }
        Ok(expired)
    }

    async fn live_job(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<JobRecord>> {
        get(self.0, queue, id)
    }

    /// The page is one range of `jobs_by_queue` ([`JobsPage::start`]).
    async fn list_live(
        &self,
        queue: &QueueName,
        page: &JobsPage<JobId>,
    ) -> StoreResult<Vec<JobRecord>> {
        let (direction, compare) = page.keyset();
        let after = page.start();
        let mut stmt = self.0.prepare_cached(&format!(
            "SELECT {columns} FROM jobs
             WHERE queue = ?1 AND id {compare} ?2 AND (?3 IS NULL OR {contains})
             ORDER BY id {direction} LIMIT ?4",
            columns = record_columns(),
            contains = payload_or_error_like("LIKE", "?3"),
        ))?;
        let rows = stmt.query_map(
            params![
                queue.as_str(),
                &after.as_bytes()[..],
                page.pattern(),
                page.limit as i64
            ],
            record_from_row,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// One range of `jobs_by_queue`, as a READY listing reads it.
    async fn live_ids_matching(
        &self,
        queue: &QueueName,
        after: Option<JobId>,
        before: JobId,
        filter: &LiveFilter,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        let after = after.unwrap_or_else(|| JobId::from_bytes([0; 16]));
        let mut stmt = self.0.prepare_cached(sql_once!(
            "SELECT id FROM jobs
             WHERE queue = ?1 AND id > ?2 AND id < ?3 AND (?4 IS NULL OR {contains})
               AND (?5 = 0 OR (status <> {IN_FLIGHT} AND run_at > ?6))
             ORDER BY id LIMIT ?7",
            contains = payload_or_error_like("LIKE", "?4"),
        ))?;
        let rows = stmt.query_map(
            params![
                queue.as_str(),
                &after.as_bytes()[..],
                &before.as_bytes()[..],
                filter.pattern(),
                filter.delayed_only,
                now,
                limit_param(limit)
            ],
            |row| id_from_row(row, 0),
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    async fn live_statuses(
        &self,
        queue: &QueueName,
        ids: &[JobId],
    ) -> StoreResult<Vec<(JobId, JobStatus)>> {
        let mut statuses = Vec::new();
        for id in ids {
            if let Some(status) = status_of(self.0, queue, *id)? {
                statuses.push((*id, status));
            }
        }
        Ok(statuses)
    }

    /// A statement per job, by primary key: the writer is this process's, so nothing
    /// claims between them, and each tests the status it writes under anyway.
    async fn act_on_waiting(
        &self,
        queue: &QueueName,
        ids: &[JobId],
        action: JobAction,
        now: UnixMillis,
    ) -> StoreResult<Vec<(JobId, Left)>> {
        let mut changed = Vec::new();
        let unkeyed = Left {
            key: None,
            had_failures: false,
        };
        match action {
            JobAction::RunNow => {
                // Due now: a scheduled job turns ready; a blocked one only drops its wait
                // (promoted in its key's id order, it is then ready at once). A delayed
                // job's time to live starts now, as it would have when due.
                let mut stmt = self.0.prepare_cached(sql_once!(
                    "UPDATE jobs SET run_at = ?3,
                            status = CASE WHEN status = {SCHEDULED} THEN {READY} ELSE status END,
                            ttl_from = CASE WHEN ttl_from > ?3 THEN ?3 ELSE ttl_from END
                     WHERE id = ?1 AND queue = ?2
                       AND status IN ({READY}, {SCHEDULED}, {BLOCKED}) AND run_at > ?3"
                ))?;
                for id in ids {
                    if stmt.execute(params![&id.as_bytes()[..], queue.as_str(), now])? == 1 {
                        changed.push((*id, unkeyed.clone()));
                    }
                }
            }
            JobAction::SetPriority(priority) => {
                let mut stmt = self.0.prepare_cached(sql_once!(
                    "UPDATE jobs SET priority = ?3
                     WHERE id = ?1 AND queue = ?2
                       AND status IN ({READY}, {SCHEDULED}, {BLOCKED}) AND priority <> ?3"
                ))?;
                for id in ids {
                    if stmt.execute(params![&id.as_bytes()[..], queue.as_str(), priority])? == 1 {
                        changed.push((*id, unkeyed.clone()));
                    }
                }
            }
            JobAction::Cancel => {
                let mut stmt = self.0.prepare_cached(sql_once!(
                    "DELETE FROM jobs
                     WHERE id = ?1 AND queue = ?2 AND status IN ({READY}, {SCHEDULED}, {BLOCKED})
                     RETURNING ordering_key, last_error IS NOT NULL"
                ))?;
                for id in ids {
                    let left = stmt
                        .query_row(params![&id.as_bytes()[..], queue.as_str()], |row| {
                            Ok(Left {
                                key: row
                                    .get::<_, Option<String>>(0)?
                                    .map(|key| (queue.to_string(), key)),
                                had_failures: row.get(1)?,
                            })
                        })
                        .optional()?;
                    if let Some(left) = left {
                        changed.push((*id, left));
                    }
                }
            }
        }
        Ok(changed)
    }

    /// Due, scheduled, blocked and in-flight jobs at `now`, and the earliest due time among the
    /// due, of `queue` or (`None`) of every queue that has live jobs. Each count walks only its
    /// own partial index, never the jobs' rows (but for the few in flight).
    async fn live_counts(
        &self,
        queue: Option<&QueueName>,
        now: UnixMillis,
    ) -> StoreResult<BTreeMap<QueueName, QueueCounts>> {
        let of_queue = if queue.is_some() {
            "AND queue = :queue"
        } else {
            ""
        };
        let mut counts: BTreeMap<QueueName, QueueCounts> = BTreeMap::new();
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        let mut each =
            |sql: &str, apply: &mut dyn FnMut(&mut QueueCounts, Tally)| -> StoreResult<()> {
                let mut stmt = self.0.prepare_cached(sql)?;
                if let Some(index) = stmt.parameter_index(":now")? {
                    stmt.raw_bind_parameter(index, now)?;
                }
                if let (Some(index), Some(queue)) = (stmt.parameter_index(":queue")?, queue) {
                    stmt.raw_bind_parameter(index, queue.as_str())?;
                }
                let mut rows = stmt.raw_query();
                while let Some(row) = rows.next()? {
                    let queue = QueueName::from_stored(row.get(0)?);
                    let entry = counts.entry(queue).or_default();
                    let tally = Tally {
                        jobs: count(row.get(1)?),
                        due: count(row.get(2)?),
                        earliest: row.get(3)?,
                    };
                    apply(entry, tally);
                }
                Ok(())
            };
        each(
            &format!(
                "SELECT queue, count(*), 0, min(run_at) FROM jobs
                 WHERE status = {READY} {of_queue} GROUP BY queue"
            ),
            &mut |c, t| {
                c.ready += t.jobs;
                c.oldest_due_at = min_of(c.oldest_due_at, t.earliest);
            },
        )?;
        // Scheduled jobs already due (no claim has promoted them yet) count as ready.
        each(
            &format!(
                "SELECT queue, count(*), sum(run_at <= :now), min(run_at) FROM jobs
                 WHERE status = {SCHEDULED} {of_queue} GROUP BY queue"
            ),
            &mut |c, t| {
                c.scheduled += t.jobs - t.due;
                c.ready += t.due;
                if t.due > 0 {
                    c.oldest_due_at = min_of(c.oldest_due_at, t.earliest);
                }
            },
        )?;
        each(
            &format!(
                "SELECT queue, count(*), 0, NULL FROM jobs INDEXED BY jobs_by_key
                 WHERE ordering_key IS NOT NULL AND status = {BLOCKED} {of_queue}
                 GROUP BY queue"
            ),
            &mut |c, t| c.blocked += t.jobs,
        )?;
        // Through the small index of in-flight jobs (all queues), not the queues' every job.
        each(
            &format!(
                "SELECT queue, count(*), 0, NULL FROM jobs INDEXED BY jobs_leased
                 WHERE status = {IN_FLIGHT} {of_queue} GROUP BY queue"
            ),
            &mut |c, t| c.in_flight += t.jobs,
        )?;
        Ok(counts)
    }
}

impl HistoryRows for SqliteTx<'_> {
    async fn record_attempt(&self, id: JobId, attempt: u32, failure: &Failure) -> StoreResult<()> {
        self.0
            .prepare_cached(
                "INSERT INTO job_attempts(job_id, queue, attempt, at, status, latency_ms, error,
                                      response_headers)
             SELECT id, queue, ?2, ?3, ?4, ?5, ?6, ?7 FROM jobs WHERE id = ?1",
            )?
            .execute(params![
                &id.as_bytes()[..],
                attempt,
                failure.at,
                failure.status,
                failure.latency_ms as i64,
                failure.error,
                failure.headers
            ])?;
        Ok(())
    }

    async fn history(&self, id: JobId) -> StoreResult<Vec<AttemptRecord>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT attempt, at, status, latency_ms, error, response_headers FROM job_attempts
             WHERE job_id = ?1 ORDER BY rowid",
        )?;
        let rows = stmt.query_map([&id.as_bytes()[..]], |row| {
            Ok(AttemptRecord {
                attempt: row.get(0)?,
                at: row.get(1)?,
                status: row.get(2)?,
                latency_ms: row.get::<_, i64>(3)?.max(0) as u64,
                error: row.get(4)?,
                headers: row.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Drop the history of the jobs of `ids` that no live job, dead letter or delivery log
    /// record shows any more.
    async fn drop_unreferenced_history(&self, ids: &[JobId]) -> StoreResult<()> {
        let mut stmt = self.0.prepare_cached(
            "DELETE FROM job_attempts WHERE job_id = ?1
               AND NOT EXISTS (SELECT 1 FROM jobs WHERE id = ?1)
               AND NOT EXISTS (SELECT 1 FROM dead_letters WHERE id = ?1)
               AND NOT EXISTS (SELECT 1 FROM delivered WHERE id = ?1)",
        )?;
        for id in ids {
            stmt.execute([&id.as_bytes()[..]])?;
        }
        Ok(())
    }
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
        // The claim and the ordering-key steps: each one index, no sort.
        let mut checked = Vec::new();
        for (name, sql, index) in [
            (
                "claim",
                "SELECT rowid FROM jobs WHERE queue = 'q' AND status = 0 ORDER BY priority DESC, run_at LIMIT 10",
                "COVERING INDEX jobs_ready (queue=?)",
            ),
            (
                "promote",
                "SELECT rowid FROM jobs WHERE queue = 'q' AND status = 3 AND run_at <= 5 ORDER BY run_at LIMIT 10",
                "COVERING INDEX jobs_scheduled (queue=? AND run_at<?)",
            ),
            (
                "key_next",
                "SELECT rowid FROM jobs WHERE queue = 'q' AND ordering_key = 'k' AND status = 4 ORDER BY id LIMIT 1",
                "jobs_by_key (queue=? AND ordering_key=? AND status=?)",
            ),
            (
                "key_head",
                "SELECT 1 FROM jobs WHERE queue = 'q' AND ordering_key = 'k' AND status IN (0, 1, 3)",
                "jobs_by_key (queue=? AND ordering_key=? AND status=?)",
            ),
            (
                "key_busy",
                "SELECT 1 FROM jobs WHERE queue = 'q' AND ordering_key = 'k'",
                "jobs_by_key (queue=? AND ordering_key=?)",
            ),
            (
                "next_due",
                "SELECT min(run_at) FROM jobs WHERE queue = 'q' AND status = 3",
                "jobs_scheduled",
            ),
        ] {
            let p = plan(&conn, sql);
            assert!(p.contains(index), "{name}: {p}");
            assert!(!p.contains("TEMP B-TREE"), "{name}: {p}");
            checked.push((name, p));
        }
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
            "SELECT id FROM jobs WHERE id < x'01' AND status <> 1 AND ttl_from IS NULL LIMIT 10",
        );
        assert!(
            expire.contains("sqlite_autoindex_jobs_1 (id<?)"),
            "{expire}"
        );
        let expire_replayed = plan(
            &conn,
            "SELECT id FROM jobs WHERE ttl_from < 5 AND status <> 1 LIMIT 10",
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
        // The delivery log: a queue's page, newest first, and its retention sweep.
        let delivered_page = plan(
            &conn,
            "SELECT * FROM delivered WHERE queue = 'q' AND (delivered_at, id) < (5, x'00') ORDER BY delivered_at DESC, id DESC LIMIT 10",
        );
        assert!(
            delivered_page.contains("delivered_by_queue (queue=? AND (delivered_at,id)<(?,?))"),
            "{delivered_page}"
        );
        assert!(!delivered_page.contains("TEMP B-TREE"), "{delivered_page}");
        let delivered_sweep = plan(
            &conn,
            "SELECT rowid FROM delivered WHERE queue = 'q' AND delivered_at < 5 LIMIT 10",
        );
        assert!(
            delivered_sweep
                .contains("COVERING INDEX delivered_by_queue (queue=? AND delivered_at<?)"),
            "{delivered_sweep}"
        );
        // The scheduler's rounds: the due schedules, and the next tick to sleep towards.
        let due_schedules = plan(
            &conn,
            "SELECT * FROM schedules WHERE paused = 0 AND next_run_at <= 5 ORDER BY next_run_at LIMIT 10",
        );
        assert!(
            due_schedules.contains("schedules_due (next_run_at<?)"),
            "{due_schedules}"
        );
        assert!(!due_schedules.contains("TEMP B-TREE"), "{due_schedules}");
        let next_tick = plan(
            &conn,
            "SELECT min(next_run_at) FROM schedules WHERE paused = 0",
        );
        assert!(next_tick.contains("schedules_due"), "{next_tick}");
        let ready_count = plan(
            &conn,
            "SELECT count(*), min(run_at) FROM jobs WHERE queue = 'q' AND status = 0",
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
        // Every queue's counts, for the metrics: each from its own partial index, no sort.
        for (name, sql, index) in [
            (
                "ready_by_queue",
                "SELECT queue, count(*), min(run_at) FROM jobs WHERE status = 0 GROUP BY queue",
                "COVERING INDEX jobs_ready",
            ),
            (
                "scheduled_by_queue",
                "SELECT queue, count(*), sum(run_at <= 5), min(run_at) FROM jobs WHERE status = 3 GROUP BY queue",
                "COVERING INDEX jobs_scheduled",
            ),
            (
                "blocked_by_queue",
                "SELECT queue, count(*) FROM jobs INDEXED BY jobs_by_key WHERE ordering_key IS NOT NULL AND status = 4 GROUP BY queue",
                "COVERING INDEX jobs_by_key",
            ),
        ] {
            let p = plan(&conn, sql);
            assert!(p.contains(index), "{name}: {p}");
            assert!(!p.contains("TEMP B-TREE"), "{name}: {p}");
            checked.push((name, p));
        }
        for (name, p) in [
            ("ready_count", &ready_count),
            ("in_flight_count", &in_flight_count),
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
        for (name, p) in &checked {
            println!("{name}:\n{p}\n");
        }
    }

    /// The one-statement completion takes exactly the jobs whose completion is that one
    /// delete, and leaves every other one untouched for the whole decision.
    #[test]
    fn a_delivered_job_is_deleted_in_one_statement_only_when_that_is_all_it_takes() {
        use crate::store::dialect::run_now;

        let dir = tempfile::tempdir().unwrap();
        let (conn, queue) = crate::store::sqlite::ceiling::open_with_queue(
            &dir.path().join("d.db"),
            "http://127.0.0.1:9/hook",
        )
        .unwrap();
        let tx = SqliteTx(&conn);
        let now = crate::model::now_millis();
        let job = |key: Option<&str>| {
            let mut job = NewJob::now(JobId::new(), crate::json::canonicalize(b"{}").unwrap(), now);
            job.ordering_key = key.map(str::to_owned);
            job
        };
        let (plain, keyed, failed_before) = (job(None), job(Some("k")), job(None));
        let ids = [plain.id, keyed.id, failed_before.id];
        run_now(tx.insert_jobs(&queue, &[plain, keyed, failed_before])).unwrap();
        let lease_of = |claimed: &[ClaimedJob], id: JobId| {
            claimed.iter().find(|job| job.id == id).unwrap().lease()
        };
        let claimed = run_now(tx.claim(&queue, now, now + 60_000, 10)).unwrap();
        assert_eq!(claimed.len(), 3);
        // The third job fails once and is claimed again.
        let failure = Failure {
            error: "boom".into(),
            status: Some(500),
            latency_ms: 1,
            at: now,
            headers: None,
        };
        assert!(
            run_now(tx.reschedule_leased(ids[2], lease_of(&claimed, ids[2]), now, &failure))
                .unwrap()
        );
        let again = run_now(tx.claim(&queue, now, now + 90_000, 10)).unwrap();
        let count = |conn: &Connection| -> i64 {
            conn.query_row("SELECT count(*) FROM jobs", [], |row| row.get(0))
                .unwrap()
        };

        let stale = Lease {
            until: lease_of(&claimed, ids[0]).until + 1,
            ..lease_of(&claimed, ids[0])
        };
        assert!(
            !delete_delivered(&conn, None, ids[0], stale).unwrap(),
            "not its lease"
        );
        assert!(!delete_delivered(&conn, None, ids[1], lease_of(&claimed, ids[1])).unwrap());
        assert!(!delete_delivered(&conn, None, ids[2], lease_of(&again, ids[2])).unwrap());
        assert_eq!(
            count(&conn),
            3,
            "a keyed or failed-before job is left whole"
        );
        let elsewhere = QueueName::parse("elsewhere").unwrap();
        let lease = lease_of(&claimed, ids[0]);
        assert!(
            !delete_delivered(&conn, Some(&elsewhere), ids[0], lease).unwrap(),
            "not its queue"
        );
        assert!(delete_delivered(&conn, Some(&queue), ids[0], lease).unwrap());
        assert_eq!(count(&conn), 2);
    }
}
