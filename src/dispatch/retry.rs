//! The retry policy: how many attempts a job gets and how long to wait before each retry.
//! The schedule is data (a list of delays), not control flow.
//!
//! **Jitter.** Each delay is spread by up to ±`jitter` (20% by default) around its scheduled
//! value, drawn anew for every retry. Jobs that failed together (a target's outage fails
//! every job in flight at once) would otherwise come back together, on the same tick of the
//! schedule, as one burst against a target that is just recovering. Proportional jitter,
//! rather than "full jitter" (anywhere from 0 to the delay), keeps the documented schedule
//! recognizable for operators (a 30 s step stays 24–36 s) and never turns a backoff into an
//! immediate retry. A worker's `Retry-After` is a floor the jitter never goes below.

use std::borrow::Cow;
use std::time::Duration;

use crate::model::UnixMillis;
use crate::policy::Defaults;
use crate::store::Queue;

/// A worker may ask for a later retry, but not park a job for longer than this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// The default spread of a retry delay: ±20%.
pub const DEFAULT_JITTER: f64 = 0.2;

/// The widest spread allowed: beyond ±50% the schedule stops meaning much, and a spread of
/// 100% could turn a backoff into an immediate retry.
pub const MAX_JITTER: f64 = 0.5;

#[derive(Debug, Clone)]
pub struct RetryPolicy {
    max_attempts: u32,
    /// Delay before retry n is `backoff[n - 1]`; the last entry repeats.
    backoff: Vec<Duration>,
    /// Fraction of a delay a retry may move either way (0 = exactly on schedule).
    jitter: f64,
}

impl RetryPolicy {
    /// `backoff` must not be empty (the configuration guarantees it); `jitter` is clamped
    /// to 0–[`MAX_JITTER`].
    pub fn new(max_attempts: u32, backoff: Vec<Duration>, jitter: f64) -> Self {
        let backoff = if backoff.is_empty() {
            vec![Duration::from_secs(1)]
        } else {
            backoff
        };
        Self {
            max_attempts: max_attempts.max(1),
            backoff,
            jitter: if jitter.is_finite() {
                jitter.clamp(0.0, MAX_JITTER)
            } else {
                0.0
            },
        }
    }

    /// The same jitter with another schedule (a queue's own attempts and backoff).
    pub fn with_schedule(&self, max_attempts: u32, backoff: Vec<Duration>) -> Self {
        Self::new(max_attempts, backoff, self.jitter)
    }

    /// The schedule of `queue`, this server policy's unless the queue sets its own attempts
    /// or backoff (the rest from `defaults`).
    pub fn for_queue(&self, queue: &Queue, defaults: &Defaults) -> Cow<'_, Self> {
        let own = &queue.policy;
        if own.max_attempts.is_none() && own.backoff.is_none() {
            return Cow::Borrowed(self);
        }
        let effective = own.effective(defaults);
        Cow::Owned(self.with_schedule(effective.max_attempts, effective.backoff))
    }

    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The scheduled wait before retry `n` (1 = the first retry, after attempt 1 failed),
    /// before jitter.
    pub fn delay_before_retry(&self, n: u32) -> Duration {
        // Never empty: `new` puts in one step when given none.
        crate::policy::backoff_step(&self.backoff, n).unwrap_or_default()
    }

    /// After attempt `attempt` failed at `now`: when to try again, or `None` if that was the
    /// last attempt. `spread`, a draw in −1…1 ([`random_spread`]), places the retry within
    /// the jitter around its scheduled delay. A worker's `Retry-After` (if any) can only push
    /// the retry later.
    pub fn next_attempt_at(
        &self,
        attempt: u32,
        now: UnixMillis,
        retry_after: Option<Duration>,
        spread: f64,
    ) -> Option<UnixMillis> {
        if attempt >= self.max_attempts {
            return None;
        }
        let factor = 1.0 + self.jitter * spread.clamp(-1.0, 1.0);
        let delay = self
            .delay_before_retry(attempt)
            .mul_f64(factor)
            .max(retry_after.unwrap_or_default().min(MAX_RETRY_AFTER));
        let millis = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
        Some(now.saturating_add(millis))
    }
}

/// A uniform draw in −1…1 for [`RetryPolicy::next_attempt_at`].
pub fn random_spread() -> f64 {
    fastrand::f64() * 2.0 - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(jitter: f64) -> RetryPolicy {
        RetryPolicy::new(
            4,
            vec![Duration::from_secs(1), Duration::from_secs(5)],
            jitter,
        )
    }

    #[test]
    fn the_last_delay_repeats() {
        let p = policy(0.0);
        assert_eq!(p.delay_before_retry(1), Duration::from_secs(1));
        assert_eq!(p.delay_before_retry(2), Duration::from_secs(5));
        assert_eq!(p.delay_before_retry(9), Duration::from_secs(5));
    }

    #[test]
    fn the_last_attempt_is_not_retried() {
        let p = policy(0.0);
        assert_eq!(p.next_attempt_at(1, 1000, None, 0.0), Some(2000));
        assert_eq!(p.next_attempt_at(3, 1000, None, 0.0), Some(6000));
        assert_eq!(p.next_attempt_at(4, 1000, None, 0.0), None);
    }

    #[test]
    fn jitter_spreads_a_delay_by_at_most_its_fraction_either_way() {
        let p = policy(0.2);
        assert_eq!(p.next_attempt_at(2, 0, None, -1.0), Some(4000));
        assert_eq!(p.next_attempt_at(2, 0, None, 0.0), Some(5000));
        assert_eq!(p.next_attempt_at(2, 0, None, 1.0), Some(6000));
        // A draw out of range is clamped, never a larger spread.
        assert_eq!(p.next_attempt_at(2, 0, None, 7.0), Some(6000));
        // Jobs failing at the same moment come back spread out, not in one burst.
        let retries: std::collections::BTreeSet<i64> = (0..200)
            .filter_map(|_| p.next_attempt_at(2, 0, None, random_spread()))
            .inspect(|at| assert!((4000..=6000).contains(at), "{at}"))
            .collect();
        assert!(retries.len() > 50, "{} distinct retry times", retries.len());
    }

    #[test]
    fn retry_after_only_delays_is_capped_and_jitter_never_undercuts_it() {
        let p = policy(0.2);
        assert_eq!(
            p.next_attempt_at(1, 0, Some(Duration::from_millis(10)), 0.0),
            Some(1000)
        );
        assert_eq!(
            p.next_attempt_at(1, 0, Some(Duration::from_secs(30)), -1.0),
            Some(30_000)
        );
        assert_eq!(
            p.next_attempt_at(1, 0, Some(Duration::from_secs(86_400)), 1.0),
            Some(3_600_000)
        );
    }

    #[test]
    fn random_draws_stay_within_minus_one_and_one() {
        for _ in 0..1000 {
            let spread = random_spread();
            assert!((-1.0..=1.0).contains(&spread), "{spread}");
        }
    }
}
