//! The dead-letter admin, job reads, the event outbox and schedules on PostgreSQL: the
//! [`PgStore`] operations of the same names, parameters and results as the store's port
//! (`Store`), each in one transaction, with SQLite's meaning. The SQL of one table is in
//! [`dead_letters`], [`events`], [`schedules`], [`delivered`] or [`jobs`]; what moves a job
//! between tables (replay, TTL expiry, a schedule's tick) is here.
//!
//! Reads run in a read-only `REPEATABLE READ` transaction: their statements see one
//! snapshot, as a read on SQLite does (a job moving from the dead letters back to its queue
//! between two statements of `get_job` is found in one place or the other, never missed).
//! Writes run in `READ COMMITTED`, where a statement that waited for a row another node
//! changed re-checks it: that is what the compare-and-sets below rely on.

use deadpool_postgres::{Client, Transaction};
use tokio_postgres::{Error as PgError, IsolationLevel, Row};
use uuid::Uuid;

use super::jobs::{bury, job_id, uuid};
use super::{PgStore, dead_letters, delivered, events, jobs, queues, schedules};
use crate::event::Event;
use crate::model::{EventId, JobId, QueueName, ScheduleName, UnixMillis};
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{
    AttemptRecord, DeadLetterPage, DlqState, DlqStats, FailureReason, Filter, FiredTick, JobRecord,
    NewJob, NewSchedule, Outbox, OutboxEvent, PageRequest, Position, ReplayReport, ReplayWalk,
    Saved, Schedule, ScheduleTick, SchedulerRound, Selection, TickPlan,
};

/// Dead letters a replay claims and puts back at a time (as on SQLite).
const REPLAY_CHUNK: usize = 500;

impl PgStore {
    /// One page of a queue's live jobs, in id (creation) order, after `after`.
    pub async fn list_ready(
        &self,
        queue: QueueName,
        after: Option<JobId>,
        limit: usize,
    ) -> StoreResult<Vec<JobRecord>> {
        let mut client = self.pool.get().await?;
        let tx = snapshot(&mut client).await?;
        queues::require(&tx, &queue).await?;
        let records = jobs::list_live(&tx, &queue, after, limit).await?;
        tx.commit().await?;
        Ok(records)
    }

    /// One page of the dead letters matching `filter`.
    pub async fn list_dead_letters(
        &self,
        filter: Filter,
        page: PageRequest,
    ) -> StoreResult<DeadLetterPage> {
        let mut client = self.pool.get().await?;
        let tx = snapshot(&mut client).await?;
        if let Some(queue) = &filter.queue {
            queues::require(&tx, queue).await?;
        }
        let page = dead_letters::list(&tx, &filter, page).await?;
        tx.commit().await?;
        Ok(page)
    }

    /// Store an operational event in the outbox, due at once.
    pub async fn record_event(&self, event: Event, now: UnixMillis) -> StoreResult<()> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        events::insert(&tx, EventId::new(), &event, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Up to `limit` outbox events due at `now`, oldest first.
    pub async fn due_events(&self, now: UnixMillis, limit: usize) -> StoreResult<Vec<OutboxEvent>> {
        let mut client = self.pool.get().await?;
        let tx = snapshot(&mut client).await?;
        let due = events::due(&tx, now, limit).await?;
        tx.commit().await?;
        Ok(due)
    }

    /// When the next outbox event falls due, if any waits.
    pub async fn next_event_due(&self) -> StoreResult<Option<UnixMillis>> {
        let mut client = self.pool.get().await?;
        let tx = snapshot(&mut client).await?;
        let next = events::next_due(&tx).await?;
        tx.commit().await?;
        Ok(next)
    }

    /// Outbox events waiting to be sent.
    pub async fn events_pending(&self) -> StoreResult<u64> {
        let mut client = self.pool.get().await?;
        let tx = snapshot(&mut client).await?;
        let pending = events::pending(&tx).await?;
        tx.commit().await?;
        Ok(pending)
    }

    /// An outbox event was sent, or given up on. Relaxed commit, as on SQLite: lost in a
    /// database crash, the event is sent again.
    pub async fn remove_event(&self, id: EventId) -> StoreResult<()> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        tx.batch_execute("SET LOCAL synchronous_commit = off")
            .await?;
        events::remove(&tx, id).await?;
        tx.commit().await?;
        Ok(())
    }

