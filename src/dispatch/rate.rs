//! Per-queue rate limits, as a schedule of start times (the generic cell rate algorithm, the
//! token bucket's exact twin): starts are due one interval (`1 / ratePerSecond`) apart, and
//! up to `burst` of them may be taken early. Each delivery started takes one; the claim loop
//! claims no more jobs than it may start and waits for the next start time when it may start
//! none; the direct hand-off takes one too, or leaves the job to the claim loop.
//!
//! Unlike a capped token count, the schedule remembers starts that came due while the claim
//! loop was still waking up (a timer fires a millisecond late, a claim takes a moment):
//! starts due within the last [`LATENESS`] (or one interval, if longer) are still owed, so at
//! 500/s with `burst` 1 the queue gets 500 starts a second, not one per claim round. A
//! schedule idle for longer starts afresh (with its burst), owing nothing. So at most
//! `burst` + rate × 10 ms (at least `burst` + 1) starts come at once, and over any window the
//! starts stay within rate × window + that.

use std::time::{Duration, Instant};

use super::per_queue::PerQueue;
use crate::model::QueueName;
use crate::policy::Rate;

/// How late a start may be taken and still count as on schedule.
pub const LATENESS: Duration = Duration::from_millis(10);

#[derive(Default)]
pub struct RateLimits {
    schedules: PerQueue<Schedule>,
}

struct Schedule {
    /// When the next start is due.
    next: Instant,
    rate: Rate,
}

impl Schedule {
    fn interval(&self) -> Duration {
        self.rate.interval()
    }

    /// How early a start may be taken: the burst beyond the first.
    fn early(&self) -> Duration {
        self.rate.early()
    }

    /// Bring the schedule to `now` under `rate` (which may have changed since): starts due
    /// longer ago than the lateness allowed are not owed.
    fn catch_up(&mut self, rate: Rate, now: Instant) {
        self.rate = rate;
        let owed = self.interval().max(LATENESS);
        if now.saturating_duration_since(self.next) > owed {
            self.next = now; // idle (or stalled) that long: start afresh
        }
    }
}

impl RateLimits {
    /// Take up to `want` starts of `queue` at `now`; returns how many were taken.
    pub fn take(&self, queue: &QueueName, rate: Rate, want: usize, now: Instant) -> usize {
        let mut schedules = self.schedules.lock();
        let schedule = schedules
            .entry(queue.clone())
            .or_insert_with(|| Schedule { next: now, rate });
        schedule.catch_up(rate, now);
        let (interval, early) = (schedule.interval(), schedule.early());
        // The starts due by now, and those the burst lets come early.
        let may_start = |next: Instant| next.saturating_duration_since(now) <= early;
        let mut taken = 0;
        while taken < want && may_start(schedule.next) {
            let Some(after) = schedule.next.checked_add(interval) else {
                break;
            };
            schedule.next = after;
            taken += 1;
        }
        taken
    }

    /// Give back starts taken for deliveries that did not start (fewer jobs than slots).
    pub fn give_back(&self, queue: &QueueName, unused: usize) {
        if unused == 0 {
            return;
        }
        if let Some(schedule) = self.schedules.lock().get_mut(queue) {
            let unused = u32::try_from(unused).unwrap_or(u32::MAX);
            let back = schedule
                .interval()
                .checked_mul(unused)
                .unwrap_or(Duration::MAX);
            schedule.next = schedule.next.checked_sub(back).unwrap_or(schedule.next);
        }
    }

    /// How long until `queue` may start a delivery again.
    pub fn next_token_in(&self, queue: &QueueName, now: Instant) -> Duration {
        let mut schedules = self.schedules.lock();
        let Some(schedule) = schedules.get_mut(queue) else {
            return Duration::ZERO;
        };
        let rate = schedule.rate;
        schedule.catch_up(rate, now);
        schedule
            .next
            .saturating_duration_since(now)
            .saturating_sub(schedule.early())
    }

    /// `queue` is gone, or no longer limited.
    pub fn forget(&self, queue: &QueueName) {
        self.schedules.forget(queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_the_rate() {
        let limits = RateLimits::default();
        let q = QueueName::parse("q").unwrap();
        let rate = Rate {
            per_second: 10.0,
            burst: Some(3),
        };
        let t0 = Instant::now();
        assert_eq!(limits.take(&q, rate, 5, t0), 3, "the burst at once");
        assert_eq!(limits.take(&q, rate, 5, t0), 0);
        assert_eq!(limits.next_token_in(&q, t0), Duration::from_millis(100));
        assert_eq!(limits.take(&q, rate, 5, t0 + Duration::from_millis(250)), 2);
        // Refill never exceeds the burst.
        assert_eq!(limits.take(&q, rate, 10, t0 + Duration::from_secs(60)), 3);
        limits.give_back(&q, 2);
        assert_eq!(limits.take(&q, rate, 10, t0 + Duration::from_secs(60)), 2);
        // Over ten seconds, no more than rate x 10 + burst + 1.
        let mut started = 0;
        let base = t0 + Duration::from_secs(120);
        for ms in (0..10_000).step_by(7) {
            started += limits.take(&q, rate, 100, base + Duration::from_millis(ms));
        }
        assert!(started <= 100 + 3 + 1, "{started}");
        assert!(started >= 100, "{started}");
    }

    #[test]
    fn a_start_that_came_due_while_the_claim_loop_woke_is_still_owed() {
        let limits = RateLimits::default();
        let q = QueueName::parse("q").unwrap();
        let rate = Rate {
            per_second: 500.0,
            burst: Some(1),
        };
        let t0 = Instant::now();
        // Every round wakes 3 ms late (a 2 ms interval): a capped bucket would give 1 start
        // per 5 ms (200/s); the schedule still gives 500/s, at most 2 at a time.
        let mut at = t0;
        let mut started = 0;
        for _ in 0..1000 {
            let taken = limits.take(&q, rate, 10, at);
            assert!(taken <= 2, "{taken} at once");
            started += taken;
            at += limits.next_token_in(&q, at) + Duration::from_millis(3);
        }
        let elapsed = (at - t0).as_secs_f64();
        let per_second = started as f64 / elapsed;
        assert!((per_second - 500.0).abs() < 5.0, "{per_second}/s");
    }

    #[test]
    fn extreme_rates_and_bursts_never_overflow() {
        let limits = RateLimits::default();
        let q = QueueName::parse("q").unwrap();
        let t0 = Instant::now();
        for (per_second, burst) in [
            (1e-300, Some(u32::MAX)),
            (1e-300, None),
            (1e6, Some(u32::MAX)),
        ] {
            let rate = Rate { per_second, burst };
            limits.forget(&q);
            assert!(limits.take(&q, rate, 3, t0) >= 1);
            let _ = limits.next_token_in(&q, t0);
            limits.give_back(&q, usize::MAX);
            let _ = limits.take(&q, rate, usize::MAX >> 40, t0 + Duration::from_secs(1));
        }
    }

    #[test]
    fn an_idle_schedule_owes_nothing_beyond_its_burst() {
        let limits = RateLimits::default();
        let q = QueueName::parse("q").unwrap();
        let rate = Rate {
            per_second: 100.0,
            burst: Some(2),
        };
        let t0 = Instant::now();
        assert_eq!(limits.take(&q, rate, 10, t0), 2);
        let later = t0 + Duration::from_secs(5);
        assert_eq!(
            limits.take(&q, rate, 10, later),
            2,
            "the burst, not 5 s worth"
        );
    }
}
