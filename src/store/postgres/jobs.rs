//! SQL for live jobs on PostgreSQL: enqueue (with ordering keys and idempotency keys),
//! claim, and the outcome of an attempt (delivered, kept, retried, dead-lettered), each in
//! one transaction that any number of nodes may run at once.
//!
//! Job statuses are [`JobStatus`](crate::store::status::JobStatus)'s, as on SQLite.
//!
//! What makes it safe across nodes:
//! - a claim locks the rows it takes with `FOR UPDATE SKIP LOCKED`: two nodes claiming at
//!   once take different jobs, and neither waits for the other;
//! - an outcome is fenced by the lease (attempt and `leased_until`): a node whose lease was
//!   recovered and re-claimed elsewhere changes nothing;
//! - "one head per ordering key" is the unique index `jobs_one_head_per_key`: two nodes
//!   enqueuing the first two jobs of a key at once cannot both make a head; the loser's job
//!   is stored blocked instead;
//! - an idempotency key is claimed by inserting its row first: a concurrent second enqueue
//!   with the same key waits on that row and then answers with the first job.

use std::collections::{BTreeMap, HashSet};

use deadpool_postgres::{GenericClient, Transaction};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use uuid::Uuid;

use super::tx::PgTx;
use crate::json::CanonicalJson;
use crate::model::{JobId, QueueName, UnixMillis};
use crate::sql_once;
use crate::store::dialect::{HistoryRows, JobRows, Left, StaleLease};
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{
    AttemptRecord, ClaimedJob, Failure, HeldLease, JobAction, JobRecord, JobState, JobsPage, Lease,
    LeaseHolder, LiveFilter, MESSAGE_PAYLOAD, MESSAGE_TOPIC, MessageRef, NewJob, Position,
    QueueCounts, ScheduleTick, payload_or_error_like,
};
use crate::store::status::JobStatus;
use crate::store::status::codes::{BLOCKED, IN_FLIGHT, READY, SCHEDULED};
use crate::trace_context::TraceContext;

/// Statements prepared once per connection (deadpool's statement cache) and reused: the
/// per-job statements would otherwise be parsed and planned on every call.
pub(super) mod prepared {
    use deadpool_postgres::GenericClient;
    use tokio_postgres::types::ToSql;
    use tokio_postgres::{Error, Row};

    type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

    pub async fn execute(
        client: &impl GenericClient,
        sql: &str,
        params: Params<'_>,
    ) -> Result<u64, Error> {
        let statement = client.prepare_cached(sql).await?;
        client.execute(&statement, params).await
    }

    pub async fn query(
        client: &impl GenericClient,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, Error> {
        let statement = client.prepare_cached(sql).await?;
        client.query(&statement, params).await
    }

    pub async fn query_opt(
        client: &impl GenericClient,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Option<Row>, Error> {
        let statement = client.prepare_cached(sql).await?;
        client.query_opt(&statement, params).await
    }

    pub async fn query_one(
        client: &impl GenericClient,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Row, Error> {
        let statement = client.prepare_cached(sql).await?;
        client.query_one(&statement, params).await
    }
}

/// What `DELETE FROM jobs … RETURNING queue, ordering_key, last_error IS NOT NULL` says a
/// job left behind.
fn left_from(row: &tokio_postgres::Row) -> Left {
    let queue: String = row.get(0);
    Left {
        key: row.get::<_, Option<String>>(1).map(|key| (queue, key)),
        had_failures: row.get(2),
    }
}

/// How many scheduled jobs one claim promotes at most.
const PROMOTE_BATCH: i64 = 1000;

/// Insert the job row. A savepoint guards the insert that may lose the race for its key's
/// head, so the transaction survives it and stores the job blocked instead.
pub(super) async fn insert(
    tx: &Transaction<'_>,
    queue: &QueueName,
    job: &NewJob,
) -> StoreResult<()> {
    let insert: &str = sql_once!(
        "INSERT INTO jobs (id, queue, status, payload, attempts, run_at, created_at,
                           not_before, ttl_from, priority, ordering_key, traceparent, tracestate,
                           message_id)
         SELECT $1::uuid, name,
                CASE WHEN $8::text IS NOT NULL AND (
                         $9::boolean
                         OR EXISTS (SELECT 1 FROM jobs WHERE queue = $2 AND ordering_key = $8))
                     THEN {BLOCKED}
                     WHEN $4::bigint > $5::bigint THEN {SCHEDULED}
                     ELSE {READY} END,
                $3::text, 0, $4, $5, $6::bigint, $6, $7::integer, $8, $10::text, $11::text,
                $12::uuid
         FROM queues WHERE name = $2"
    );
    let (id, due_at) = (uuid(job.id), job.due_at());
    let (name, payload) = (queue.as_str(), job.stored_payload());
    let trace = TraceContext::columns(job.trace.as_ref());
    let message = job.message.as_ref().map(|message| uuid(message.id));
    let params = |blocked: &'static bool| {
        insert_args(
            &id, &name, &payload, job, &due_at, blocked, &trace, &message,
        )
    };
    let inserted = if let Some(key) = &job.ordering_key {
        lock_key(tx, queue.as_str(), key).await?;
        tx.batch_execute("SAVEPOINT head").await?;
        match prepared::execute(tx, insert, &params(&false)).await {
            Ok(n) => {
                tx.batch_execute("RELEASE SAVEPOINT head").await?;
                n
            }
            Err(e) if lost_the_head(&e) => {
                tx.batch_execute("ROLLBACK TO SAVEPOINT head").await?;
                prepared::execute(tx, insert, &params(&true)).await?
            }
            Err(e) => return Err(e.into()),
        }
    } else {
        prepared::execute(tx, insert, &params(&false)).await?
    };
    if inserted == 0 {
        return Err(StoreError::QueueNotFound);
    }
    Ok(())
}

/// The parameters of the insert, `$1`…`$12`: `blocked` forces the job behind its key.
#[allow(clippy::too_many_arguments)]
fn insert_args<'a>(
    id: &'a Uuid,
    queue: &'a &'a str,
    payload: &'a &'a str,
    job: &'a NewJob,
    due_at: &'a UnixMillis,
    blocked: &'a bool,
    (traceparent, tracestate): &'a (Option<String>, Option<&'a str>),
    message: &'a Option<Uuid>,
) -> [&'a (dyn ToSql + Sync); 12] {
    [
        id,
        queue,
        payload,
        due_at,
        &job.created_at,
        &job.not_before,
        &job.priority,
        &job.ordering_key,
        blocked,
        traceparent,
        tracestate,
        message,
    ]
}

