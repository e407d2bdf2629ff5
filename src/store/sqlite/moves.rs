//! The operations that move a job between tables, in one transaction each: an attempt's
//! outcome (delivered, retried, dead-lettered), lease recovery, TTL expiry, cancel, replay
//! (dead letter back to a live job), the removal of dead letters and of delivered jobs with
//! their history, and a schedule's tick (a job stored as its schedule moves on).
//! The table modules know nothing of each other; everything that touches two of them is here.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::jobs::{delete_history, id_from_row, record_attempt, state_of};
use super::{dead_letters, delivered, events, idempotency, jobs, schedules};
use crate::event::{Event, excerpt};
use crate::model::{EventId, JobId, QueueName, UnixMillis};
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{
    BatchEnqueued, BatchKey, Enqueued, FailureReason, FiredTick, IdempotencyKey, JobState, Lease,
    NewJob, Outbox, Outcome, ReplayReport, ScheduleTick, SchedulerRound, Selection, TickPlan,
};

/// Store `job` unless its idempotency key already stands for a job of `queue` (and has not
/// expired): the lookup, the insert and the key's record commit together, so concurrent
/// enqueues with one key store one job.
pub fn enqueue_once(
    conn: &Connection,
    queue: &QueueName,
    job: &NewJob,
    key: &IdempotencyKey,
) -> StoreResult<Enqueued> {
    if let Some(first) = idempotency::find(conn, queue, key)? {
        return Ok(Enqueued::Duplicate(first));
    }
    jobs::insert(conn, queue, job)?;
    idempotency::record(conn, queue, key, job.id, job.created_at)?;
    Ok(Enqueued::Stored)
}

/// Store every job of a batch, unless its key stands for a batch already (then nothing:
/// the same batch is a duplicate, another one is refused). The lookup, the inserts and the
/// key's record commit together.
pub fn enqueue_batch(
    conn: &Connection,
    queue: &QueueName,
    batch: &[NewJob],
    key: Option<&BatchKey>,
) -> StoreResult<BatchEnqueued> {
    if let Some(key) = key
        && let Some(recorded) = idempotency::find_batch(conn, queue, key)?
    {
        return recorded.answer(key);
    }
    for job in batch {
        jobs::insert(conn, queue, job)?;
    }
    if let Some(key) = key {
        let ids: Vec<JobId> = batch.iter().map(|job| job.id).collect();
        idempotency::record_batch(conn, queue, key, &ids)?;
    }
    Ok(BatchEnqueued::Stored)
}

/// Fire the ticks of up to `limit` active schedules due at `now`, each in this one
/// transaction: the schedule's next tick moves on (compare-and-set on the tick fired, so a
/// tick fires once) and its job is stored, or neither.
///
/// Ticks missed (the server was down, or this round ran late by more than a tick) fire once:
/// the job carries the latest tick due, and the next tick is the first after `now`. A queue
/// at its `maxQueued` cap skips the tick (the schedule moves on, no job is stored).
pub fn fire_due_schedules(
    conn: &Connection,
    now: UnixMillis,
    limit: usize,
) -> StoreResult<SchedulerRound> {
    let mut due = schedules::due(conn, now, limit + 1)?;
    let more = due.len() > limit;
    due.truncate(limit);
    let mut fired = Vec::with_capacity(due.len());
    for schedule in due {
        let (planned, tick, next) = match schedule.tick_plan(now) {
            None => continue,
            Some(TickPlan::Park { planned, error }) => {
                tracing::error!(queue = %schedule.queue, schedule = %schedule.name, %error, "schedule parked");
                schedules::claim_tick(conn, &schedule.queue, &schedule.name, planned, None)?;
                continue;
            }
            Some(TickPlan::Fire {
                planned,
                tick,
                next,
            }) => (planned, tick, next),
        };
        if !schedules::claim_tick(conn, &schedule.queue, &schedule.name, planned, next)? {
            continue;
        }
        let job = NewJob {
            priority: schedule.priority,
            ordering_key: schedule.ordering_key.clone(),
            ..NewJob::now(JobId::new(), schedule.payload.clone(), now)
        };
        let stored = match jobs::insert(conn, &schedule.queue, &job) {
            Ok(()) => {
                let by = ScheduleTick {
                    schedule: schedule.name.clone(),
                    tick,
                };
                jobs::set_schedule_tick(conn, job.id, &by)?;
                schedules::record_run(conn, &schedule.queue, &schedule.name, tick, job.id)?;
                Some(job.id)
            }
            Err(StoreError::QueueFull) => None,
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
        next_due: schedules::next_due(conn)?,
    })
}

