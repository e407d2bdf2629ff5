//! Per-queue limits held across every node sharing the database. A queue's own
//! `concurrency` is its leased jobs counted at each claim (on the `jobs_in_flight` index); its
//! `ratePerSecond` is one start schedule in `queue_rates` (the generic cell rate algorithm
//! of `dispatch::rate`, kept in the database instead of in memory). Both are checked in the
//! claim's transaction under a per-queue advisory lock, so two nodes' claims of one limited
//! queue take turns and neither limit is overshot, whatever the number of nodes. Queues
//! without limits of their own claim without the lock. Also: circuit breakers one node opens
//! for every node (`queue_breakers`).

use std::time::Duration;

use deadpool_postgres::{GenericClient, Transaction};
use uuid::Uuid;

use super::jobs::{self, prepared};
use crate::model::{QueueName, UnixMillis};
use crate::policy::Rate;
use crate::store::error::StoreResult;
use crate::store::records::{BreakerNews, Claimed, LeaseHolder, SharedLimits};

/// How late a start may be taken and still count as on schedule (`dispatch::rate::LATENESS`).
const LATENESS_US: i64 = 10_000;

/// When a node finds the queue's whole concurrency in flight on other nodes, it looks again
/// this much later (their deliveries end without telling it).
const CONCURRENCY_RECHECK_MS: i64 = 100;

/// Lease up to `want` due jobs of `queue`, within `limits` counted across every node, to
/// `holder` when a pull worker asks (the claim's arguments, plus the limits).
#[allow(clippy::too_many_arguments)]
pub async fn claim_within(
    tx: &Transaction<'_>,
    queue: &QueueName,
    now: UnixMillis,
    leased_until: UnixMillis,
    want: usize,
    limits: SharedLimits,
    node: Uuid,
    holder: Option<&LeaseHolder>,
) -> StoreResult<Claimed> {
    prepared::execute(
        tx,
        "SELECT pg_advisory_xact_lock(hashtextextended('limits' || chr(30) || $1::text, 0))",
        &[&queue.as_str()],
    )
    .await?;
    let mut allowed = want;
    let mut held_back_until = None;
    if let Some(concurrency) = limits.concurrency {
        let row = prepared::query_one(
            tx,
            crate::sql_once!(
                "SELECT count(*) FROM jobs WHERE queue = $1 AND status = {IN_FLIGHT}",
                IN_FLIGHT = crate::store::status::codes::IN_FLIGHT,
            ),
            &[&queue.as_str()],
        )
        .await?;
        let in_flight = usize::try_from(row.get::<_, i64>(0)).unwrap_or(usize::MAX);
        let room = concurrency.saturating_sub(in_flight);
        if room < allowed {
            allowed = room;
            held_back_until = Some(now + CONCURRENCY_RECHECK_MS);
        }
    }
    let schedule = match limits.rate {
        Some(rate) => {
            let row = prepared::query_opt(
                tx,
                "SELECT next_start_us FROM queue_rates WHERE queue = $1",
                &[&queue.as_str()],
            )
            .await?;
            let plan = StartPlan::new(row.map(|r| r.get(0)), now * 1000, rate, allowed);
            if plan.allowed < allowed {
                allowed = plan.allowed;
                let due = plan.next_due_ms();
                held_back_until = Some(held_back_until.map_or(due, |at: i64| at.max(due)));
            }
            Some(plan)
        }
        None => None,
    };
    let claimed = if allowed == 0 {
        Vec::new()
    } else {
        jobs::claim(tx, queue, now, leased_until, allowed, node, holder).await?
    };
    if let Some(plan) = schedule {
        prepared::execute(
            tx,
            "INSERT INTO queue_rates (queue, next_start_us) VALUES ($1, $2)
             ON CONFLICT (queue) DO UPDATE SET next_start_us = EXCLUDED.next_start_us",
            &[&queue.as_str(), &plan.after(claimed.len())],
        )
        .await?;
    }
    // Fewer due jobs than allowed: nothing was held back by a limit.
    if claimed.len() < allowed {
        held_back_until = None;
    }
    Ok(Claimed {
        jobs: claimed,
        held_back_until,
    })
}

/// One claim's starts under a rate: how many may be taken now, and the schedule after.
#[derive(Debug, Clone, Copy, PartialEq)]
struct StartPlan {
    /// The schedule's next start, caught up to now.
    next_us: i64,
    interval_us: i64,
    early_us: i64,
    allowed: usize,
}

impl StartPlan {
    /// Bring the schedule (`next_us`, or none yet) to `now_us` and take up to `want` starts:
    /// those due by now and those the burst lets come early. A schedule idle for longer than
    /// one interval (or the lateness allowed) starts afresh, owing nothing.
    fn new(next_us: Option<i64>, now_us: i64, rate: Rate, want: usize) -> Self {
        let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
        let interval_us = micros(rate.interval()).max(1);
        let early_us = micros(rate.early());
        let mut next = next_us.unwrap_or(now_us);
        if now_us.saturating_sub(next) > interval_us.max(LATENESS_US) {
            next = now_us;
        }
        let ahead = next.saturating_sub(now_us);
        let allowed = if ahead > early_us {
            0
        } else {
            let on_schedule = (early_us - ahead) / interval_us + 1;
            usize::try_from(on_schedule).unwrap_or(usize::MAX).min(want)
        };
        Self {
            next_us: next,
            interval_us,
            early_us,
            allowed,
        }
    }

