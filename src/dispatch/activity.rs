//! What each queue's attempts ended in recently (delivered, failed), for its stats: a ring
//! of sixty one-second buckets (the last minute) and a ring of sixty one-minute buckets (the
//! last hour, the UI's chart, each with how long its attempts took) per queue, kept in
//! memory by the node that made the attempts.

use super::per_queue::PerQueue;
use crate::latency::LatencyHistogram;
use crate::model::{QueueName, UnixMillis};
use crate::store::ActivityFigures;

const SECONDS: usize = 60;
/// Minutes in [`Activity::last_hour`].
pub const MINUTES: usize = 60;

/// Attempt outcomes per queue over a sliding minute.
#[derive(Default)]
pub struct Activity {
    windows: PerQueue<Window>,
}

/// One queue's recent attempts: `seconds[s % 60]` counts those of second `s`,
/// `minutes[m % 60]` those of minute `m`.
struct Window {
    seconds: [Bucket; SECONDS],
    minutes: [Bucket; MINUTES],
    /// `latency[m % 60]`: how long the attempts of `minutes[m % 60]` took.
    latency: [LatencyHistogram; MINUTES],
}

/// The attempts of one period (a second or a minute, numbered from the epoch).
#[derive(Clone, Copy, Default)]
struct Bucket {
    period: i64,
    delivered: u64,
    failed: u64,
}

impl Bucket {
    /// Count one attempt of `period` in this ring slot, emptied first if it held an older
    /// period.
    fn count(&mut self, period: i64, delivered: bool) {
        if self.period != period {
            *self = Bucket {
                period,
                ..Bucket::default()
            };
        }
        if delivered {
            self.delivered += 1;
        } else {
            self.failed += 1;
        }
    }

    fn figures(&self) -> LastMinute {
        LastMinute {
            delivered: self.delivered,
            failed: self.failed,
        }
    }
}

fn slot(period: i64, ring: usize) -> usize {
    period.rem_euclid(ring as i64) as usize
}

/// Attempts of one queue over the last 60 seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LastMinute {
    pub delivered: u64,
    pub failed: u64,
}

impl Activity {
    /// Count one attempt of `queue` that ended at `now` after `latency_ms`.
    pub fn record(&self, queue: &QueueName, delivered: bool, latency_ms: u64, now: UnixMillis) {
        let second = now.div_euclid(1000);
        let minute = now.div_euclid(60_000);
        let mut windows = self.windows.lock();
        let window = windows.entry(queue.clone()).or_insert_with(|| Window {
            seconds: [Bucket::default(); SECONDS],
            minutes: [Bucket::default(); MINUTES],
            latency: [LatencyHistogram::default(); MINUTES],
        });
        window.seconds[slot(second, SECONDS)].count(second, delivered);
        let at = slot(minute, MINUTES);
        if window.minutes[at].period != minute {
            window.latency[at] = LatencyHistogram::default();
        }
        window.minutes[at].count(minute, delivered);
        window.latency[at].record(latency_ms);
    }