    /// An outbox event's attempt failed: try again at `next_at`. Relaxed commit, as on
    /// SQLite.
    pub async fn reschedule_event(
        &self,
        id: EventId,
        next_at: UnixMillis,
        error: String,
    ) -> StoreResult<()> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        tx.batch_execute("SET LOCAL synchronous_commit = off")
            .await?;
        events::reschedule(&tx, id, next_at, &error).await?;
        tx.commit().await?;
        Ok(())
    }

    /// One page of a queue's delivery log, newest first, after `before` (the last record
    /// of the previous page).
    pub async fn list_delivered(
        &self,
        queue: QueueName,
        before: Option<Position>,
        limit: usize,
    ) -> StoreResult<Vec<JobRecord>> {
        let mut client = self.pool.get().await?;
        let tx = snapshot(&mut client).await?;
        queues::require(&tx, &queue).await?;
        let records = delivered::list(&tx, &queue, before, limit).await?;
        tx.commit().await?;
        Ok(records)
    }

    /// Delete up to `limit` records of the delivery log, with their attempt history: of
    /// each queue in `cutoffs`, those delivered before its cutoff. Returns how many.
    pub async fn purge_delivered(
        &self,
        cutoffs: Vec<(QueueName, UnixMillis)>,
        limit: usize,
    ) -> StoreResult<usize> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let mut deleted = 0;
        for (queue, before) in &cutoffs {
            if deleted >= limit {
                break;
            }
            let ids = delivered::purge(&tx, queue, *before, limit - deleted).await?;
            drop_history_unless_referenced(&tx, &ids).await?;
            deleted += ids.len();
        }
        tx.commit().await?;
        Ok(deleted)
    }

    /// A job of `queue`, live, delivered and kept, or dead-lettered, with its attempt
    /// history.
    pub async fn get_job(
        &self,
        queue: QueueName,
        id: JobId,
    ) -> StoreResult<(JobRecord, Vec<AttemptRecord>)> {
        let mut client = self.pool.get().await?;
        let tx = snapshot(&mut client).await?;
        let record = match jobs::get_live(&tx, &queue, id).await? {
            Some(record) => record,
            None => match delivered::get(&tx, &queue, id).await? {
                Some(record) => record,
                // A `replayed` record is only audit: its job is live again (found above)
                // or delivered since.
                None => dead_letters::get(&tx, Some(&queue), id)
                    .await?
                    .filter(|letter| letter.status != DlqState::Replayed)
                    .ok_or(StoreError::JobNotFound)?
                    .into_job_record(),
            },
        };
        let attempts = jobs::history(&tx, id).await?;
        tx.commit().await?;
        Ok((record, attempts))
    }

    /// Dead-letter figures at `now`; a pending record replayed more than
    /// `repeat_after_replays` times counts as a repeat failure.
    pub async fn dlq_stats(
        &self,
        now: UnixMillis,
        repeat_after_replays: u32,
    ) -> StoreResult<DlqStats> {
        let mut client = self.pool.get().await?;
        let tx = snapshot(&mut client).await?;
        let stats = dead_letters::stats(&tx, now, repeat_after_replays).await?;
        tx.commit().await?;
        Ok(stats)
    }

    /// Replay dead letters: claim `pending` records (`pending → replaying`, skipping those
    /// another transaction holds, so concurrent replays on any nodes never send a job
    /// twice), put their jobs back as READY due at `run_at`, mark them `replayed`; a record
    /// whose job cannot be put back is rolled back to `pending`. Returns how many records
    /// were claimed, and what happened.
    ///
    /// In chunks of 500 records as on SQLite, but all in one transaction: a replay cut short
    /// (a crash, a lost connection) leaves nothing `replaying` behind, so there is nothing
    /// to reset at start-up.
    pub async fn replay(
        &self,
        selection: Selection,
        now: UnixMillis,
        run_at: UnixMillis,
    ) -> StoreResult<(usize, ReplayReport)> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let mut walk = ReplayWalk::new(selection, REPLAY_CHUNK);
        while let Some(chunk) = walk.next_chunk() {
            let claimed = dead_letters::claim_for_replay(&tx, &chunk, now, REPLAY_CHUNK).await?;
            if !walk.claimed(claimed.len()) {
                break;
            }
            walk.put_back(replay_claimed(&tx, &claimed, now, run_at).await?);
        }
        tx.commit().await?;
        Ok(walk.finish())
    }

    /// Dismiss pending dead letters (`pending → acknowledged`). Returns how many.
    pub async fn acknowledge(&self, selection: Selection, now: UnixMillis) -> StoreResult<usize> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let acknowledged = dead_letters::acknowledge(&tx, &selection, now).await?;
        tx.commit().await?;
        Ok(acknowledged)
    }

    /// Delete dead letters for good, whatever their state. Their attempt history goes too,
    /// unless the job still shows it (live again after a replay, or in the delivery log).
    /// `JobNotFound` when the one record asked for is not there.
    pub async fn delete_dead_letters(&self, selection: Selection) -> StoreResult<usize> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let deleted = dead_letters::delete(&tx, &selection).await?;
        if matches!(&selection, Selection::Ids(ids) if ids.len() == 1) && deleted.is_empty() {
            return Err(StoreError::JobNotFound);
        }
        drop_history_unless_referenced(&tx, &deleted).await?;
        tx.commit().await?;
        Ok(deleted.len())
    }

    /// Dead-letter (reason `expired`) up to `limit` jobs not in flight created before
    /// `cutoff` (or, replayed or delayed, due before it: `ttl_from`); returns the queue of
    /// each. A job a claim holds at that moment is left alone: it is being delivered.
    pub async fn expire_jobs(
        &self,
        cutoff: UnixMillis,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<QueueName>> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let expired = expire(&tx, cutoff, now, limit, self.outbox).await?;
        tx.commit().await?;
        Ok(expired)
    }

    /// Delete up to `limit` replayed/acknowledged dead letters last changed before
    /// `before`, with the history no other record shows.
    pub async fn purge_dead_letters(&self, before: UnixMillis, limit: usize) -> StoreResult<usize> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let purged = dead_letters::purge_closed(&tx, before, limit).await?;
        drop_history_unless_referenced(&tx, &purged).await?;
        tx.commit().await?;
        Ok(purged.len())
    }

    /// Create or replace a schedule of `queue` at `now`.
    pub async fn put_schedule(
        &self,
        queue: QueueName,
        schedule: NewSchedule,
        now: UnixMillis,
    ) -> StoreResult<Saved> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let saved = schedules::upsert(&tx, &queue, &schedule, now, self.caps).await?;
        tx.commit().await?;
        Ok(saved)
    }

    /// `queue`'s schedules, by name.
    pub async fn list_schedules(&self, queue: QueueName) -> StoreResult<Vec<Schedule>> {
        let mut client = self.pool.get().await?;
        let tx = snapshot(&mut client).await?;
        queues::require(&tx, &queue).await?;
        let list = schedules::list(&tx, &queue).await?;
        tx.commit().await?;
        Ok(list)
    }

    pub async fn get_schedule(
        &self,
        queue: QueueName,
        name: ScheduleName,
    ) -> StoreResult<Schedule> {
        let mut client = self.pool.get().await?;
        let tx = snapshot(&mut client).await?;
        let schedule = schedules::get(&tx, &queue, &name, false).await?;
        tx.commit().await?;
        schedule.ok_or(StoreError::ScheduleNotFound)
    }

    pub async fn delete_schedule(&self, queue: QueueName, name: ScheduleName) -> StoreResult<()> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        schedules::delete(&tx, &queue, &name).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Pause a schedule, or resume it from its first tick after `now` (ticks missed while
    /// paused are not made up). Returns the schedule as it becomes.
    pub async fn pause_schedule(
        &self,
        queue: QueueName,
        name: ScheduleName,
        paused: bool,
        now: UnixMillis,
    ) -> StoreResult<Schedule> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let schedule = schedules::set_paused(&tx, &queue, &name, paused, now).await?;
        tx.commit().await?;
        Ok(schedule)
    }

    /// Fire the ticks due at `now` of up to `limit` schedules, in one transaction: each
    /// stores its job and moves its schedule on, or neither. Missed ticks fire once (the
    /// latest). Several nodes may run rounds at once: each tick fires on one of them (see
    /// [`schedules`]). The commit is durable, as an enqueue's: a tick whose commit were
    /// lost after its job was delivered would fire again.
    pub async fn fire_due_schedules(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<SchedulerRound> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let round = fire_due_schedules(&tx, now, limit).await?;
        tx.commit().await?;
        Ok(round)
    }
}

