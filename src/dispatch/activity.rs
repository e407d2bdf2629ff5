//! What each queue's attempts ended in over the last minute (delivered, failed), for its
//! stats: a ring of sixty one-second buckets per queue, kept in memory by the node that made
//! the attempts.

use super::per_queue::PerQueue;
use crate::model::{QueueName, UnixMillis};

const SECONDS: usize = 60;

/// Attempt outcomes per queue over a sliding minute.
#[derive(Default)]
pub struct Activity {
    windows: PerQueue<Window>,
}

/// One queue's minute: bucket `s % 60` counts the attempts of second `s`.
struct Window {
    buckets: [Bucket; SECONDS],
}

#[derive(Clone, Copy, Default)]
struct Bucket {
    second: i64,
    delivered: u64,
    failed: u64,
}

/// Attempts of one queue over the last 60 seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LastMinute {
    pub delivered: u64,
    pub failed: u64,
}

impl Activity {
    /// Count one attempt of `queue` that ended at `now`.
    pub fn record(&self, queue: &QueueName, delivered: bool, now: UnixMillis) {
        let second = now.div_euclid(1000);
        let mut windows = self.windows.lock();
        let window = windows.entry(queue.clone()).or_insert_with(|| Window {
            buckets: [Bucket::default(); SECONDS],
        });
        let bucket = &mut window.buckets[second.rem_euclid(SECONDS as i64) as usize];
        if bucket.second != second {
            *bucket = Bucket {
                second,
                ..Bucket::default()
            };
        }
        if delivered {
            bucket.delivered += 1;
        } else {
            bucket.failed += 1;
        }
    }

    /// `queue`'s attempts in the 60 seconds up to `now`.
    pub fn last_minute(&self, queue: &QueueName, now: UnixMillis) -> LastMinute {
        let second = now.div_euclid(1000);
        let windows = self.windows.lock();
        let Some(window) = windows.get(queue) else {
            return LastMinute::default();
        };
        window
            .buckets
            .iter()
            .filter(|b| b.second > second - SECONDS as i64 && b.second <= second)
            .fold(LastMinute::default(), |sum, b| LastMinute {
                delivered: sum.delivered + b.delivered,
                failed: sum.failed + b.failed,
            })
    }

    /// `queue` is gone.
    pub fn forget(&self, queue: &QueueName) {
        self.windows.forget(queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_count_for_sixty_seconds_then_drop_out() {
        let activity = Activity::default();
        let q = QueueName::parse("q").unwrap();
        let t0 = 1_700_000_000_000;
        activity.record(&q, true, t0);
        activity.record(&q, true, t0 + 500);
        activity.record(&q, false, t0 + 30_000);
        let seen = |at| activity.last_minute(&q, at);
        assert_eq!(
            seen(t0 + 30_000),
            LastMinute {
                delivered: 2,
                failed: 1
            }
        );
        assert_eq!(
            seen(t0 + 59_999),
            LastMinute {
                delivered: 2,
                failed: 1
            }
        );
        assert_eq!(
            seen(t0 + 60_000),
            LastMinute {
                delivered: 0,
                failed: 1
            }
        );
        assert_eq!(seen(t0 + 90_000), LastMinute::default());
        // A bucket reused a minute later starts from zero.
        activity.record(&q, true, t0 + 60_100);
        assert_eq!(
            seen(t0 + 60_100),
            LastMinute {
                delivered: 1,
                failed: 1
            }
        );
        let other = QueueName::parse("other").unwrap();
        assert_eq!(activity.last_minute(&other, t0), LastMinute::default());
        activity.forget(&q);
        assert_eq!(seen(t0 + 60_100), LastMinute::default());
    }
}