    /// How long `queue`'s attempts of the minute `minutes_ago` before `now`'s took.
    fn latency_of(&self, queue: &QueueName, now: UnixMillis, minutes_ago: i64) -> LatencyHistogram {
        let minute = now.div_euclid(60_000) - minutes_ago;
        let windows = self.windows.lock();
        match windows.get(queue) {
            Some(window) if window.minutes[slot(minute, MINUTES)].period == minute => {
                window.latency[slot(minute, MINUTES)]
            }
            _ => LatencyHistogram::default(),
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
            .seconds
            .iter()
            .filter(|b| b.period > second - SECONDS as i64 && b.period <= second)
            .fold(LastMinute::default(), |sum, b| LastMinute {
                delivered: sum.delivered + b.delivered,
                failed: sum.failed + b.failed,
            })
    }

    /// `queue`'s attempts per minute over the last hour, oldest minute first; the last entry
    /// is the current (partial) minute.
    pub fn last_hour(&self, queue: &QueueName, now: UnixMillis) -> [LastMinute; MINUTES] {
        let minute = now.div_euclid(60_000);
        let mut hour = [LastMinute::default(); MINUTES];
        let windows = self.windows.lock();
        if let Some(window) = windows.get(queue) {
            for (i, figures) in hour.iter_mut().enumerate() {
                let period = minute - (MINUTES - 1 - i) as i64;
                let bucket = &window.minutes[slot(period, MINUTES)];
                if bucket.period == period {
                    *figures = bucket.figures();
                }
            }
        }
        hour
    }

    /// Everything [`Self::last_minute`] and [`Self::last_hour`] say of `queue` at `now`.
    pub fn figures(&self, queue: &QueueName, now: UnixMillis) -> ActivityFigures {
        let last_minute = self.last_minute(queue, now);
        let hour = self.last_hour(queue, now);
        ActivityFigures {
            last_minute_delivered: last_minute.delivered,
            last_minute_failed: last_minute.failed,
            hour_delivered: hour.map(|m| m.delivered),
            hour_failed: hour.map(|m| m.failed),
            latency: [
                self.latency_of(queue, now, 1),
                self.latency_of(queue, now, 0),
            ],
        }
    }

    /// The figures of every queue with an attempt in the last hour.
    pub fn busy_queues(&self, now: UnixMillis) -> Vec<(QueueName, ActivityFigures)> {
        let names: Vec<QueueName> = self.windows.lock().keys().cloned().collect();
        names
            .into_iter()
            .map(|name| {
                let figures = self.figures(&name, now);
                (name, figures)
            })
            .filter(|(_, figures)| *figures != ActivityFigures::default())
            .collect()
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
        activity.record(&q, true, 1, t0);
        activity.record(&q, true, 1, t0 + 500);
        activity.record(&q, false, 1, t0 + 30_000);
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
        activity.record(&q, true, 1, t0 + 60_100);
        assert_eq!(
            seen(t0 + 60_100),
            LastMinute {
                delivered: 1,
                failed: 1
            }
        );
        let other = QueueName::parse("other").unwrap();
        assert_eq!(
            activity.last_hour(&other, t0),
            [LastMinute::default(); MINUTES]
        );
        assert_eq!(activity.last_minute(&other, t0), LastMinute::default());
        activity.forget(&q);
        assert_eq!(seen(t0 + 60_100), LastMinute::default());
    }

    #[test]
    fn each_minute_keeps_how_long_its_attempts_took() {
        let activity = Activity::default();
        let q = QueueName::parse("q").unwrap();
        let t0 = 1_700_000_000_000 - 1_700_000_000_000 % 60_000; // a minute's start
        activity.record(&q, true, 3, t0);
        activity.record(&q, false, 4_000, t0 + 1);
        activity.record(&q, true, 40, t0 + 60_000);
        let [before, current] = activity.figures(&q, t0 + 60_001).latency;
        assert_eq!(before.count(), 2);
        assert!(before.quantile(1.0).unwrap() > 2_500.0, "{before:?}");
        assert_eq!(current.count(), 1);
        // An hour later the slot of t0's minute is reused: its histogram starts afresh.
        let later = t0 + 60 * 60_000;
        activity.record(&q, true, 3, later);
        let [before, current] = activity.figures(&q, later).latency;
        assert_eq!((before.count(), current.count()), (0, 1));
    }

    #[test]
    fn the_last_hour_is_sixty_minutes_oldest_first() {
        let activity = Activity::default();
        let q = QueueName::parse("q").unwrap();
        let t0 = 1_700_000_000_000 - 1_700_000_000_000 % 60_000; // a minute's start
        activity.record(&q, true, 1, t0);
        activity.record(&q, false, 1, t0 + 59_999);
        activity.record(&q, true, 1, t0 + 5 * 60_000);
        let hour = activity.last_hour(&q, t0 + 5 * 60_000 + 1);
        assert_eq!(
            hour[MINUTES - 1],
            LastMinute {
                delivered: 1,
                failed: 0
            }
        );
        assert_eq!(
            hour[MINUTES - 6],
            LastMinute {
                delivered: 1,
                failed: 1
            }
        );
        assert_eq!(hour.iter().map(|m| m.delivered + m.failed).sum::<u64>(), 3);
        // An hour later the first minute has left the window, and its slot, reused by a
        // new minute, starts from zero.
        let later = t0 + 60 * 60_000;
        activity.record(&q, false, 1, later);
        let hour = activity.last_hour(&q, later);
        assert_eq!(
            hour[MINUTES - 1],
            LastMinute {
                delivered: 0,
                failed: 1
            }
        );
        assert_eq!(
            hour[MINUTES - 56],
            LastMinute {
                delivered: 1,
                failed: 0
            }
        );
        assert_eq!(hour.iter().map(|m| m.delivered + m.failed).sum::<u64>(), 2);
    }
}
