//! Schedules: a scheduler round (each due schedule's tick stores at most one job, across
//! restarts, crashes and nodes, because the tick moves on by compare-and-set in the
//! transaction that stores its job), and what a put or a pause makes of the next tick.

use crate::model::{JobId, QueueName, ScheduleName, UnixMillis};
use crate::store::dialect::Tx;
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{
    Caps, FiredTick, NewJob, NewSchedule, Saved, Schedule, ScheduleTick, SchedulerRound, TickPlan,
};

/// Fire the ticks of up to `limit` active schedules due at `now`. Ticks missed (the server
/// was down, or the round ran late by more than a tick) fire once: the job carries the
/// latest tick due, and the next tick is the first after `now`. A queue at its `maxQueued`
/// cap skips the tick (the schedule moves on, no job is stored); a schedule whose next tick
/// cannot be computed is parked.
pub async fn fire_due(tx: &impl Tx, now: UnixMillis, limit: usize) -> StoreResult<SchedulerRound> {
    let mut due = tx.due_schedules(now, limit.saturating_add(1)).await?;
    let more = due.len() > limit;
    due.truncate(limit);
    let mut fired = Vec::with_capacity(due.len());
    for schedule in due {
        let (planned, tick, next) = match schedule.tick_plan(now) {
            None => continue,
            Some(TickPlan::Park { planned, error }) => {
                tracing::error!(queue = %schedule.queue, schedule = %schedule.name, %error, "schedule parked");
                tx.claim_tick(&schedule.queue, &schedule.name, planned, None)
                    .await?;
                continue;
            }
            Some(TickPlan::Fire {
                planned,
                tick,
                next,
            }) => (planned, tick, next),
        };
        if !tx
            .claim_tick(&schedule.queue, &schedule.name, planned, next)
            .await?
        {
            continue;
        }
        let job = NewJob {
            priority: schedule.priority,
            ordering_key: schedule.ordering_key.clone(),
            ..NewJob::now(JobId::new(), schedule.payload.clone(), now)
        };
        tx.savepoint("fire_one").await?;
        let stored = match tx
            .insert_jobs(&schedule.queue, std::slice::from_ref(&job))
            .await
        {
            Ok(()) => {
                tx.release("fire_one").await?;
                let by = ScheduleTick {
                    schedule: schedule.name.clone(),
                    tick,
                };
                tx.mark_schedule_tick(job.id, &by).await?;
                tx.record_run(&schedule.queue, &schedule.name, tick, job.id)
                    .await?;
                Some(job.id)
            }
            Err(StoreError::QueueFull) => {
                tx.roll_back_to("fire_one").await?;
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
        next_due: tx.next_schedule_due().await?,
    })
}

/// Create or replace a schedule of `queue` at `now`. A replaced schedule keeps its history
/// (`last_run_at`, `last_job_id`), and its next tick when its expression and time zone did
/// not change (a tick due this very moment is not lost to the replacement); otherwise the
/// next tick is the first after `now`. A paused schedule has none. A new schedule past the
/// queue's cap is refused.
pub async fn put(
    tx: &impl Tx,
    queue: &QueueName,
    schedule: &NewSchedule,
    now: UnixMillis,
    caps: Caps,
) -> StoreResult<Saved> {
    tx.lock_queue_for_schedules(queue).await?;
    let existing = tx.schedule_for_update(queue, &schedule.name).await?;
    let spec = &schedule.spec;
    let next_run_at = match &existing {
        _ if schedule.paused => None,
        Some(old)
            if old.cron == spec.expression()
                && old.timezone == spec.timezone()
                && old.next_run_at.is_some() =>
        {
            old.next_run_at
        }
        _ => spec.next_after(now),
    };
    if existing.is_none() {
        caps.admit_schedule(tx.count_schedules(queue).await?)?;
        if tx
            .insert_schedule(queue, schedule, next_run_at, now)
            .await?
        {
            return Ok(Saved::Created);
        }
        // Created meanwhile: cannot happen under the queue's lock taken above (every
        // creation takes it first); were it to, replace that one.
        tx.require_queue(queue).await?;
    }
    tx.replace_schedule(queue, schedule, next_run_at, now)
        .await?;
    Ok(Saved::Replaced)
}

/// Pause a schedule (it has no next tick), or resume it: its next tick is the first after
/// `now`, so the ticks it missed while paused are not made up. Pausing a paused schedule or
/// resuming an active one changes nothing. Returns the schedule as it becomes.
/// Fire `queue`'s schedule `name` once, by hand, at `now` (a paused schedule too): its job
/// is stored like a tick's (with the schedule's priority and ordering key, carrying tick
/// `now`) and is the schedule's last run; the next tick does not move. `QueueFull` when the
/// queue holds its `maxQueued` jobs.
pub async fn run_now(
    tx: &impl Tx,
    queue: &QueueName,
    name: &ScheduleName,
    now: UnixMillis,
) -> StoreResult<JobId> {
    let schedule = tx
        .schedule_for_update(queue, name)
        .await?
        .ok_or(StoreError::ScheduleNotFound)?;
    let job = NewJob {
        priority: schedule.priority,
        ordering_key: schedule.ordering_key.clone(),
        ..NewJob::now(JobId::new(), schedule.payload.clone(), now)
    };
    tx.insert_jobs(queue, std::slice::from_ref(&job)).await?;
    let by = ScheduleTick {
        schedule: name.clone(),
        tick: now,
    };
    tx.mark_schedule_tick(job.id, &by).await?;
    tx.record_run(queue, name, now, job.id).await?;
    Ok(job.id)
}

pub async fn pause(
    tx: &impl Tx,
    queue: &QueueName,
    name: &ScheduleName,
    paused: bool,
    now: UnixMillis,
) -> StoreResult<Schedule> {
    let schedule = tx
        .schedule_for_update(queue, name)
        .await?
        .ok_or(StoreError::ScheduleNotFound)?;
    if schedule.paused == paused {
        return Ok(schedule);
    }
    let next_run_at = if paused {
        None
    } else {
        schedule.spec()?.next_after(now)
    };
    tx.set_schedule_paused(queue, name, paused, next_run_at, now)
        .await?;
    tx.schedule(queue, name)
        .await?
        .ok_or(StoreError::ScheduleNotFound)
}
