//! The scheduler: fires the ticks of the queues' recurring jobs ([`Schedule`]s). One loop
//! sleeps until the earliest next tick, or until a schedule changes, then has the store fire
//! what is due; the store makes each tick one commit (its job stored, its schedule moved
//! on), which is what makes a tick fire once across restarts and crashes.
//!
//! [`Scheduler::fire_due`] is one round and takes `now`, so tests drive it with any clock.
//!
//! [`Schedule`]: crate::store::Schedule

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::dispatch::Wakeups;
use crate::model::{UnixMillis, now_millis};
use crate::store::{SchedulerRound, Store, StoreResult};
use crate::telemetry;

/// Schedules one round fires at most (one write); more due run another round at once.
pub const ROUND_LIMIT: usize = 100;
/// The longest the loop sleeps without looking: it sleeps by the monotonic clock while
/// ticks are wall-clock times, so a clock step is noticed within this.
const MAX_IDLE: Duration = Duration::from_secs(60);
/// The pause after a failed round before the next.
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);

/// Tells the scheduler that a schedule was created, changed, resumed or deleted, so it looks
/// again at once rather than at the tick it was sleeping towards.
#[derive(Clone, Default)]
pub struct ScheduleChanges(Arc<Notify>);

impl ScheduleChanges {
    pub fn notify(&self) {
        // A stored permit: a change made while the loop is busy is not lost.
        self.0.notify_one();
    }

    async fn changed(&self) {
        self.0.notified().await;
    }
}

pub struct Scheduler {
    pub store: Store,
    pub wakeups: Wakeups,
    pub changes: ScheduleChanges,
}

impl Scheduler {
    /// One round at `now`: fire the due ticks (up to [`ROUND_LIMIT`] schedules), wake the
    /// dispatcher for the queues that got a job, count and log them.
    pub async fn fire_due(&self, now: UnixMillis) -> StoreResult<SchedulerRound> {
        let round = self.store.fire_due_schedules(now, ROUND_LIMIT).await?;
        for fired in &round.fired {
            match fired.job {
                Some(job) => {
                    telemetry::schedule_tick(&fired.queue, "enqueued");
                    telemetry::job_enqueued(&fired.queue);
                    self.wakeups.mark_due(&fired.queue, now);
                    if fired.caught_up {
                        tracing::info!(queue = %fired.queue, schedule = %fired.schedule, tick = fired.tick, job_id = %job, "missed ticks fired once, for the latest");
                    } else {
                        tracing::debug!(queue = %fired.queue, schedule = %fired.schedule, tick = fired.tick, job_id = %job, "schedule fired");
                    }
                }
                None => {
                    telemetry::schedule_tick(&fired.queue, "skipped");
                    tracing::warn!(queue = %fired.queue, schedule = %fired.schedule, tick = fired.tick, "queue full (maxQueued): schedule tick skipped");
                }
            }
        }
        Ok(round)
    }

    /// Fire ticks as they fall due until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            let now = now_millis();
            let wait = match self.fire_due(now).await {
                Ok(round) if round.more => Duration::ZERO,
                Ok(round) => wait_until(round.next_due, now),
                Err(err) => {
                    tracing::error!(error = %err, "scheduler round failed; retrying");
                    RETRY_AFTER_ERROR
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = self.changes.changed() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// How long to sleep at `now` for a tick due at `next` (at most [`MAX_IDLE`]).
fn wait_until(next: Option<UnixMillis>, now: UnixMillis) -> Duration {
    next.map_or(MAX_IDLE, |next| {
        Duration::from_millis(u64::try_from(next.saturating_sub(now)).unwrap_or(0)).min(MAX_IDLE)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_sleeps_until_the_next_tick_and_never_longer_than_a_minute() {
        assert_eq!(wait_until(Some(1_500), 1_000), Duration::from_millis(500));
        assert_eq!(wait_until(Some(900), 1_000), Duration::ZERO);
        assert_eq!(wait_until(Some(i64::MAX), 1_000), MAX_IDLE);
        assert_eq!(wait_until(None, 1_000), MAX_IDLE);
    }
}