    /// The schedule once `taken` starts were used.
    fn after(&self, taken: usize) -> i64 {
        let taken = i64::try_from(taken).unwrap_or(i64::MAX);
        self.next_us
            .saturating_add(self.interval_us.saturating_mul(taken))
    }

    /// When the next start may be taken, in milliseconds (rounded up).
    fn next_due_ms(&self) -> UnixMillis {
        let due_us = self.next_us.saturating_sub(self.early_us);
        due_us.div_euclid(1000) + i64::from(due_us.rem_euclid(1000) > 0)
    }
}

/// Open `queue`'s breaker on every node until `until` (a later opening wins).
pub async fn open_breaker(
    client: &impl GenericClient,
    queue: &QueueName,
    until: UnixMillis,
) -> StoreResult<()> {
    client
        .execute(
            "INSERT INTO queue_breakers (queue, open_until) VALUES ($1, $2)
             ON CONFLICT (queue) DO UPDATE
             SET open_until = greatest(queue_breakers.open_until, EXCLUDED.open_until)",
            &[&queue.as_str(), &until],
        )
        .await?;
    Ok(())
}

/// Close `queue`'s breaker on every node, at `now`: its shared rest ends, and the nodes that
/// opened theirs before `now` close them.
pub async fn close_breaker(
    client: &impl GenericClient,
    queue: &QueueName,
    now: UnixMillis,
) -> StoreResult<()> {
    client
        .execute(
            "INSERT INTO queue_breakers (queue, open_until, closed_at) VALUES ($1, $2, $2)
             ON CONFLICT (queue) DO UPDATE
             SET open_until = least(queue_breakers.open_until, EXCLUDED.open_until),
                 closed_at = EXCLUDED.closed_at",
            &[&queue.as_str(), &now],
        )
        .await?;
    Ok(())
}

/// The breakers some node opened that are still open at `now`, and those an operator closed
/// after `closed_since`.
pub async fn breaker_news(
    client: &impl GenericClient,
    now: UnixMillis,
    closed_since: UnixMillis,
) -> StoreResult<BreakerNews> {
    let rows = client
        .query(
            "SELECT queue, open_until, closed_at FROM queue_breakers
             WHERE open_until > $1 OR closed_at > $2",
            &[&now, &closed_since],
        )
        .await?;
    let mut news = BreakerNews::default();
    for row in &rows {
        let queue = QueueName::from_stored(row.get(0));
        let (open_until, closed_at): (UnixMillis, UnixMillis) = (row.get(1), row.get(2));
        if closed_at > closed_since {
            news.closed.push((queue.clone(), closed_at));
        }
        if open_until > now {
            news.open.push((queue, open_until));
        }
    }
    Ok(news)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_second: f64, burst: Option<u32>) -> Rate {
        Rate { per_second, burst }
    }

    const NOW: i64 = 1_700_000_000_000_000;

    #[test]
    fn a_fresh_schedule_gives_the_burst_at_once_then_one_start_per_interval() {
        // 10/s with a burst of 3: three now, the schedule 300 ms on.
        let plan = StartPlan::new(None, NOW, rate(10.0, Some(3)), 100);
        assert_eq!(plan.allowed, 3);
        let next = plan.after(3);
        assert_eq!(next, NOW + 300_000);
        // At once again: nothing (the next start is 100 ms beyond the early allowance).
        let again = StartPlan::new(Some(next), NOW, rate(10.0, Some(3)), 100);
        assert_eq!(again.allowed, 0);
        assert_eq!(again.next_due_ms(), (NOW + 100_000) / 1000);
        // 100 ms later: one.
        let later = StartPlan::new(Some(next), NOW + 100_000, rate(10.0, Some(3)), 100);
        assert_eq!(later.allowed, 1);
    }

    #[test]
    fn starts_not_taken_are_not_used_and_an_idle_schedule_owes_nothing() {
        let plan = StartPlan::new(None, NOW, rate(10.0, Some(1)), 5);
        assert_eq!(plan.allowed, 1);
        // No due job: the schedule stays where it was.
        assert_eq!(plan.after(0), NOW);
        // Idle for a minute: it starts afresh with its burst, not 600 owed starts.
        let idle = StartPlan::new(Some(NOW), NOW + 60_000_000, rate(10.0, Some(1)), 1000);
        assert_eq!(idle.allowed, 1);
        // A start due 5 ms ago (within the lateness) is still owed, with the current one.
        let late = StartPlan::new(Some(NOW - 5_000), NOW, rate(1000.0, Some(1)), 10);
        assert_eq!(late.next_us, NOW - 5_000);
        assert_eq!(late.allowed, 6);
    }

    #[test]
    fn over_any_window_the_starts_stay_within_rate_times_window_plus_burst() {
        let r = rate(50.0, Some(4));
        let mut next = None;
        let mut taken = 0usize;
        // A claim every 7 ms for 2 s, each asking for 10.
        for step in 0..=(2_000 / 7) {
            let now = NOW + step * 7_000;
            let plan = StartPlan::new(next, now, r, 10);
            taken += plan.allowed;
            next = Some(plan.after(plan.allowed));
        }
        // 2 s at 50/s is 100, plus the burst of 4.
        assert!(taken <= 104, "{taken}");
        assert!(taken >= 98, "{taken}");
    }
}
