//! PostgreSQL's side of the contract: [`Tx`] over one transaction, each primitive the SQL
//! of its table module (or, for the few only the shared decisions call, here). Safe with
//! any number of nodes at once: claims and sweeps lock what they take (`FOR UPDATE SKIP
//! LOCKED`), outcomes are fenced by the lease, keys are claimed by inserting their row.

use std::collections::BTreeMap;

use deadpool_postgres::Transaction;
use uuid::Uuid;

use super::jobs::{attempt_of, attempt_param, job_id, limit_param, prepared, uuid};
use super::{dead_letters, delivered, events, jobs, queues, schedules};
use crate::event::Event;
use crate::model::{EventId, JobId, QueueName, ScheduleName, UnixMillis};
use crate::sql_once;
use crate::store::dialect::{Buried, KeyClaim, Left, StaleLease, Tx};
use crate::store::error::StoreResult;
use crate::store::records::{
    AttemptRecord, BatchKey, ClaimedJob, DeadLetter, DeadLetterPage, Delivery, DlqStats, Failure,
    FailureReason, Filter, IdempotencyKey, JobRecord, Lease, NewJob, NewSchedule, OutboxEvent,
    PageRequest, Position, QueueCounts, RecordedBatch, Schedule, ScheduleTick, Selection,
};
use crate::store::status::JobStatus;
use crate::store::status::codes::{IN_FLIGHT, READY, SCHEDULED};

/// One PostgreSQL transaction of node `node` (what its leases carry), as the decisions
/// see it.
#[derive(Clone, Copy)]
pub struct PgTx<'t> {
    pub tx: &'t Transaction<'t>,
    pub node: Uuid,
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