/// A read-only transaction on one snapshot.
async fn snapshot(client: &mut Client) -> StoreResult<Transaction<'_>> {
    Ok(client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?)
}

// ---------------------------------------------------------------------------------------
// Moves between tables
// ---------------------------------------------------------------------------------------

/// Put claimed records back on their queues as READY jobs with fresh attempts, due at
/// `run_at`, and mark them `replayed`. Each record is its own savepoint: one that fails is
/// rolled back to `pending` without undoing the others.
async fn replay_claimed(
    tx: &Transaction<'_>,
    ids: &[JobId],
    now: UnixMillis,
    run_at: UnixMillis,
) -> StoreResult<ReplayReport> {
    let mut report = ReplayReport::default();
    for id in ids {
        tx.batch_execute("SAVEPOINT replay_one").await?;
        let attempt = async {
            let mut put = put_back(tx, *id, now, run_at, false).await;
            if matches!(&put, Err(e) if super::jobs::lost_the_head(e)) {
                // Another node's job took the head of the key meanwhile: this one waits
                // behind it, as an enqueue that lost that race does.
                tx.batch_execute("ROLLBACK TO SAVEPOINT replay_one").await?;
                put = put_back(tx, *id, now, run_at, true).await;
            }
            let Some(queue) = put? else {
                return Ok(None);
            };
            dead_letters::mark_replayed(tx, *id, now).await?;
            StoreResult::Ok(Some(queue))
        }
        .await;
        match attempt {
            Ok(Some(queue)) => {
                tx.batch_execute("RELEASE SAVEPOINT replay_one").await?;
                report.replayed.push((*id, queue));
            }
            Ok(None) | Err(_) => {
                if let Err(err) = &attempt {
                    tracing::warn!(job_id = %id, error = %err, "replay failed; record back to pending");
                }
                tx.batch_execute("ROLLBACK TO SAVEPOINT replay_one; RELEASE SAVEPOINT replay_one")
                    .await?;
                dead_letters::unclaim(tx, *id, now).await?;
                report.failed.push(*id);
            }
        }
    }
    Ok(report)
}

