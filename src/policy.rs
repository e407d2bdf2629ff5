//! A queue's delivery policy: what a queue may set for itself (attempts, backoff, timeout,
//! concurrency, rate, a cap on queued jobs, how long delivered jobs are kept), the ranges each setting must lie in, and the
//! effective value of each once the server's defaults fill what the queue left unset. A
//! setting a queue leaves unset follows the server's setting, and keeps following it when
//! that changes.

use std::ops::RangeInclusive;
use std::time::Duration;

use crate::model::{InvalidInput, Secret, SignatureScheme, Target, UnixMillis};

/// Attempts a queue may allow a job.
pub const MAX_ATTEMPTS: RangeInclusive<u32> = 1..=100;
/// Entries of a backoff schedule.
pub const BACKOFF_STEPS: RangeInclusive<usize> = 1..=20;
/// One attempt's time limit.
pub const TIMEOUT: RangeInclusive<Duration> = Duration::from_millis(100)..=Duration::from_secs(900);
/// Deliveries of one queue in flight at once.
pub const CONCURRENCY: RangeInclusive<u32> = 1..=10_000;
/// How long delivered jobs are kept in the delivery log (0: not kept).
pub const KEEP_DELIVERED: RangeInclusive<Duration> =
    Duration::ZERO..=Duration::from_secs(365 * 24 * 3600);

/// How many deliveries a queue may start per second, with a burst allowance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Deliveries started per second, on average (> 0; fractions allowed).
    pub per_second: f64,
    /// Deliveries that may start at once after a quiet spell; `None`: one second's worth
    /// (at least 1).
    pub burst: Option<u32>,
}

/// The longest interval between starts: a rate below one start a year (accepted: any rate
/// above 0 is) is held as one a year.
const LONGEST_INTERVAL: Duration = Duration::from_secs(365 * 24 * 3600);

impl Rate {
    /// The burst in effect.
    pub fn effective_burst(&self) -> u32 {
        self.burst
            .unwrap_or_else(|| (self.per_second.ceil() as u32).max(1))
    }

    /// The time between two starts on schedule (`1 / per_second`).
    pub fn interval(&self) -> Duration {
        Duration::try_from_secs_f64(1.0 / self.per_second)
            .unwrap_or(LONGEST_INTERVAL)
            .min(LONGEST_INTERVAL)
    }

    /// How early a start may be taken: the burst beyond the first.
    pub fn early(&self) -> Duration {
        let beyond_first = self.effective_burst().saturating_sub(1);
        self.interval()
            .checked_mul(beyond_first)
            .unwrap_or(Duration::MAX)
    }
}

/// What a queue sets for itself; `None` follows the server's setting.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueuePolicy {
    pub max_attempts: Option<u32>,
    pub backoff: Option<Vec<Duration>>,
    pub timeout: Option<Duration>,
    pub concurrency: Option<u32>,
    pub rate: Option<Rate>,
    /// A cap on the queue's READY jobs (enqueues beyond it get 429).
    pub max_queued: Option<u64>,
    /// How long delivered jobs stay in the delivery log (zero: not kept).
    pub keep_delivered: Option<Duration>,
}

/// The server's settings a queue's policy falls back to.
#[derive(Debug, Clone, PartialEq)]
pub struct Defaults {
    pub max_attempts: u32,
    pub backoff: Vec<Duration>,
    pub timeout: Duration,
    pub concurrency: u32,
    pub keep_delivered: Duration,
}

/// A queue's policy with every setting resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Effective {
    pub max_attempts: u32,
    pub backoff: Vec<Duration>,
    pub timeout: Duration,
    pub concurrency: u32,
    pub rate: Option<Rate>,
    pub max_queued: Option<u64>,
    pub keep_delivered: Duration,
}

impl QueuePolicy {
    /// Every setting, the queue's own or else the server's.
    pub fn effective(&self, defaults: &Defaults) -> Effective {
        Effective {
            max_attempts: self.max_attempts.unwrap_or(defaults.max_attempts),
            backoff: self
                .backoff
                .clone()
                .unwrap_or_else(|| defaults.backoff.clone()),
            timeout: self.timeout.unwrap_or(defaults.timeout),
            concurrency: self.concurrency.unwrap_or(defaults.concurrency),
            rate: self.rate,
            max_queued: self.max_queued,
            keep_delivered: self.keep_delivered(defaults),
        }
    }