impl Tx for PgTx<'_> {
    async fn savepoint(&self, name: &'static str) -> StoreResult<()> {
        Ok(self.tx.batch_execute(&format!("SAVEPOINT {name}")).await?)
    }

    async fn release(&self, name: &'static str) -> StoreResult<()> {
        Ok(self
            .tx
            .batch_execute(&format!("RELEASE SAVEPOINT {name}"))
            .await?)
    }

    async fn roll_back_to(&self, name: &'static str) -> StoreResult<()> {
        Ok(self
            .tx
            .batch_execute(&format!(
                "ROLLBACK TO SAVEPOINT {name}; RELEASE SAVEPOINT {name}"
            ))
            .await?)
    }

    async fn insert_jobs(&self, queue: &QueueName, batch: &[NewJob]) -> StoreResult<()> {
        for job in batch {
            jobs::insert(self.tx, queue, job).await?;
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
        jobs::claim(self.tx, queue, now, leased_until, limit, self.node).await
    }

    async fn delete_leased(&self, id: JobId, lease: Lease) -> StoreResult<Option<Left>> {
        Ok(prepared::query_opt(
            self.tx,
            sql_once!(
                "DELETE FROM jobs WHERE id = $1 AND status = {IN_FLIGHT} AND attempts = $2
                                        AND leased_until = $3
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

    async fn promote_next_of_key(
        &self,
        queue: &str,
        key: &str,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        jobs::promote_next_of_key(self.tx, queue, key, now).await
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
                   AND leased_until = $3"
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
                   AND leased_until = $3"
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
                "SELECT j.id, j.attempts, j.leased_until, coalesce(q.max_attempts, $2)
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
        jobs::get_live(self.tx, queue, id).await
    }

    async fn record_attempt(&self, id: JobId, attempt: u32, failure: &Failure) -> StoreResult<()> {
        prepared::execute(
            self.tx,
            "INSERT INTO job_attempts (job_id, queue, attempt, at, status, latency_ms, error)
             SELECT id, queue, $2::integer, $3::bigint, $4::integer, $5::bigint, $6::text
             FROM jobs WHERE id = $1",
            &[
                &uuid(id),
                &attempt_param(attempt),
                &failure.at,
                &failure.status.map(i32::from),
                &i64::try_from(failure.latency_ms).unwrap_or(i64::MAX),
                &failure.error,
            ],
        )
        .await?;
        Ok(())
    }

    async fn history(&self, id: JobId) -> StoreResult<Vec<AttemptRecord>> {
        jobs::history(self.tx, id).await
    }

    async fn drop_history(&self, ids: &[JobId]) -> StoreResult<()> {
        let ids: Vec<Uuid> = ids.iter().map(|id| uuid(*id)).collect();
        prepared::execute(
            self.tx,
            "DELETE FROM job_attempts WHERE job_id = ANY($1)",
            &[&ids],
        )
        .await?;
        Ok(())
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
                        response_status, latency_ms)
                 SELECT id, queue, payload, attempts, created_at, not_before, priority,
                        ordering_key, schedule, schedule_tick, $4::bigint, $5::integer,
                        $6::bigint
                 FROM jobs WHERE id = $1 AND status = {IN_FLIGHT} AND attempts = $2
                             AND leased_until = $3
                 ON CONFLICT (id) DO UPDATE SET
                     queue = excluded.queue, payload = excluded.payload,
                     attempts = excluded.attempts, delivered_at = excluded.delivered_at,
                     response_status = excluded.response_status,
                     latency_ms = excluded.latency_ms"
            ),
            &[
                &uuid(id),
                &attempt_param(lease.attempt),
                &lease.until,
                &delivery.at,
                &i32::from(delivery.status),
                &i64::try_from(delivery.latency_ms).unwrap_or(i64::MAX),
            ],
        )
        .await?;
        Ok(kept == 1)
    }

    async fn delivered_job(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<JobRecord>> {
        delivered::get(self.tx, queue, id).await
    }

    async fn purge_delivered(
        &self,
        queue: &QueueName,
        before: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        delivered::purge(self.tx, queue, before, limit).await
    }

    async fn copy_to_dead_letters(
        &self,
        id: JobId,
        reason: FailureReason,
        now: UnixMillis,
    ) -> StoreResult<Option<Buried>> {
        let row = prepared::query_opt(
            self.tx,
            "INSERT INTO dead_letters (id, queue, target, payload, created_at, attempts,
                    failure_reason, last_error, last_status, failed_at, state, replay_count,
                    updated_at, priority, ordering_key, schedule, schedule_tick)
             SELECT j.id, j.queue, q.target, j.payload, j.created_at, j.attempts, $2::text,
                    j.last_error, j.last_status, $3::bigint, 'pending', j.replay_count, $3,
                    j.priority, j.ordering_key, j.schedule, j.schedule_tick
             FROM jobs j JOIN queues q ON q.name = j.queue
             WHERE j.id = $1
             ON CONFLICT (id) DO UPDATE SET
                 queue = excluded.queue, target = excluded.target, payload = excluded.payload,
                 attempts = excluded.attempts, failure_reason = excluded.failure_reason,
                 last_error = excluded.last_error, last_status = excluded.last_status,
                 failed_at = excluded.failed_at, state = 'pending',
                 replay_count = excluded.replay_count, acknowledged_at = NULL,
                 updated_at = excluded.updated_at, priority = excluded.priority,
                 ordering_key = excluded.ordering_key, schedule = excluded.schedule,
                 schedule_tick = excluded.schedule_tick
             RETURNING queue, attempts, last_status, last_error",
            &[&uuid(id), &reason.as_str(), &now],
        )
        .await?;
        Ok(row.map(|row| Buried {
            queue: QueueName::from_stored(row.get(0)),
            attempts: attempt_of(row.get(1)),
            last_status: dead_letters::status_of(row.get(2)),
            last_error: row.get(3),
        }))
    }

    async fn dead_letter_is_open(&self, queue: &QueueName, id: JobId) -> StoreResult<bool> {
        Ok(prepared::query_opt(
            self.tx,
            "SELECT 1 FROM dead_letters WHERE id = $1 AND queue = $2 AND state != 'replayed'",
            &[&uuid(id), &queue.as_str()],
        )
        .await?
        .is_some())
    }

    async fn dead_letter(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<DeadLetter>> {
        dead_letters::get(self.tx, Some(queue), id).await
    }

    async fn claim_for_replay(
        &self,
        selection: &Selection,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        dead_letters::claim_for_replay(self.tx, selection, now, limit).await
    }

    async fn put_back(
        &self,
        id: JobId,
        now: UnixMillis,
        run_at: UnixMillis,
    ) -> StoreResult<Option<QueueName>> {
        dead_letters::put_back(self.tx, id, now, run_at).await
    }

    async fn mark_replayed(&self, id: JobId, now: UnixMillis) -> StoreResult<()> {
        dead_letters::mark_replayed(self.tx, id, now).await
    }

    async fn unclaim_replay(&self, id: JobId, now: UnixMillis) -> StoreResult<()> {
        dead_letters::unclaim(self.tx, id, now).await
    }

    async fn delete_dead_letters(&self, selection: &Selection) -> StoreResult<Vec<JobId>> {
        dead_letters::delete(self.tx, selection).await
    }

    async fn purge_closed_dead_letters(
        &self,
        before: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        dead_letters::purge_closed(self.tx, before, limit).await
    }

    async fn claim_idempotency_key(
        &self,
        queue: &QueueName,
        key: &IdempotencyKey,
        id: JobId,
        created_at: UnixMillis,
    ) -> StoreResult<KeyClaim> {
        jobs::claim_idempotency_key(self.tx, queue, key, id, created_at).await
    }

    async fn claim_batch_key(
        &self,
        queue: &QueueName,
        key: &BatchKey,
        ids: &[JobId],
    ) -> StoreResult<Option<RecordedBatch>> {
        jobs::claim_batch_key(self.tx, queue, key, ids).await
    }

    async fn insert_event(&self, id: EventId, event: &Event, now: UnixMillis) -> StoreResult<()> {
        events::insert(self.tx, id, event, now).await
    }

    async fn due_schedules(&self, now: UnixMillis, limit: usize) -> StoreResult<Vec<Schedule>> {
        schedules::due(self.tx, now, limit).await
    }

    async fn claim_tick(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        planned: UnixMillis,
        next: Option<UnixMillis>,
    ) -> StoreResult<bool> {
        schedules::claim_tick(self.tx, queue, name, planned, next).await
    }

    async fn record_run(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        tick: UnixMillis,
        job: JobId,
    ) -> StoreResult<()> {
        schedules::record_run(self.tx, queue, name, tick, job).await
    }

    async fn next_schedule_due(&self) -> StoreResult<Option<UnixMillis>> {
        schedules::next_due(self.tx).await
    }

    async fn lock_queue_for_schedules(&self, queue: &QueueName) -> StoreResult<()> {
        schedules::lock_queue(self.tx, queue).await
    }

    async fn schedule(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
    ) -> StoreResult<Option<Schedule>> {
        schedules::get(self.tx, queue, name, false).await
    }

    async fn schedule_for_update(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
    ) -> StoreResult<Option<Schedule>> {
        schedules::get(self.tx, queue, name, true).await
    }

    async fn schedules(&self, queue: &QueueName) -> StoreResult<Vec<Schedule>> {
        schedules::list(self.tx, queue).await
    }

    async fn count_schedules(&self, queue: &QueueName) -> StoreResult<u64> {
        schedules::count(self.tx, queue).await
    }

    async fn insert_schedule(
        &self,
        queue: &QueueName,
        schedule: &NewSchedule,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        schedules::insert(self.tx, queue, schedule, next_run_at, now).await
    }

    async fn replace_schedule(
        &self,
        queue: &QueueName,
        schedule: &NewSchedule,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<()> {
        schedules::replace(self.tx, queue, schedule, next_run_at, now).await
    }

    async fn set_schedule_paused(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        paused: bool,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<()> {
        schedules::set_paused(self.tx, queue, name, paused, next_run_at, now).await
    }

    async fn delete_schedule(&self, queue: &QueueName, name: &ScheduleName) -> StoreResult<()> {
        schedules::delete(self.tx, queue, name).await
    }

    async fn require_queue(&self, queue: &QueueName) -> StoreResult<()> {
        queues::require(self.tx, queue).await
    }

    async fn list_live(
        &self,
        queue: &QueueName,
        after: Option<JobId>,
        limit: usize,
    ) -> StoreResult<Vec<JobRecord>> {
        jobs::list_live(self.tx, queue, after, limit).await
    }

    async fn list_delivered(
        &self,
        queue: &QueueName,
        before: Option<Position>,
        limit: usize,
    ) -> StoreResult<Vec<JobRecord>> {
        delivered::list(self.tx, queue, before, limit).await
    }

    async fn list_dead_letters(
        &self,
        filter: &Filter,
        page: PageRequest,
    ) -> StoreResult<DeadLetterPage> {
        dead_letters::list(self.tx, filter, page).await
    }

    async fn dlq_stats(&self, now: UnixMillis, repeat_after_replays: u32) -> StoreResult<DlqStats> {
        dead_letters::stats(self.tx, now, repeat_after_replays).await
    }

    async fn acknowledge(&self, selection: &Selection, now: UnixMillis) -> StoreResult<usize> {
        dead_letters::acknowledge(self.tx, selection, now).await
    }

    async fn live_counts(
        &self,
        queue: Option<&QueueName>,
        now: UnixMillis,
    ) -> StoreResult<BTreeMap<QueueName, QueueCounts>> {
        jobs::counts(self.tx, queue, now).await
    }

    async fn pending_dead_letters(
        &self,
        queue: Option<&QueueName>,
    ) -> StoreResult<Vec<(QueueName, u64)>> {
        jobs::pending_dead_letters(self.tx, queue).await
    }

    async fn purge_idempotency_keys(&self, before: UnixMillis, limit: usize) -> StoreResult<usize> {
        jobs::purge_idempotency_keys(self.tx, before, limit).await
    }

    async fn due_events(&self, now: UnixMillis, limit: usize) -> StoreResult<Vec<OutboxEvent>> {
        events::due(self.tx, now, limit).await
    }

    async fn next_event_due(&self) -> StoreResult<Option<UnixMillis>> {
        events::next_due(self.tx).await
    }

    async fn events_pending(&self) -> StoreResult<u64> {
        events::pending(self.tx).await
    }

    async fn remove_event(&self, id: EventId) -> StoreResult<()> {
        events::remove(self.tx, id).await
    }

    async fn reschedule_event(
        &self,
        id: EventId,
        next_at: UnixMillis,
        error: &str,
    ) -> StoreResult<()> {
        events::reschedule(self.tx, id, next_at, error).await
    }
}