/// Whether `error` is another node's job taking the head of the key first.
pub(super) fn lost_the_head(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&SqlState::UNIQUE_VIOLATION)
        && error
            .as_db_error()
            .and_then(|db| db.constraint())
            .is_some_and(|c| c == "jobs_one_head_per_key")
}

/// One row of [`insert_unkeyed`]: a job without an ordering key for `queue`, leased to
/// this node until `leased_until` if it is handed straight to a delivery.
pub(super) struct UnkeyedRow<'a> {
    pub queue: &'a QueueName,
    pub job: &'a NewJob,
    pub leased_until: Option<UnixMillis>,
}

/// Insert jobs without ordering keys, of any queues, in one statement: each ready,
/// scheduled until due, or (with `leased_until`) in flight on its first attempt, leased to
/// `node`. Returns the ids stored: a job whose queue is gone is left out. A queue at its
/// `maxQueued` cap fails the whole statement (`QueueFull`). Rows are inserted in the order
/// given: callers sort them by queue, so two nodes' statements take the capped queues'
/// counter rows in one order and cannot deadlock.
pub(super) async fn insert_unkeyed(
    client: &impl GenericClient,
    node: Uuid,
    rows: &[UnkeyedRow<'_>],
) -> StoreResult<Vec<JobId>> {
    let mut ids = Vec::with_capacity(rows.len());
    let mut queues = Vec::with_capacity(rows.len());
    let mut payloads = Vec::with_capacity(rows.len());
    let mut run_ats = Vec::with_capacity(rows.len());
    let mut created_ats = Vec::with_capacity(rows.len());
    let mut not_befores = Vec::with_capacity(rows.len());
    let mut priorities = Vec::with_capacity(rows.len());
    let mut leases = Vec::with_capacity(rows.len());
    let mut traceparents = Vec::with_capacity(rows.len());
    let mut tracestates = Vec::with_capacity(rows.len());
    let mut messages = Vec::with_capacity(rows.len());
    for row in rows {
        debug_assert!(
            row.job.ordering_key.is_none(),
            "a keyed job takes its key's lock"
        );
        let leased = row.leased_until.is_some();
        ids.push(uuid(row.job.id));
        queues.push(row.queue.as_str());
        payloads.push(row.job.stored_payload());
        messages.push(row.job.message.as_ref().map(|message| uuid(message.id)));
        // A leased job is due now: its time to live runs from its creation.
        run_ats.push(if leased {
            row.job.created_at
        } else {
            row.job.due_at()
        });
        created_ats.push(row.job.created_at);
        not_befores.push(if leased { None } else { row.job.not_before });
        priorities.push(row.job.priority);
        leases.push(row.leased_until);
        let (traceparent, tracestate) = TraceContext::columns(row.job.trace.as_ref());
        traceparents.push(traceparent);
        tracestates.push(tracestate);
    }
    let stored = prepared::query(
        client,
        sql_once!(
            "INSERT INTO jobs (id, queue, status, payload, attempts, run_at, created_at,
                               not_before, ttl_from, priority, leased_until, leased_by,
                               traceparent, tracestate, message_id)
             SELECT j.id, q.name,
                    CASE WHEN j.leased_until IS NOT NULL THEN {IN_FLIGHT}
                         WHEN j.run_at > j.created_at THEN {SCHEDULED}
                         ELSE {READY} END,
                    j.payload, CASE WHEN j.leased_until IS NOT NULL THEN 1 ELSE 0 END,
                    j.run_at, j.created_at, j.not_before, j.not_before, j.priority,
                    j.leased_until, CASE WHEN j.leased_until IS NOT NULL THEN $8::uuid END,
                    j.traceparent, j.tracestate, j.message_id
             FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::bigint[],
                         $6::bigint[], $7::integer[], $9::bigint[], $10::text[], $11::text[],
                         $12::uuid[])
                  WITH ORDINALITY AS j(id, queue, payload, run_at, created_at, not_before,
                                       priority, leased_until, traceparent, tracestate,
                                       message_id, n)
             JOIN queues q ON q.name = j.queue
             ORDER BY j.n
             RETURNING id"
        ),
        &[
            &ids,
            &queues,
            &payloads,
            &run_ats,
            &created_ats,
            &not_befores,
            &priorities,
            &node,
            &leases,
            &traceparents,
            &tracestates,
            &messages,
        ],
    )
    .await?;
    Ok(stored.iter().map(|row| job_id(row.get(0))).collect())
}

/// Delete the jobs of `leases` still in flight under them and without an ordering key,
/// and the attempt history of those that had failed before: delivered jobs not kept. The
/// ids deleted. One statement, so it needs no transaction of its own.
///
/// Planned for each group: sent unprepared (`query_typed`: parse, bind and execute in one
/// round trip), so PostgreSQL knows the group's size and the table's size now, on a
/// completer's session ([`super::connect::Sessions::Completions`]), where scans of every
/// job are a last resort. Prepared once per connection, it kept the plan made at its sixth
/// run, in a node's first second, while `jobs` held a few rows. Keeping a plan made on
/// those sessions fixed that too, and plans cost 0.04 ms a group against 0.24; but four
/// nodes paid more per job with it than with a plan per group (docs/benchmarks.md, "Plans
/// kept from a node's first second").
pub async fn delete_delivered(
    client: &tokio_postgres::Client,
    leases: &[(JobId, Lease)],
) -> StoreResult<HashSet<JobId>> {
    let ids: Vec<Uuid> = leases.iter().map(|(id, _)| uuid(*id)).collect();
    let attempts: Vec<i32> = leases
        .iter()
        .map(|(_, l)| attempt_param(l.attempt))
        .collect();
    let untils: Vec<UnixMillis> = leases.iter().map(|(_, l)| l.until).collect();
    let deleted = client
        .query_typed(
            hot::complete_delivered(),
            &[
                (&ids, Type::UUID_ARRAY),
                (&attempts, Type::INT4_ARRAY),
                (&untils, Type::INT8_ARRAY),
            ],
        )
        .await?;
    Ok(deleted.iter().map(|row| job_id(row.get(0))).collect())
}

fn earliest_of(a: Option<UnixMillis>, b: Option<UnixMillis>) -> Option<UnixMillis> {
    a.into_iter().chain(b).min()
}