/// Record the outcome of job `id` under `lease`. Returns false (and changes nothing) if the
/// lease was lost in the meantime: the job was recovered, cancelled, replayed or its queue
/// deleted. A job that leaves (delivered, dead-lettered) lets the next job of its ordering
/// key go. A delivered job to keep is copied to the delivery log first, with its history.
pub fn record_outcome(
    conn: &Connection,
    id: JobId,
    lease: Lease,
    outcome: &Outcome,
    outbox: Outbox,
) -> StoreResult<bool> {
    let Lease { attempt, until } = lease;
    match outcome {
        Outcome::Delivered { delivery, keep } => {
            if *keep && !delivered::keep(conn, id, (attempt, until), delivery)? {
                return Ok(false);
            }
            let deleted = jobs::delete_leased(conn, id, attempt, until, delivery.at)?;
            // Only a job that failed before has history to drop: a first-time success
            // writes nothing beyond its claim and this delete.
            if deleted == Some(true) && !keep {
                delete_history(conn, id)?;
            }
            Ok(deleted.is_some())
        }
        Outcome::Retry { run_at, failure } => {
            let changed = jobs::reschedule_leased(conn, id, (attempt, until), *run_at, failure)?;
            if changed {
                record_attempt(conn, id, attempt, failure)?;
            }
            Ok(changed)
        }
        Outcome::Dead { failure } => {
            let changed = conn
                .prepare_cached(
                    "UPDATE jobs SET last_error = ?4, last_status = ?5
                     WHERE id = ?1 AND status = 1 AND attempts = ?2 AND leased_until = ?3",
                )?
                .execute(params![
                    &id.as_bytes()[..],
                    attempt,
                    until,
                    failure.error,
                    failure.status
                ])?;
            if changed == 1 {
                record_attempt(conn, id, attempt, failure)?;
                bury(
                    conn,
                    id,
                    FailureReason::MaxAttemptsReached,
                    failure.at,
                    outbox,
                )?;
            }
            Ok(changed == 1)
        }
    }
}

