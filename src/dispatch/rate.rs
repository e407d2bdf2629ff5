//! Per-queue rate limits: a token bucket per queue with a `ratePerSecond`. Tokens refill
//! continuously at the rate, up to the burst; each delivery started takes one. The claim
//! loop claims no more jobs than there are tokens, and waits for the next token when there
//! is none; the direct hand-off takes one too, or leaves the job to the claim loop.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::model::QueueName;
use crate::policy::Rate;

#[derive(Default)]
pub struct RateLimits {
    buckets: Mutex<HashMap<QueueName, Bucket>>,
}

struct Bucket {
    tokens: f64,
    refilled: Instant,
    rate: Rate,
}

impl Bucket {
    fn new(rate: Rate, now: Instant) -> Self {
        Self {
            // A new (or newly limited) queue may start its burst at once.
            tokens: f64::from(rate.effective_burst()),
            refilled: now,
            rate,
        }
    }

    /// Bring the bucket to `now` under `rate` (which may have changed since).
    fn refill(&mut self, rate: Rate, now: Instant) {
        let burst = f64::from(rate.effective_burst());
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate.per_second).min(burst);
        self.refilled = now;
        self.rate = rate;
    }
}

impl RateLimits {
    /// Take up to `want` tokens of `queue` at `now`; returns how many were taken.
    pub fn take(&self, queue: &QueueName, rate: Rate, want: usize, now: Instant) -> usize {
        let mut buckets = self.lock();
        let bucket = buckets
            .entry(queue.clone())
            .or_insert_with(|| Bucket::new(rate, now));
        bucket.refill(rate, now);
        let whole = bucket.tokens.floor().max(0.0) as usize;
        let taken = whole.min(want);
        bucket.tokens -= taken as f64;
        taken
    }

    /// Give back tokens taken for deliveries that did not start (fewer jobs than slots).
    pub fn give_back(&self, queue: &QueueName, unused: usize) {
        if unused == 0 {
            return;
        }
        if let Some(bucket) = self.lock().get_mut(queue) {
            let burst = f64::from(bucket.rate.effective_burst());
            bucket.tokens = (bucket.tokens + unused as f64).min(burst);
        }
    }

    /// How long until `queue` has a whole token again.
    pub fn next_token_in(&self, queue: &QueueName, now: Instant) -> Duration {
        let mut buckets = self.lock();
        let Some(bucket) = buckets.get_mut(queue) else {
            return Duration::ZERO;
        };
        let rate = bucket.rate;
        bucket.refill(rate, now);
        let missing = (1.0 - bucket.tokens).max(0.0);
        Duration::from_secs_f64(missing / rate.per_second)
    }

    /// `queue` is gone, or no longer limited.
    pub fn forget(&self, queue: &QueueName) {
        self.lock().remove(queue);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<QueueName, Bucket>> {
        // Each update leaves a bucket whole: a panic cannot leave half a change.
        self.buckets.lock().unwrap_or_else(|e| e.into_inner())
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
        // Over ten seconds, no more than rate x 10 + burst.
        let mut started = 0;
        let base = t0 + Duration::from_secs(120);
        for ms in (0..10_000).step_by(7) {
            started += limits.take(&q, rate, 100, base + Duration::from_millis(ms));
        }
        assert!(started <= 100 + 3, "{started}");
        assert!(started >= 100, "{started}");
    }
}