/// When `queue` next has a job due: a ready job's time (it is due already), else the
/// earliest scheduled one's (through `jobs_scheduled`, ordered by due time). The ready
/// job is read in `jobs_ready`'s own order: without the `ORDER BY`, the plan PostgreSQL
/// caches for the statement after a few runs is a sequential scan of `jobs` that stops at
/// the first ready row, which under a backlog reads past every job in flight first. Run
/// in a transaction of its own, for [`hot::IN_INDEX_ORDER`].
pub async fn next_due(tx: &Transaction<'_>, queue: &QueueName) -> StoreResult<Option<UnixMillis>> {
    let statement = tx.prepare_cached(hot::next_due()).await?;
    let (_, row) = futures_util::future::try_join(
        tx.batch_execute(hot::IN_INDEX_ORDER),
        tx.query_one(&statement, &[&queue.as_str()]),
    )
    .await?;
    Ok(row.get(0))
}

/// The statements every claim round runs, by name, so that the plan test can check the
/// plans PostgreSQL caches for them (`postgres_the_claim_reads_only_the_ready_index…` in
/// `tests/api/postgres.rs`).
pub mod hot {
    use crate::sql_once;
    use crate::store::status::codes::{IN_FLIGHT, READY, SCHEDULED};

    /// Sent before the statements below, in their transaction: PostgreSQL reads the jobs
    /// in their index's order and stops at the limit, whatever its statistics say.
    ///
    /// Those lag behind a queue: taken while it held a few jobs (or never, on a new
    /// database), they put a queue's ready jobs at a handful, and the plans PostgreSQL
    /// picks then read every ready job through a bitmap and sort them all for the first
    /// 256: with 150 000 jobs waiting, each claim read 6 600 pages and sorted 7 MB on disk
    /// (up to 105 ms a claim), where the index's order reads a few hundred pages. None of
    /// these statements needs a sort, so making sorts the planner's last resort leaves it
    /// the indexes' order.
    ///
    /// Nor does any need to read every job, so sequential scans are made a last resort
    /// too. A connection keeps the plan PostgreSQL makes for each of these after a few
    /// runs, and makes it in the node's first second, while `jobs` may hold a few rows: the
    /// promotion and the claim then looked up their `id = ANY(…)` by scanning every job,
    /// and kept doing so as the backlog grew, each claim round reading the whole table.
    /// `LOCAL`: the settings end with the transaction, and no other statement of the node
    /// sees them.
    pub const IN_INDEX_ORDER: &str = "SET LOCAL enable_sort = off; SET LOCAL enable_seqscan = off";

    /// `$1` queue: when it next has a job due (see [`super::next_due`]). Both reads are
    /// ordered and limited, so neither can be planned as a scan of every job: the
    /// scheduled one was `min(run_at)`, and the plan a connection keeps for it, made while
    /// `jobs` held a few rows, read the whole table on every probe of a queue with no
    /// ready job.
    pub fn next_due() -> &'static str {
        sql_once!(
            "SELECT coalesce(
                 (SELECT run_at FROM jobs WHERE queue = $1 AND status = {READY}
                  ORDER BY priority DESC, run_at, id LIMIT 1),
                 (SELECT run_at FROM jobs WHERE queue = $1 AND status = {SCHEDULED}
                  ORDER BY run_at LIMIT 1))"
        )
    }

    /// `$1` queue, `$2` now, `$3` at most: make its scheduled jobs that fell due ready.
    pub fn promote_due() -> &'static str {
        sql_once!(
            "UPDATE jobs SET status = {READY}
             WHERE id = ANY(ARRAY(SELECT id FROM jobs
                                  WHERE queue = $1 AND status = {SCHEDULED} AND run_at <= $2
                                  ORDER BY run_at LIMIT $3
                                  FOR UPDATE SKIP LOCKED))"
        )
    }

    /// `$1` ids, `$2` attempts, `$3` lease ends (one each): delete the jobs still leased so
    /// and without an ordering key, with the attempt history of those that had failed
    /// before, answering their ids: one statement, atomic without a transaction around it
    /// ([`super::Runner::one_relaxed_statement`]). The counter rows of their capped queues
    /// are locked first, in queue order, as the counting trigger then takes them at the
    /// statement's end.
    ///
    /// Each lease finds its job by id, whatever the statistics say. These lag behind a busy
    /// queue: taken while few jobs were in flight, they make a scan of an in-flight index
    /// (`… WHERE status = 1`) look cheaper than the lookups, and the plan then compares
    /// every job in flight with every lease of the group (60–140 ms a statement for groups
    /// of 256 with three nodes). Written `status + 0`, the status test cannot pick those
    /// indexes; it still fences the delete, row by row. (Adding `j.id = ANY($1)` does not
    /// help: the jobs found so are then each compared with every lease.) It is planned for
    /// each group ([`super::delete_delivered`]).
    pub fn complete_delivered() -> &'static str {
        sql_once!(
            "WITH sizes AS (SELECT 1 FROM queue_sizes
                            WHERE queue IN (SELECT queue FROM jobs WHERE id = ANY($1))
                            ORDER BY queue FOR UPDATE),
                  gone AS (DELETE FROM jobs j
                           USING unnest($1::uuid[], $2::integer[], $3::bigint[])
                                 AS d(id, attempts, until)
                           WHERE j.id = d.id
                             AND j.status + 0 = {IN_FLIGHT} AND j.attempts = d.attempts
                             AND coalesce(j.lease_id, j.leased_until) = d.until
                             AND j.ordering_key IS NULL
                             AND (SELECT count(*) FROM sizes) >= 0
                           RETURNING j.id, j.last_error IS NOT NULL AS failed_before),
                  history AS (DELETE FROM job_attempts a
                              WHERE job_id IN (SELECT id FROM gone WHERE failed_before)
                                AND NOT EXISTS (SELECT 1 FROM dead_letters d
                                                WHERE d.id = a.job_id))
             SELECT id FROM gone"
        )
    }

    /// `$1` queue, `$2` lease end, `$3` at most, `$4` node, `$5` now, `$6`/`$7` the
    /// holder's id and name (a pull worker's; NULL for a push delivery): lease its next
    /// ready jobs.
    pub fn claim() -> &'static str {
        sql_once!(
            "UPDATE jobs SET status = {IN_FLIGHT}, attempts = attempts + 1, leased_until = $2,
                             leased_by = $4, lease_id = NULL, leased_at = $5,
                             lease_holder = $6, lease_holder_name = $7
             WHERE id = ANY(ARRAY(SELECT id FROM jobs
                                  WHERE queue = $1 AND status = {READY}
                                    AND NOT (SELECT paused FROM queues WHERE name = $1)
                                  ORDER BY priority DESC, run_at, id LIMIT $3
                                  FOR UPDATE SKIP LOCKED))
             RETURNING id, payload, attempts, created_at, leased_until, ordering_key,
                       schedule, schedule_tick, traceparent, tracestate, priority, message_id"
        )
    }
}