/// Remove a ready job that is not being delivered.
pub fn cancel(conn: &Connection, queue: &QueueName, id: JobId, now: UnixMillis) -> StoreResult<()> {
    match state_of(conn, queue, id)? {
        Some(JobState::Ready) => {
            jobs::remove(conn, id, now)?;
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

/// Leases that outlived the lease timeout (a delivery that hung past every timeout): the
/// attempt counts; the job retries now, or is dead-lettered if it was the last attempt.
pub fn recover_stale_leases(
    conn: &Connection,
    now: UnixMillis,
    default_max_attempts: u32,
    outbox: Outbox,
) -> StoreResult<usize> {
    // Each job's queue decides its last attempt: its own maxAttempts, else the server's.
    let stale: Vec<(JobId, Lease, u32)> = conn
        .prepare_cached(
            "SELECT j.id, j.attempts, j.leased_until, coalesce(q.max_attempts, ?2)
             FROM jobs j JOIN queues q ON q.name = j.queue
             WHERE j.status = 1 AND j.leased_until < ?1",
        )?
        .query_map(params![now, default_max_attempts], |row| {
            Ok((
                id_from_row(row, 0)?,
                Lease {
                    attempt: row.get(1)?,
                    until: row.get(2)?,
                },
                row.get(3)?,
            ))
        })?
        .collect::<Result<_, _>>()?;
    for (id, lease, max_attempts) in &stale {
        let outcome = Outcome::of_expired_lease(*lease, *max_attempts, now);
        record_outcome(conn, *id, *lease, &outcome, outbox)?;
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
    outbox: Outbox,
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
             WHERE id < ?1 AND status <> 1 AND ttl_from IS NULL LIMIT ?2",
        )?
        .query_map(params![&bound.as_bytes()[..], limit as i64], row)?
        .collect::<Result<_, _>>()?;
    let room = limit.saturating_sub(expired.len());
    if room > 0 {
        let replayed = conn
            .prepare_cached(
                "SELECT id, queue FROM jobs WHERE ttl_from < ?1 AND status <> 1 LIMIT ?2",
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
        bury(conn, *id, FailureReason::Expired, now, outbox)?;
    }
    Ok(expired.into_iter().map(|(_, queue)| queue).collect())
}

/// Move job `id` from `jobs` into the dead letters (as `pending`). A job that was replayed
/// and failed again reopens its existing record, keeping its replay count. With
/// `outbox.dead_letters`, a `job.dead_lettered` event is stored in the same transaction.
pub fn bury(
    conn: &Connection,
    id: JobId,
    reason: FailureReason,
    now: UnixMillis,
    outbox: Outbox,
) -> StoreResult<()> {
    let key = &id.as_bytes()[..];
    if outbox.dead_letters {
        announce_dead_letter(conn, id, reason, now)?;
    }
    conn.prepare_cached(
        "INSERT INTO dead_letters(id, queue, target, payload, created_at, attempts,
                failure_reason, last_error, last_status, failed_at, state, replay_count,
                updated_at, priority, ordering_key, schedule, schedule_tick)
         SELECT j.id, j.queue, q.target, j.payload, j.created_at, j.attempts, ?2,
                j.last_error, j.last_status, ?3, 'pending', j.replay_count, ?3, j.priority,
                j.ordering_key, j.schedule, j.schedule_tick
         FROM jobs j JOIN queues q ON q.name = j.queue
         WHERE j.id = ?1
         ON CONFLICT(id) DO UPDATE SET
             queue = excluded.queue, target = excluded.target, payload = excluded.payload,
             attempts = excluded.attempts, failure_reason = excluded.failure_reason,
             last_error = excluded.last_error, last_status = excluded.last_status,
             failed_at = excluded.failed_at, state = 'pending',
             replay_count = excluded.replay_count, acknowledged_at = NULL,
             updated_at = excluded.updated_at, priority = excluded.priority,
             ordering_key = excluded.ordering_key, schedule = excluded.schedule,
             schedule_tick = excluded.schedule_tick",
    )?
    .execute(params![key, reason.as_str(), now])?;
    jobs::remove(conn, id, now)?;
    Ok(())
}

/// Store the `job.dead_lettered` event of live job `id`, about to be buried.
fn announce_dead_letter(
    conn: &Connection,
    id: JobId,
    reason: FailureReason,
    now: UnixMillis,
) -> StoreResult<()> {
    let job = conn
        .prepare_cached("SELECT queue, attempts, last_status, last_error FROM jobs WHERE id = ?1")?
        .query_row([&id.as_bytes()[..]], |row| {
            Ok((
                QueueName::from_stored(row.get(0)?),
                row.get(1)?,
                row.get(2)?,
                row.get::<_, Option<String>>(3)?,
            ))
        })
        .optional()?;
    let Some((queue, attempts, last_status, last_error)) = job else {
        return Ok(());
    };
    let event = Event::JobDeadLettered {
        queue,
        id,
        attempts,
        last_status,
        error: last_error.as_deref().map(excerpt),
        reason: reason.as_str().to_owned(),
    };
    events::insert(conn, EventId::new(), &event, now)
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
        let attempt = (|| -> StoreResult<Option<QueueName>> {
            let queue: Option<String> = conn
                .prepare_cached(&format!(
                    "INSERT INTO jobs(id, queue, status, payload, attempts, run_at, created_at,
                            last_error, last_status, replay_count, ttl_from, priority,
                            ordering_key, schedule, schedule_tick)
                     SELECT id, queue, {status}, payload, 0, ?2, created_at, last_error,
                            last_status, replay_count + 1, ?2, priority, ordering_key,
                            schedule, schedule_tick
                     FROM dead_letters WHERE id = ?1 AND state = 'replaying'
                     RETURNING queue",
                    status = jobs::entry_status(
                        "dead_letters.queue",
                        Some("dead_letters.ordering_key"),
                        "?2",
                        "?3"
                    ),
                ))?
                .query_row(params![key, run_at, now], |row| row.get(0))
                .optional()?;
            let Some(queue) = queue else {
                return Ok(None);
            };
            conn.prepare_cached(
                "UPDATE dead_letters SET state = 'replayed', replayed_at = ?2,
                        replay_count = replay_count + 1, updated_at = ?2
                 WHERE id = ?1",
            )?
            .execute(params![key, now])?;
            Ok(Some(QueueName::from_stored(queue)))
        })();
        match attempt {
            Ok(Some(queue)) => {
                conn.execute_batch("RELEASE replay_one")?;
                report.replayed.push((*id, queue));
            }
            Ok(None) | Err(_) => {
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

/// Remove dead letters for good (explicit admin action). Their attempt history goes too,
/// unless the job still shows it (live again after a replay, or in the delivery log).
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
            drop_history_unless_referenced(conn, *id)?;
        }
    }
    if matches!(selection, Selection::Ids(ids) if ids.len() == 1) && deleted == 0 {
        return Err(StoreError::JobNotFound);
    }
    Ok(deleted)
}

/// Drop the attempt history of job `id` unless a live job, a dead letter or the delivery
/// log still shows it.
fn drop_history_unless_referenced(conn: &Connection, id: JobId) -> StoreResult<()> {
    let referenced: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM jobs WHERE id = ?1)
                 OR EXISTS (SELECT 1 FROM dead_letters WHERE id = ?1)
                 OR EXISTS (SELECT 1 FROM delivered WHERE id = ?1)",
        )?
        .query_row([&id.as_bytes()[..]], |row| row.get(0))?;
    if !referenced {
        delete_history(conn, id)?;
    }
    Ok(())
}