    /// How long delivered jobs are kept (zero: not kept).
    pub fn keep_delivered(&self, defaults: &Defaults) -> Duration {
        self.keep_delivered.unwrap_or(defaults.keep_delivered)
    }

    /// The attempt time limit in effect.
    pub fn timeout(&self, defaults: &Defaults) -> Duration {
        self.timeout.unwrap_or(defaults.timeout)
    }

    /// The concurrency limit in effect.
    pub fn concurrency(&self, defaults: &Defaults) -> u32 {
        self.concurrency.unwrap_or(defaults.concurrency)
    }
}

/// A change to a queue: each field `None` leaves the setting as it is; `Some(None)` resets
/// it to follow the server (for `secret`: removes the secret; for `paused`: resumes; for
/// `target`: makes it a pull queue).
#[derive(Debug, Clone, Default)]
pub struct QueueChange {
    pub target: Option<Option<Target>>,
    pub secret: Option<Option<Secret>>,
    pub max_attempts: Option<Option<u32>>,
    pub backoff: Option<Option<Vec<Duration>>>,
    pub timeout: Option<Option<Duration>>,
    pub concurrency: Option<Option<u32>>,
    pub rate_per_second: Option<Option<f64>>,
    pub burst: Option<Option<u32>>,
    pub max_queued: Option<Option<u64>>,
    pub keep_delivered: Option<Option<Duration>>,
    pub paused: Option<bool>,
    pub signature_scheme: Option<SignatureScheme>,
    /// With a new `secret`: keep the one it replaces signing (Standard Webhooks) until
    /// then.
    pub rotate_until: Option<UnixMillis>,
}

impl QueueChange {
    /// A change that only pauses or resumes.
    pub fn paused(paused: bool) -> Self {
        Self {
            paused: Some(paused),
            ..Self::default()
        }
    }
}

// ---------------------------------------------------------------------------------------
// Checks, for values given by clients (the messages are safe to show them).
// ---------------------------------------------------------------------------------------

fn out_of_range(field: &str, range: &str) -> InvalidInput {
    InvalidInput(format!("{field} must be {range}"))
}

pub fn check_max_attempts(value: u32) -> Result<u32, InvalidInput> {
    MAX_ATTEMPTS
        .contains(&value)
        .then_some(value)
        .ok_or_else(|| out_of_range("maxAttempts", "1 to 100"))
}

/// The delay before retry `n` (1 = the first retry) in a backoff schedule: `steps[n - 1]`,
/// the last step repeating; `None` for an empty schedule.
pub fn backoff_step(steps: &[Duration], n: u32) -> Option<Duration> {
    let index = (n.max(1) - 1) as usize;
    steps.get(index.min(steps.len().saturating_sub(1))).copied()
}

/// A duration such as `500ms`, `5s`, `2m`.
pub fn parse_duration(field: &str, raw: &str) -> Result<Duration, InvalidInput> {
    read_duration(raw).map_err(|why| InvalidInput(format!("{field}: {why}")))
}

/// A duration as hookq writes them everywhere (`500ms`, `5s`, `2m`, `1h`, `1m30s`), for the
/// API's fields and the server's settings alike. No space inside: humantime would add the
/// parts up, so `"1s 5s"` meant for a list of two steps would silently be one of 6 s.
pub fn read_duration(raw: &str) -> Result<Duration, String> {
    let text = raw.trim();
    if text.contains(char::is_whitespace) {
        return Err(format!(
            "`{raw}` holds a space: write one duration without spaces (`1m30s`), and separate \
             the steps of a list with commas (`{}`)",
            text.split_whitespace().collect::<Vec<_>>().join(",")
        ));
    }
    humantime::parse_duration(text)
        .map_err(|_| format!("`{raw}` is not a duration such as 500ms, 5s, 2m or 1h"))
}

pub fn check_backoff(raw: &[String]) -> Result<Vec<Duration>, InvalidInput> {
    if !BACKOFF_STEPS.contains(&raw.len()) {
        return Err(out_of_range("backoff", "a list of 1 to 20 durations"));
    }
    raw.iter()
        .map(|step| parse_duration("backoff", step))
        .collect()
}

pub fn check_timeout(raw: &str) -> Result<Duration, InvalidInput> {
    let timeout = parse_duration("timeout", raw)?;
    TIMEOUT
        .contains(&timeout)
        .then_some(timeout)
        .ok_or_else(|| out_of_range("timeout", "from 100ms to 15m"))
}