/// Lease up to `limit` due jobs of `queue` to `node`: higher priority first, then the
/// longest due, then the oldest. Scheduled jobs that fell due are promoted first.
/// The queue's `paused` flag is read in the claim itself: a claim round that began before
/// a pause (on this node or another) takes nothing once the pause is committed.
///
/// Both updates name their rows as `id = ANY(ARRAY(…))`, not `id IN (…)`: the plan
/// PostgreSQL caches for a prepared statement does not know `LIMIT $3`, and for `IN` it
/// costs the sub-select at a tenth of the queue and picks a hash semi-join over a
/// sequential scan of every job, each claim reading the whole table. An array of ids is
/// always found through the primary key (checked by the plan test in `tests/api/postgres.rs`).
pub async fn claim(
    tx: &Transaction<'_>,
    queue: &QueueName,
    now: UnixMillis,
    leased_until: UnixMillis,
    limit: usize,
    node: Uuid,
    holder: Option<&LeaseHolder>,
) -> StoreResult<Vec<ClaimedJob>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let (holder_id, holder_name) = holder.map(|h| (h.id.as_str(), h.name.as_str())).unzip();
    // Both prepared first, then sent together after the planner setting, the promotion
    // first: one round trip, and the claim sees the jobs the promotion made ready (the
    // connection runs them in the order sent).
    let promote = tx.prepare_cached(hot::promote_due()).await?;
    let claim = tx.prepare_cached(hot::claim()).await?;
    let (_, _, rows) = futures_util::future::try_join3(
        tx.batch_execute(hot::IN_INDEX_ORDER),
        tx.execute(&promote, &[&queue.as_str(), &now, &PROMOTE_BATCH]),
        tx.query(
            &claim,
            &[
                &queue.as_str(),
                &leased_until,
                &limit,
                &node,
                &now,
                &holder_id,
                &holder_name,
            ],
        ),
    )
    .await?;
    let mut claimed: Vec<ClaimedJob> = rows
        .iter()
        .map(|row| ClaimedJob {
            id: job_id(row.get(0)),
            payload: CanonicalJson::from_stored(row.get(1)),
            attempt: attempt_of(row.get(2)),
            created_at: row.get(3),
            leased_until: row.get(4),
            priority: row.get(10),
            ordering_key: row.get(5),
            schedule: ScheduleTick::from_columns(row.get(6), row.get(7)),
            trace: TraceContext::from_columns(row.get(8), row.get(9)),
            message: None,
        })
        .collect();
    let messages: Vec<(JobId, Uuid)> = rows
        .iter()
        .filter_map(|row| Some((job_id(row.get(0)), row.get::<_, Option<Uuid>>(11)?)))
        .collect();
    fill_messages(tx, &mut claimed, &messages).await?;
    claimed.sort_by_key(|job| job.id);
    Ok(claimed)
}

/// A message's job stores no payload of its own: read the payload and topic of each
/// claimed job's message (`messages`: job, message) in one statement, only when a claim
/// took such jobs.
async fn fill_messages(
    tx: &Transaction<'_>,
    claimed: &mut [ClaimedJob],
    messages: &[(JobId, Uuid)],
) -> StoreResult<()> {
    if messages.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = messages.iter().map(|(_, message)| *message).collect();
    let rows = prepared::query(
        tx,
        "SELECT id, topic, payload FROM topic_messages WHERE id = ANY($1)",
        &[&ids],
    )
    .await?;
    for row in rows {
        let message: Uuid = row.get(0);
        for (job, _) in messages.iter().filter(|(_, m)| *m == message) {
            if let Some(job) = claimed.iter_mut().find(|claimed| claimed.id == *job) {
                job.payload = CanonicalJson::from_stored(row.get(2));
                job.message = MessageRef::from_columns(Some(job_id(message)), Some(row.get(1)));
            }
        }
    }
    Ok(())
}

/// Take the lock of ordering key `key` of `queue` until the transaction ends. Every
/// transaction that adds a job to a key (enqueue, replay) or takes its head away (before
/// promoting the next) holds it, so the two never pass each other unseen: without it, an
/// enqueue that still sees the old head stores its job blocked while the removal, not yet
/// seeing that job, promotes nothing, and the key would wait forever. Under the lock the
/// later one's next statement sees what the earlier one committed (READ COMMITTED takes a
/// new snapshot per statement).
///
/// Lock order: a capped queue's `queue_sizes` row first (the `WHERE`'s sub-select runs
/// before the select list), then the key. A job's removal takes that row first through its
/// counting trigger and the key after, to promote the next job; an enqueue adds to the row
/// after taking the key. Taking both here in that same order keeps the two from waiting on
/// each other (a deadlock). An uncapped queue has no row: only the key is locked.
pub(super) async fn lock_key(tx: &Transaction<'_>, queue: &str, key: &str) -> StoreResult<()> {
    prepared::execute(
        tx,
        "WITH size AS (SELECT 1 FROM queue_sizes WHERE queue = $1 FOR UPDATE)
         SELECT pg_advisory_xact_lock(hashtextextended($1::text || chr(31) || $2::text, 0))
         WHERE (SELECT count(*) FROM size) >= 0",
        &[&queue, &key],
    )
    .await?;
    Ok(())
}

pub(super) fn uuid(id: JobId) -> Uuid {
    Uuid::from_bytes(*id.as_bytes())
}

pub(super) fn job_id(id: Uuid) -> JobId {
    JobId::from_bytes(id.into_bytes())
}

/// Attempt counts are INTEGER columns; they never come near `i32::MAX` (at most 100).
pub(super) fn attempt_param(attempt: u32) -> i32 {
    i32::try_from(attempt).unwrap_or(i32::MAX)
}

pub(super) fn attempt_of(stored: i32) -> u32 {
    u32::try_from(stored).unwrap_or(0)
}

/// The columns of a live job, in the order [`live_from_row`] reads them.
fn live_columns() -> &'static str {
    sql_once!(
        "id, queue, status, {MESSAGE_PAYLOAD}, attempts, created_at, run_at, last_error,
         last_status, not_before, priority, ordering_key, schedule, schedule_tick,
         leased_until, traceparent, tracestate, message_id, {MESSAGE_TOPIC}"
    )
}