/// Insert the job of claimed record `id` back into `jobs`: fresh attempts, due (and its
/// time to live starting) at `run_at`; blocked behind its ordering key if the key has a
/// live job (or `blocked`), as an enqueued job would be. Returns its queue, or `None` if
/// the record is not claimed. Fails if the job is live (its id is taken).
async fn put_back(
    tx: &Transaction<'_>,
    id: JobId,
    now: UnixMillis,
    run_at: UnixMillis,
    blocked: bool,
) -> Result<Option<QueueName>, PgError> {
    // A keyed job joins its key under the key's lock (see `jobs::lock_key`).
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(queue || chr(31) || ordering_key, 0))
         FROM dead_letters WHERE id = $1 AND ordering_key IS NOT NULL",
        &[&uuid(id)],
    )
    .await?;
    let row = tx
        .query_opt(
            "INSERT INTO jobs (id, queue, status, payload, attempts, run_at, created_at,
                               last_error, last_status, replay_count, ttl_from, priority,
                               ordering_key, schedule, schedule_tick)
             SELECT d.id, d.queue,
                    CASE WHEN d.ordering_key IS NOT NULL AND (
                             $4::boolean
                             OR EXISTS (SELECT 1 FROM jobs j
                                        WHERE j.queue = d.queue
                                          AND j.ordering_key = d.ordering_key))
                         THEN 4
                         WHEN $2::bigint > $3::bigint THEN 3
                         ELSE 0 END,
                    d.payload, 0, $2::bigint, d.created_at, d.last_error, d.last_status,
                    d.replay_count + 1, $2::bigint, d.priority, d.ordering_key, d.schedule,
                    d.schedule_tick
             FROM dead_letters d WHERE d.id = $1 AND d.state = 'replaying'
             RETURNING queue",
            &[&uuid(id), &run_at, &now, &blocked],
        )
        .await?;
    Ok(row.map(|row| QueueName::from_stored(row.get(0))))
}