pub fn check_concurrency(value: u32) -> Result<u32, InvalidInput> {
    CONCURRENCY
        .contains(&value)
        .then_some(value)
        .ok_or_else(|| out_of_range("concurrency", "1 to 10000"))
}

pub fn check_rate(value: f64) -> Result<f64, InvalidInput> {
    (value.is_finite() && value > 0.0 && value <= 1_000_000.0)
        .then_some(value)
        .ok_or_else(|| out_of_range("ratePerSecond", "a number above 0 (at most 1000000)"))
}

pub fn check_burst(value: u32) -> Result<u32, InvalidInput> {
    (value >= 1)
        .then_some(value)
        .ok_or_else(|| out_of_range("burst", "at least 1"))
}

pub fn check_max_queued(value: u64) -> Result<u64, InvalidInput> {
    (value >= 1)
        .then_some(value)
        .ok_or_else(|| out_of_range("maxQueued", "at least 1"))
}

/// How long delivered jobs are kept: a duration up to 365 days; `0s` keeps none.
pub fn check_keep_delivered(raw: &str) -> Result<Duration, InvalidInput> {
    let keep = parse_duration("keepDelivered", raw)?;
    KEEP_DELIVERED
        .contains(&keep)
        .then_some(keep)
        .ok_or_else(|| out_of_range("keepDelivered", "from 0s (not kept) to 365d"))
}

/// A duration as the API shows it: `500ms`, `5s`, `2m 30s`.
pub fn format_duration(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Defaults {
        Defaults {
            max_attempts: 5,
            backoff: vec![Duration::from_secs(1)],
            timeout: Duration::from_secs(30),
            concurrency: 256,
            keep_delivered: Duration::ZERO,
        }
    }

    #[test]
    fn unset_settings_follow_the_server_and_set_ones_win() {
        let policy = QueuePolicy {
            max_attempts: Some(2),
            timeout: Some(Duration::from_millis(500)),
            ..QueuePolicy::default()
        };
        let effective = policy.effective(&defaults());
        assert_eq!(effective.max_attempts, 2);
        assert_eq!(effective.timeout, Duration::from_millis(500));
        assert_eq!(effective.backoff, vec![Duration::from_secs(1)]);
        assert_eq!(effective.concurrency, 256);
        assert_eq!(effective.rate, None);
    }

    #[test]
    fn a_rate_bursts_one_seconds_worth_unless_told_otherwise() {
        let rate = |per_second, burst| Rate { per_second, burst };
        assert_eq!(rate(0.5, None).effective_burst(), 1);
        assert_eq!(rate(20.0, None).effective_burst(), 20);
        assert_eq!(rate(2.5, None).effective_burst(), 3);
        assert_eq!(rate(20.0, Some(5)).effective_burst(), 5);
    }

    #[test]
    fn values_outside_their_ranges_are_refused() {
        assert!(check_max_attempts(0).is_err());
        assert!(check_max_attempts(101).is_err());
        assert_eq!(check_max_attempts(100), Ok(100));
        assert!(check_backoff(&[]).is_err());
        assert!(check_backoff(&vec!["1s".to_owned(); 21]).is_err());
        assert!(check_backoff(&["soon".to_owned()]).is_err());
        assert_eq!(
            check_backoff(&["500ms".to_owned(), "5s".to_owned()]),
            Ok(vec![Duration::from_millis(500), Duration::from_secs(5)])
        );
        assert!(check_timeout("99ms").is_err());
        assert!(check_timeout("16m").is_err());
        assert_eq!(check_timeout("15m"), Ok(Duration::from_secs(900)));
        assert!(check_concurrency(0).is_err());
        assert!(check_concurrency(10_001).is_err());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(check_rate(bad).is_err(), "{bad}");
        }
        assert_eq!(check_rate(0.25), Ok(0.25));
        assert!(check_burst(0).is_err());
        assert!(check_max_queued(0).is_err());
        assert_eq!(check_keep_delivered("0s"), Ok(Duration::ZERO));
        assert_eq!(
            check_keep_delivered("7d"),
            Ok(Duration::from_secs(7 * 86_400))
        );
        assert!(check_keep_delivered("366d").is_err());
        assert!(check_keep_delivered("a while").is_err());
    }
}