/// Delivery-log retention: delete up to `limit` records of `queue` delivered before
/// `before`, with their attempt history. Returns how many.
pub fn purge_delivered(
    conn: &Connection,
    queue: &QueueName,
    before: UnixMillis,
    limit: usize,
) -> StoreResult<usize> {
    let ids = delivered::purge(conn, queue, before, limit)?;
    for id in &ids {
        drop_history_unless_referenced(conn, *id)?;
    }
    Ok(ids.len())
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
        drop_history_unless_referenced(conn, id)?;
    }
    Ok(ids.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::now_millis;
    use crate::store::records::{DlqState, Failure, Filter, PageRequest};
    use crate::store::sealing::Sealing;
    use crate::store::sqlite::{SqliteStore, Synchronous};

    // ---------------------------------------------------------------------------------------
    // Replay rollback and interrupted replays
    // ---------------------------------------------------------------------------------------

    /// A raw writer connection on a fresh, migrated database with queue `q`.
    fn raw_database(dir: &tempfile::TempDir) -> (rusqlite::Connection, QueueName) {
        let (conn, queue) = super::super::ceiling::open_with_queue(
            &dir.path().join("raw.db"),
            "http://127.0.0.1:9/hook",
        )
        .unwrap();
        (conn, queue)
    }

    fn empty_job(id: JobId, now: UnixMillis) -> crate::store::records::NewJob {
        let payload = crate::json::canonicalize(b"{}").expect("JSON");
        crate::store::records::NewJob::now(id, payload, now)
    }

    fn failure(at: UnixMillis) -> Failure {
        Failure {
            error: "boom".into(),
            status: Some(500),
            latency_ms: 1,
            at,
        }
    }

    /// Dead-letter `n` fresh jobs through the job functions, at `now`.
    fn bury_jobs(
        conn: &rusqlite::Connection,
        queue: &QueueName,
        n: usize,
        now: UnixMillis,
    ) -> Vec<JobId> {
        let mut ids: Vec<JobId> = (0..n).map(|_| JobId::new()).collect();
        ids.sort();
        for id in &ids {
            jobs::insert(conn, queue, &empty_job(*id, now)).unwrap();
        }
        for job in jobs::claim(conn, queue, now, now + 60_000, n).unwrap() {
            let dead = Outcome::Dead {
                failure: failure(now),
            };
            assert!(record_outcome(conn, job.id, job.lease(), &dead, Outbox::default()).unwrap());
        }
        ids
    }

    #[test]
    fn a_replay_whose_job_cannot_be_put_back_is_rolled_back_to_pending() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, queue) = raw_database(&dir);
        let t0 = now_millis();
        let ids = bury_jobs(&conn, &queue, 3, t0);
        let claimed =
            dead_letters::claim_for_replay(&conn, &Selection::Ids(ids.clone()), t0, 10).unwrap();
        assert_eq!(claimed, ids);
        // The middle job is live again, so re-inserting it violates the unique id.
        jobs::insert(&conn, &queue, &empty_job(ids[1], t0)).unwrap();

        let report = replay_claimed(&conn, &claimed, t0 + 5, t0 + 5).unwrap();
        assert_eq!(report.replayed_ids(), [ids[0], ids[2]]);
        assert_eq!(report.failed, [ids[1]]);

        let rolled_back = dead_letters::get(&conn, Some(&queue), ids[1])
            .unwrap()
            .unwrap();
        assert_eq!(rolled_back.status, DlqState::Pending);
        assert_eq!(rolled_back.replay_count, 0);
        assert_eq!(rolled_back.replayed_at, None);
        for id in [ids[0], ids[2]] {
            let letter = dead_letters::get(&conn, Some(&queue), id).unwrap().unwrap();
            assert_eq!(letter.status, DlqState::Replayed);
            assert_eq!(letter.replay_count, 1);
            assert_eq!(letter.replayed_at, Some(t0 + 5));
            let job = jobs::get(&conn, &queue, id)
                .unwrap()
                .expect("the job is live again");
            assert_eq!(job.state, JobState::Ready);
            assert_eq!(job.attempts, 0, "fresh attempts");
            assert_eq!(job.run_at, t0 + 5);
        }
        // The live job that blocked the replay is the one inserted above, untouched.
        let blocker = jobs::get(&conn, &queue, ids[1]).unwrap().unwrap();
        assert_eq!(blocker.run_at, t0);
        // No transaction is left open.
        assert!(conn.is_autocommit());
    }

    #[tokio::test]
    async fn records_left_replaying_by_an_interrupted_replay_are_pending_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = now_millis();
        let ids = {
            let (conn, queue) = raw_database(&dir);
            let ids = bury_jobs(&conn, &queue, 2, t0);
            // The process stops between claiming and putting back.
            let claimed =
                dead_letters::claim_for_replay(&conn, &Selection::Queue(queue), t0, 10).unwrap();
            assert_eq!(claimed.len(), 2);
            ids
        };
        let (store, done) = SqliteStore::open(
            &dir.path().join("raw.db"),
            Synchronous::Normal,
            Sealing::none(),
            t0,
            |_| {},
        )
        .unwrap();
        let page = PageRequest {
            after: None,
            limit: 100,
            newest_first: true,
            with_payload: false,
            with_total: false,
        };
        let letters = store
            .list_dead_letters(Filter::default(), page)
            .await
            .unwrap()
            .letters;
        assert_eq!(letters.len(), 2);
        assert!(
            letters.iter().all(|l| l.status == DlqState::Pending),
            "{letters:?}"
        );
        // And they can be replayed now.
        let (claimed, report) = store
            .replay(Selection::Ids(ids.clone()), t0, t0)
            .await
            .unwrap();
        assert_eq!(claimed, 2);
        assert_eq!(report.replayed_ids(), ids);
        drop(store);
        tokio::task::spawn_blocking(move || done.wait())
            .await
            .unwrap();
    }
}
