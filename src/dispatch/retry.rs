//! The retry policy: how many attempts a job gets and how long to wait before each retry.
//! The schedule is data (a list of delays), not control flow.

use std::time::Duration;

use crate::model::UnixMillis;

#[derive(Debug, Clone)]
pub struct RetryPolicy {
    max_attempts: u32,
    /// Delay before retry n is `backoff[n - 1]`; the last entry repeats.
    backoff: Vec<Duration>,
}

impl RetryPolicy {
    /// `backoff` must not be empty (the configuration guarantees it).
    pub fn new(max_attempts: u32, backoff: Vec<Duration>) -> Self {
        let backoff = if backoff.is_empty() {
            vec![Duration::from_secs(1)]
        } else {
            backoff
        };
        Self {
            max_attempts: max_attempts.max(1),
            backoff,
        }
    }

    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The wait before retry `n` (1 = the first retry, after attempt 1 failed).
    pub fn delay_before_retry(&self, n: u32) -> Duration {
        let index = (n.max(1) - 1) as usize;
        self.backoff[index.min(self.backoff.len() - 1)]
    }

    /// After attempt `attempt` failed at `now`: when to try again, or `None` if that was the
    /// last attempt. A worker's `Retry-After` (if any) can only push the retry later.
    pub fn next_attempt_at(
        &self,
        attempt: u32,
        now: UnixMillis,
        retry_after: Option<Duration>,
    ) -> Option<UnixMillis> {
        if attempt >= self.max_attempts {
            return None;
        }
        let delay = self
            .delay_before_retry(attempt)
            .max(retry_after.unwrap_or_default().min(MAX_RETRY_AFTER));
        Some(now.saturating_add(delay.as_millis() as i64))
    }
}

/// A worker may ask for a later retry, but not park a job for longer than this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy::new(4, vec![Duration::from_secs(1), Duration::from_secs(5)])
    }

    #[test]
    fn the_last_delay_repeats() {
        let p = policy();
        assert_eq!(p.delay_before_retry(1), Duration::from_secs(1));
        assert_eq!(p.delay_before_retry(2), Duration::from_secs(5));
        assert_eq!(p.delay_before_retry(9), Duration::from_secs(5));
    }

    #[test]
    fn the_last_attempt_is_not_retried() {
        let p = policy();
        assert_eq!(p.next_attempt_at(1, 1000, None), Some(2000));
        assert_eq!(p.next_attempt_at(3, 1000, None), Some(6000));
        assert_eq!(p.next_attempt_at(4, 1000, None), None);
    }

    #[test]
    fn retry_after_only_delays_and_is_capped() {
        let p = policy();
        assert_eq!(
            p.next_attempt_at(1, 0, Some(Duration::from_millis(10))),
            Some(1000)
        );
        assert_eq!(
            p.next_attempt_at(1, 0, Some(Duration::from_secs(30))),
            Some(30_000)
        );
        assert_eq!(
            p.next_attempt_at(1, 0, Some(Duration::from_secs(86_400))),
            Some(3_600_000)
        );
    }
}