/// Dead-letter (reason `expired`) up to `limit` jobs not in flight: created before `cutoff`
/// (ids are UUIDv7, so every id below the first possible id of `cutoff` was created
/// before it: a range of the primary key), or, with a time to live of their own (replayed,
/// delayed), whose `ttl_from` is before it (`jobs_ttl_from`). Locked as they are found,
/// skipping the rows a claim holds; returns the queue of each.
async fn expire(
    tx: &Transaction<'_>,
    cutoff: UnixMillis,
    now: UnixMillis,
    limit: usize,
    outbox: Outbox,
) -> StoreResult<Vec<QueueName>> {
    let bound = uuid(JobId::first_of_millis(cutoff));
    let row = |row: &Row| (job_id(row.get(0)), QueueName::from_stored(row.get(1)));
    let mut expired: Vec<(JobId, QueueName)> = tx
        .query(
            "SELECT id, queue FROM jobs
             WHERE id < $1 AND status <> 1 AND ttl_from IS NULL
             ORDER BY id LIMIT $2
             FOR UPDATE SKIP LOCKED",
            &[&bound, &jobs::limit_param(limit)],
        )
        .await?
        .iter()
        .map(row)
        .collect();
    let room = limit.saturating_sub(expired.len());
    if room > 0 {
        let own_ttl = tx
            .query(
                "SELECT id, queue FROM jobs
                 WHERE ttl_from < $1 AND status <> 1
                 ORDER BY ttl_from LIMIT $2
                 FOR UPDATE SKIP LOCKED",
                &[&cutoff, &jobs::limit_param(room)],
            )
            .await?;
        expired.extend(own_ttl.iter().map(row));
    }
    for (id, _) in &expired {
        tx.execute(
            "UPDATE jobs
             SET last_error = coalesce(last_error, 'expired: not delivered within the job TTL')
             WHERE id = $1",
            &[&uuid(*id)],
        )
        .await?;
        bury(tx, *id, FailureReason::Expired, now, outbox).await?;
    }
    Ok(expired.into_iter().map(|(_, queue)| queue).collect())
}

/// Fire the ticks of up to `limit` active schedules due at `now`: for each, the schedule's
/// next tick moves on (compare-and-set on the tick fired) and its job is stored, as on
/// SQLite. A queue at its `maxQueued` cap skips the tick (the schedule moves on, no job is
/// stored): its refused insert is rolled back to a savepoint, so the round goes on.
async fn fire_due_schedules(
    tx: &Transaction<'_>,
    now: UnixMillis,
    limit: usize,
) -> StoreResult<SchedulerRound> {
    let mut due = schedules::due(tx, now, limit.saturating_add(1)).await?;
    let more = due.len() > limit;
    due.truncate(limit);
    let mut fired = Vec::with_capacity(due.len());
    for schedule in due {
        let (planned, tick, next) = match schedule.tick_plan(now) {
            None => continue,
            Some(TickPlan::Park { planned, error }) => {
                tracing::error!(queue = %schedule.queue, schedule = %schedule.name, %error, "schedule parked");
                schedules::claim_tick(tx, &schedule.queue, &schedule.name, planned, None).await?;
                continue;
            }
            Some(TickPlan::Fire {
                planned,
                tick,
                next,
            }) => (planned, tick, next),
        };
        if !schedules::claim_tick(tx, &schedule.queue, &schedule.name, planned, next).await? {
            continue;
        }
        let job = NewJob {
            priority: schedule.priority,
            ordering_key: schedule.ordering_key.clone(),
            ..NewJob::now(JobId::new(), schedule.payload.clone(), now)
        };
        tx.batch_execute("SAVEPOINT fire_one").await?;
        let stored = match jobs::enqueue(tx, &schedule.queue, &job).await {
            Ok(_) => {
                tx.batch_execute("RELEASE SAVEPOINT fire_one").await?;
                let by = ScheduleTick {
                    schedule: schedule.name.clone(),
                    tick,
                };
                mark_schedule_tick(tx, job.id, &by).await?;
                schedules::record_run(tx, &schedule.queue, &schedule.name, tick, job.id).await?;
                Some(job.id)
            }
            Err(StoreError::QueueFull) => {
                tx.batch_execute("ROLLBACK TO SAVEPOINT fire_one; RELEASE SAVEPOINT fire_one")
                    .await?;
                None
            }
            Err(err) => return Err(err),
        };
        fired.push(FiredTick {
            queue: schedule.queue,
            schedule: schedule.name,
            tick,
            job: stored,
            caught_up: tick > planned,
        });
    }
    Ok(SchedulerRound {
        fired,
        more,
        next_due: schedules::next_due(tx).await?,
    })
}

/// Mark job `id`, just stored, as the job of a schedule's tick.
async fn mark_schedule_tick(
    tx: &Transaction<'_>,
    id: JobId,
    tick: &ScheduleTick,
) -> StoreResult<()> {
    tx.execute(
        "UPDATE jobs SET schedule = $2, schedule_tick = $3 WHERE id = $1",
        &[&uuid(id), &tick.schedule.as_str(), &tick.tick],
    )
    .await?;
    Ok(())
}

/// Drop the attempt history of the jobs `ids` that no live job, dead letter or delivery
/// log record shows any more.
async fn drop_history_unless_referenced(tx: &Transaction<'_>, ids: &[JobId]) -> StoreResult<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = ids.iter().map(|id| uuid(*id)).collect();
    tx.execute(
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