fn live_from_row(row: &Row) -> StoreResult<JobRecord> {
    let state = match row.get::<_, i16>(2) {
        0 | 3 | 4 => JobState::Ready,
        1 => JobState::InFlight,
        other => {
            return Err(StoreError::from(anyhow::anyhow!(
                "jobs.status holds {other}, which this hookq does not know"
            )));
        }
    };
    Ok(JobRecord {
        id: job_id(row.get(0)),
        queue: QueueName::from_stored(row.get(1)),
        state,
        payload: CanonicalJson::from_stored(row.get(3)),
        attempts: attempt_of(row.get(4)),
        created_at: row.get(5),
        run_at: row.get(6),
        last_error: row.get(7),
        last_status: super::dead_letters::status_of(row.get(8)),
        not_before: row.get(9),
        priority: row.get(10),
        ordering_key: row.get(11),
        schedule: ScheduleTick::from_columns(row.get(12), row.get(13)),
        lease_expires_at: row.get(14),
        trace: TraceContext::from_columns(row.get(15), row.get(16)),
        message: MessageRef::from_columns(row.get::<_, Option<Uuid>>(17).map(job_id), row.get(18)),
        delivery: None,
        dead: None,
    })
}

pub(super) fn limit_param(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

impl JobRows for PgTx<'_> {
    /// Sent unprepared, planned for its own values each time: a generic plan kept from a
    /// node's first seconds would read every job (`jobs_leased` is the range to read).
    async fn held_leases(
        &self,
        queue: Option<&QueueName>,
        after: Position,
        limit: usize,
    ) -> StoreResult<Vec<HeldLease>> {
        let rows = self
            .tx
            .query(
                sql_once!(
                    "SELECT id, queue, attempts, leased_at, leased_until, lease_holder,
                        lease_holder_name, lease_id IS NOT NULL
                 FROM jobs
                 WHERE status = {IN_FLIGHT} AND lease_holder IS NOT NULL
                   AND ($1::text IS NULL OR queue = $1) AND (leased_until, id) > ($2, $3)
                 ORDER BY leased_until, id LIMIT $4"
                ),
                &[
                    &queue.map(QueueName::as_str),
                    &after.at,
                    &uuid(after.id),
                    &i64::try_from(limit).unwrap_or(i64::MAX),
                ],
            )
            .await?;
        Ok(rows.iter().map(|row| held_lease(row, false)).collect())
    }

    /// One statement for every queue: [`insert_unkeyed`]'s.
    async fn insert_message_jobs(
        &self,
        message: &NewJob,
        targets: &[(QueueName, JobId)],
    ) -> StoreResult<()> {
        if targets.is_empty() {
            return Ok(());
        }
        let jobs: Vec<NewJob> = targets
            .iter()
            .map(|(_, id)| NewJob {
                id: *id,
                ..message.clone()
            })
            .collect();
        let rows: Vec<UnkeyedRow<'_>> = targets
            .iter()
            .zip(&jobs)
            .map(|((queue, _), job)| UnkeyedRow {
                queue,
                job,
                leased_until: None,
            })
            .collect();
        if insert_unkeyed(self.tx, self.node, &rows).await?.len() < rows.len() {
            return Err(StoreError::QueueNotFound);
        }
        Ok(())
    }

    async fn insert_jobs(&self, queue: &QueueName, batch: &[NewJob]) -> StoreResult<()> {
        if batch.iter().any(|job| job.ordering_key.is_some()) {
            // Each keyed job takes its key's lock and may lose the race for its head.
            for job in batch {
                insert(self.tx, queue, job).await?;
            }
            return Ok(());
        }
        let rows: Vec<UnkeyedRow<'_>> = batch
            .iter()
            .map(|job| UnkeyedRow {
                queue,
                job,
                leased_until: None,
            })
            .collect();
        if insert_unkeyed(self.tx, self.node, &rows).await?.len() < rows.len() {
            return Err(StoreError::QueueNotFound);
        }
        Ok(())
    }

    async fn mark_schedule_tick(&self, id: JobId, tick: &ScheduleTick) -> StoreResult<()> {
        prepared::execute(
            self.tx,
            "UPDATE jobs SET schedule = $2, schedule_tick = $3 WHERE id = $1",
            &[&uuid(id), &tick.schedule.as_str(), &tick.tick],
        )
        .await?;
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
        claim(self.tx, queue, now, leased_until, limit, self.node, None).await
    }

    async fn delete_leased(&self, id: JobId, lease: Lease) -> StoreResult<Option<Left>> {
        Ok(prepared::query_opt(
            self.tx,
            sql_once!(
                "DELETE FROM jobs WHERE id = $1 AND status = {IN_FLIGHT} AND attempts = $2
                                        AND coalesce(lease_id, leased_until) = $3
                 RETURNING queue, ordering_key, last_error IS NOT NULL"
            ),
            &[&uuid(id), &attempt_param(lease.attempt), &lease.until],
        )
        .await?
        .as_ref()
        .map(left_from))
    }

    async fn delete_job(&self, id: JobId) -> StoreResult<Option<Left>> {
        Ok(prepared::query_opt(
            self.tx,
            "DELETE FROM jobs WHERE id = $1
             RETURNING queue, ordering_key, last_error IS NOT NULL",
            &[&uuid(id)],
        )
        .await?
        .as_ref()
        .map(left_from))
    }

    /// After a job of `key` left: if the key has no head any more, its earliest blocked job
    /// becomes the head (ready, or scheduled if it asked to start later).
    async fn promote_next_of_key(
        &self,
        queue: &str,
        key: &str,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        lock_key(self.tx, queue, key).await?;
        let promoted = prepared::execute(
            self.tx,
            sql_once!(
                "UPDATE jobs SET status = CASE WHEN run_at > $3 THEN {SCHEDULED} ELSE {READY} END
                 WHERE id = (SELECT id FROM jobs
                             WHERE queue = $1 AND ordering_key = $2 AND status = {BLOCKED}
                             ORDER BY id LIMIT 1)
                   AND NOT EXISTS (SELECT 1 FROM jobs
                                   WHERE queue = $1 AND ordering_key = $2 AND status IN ({READY}, {IN_FLIGHT}, {SCHEDULED}))"
            ),
            &[&queue, &key, &now],
        )
        .await?;
        Ok(promoted == 1)
    }

    async fn reschedule_leased(
        &self,
        id: JobId,
        lease: Lease,
        run_at: UnixMillis,
        failure: &Failure,
    ) -> StoreResult<bool> {
        let changed = prepared::execute(
            self.tx,
            sql_once!(
                "UPDATE jobs SET status = CASE WHEN $4::bigint > $5::bigint
                                               THEN {SCHEDULED} ELSE {READY} END,
                        run_at = $4, leased_until = NULL, leased_by = NULL,
                        last_error = $6, last_status = $7
                 WHERE id = $1 AND status = {IN_FLIGHT} AND attempts = $2
                   AND coalesce(lease_id, leased_until) = $3"
            ),
            &[
                &uuid(id),
                &attempt_param(lease.attempt),
                &lease.until,
                &run_at,
                &failure.at,
                &failure.error,
                &failure.status.map(i32::from),
            ],
        )
        .await?;
        Ok(changed == 1)
    }

    async fn note_last_failure(
        &self,
        id: JobId,
        lease: Lease,
        failure: &Failure,
    ) -> StoreResult<bool> {
        let changed = prepared::execute(
            self.tx,
            sql_once!(
                "UPDATE jobs SET last_error = $4, last_status = $5
                 WHERE id = $1 AND status = {IN_FLIGHT} AND attempts = $2
                   AND coalesce(lease_id, leased_until) = $3"
            ),
            &[
                &uuid(id),
                &attempt_param(lease.attempt),
                &lease.until,
                &failure.error,
                &failure.status.map(i32::from),
            ],
        )
        .await?;
        Ok(changed == 1)
    }

    async fn extend_lease(&self, id: JobId, lease: Lease, until: UnixMillis) -> StoreResult<bool> {
        let changed = prepared::execute(
            self.tx,
            sql_once!(
                "UPDATE jobs SET lease_id = coalesce(lease_id, leased_until), leased_until = $4
                 WHERE id = $1 AND status = {IN_FLIGHT} AND attempts = $2
                   AND coalesce(lease_id, leased_until) = $3"
            ),
            &[
                &uuid(id),
                &attempt_param(lease.attempt),
                &lease.until,
                &until,
            ],
        )
        .await?;
        Ok(changed == 1)
    }

    async fn lease_of(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<Lease>> {
        Ok(prepared::query_opt(
            self.tx,
            sql_once!(
                "SELECT attempts, coalesce(lease_id, leased_until) FROM jobs
                 WHERE id = $1 AND queue = $2 AND status = {IN_FLIGHT}"
            ),
            &[&uuid(id), &queue.as_str()],
        )
        .await?
        .map(|row| Lease {
            attempt: attempt_of(row.get(0)),
            until: row.get(1),
        }))
    }

    async fn pull_lease_expiries(&self, limit: usize) -> StoreResult<Vec<UnixMillis>> {
        let rows = prepared::query(
            self.tx,
            sql_once!(
                "SELECT DISTINCT leased_until FROM jobs
                 WHERE status = {IN_FLIGHT} AND leased_until IS NOT NULL
                   AND queue IN (SELECT name FROM queues WHERE target = '')
                 ORDER BY leased_until LIMIT $1"
            ),
            &[&(limit as i64)],
        )
        .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    async fn release_lease(&self, id: JobId, lease: Lease) -> StoreResult<bool> {
        let changed = prepared::execute(
            self.tx,
            sql_once!(
                "UPDATE jobs SET status = {READY}, attempts = attempts - 1, leased_until = NULL,
                                 leased_by = NULL, lease_id = NULL
                 WHERE id = $1 AND status = {IN_FLIGHT} AND attempts = $2
                   AND coalesce(lease_id, leased_until) = $3"
            ),
            &[&uuid(id), &attempt_param(lease.attempt), &lease.until],
        )
        .await?;
        Ok(changed == 1)
    }

    async fn note_expired(&self, id: JobId) -> StoreResult<()> {
        prepared::execute(
            self.tx,
            "UPDATE jobs
             SET last_error = coalesce(last_error, 'expired: not delivered within the job TTL')
             WHERE id = $1",
            &[&uuid(id)],
        )
        .await?;
        Ok(())
    }

    async fn live_status(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<JobStatus>> {
        // Locked, so a claim on another node cannot take it between this look and the
        // caller's write.
        let code: Option<i16> = prepared::query_opt(
            self.tx,
            "SELECT status FROM jobs WHERE id = $1 AND queue = $2 FOR UPDATE",
            &[&uuid(id), &queue.as_str()],
        )
        .await?
        .map(|row| row.get(0));
        code.map(|code| {
            JobStatus::from_code(i64::from(code)).ok_or_else(|| {
                anyhow::anyhow!("jobs.status holds {code}, which this hookq does not know").into()
            })
        })
        .transpose()
    }

    async fn stale_leases(
        &self,
        now: UnixMillis,
        default_max_attempts: u32,
        limit: usize,
    ) -> StoreResult<Vec<StaleLease>> {
        Ok(prepared::query(
            self.tx,
            sql_once!(
                "SELECT j.id, j.attempts, coalesce(j.lease_id, j.leased_until),
                        coalesce(q.max_attempts, $2), j.queue
                 FROM jobs j JOIN queues q ON q.name = j.queue
                 WHERE j.status = {IN_FLIGHT} AND j.leased_until < $1
                 ORDER BY j.leased_until LIMIT $3
                 FOR UPDATE OF j SKIP LOCKED"
            ),
            &[
                &now,
                &attempt_param(default_max_attempts),
                &limit_param(limit),
            ],
        )
        .await?
        .iter()
        .map(|row| StaleLease {
            id: job_id(row.get(0)),
            queue: QueueName::from_stored(row.get(4)),
            lease: Lease {
                attempt: attempt_of(row.get(1)),
                until: row.get(2),
            },
            max_attempts: attempt_of(row.get(3)),
        })
        .collect())
    }

    async fn expired_jobs(
        &self,
        cutoff: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<(JobId, QueueName)>> {
        // Ids are UUIDv7: every id below the first possible id of `cutoff` was created
        // before it (a range of the primary key). Locked as found, skipping rows a claim
        // holds: a job being delivered is left alone.
        let bound = uuid(JobId::first_of_millis(cutoff));
        let row =
            |row: &tokio_postgres::Row| (job_id(row.get(0)), QueueName::from_stored(row.get(1)));
        let mut expired: Vec<(JobId, QueueName)> = prepared::query(
            self.tx,
            sql_once!(
                "SELECT id, queue FROM jobs
                 WHERE id < $1 AND status <> {IN_FLIGHT} AND ttl_from IS NULL
                 ORDER BY id LIMIT $2
                 FOR UPDATE SKIP LOCKED"
            ),
            &[&bound, &limit_param(limit)],
        )
        .await?
        .iter()
        .map(row)
        .collect();
        let room = limit.saturating_sub(expired.len());
        if room > 0 {
            let own_ttl = prepared::query(
                self.tx,
                sql_once!(
                    "SELECT id, queue FROM jobs
                     WHERE ttl_from < $1 AND status <> {IN_FLIGHT}
                     ORDER BY ttl_from LIMIT $2
                     FOR UPDATE SKIP LOCKED"
                ),
                &[&cutoff, &limit_param(room)],
            )
            .await?;
            expired.extend(own_ttl.iter().map(row));
        }
        Ok(expired)
    }

    async fn live_job(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<JobRecord>> {
        prepared::query_opt(
            self.tx,
            &format!(
                "SELECT {} FROM jobs WHERE id = $1 AND queue = $2",
                live_columns()
            ),
            &[&uuid(id), &queue.as_str()],
        )
        .await?
        .as_ref()
        .map(live_from_row)
        .transpose()
    }

    /// One page of `queue`'s live jobs in id (creation) order after `after`, through
    /// `jobs_by_queue`.
    /// The page is one range of the queue's jobs by id ([`JobsPage::start`]).
    async fn list_live(
        &self,
        queue: &QueueName,
        page: &JobsPage<JobId>,
    ) -> StoreResult<Vec<JobRecord>> {
        let (direction, compare) = page.keyset();
        let after = uuid(page.start());
        let rows = prepared::query(
            self.tx,
            &format!(
                "SELECT {columns} FROM jobs
                 WHERE queue = $1 AND id {compare} $2 AND ($3::text IS NULL OR {contains})
                 ORDER BY id {direction} LIMIT $4",
                columns = live_columns(),
                contains = payload_or_error_like("ILIKE", "$3::text"),
            ),
            &[
                &queue.as_str(),
                &after,
                &page.pattern(),
                &limit_param(page.limit),
            ],
        )
        .await?;
        rows.iter().map(live_from_row).collect()
    }

    /// One range of the queue's jobs by id, as a READY listing reads it.
    async fn live_ids_matching(
        &self,
        queue: &QueueName,
        after: Option<JobId>,
        before: JobId,
        filter: &LiveFilter,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        let after = uuid(after.unwrap_or_else(|| JobId::from_bytes([0; 16])));
        let rows = prepared::query(
            self.tx,
            sql_once!(
                "SELECT id FROM jobs
                 WHERE queue = $1 AND id > $2 AND id < $3 AND ($4::text IS NULL OR {contains})
                   AND (NOT $5::boolean OR (status <> {IN_FLIGHT} AND run_at > $6::bigint))
                 ORDER BY id LIMIT $7",
                contains = payload_or_error_like("ILIKE", "$4::text"),
            ),
            &[
                &queue.as_str(),
                &after,
                &uuid(before),
                &filter.pattern(),
                &filter.delayed_only,
                &now,
                &limit_param(limit),
            ],
        )
        .await?;
        Ok(rows.iter().map(|row| job_id(row.get(0))).collect())
    }

    async fn live_statuses(
        &self,
        queue: &QueueName,
        ids: &[JobId],
    ) -> StoreResult<Vec<(JobId, JobStatus)>> {
        let ids: Vec<Uuid> = ids.iter().map(|id| uuid(*id)).collect();
        let rows = prepared::query(
            self.tx,
            "SELECT id, status FROM jobs WHERE queue = $1 AND id = ANY($2)",
            &[&queue.as_str(), &ids],
        )
        .await?;
        rows.iter()
            .map(|row| {
                let code: i16 = row.get(1);
                let status = JobStatus::from_code(i64::from(code)).ok_or_else(|| {
                    StoreError::from(anyhow::anyhow!(
                        "jobs.status holds {code}, which this hookq does not know"
                    ))
                })?;
                Ok((job_id(row.get(0)), status))
            })
            .collect()
    }

    /// One statement for every job of the call. A cancel first takes, in the one order
    /// every path takes them, the queue's counter row (when it has a cap) and then the
    /// lock of each ordering key among the jobs (sorted): a head's delivery that holds its
    /// key and then promotes the key's next job, which this cancel may be deleting, would
    /// otherwise wait on the row while this waits on the key.
    async fn act_on_waiting(
        &self,
        queue: &QueueName,
        ids: &[JobId],
        action: JobAction,
        now: UnixMillis,
    ) -> StoreResult<Vec<(JobId, Left)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Uuid> = ids.iter().map(|id| uuid(*id)).collect();
        let name = queue.as_str();
        let unkeyed = |row: &Row| {
            (
                job_id(row.get(0)),
                Left {
                    key: None,
                    had_failures: false,
                },
            )
        };
        Ok(match action {
            // As on SQLite: a scheduled job turns ready, a blocked one only drops its wait.
            JobAction::RunNow => prepared::query(
                self.tx,
                sql_once!(
                    "UPDATE jobs SET run_at = $3,
                            status = CASE WHEN status = {SCHEDULED} THEN {READY} ELSE status END,
                            ttl_from = CASE WHEN ttl_from > $3 THEN $3 ELSE ttl_from END
                     WHERE id = ANY($1) AND queue = $2
                       AND status IN ({READY}, {SCHEDULED}, {BLOCKED}) AND run_at > $3
                     RETURNING id"
                ),
                &[&ids, &name, &now],
            )
            .await?
            .iter()
            .map(unkeyed)
            .collect(),
            JobAction::SetPriority(priority) => prepared::query(
                self.tx,
                sql_once!(
                    "UPDATE jobs SET priority = $3
                     WHERE id = ANY($1) AND queue = $2
                       AND status IN ({READY}, {SCHEDULED}, {BLOCKED}) AND priority <> $3
                     RETURNING id"
                ),
                &[&ids, &name, &priority],
            )
            .await?
            .iter()
            .map(unkeyed)
            .collect(),
            JobAction::Cancel => {
                prepared::execute(
                    self.tx,
                    "SELECT 1 FROM queue_sizes WHERE queue = $1 FOR UPDATE",
                    &[&name],
                )
                .await?;
                let keys = prepared::query(
                    self.tx,
                    "SELECT DISTINCT ordering_key FROM jobs
                     WHERE id = ANY($1) AND queue = $2 AND ordering_key IS NOT NULL
                     ORDER BY ordering_key",
                    &[&ids, &name],
                )
                .await?;
                for row in &keys {
                    lock_key(self.tx, name, row.get(0)).await?;
                }
                prepared::query(
                    self.tx,
                    sql_once!(
                        "DELETE FROM jobs
                         WHERE id = ANY($1) AND queue = $2
                           AND status IN ({READY}, {SCHEDULED}, {BLOCKED})
                         RETURNING id, ordering_key, last_error IS NOT NULL"
                    ),
                    &[&ids, &name],
                )
                .await?
                .iter()
                .map(|row| {
                    (
                        job_id(row.get(0)),
                        Left {
                            key: row
                                .get::<_, Option<String>>(1)
                                .map(|key| (name.to_owned(), key)),
                            had_failures: row.get(2),
                        },
                    )
                })
                .collect()
            }
        })
    }

    /// Where each queue's live jobs stand at `now` (only `queue` when given): each figure
    /// counted through its partial index (ready, scheduled, blocked, in flight), never by
    /// reading every job of a queue. Scheduled jobs already due count as ready.
    async fn live_counts(
        &self,
        queue: Option<&QueueName>,
        now: UnixMillis,
    ) -> StoreResult<BTreeMap<QueueName, QueueCounts>> {
        let name = queue.map(QueueName::as_str);
        let rows = self
            .tx
            .query(
                sql_once!(
                    "SELECT queue, {READY} AS kind, count(*), count(*), min(run_at) FROM jobs
                 WHERE status = {READY} AND ($2::text IS NULL OR queue = $2) GROUP BY queue
                 UNION ALL
                 SELECT queue, {SCHEDULED}, count(*), count(*) FILTER (WHERE run_at <= $1),
                        min(run_at) FILTER (WHERE run_at <= $1) FROM jobs
                 WHERE status = {SCHEDULED} AND ($2::text IS NULL OR queue = $2) GROUP BY queue
                 UNION ALL
                 SELECT queue, {BLOCKED}, count(*), 0, NULL FROM jobs
                 WHERE ordering_key IS NOT NULL AND status = {BLOCKED}
                   AND ($2::text IS NULL OR queue = $2) GROUP BY queue
                 UNION ALL
                 SELECT queue, {IN_FLIGHT}, count(*), 0, NULL FROM jobs
                 WHERE status = {IN_FLIGHT} AND ($2::text IS NULL OR queue = $2) GROUP BY queue"
                ),
                &[&now, &name],
            )
            .await?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        let mut counts: BTreeMap<QueueName, QueueCounts> = BTreeMap::new();
        for row in rows {
            let entry = counts
                .entry(QueueName::from_stored(row.get(0)))
                .or_default();
            let (jobs, due, earliest): (i64, i64, Option<i64>) =
                (row.get(2), row.get(3), row.get(4));
            match i16::try_from(row.get::<_, i32>(1)).unwrap_or(IN_FLIGHT) {
                READY => {
                    entry.ready += count(jobs);
                    entry.oldest_due_at = earliest_of(entry.oldest_due_at, earliest);
                }
                SCHEDULED => {
                    entry.scheduled += count(jobs - due);
                    entry.ready += count(due);
                    entry.oldest_due_at = earliest_of(entry.oldest_due_at, earliest);
                }
                BLOCKED => entry.blocked += count(jobs),
                _ => entry.in_flight += count(jobs),
            }
        }
        Ok(counts)
    }
}

/// A held lease as both listings read it: `id, queue, attempts, leased_at, leased_until,
/// lease_holder, lease_holder_name, extended` (a job's, or with `dead_letter` a letter's).
pub(super) fn held_lease(row: &Row, dead_letter: bool) -> HeldLease {
    HeldLease {
        id: job_id(row.get(0)),
        queue: QueueName::from_stored(row.get(1)),
        attempt: attempt_of(row.get(2)),
        leased_at: row.get(3),
        leased_until: row.get(4),
        holder: LeaseHolder {
            id: row.get(5),
            name: row.get::<_, Option<String>>(6).unwrap_or_default(),
        },
        extended: row.get(7),
        dead_letter,
    }
}

impl HistoryRows for PgTx<'_> {
    async fn record_attempt(&self, id: JobId, attempt: u32, failure: &Failure) -> StoreResult<()> {
        prepared::execute(
            self.tx,
            "INSERT INTO job_attempts (job_id, queue, attempt, at, status, latency_ms, error,
                                       response_headers)
             SELECT id, queue, $2::integer, $3::bigint, $4::integer, $5::bigint, $6::text,
                    $7::text
             FROM jobs WHERE id = $1",
            &[
                &uuid(id),
                &attempt_param(attempt),
                &failure.at,
                &failure.status.map(i32::from),
                &i64::try_from(failure.latency_ms).unwrap_or(i64::MAX),
                &failure.error,
                &failure.headers,
            ],
        )
        .await?;
        Ok(())
    }

    /// The failed attempts of a job, oldest first. `job_attempts` has no insertion order of its
    /// own on PostgreSQL (SQLite reads its rowid): by time, then attempt number, which is the
    /// order they were recorded in (a replay restarts the numbers, later).
    async fn history(&self, id: JobId) -> StoreResult<Vec<AttemptRecord>> {
        Ok(prepared::query(
            self.tx,
            "SELECT attempt, at, status, latency_ms, error, response_headers FROM job_attempts
                 WHERE job_id = $1 ORDER BY at, attempt",
            &[&uuid(id)],
        )
        .await?
        .iter()
        .map(|row| AttemptRecord {
            attempt: attempt_of(row.get(0)),
            at: row.get(1),
            status: super::dead_letters::status_of(row.get(2)),
            latency_ms: u64::try_from(row.get::<_, i64>(3)).unwrap_or(0),
            error: row.get(4),
            headers: row.get(5),
        })
        .collect())
    }

    async fn drop_unreferenced_history(&self, ids: &[JobId]) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids: Vec<Uuid> = ids.iter().map(|id| uuid(*id)).collect();
        prepared::execute(
            self.tx,
            "DELETE FROM job_attempts a
             WHERE a.job_id = ANY($1)
               AND NOT EXISTS (SELECT 1 FROM jobs WHERE id = a.job_id)
               AND NOT EXISTS (SELECT 1 FROM dead_letters WHERE id = a.job_id)
               AND NOT EXISTS (SELECT 1 FROM delivered WHERE id = a.job_id)",
            &[&ids],
        )
        .await?;
        Ok(())
    }
}
