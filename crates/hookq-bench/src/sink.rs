//! The in-process HTTP sink standing in for a worker: answers every POST with 200, counts
//! deliveries by job id (`X-Hookq-Job-Id`), and, when asked, reads the send timestamp the
//! load generator embedded in the payload to record enqueue→delivery latency. Jobs of a
//! schedule are counted by tick (`X-Hookq-Schedule-Tick`), and their latency is measured
//! from the tick.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use tokio_util::sync::CancellationToken;

/// The header deliveries are counted by (hookq sets it; so does the relay).
pub const JOB_ID_HEADER: &str = "x-hookq-job-id";
/// The tick (unix ms) a schedule's job is for.
pub const SCHEDULE_TICK_HEADER: &str = "x-hookq-schedule-tick";
/// How often `wait_for` looks at the counter.
const POLL: Duration = Duration::from_millis(2);

#[derive(Default)]
struct Counters {
    deliveries: AtomicU64,
    duplicates: AtomicU64,
    /// µs since the bench's start of the first and the latest delivery (0: none yet).
    first_micros: AtomicU64,
    last_micros: AtomicU64,
    record_latency: AtomicBool,
    /// Check each delivery's `"k"` (key) and `"s"` (sequence within the key) fields: every
    /// key's deliveries must come as 0, 1, 2, … (the ordered benchmark).
    check_order: AtomicBool,
    next_of_key: Mutex<HashMap<u64, u64>>,
    out_of_order: AtomicU64,
    /// Job ids delivered (a second delivery of one counts as a duplicate).
    seen: Mutex<HashSet<u128>>,
    /// Enqueue→delivery latencies in µs (tick→delivery for a schedule's jobs).
    latencies: Mutex<Vec<u32>>,
    /// Distinct jobs delivered per schedule tick (unix ms).
    jobs_per_tick: Mutex<HashMap<i64, u64>>,
}

/// A running sink; cheap to clone.
#[derive(Clone)]
pub struct Sink {
    counters: Arc<Counters>,
    start: Instant,
    pub addr: SocketAddr,
}

/// What the sink saw since its last reset.
#[derive(Debug, Clone, Copy)]
pub struct SinkSnapshot {
    pub deliveries: u64,
    pub duplicates: u64,
    /// Deliveries that broke their key's sequence (with order checking on).
    pub out_of_order: u64,
    pub first: Option<Duration>,
    pub last: Option<Duration>,
}

impl Sink {
    /// Serve on an ephemeral loopback port until `shutdown`. `start` is the bench's clock origin.
    pub async fn start(start: Instant, shutdown: CancellationToken) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("cannot bind the sink")?;
        let addr = listener.local_addr()?;
        let sink = Self {
            counters: Arc::default(),
            start,
            addr,
        };
        let app = Router::new()
            .route("/{*path}", post(receive))
            .route("/", post(receive))
            .with_state(sink.clone());
        tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await;
            if let Err(err) = served {
                eprintln!("sink stopped: {err}");
            }
        });
        Ok(sink)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.addr)
    }

    /// Forget everything counted so far; `record_latency` turns timestamp reading on or off.
    pub fn reset(&self, record_latency: bool) {
        let c = &self.counters;
        c.deliveries.store(0, Ordering::SeqCst);
        c.duplicates.store(0, Ordering::SeqCst);
        c.first_micros.store(0, Ordering::SeqCst);
        c.last_micros.store(0, Ordering::SeqCst);
        lock(&c.seen).clear();
        lock(&c.latencies).clear();
        lock(&c.jobs_per_tick).clear();
        c.record_latency.store(record_latency, Ordering::SeqCst);
        c.check_order.store(false, Ordering::SeqCst);
        lock(&c.next_of_key).clear();
        c.out_of_order.store(0, Ordering::SeqCst);
    }

    /// From now on (until the next reset), check every key's delivery sequence.
    pub fn check_order(&self) {
        self.counters.check_order.store(true, Ordering::SeqCst);
    }

    /// Whether every one of `ids` has been delivered; and how many distinct jobs were
    /// delivered that are not among them.
    pub fn delivered_of(&self, ids: &HashSet<u128>) -> (bool, u64) {
        let seen = lock(&self.counters.seen);
        let all = ids.iter().all(|id| seen.contains(id));
        let others = seen.iter().filter(|id| !ids.contains(id)).count() as u64;
        (all, others)
    }

    pub fn snapshot(&self) -> SinkSnapshot {
        let c = &self.counters;
        let micros = |v: u64| (v > 0).then(|| Duration::from_micros(v));
        SinkSnapshot {
            deliveries: c.deliveries.load(Ordering::SeqCst),
            duplicates: c.duplicates.load(Ordering::SeqCst),
            out_of_order: c.out_of_order.load(Ordering::SeqCst),
            first: micros(c.first_micros.load(Ordering::SeqCst)),
            last: micros(c.last_micros.load(Ordering::SeqCst)),
        }
    }

    /// Distinct jobs delivered per schedule tick since the last reset.
    pub fn jobs_per_tick(&self) -> HashMap<i64, u64> {
        lock(&self.counters.jobs_per_tick).clone()
    }

    /// The latencies recorded since the last reset, in µs, sorted.
    pub fn take_latencies(&self) -> Vec<u32> {
        let mut samples = std::mem::take(&mut *lock(&self.counters.latencies));
        samples.sort_unstable();
        samples
    }

    /// Wait until `count` distinct jobs have been delivered; fail after `timeout`.
    pub async fn wait_for(&self, count: u64, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let c = &self.counters;
            let got = c.deliveries.load(Ordering::SeqCst) - c.duplicates.load(Ordering::SeqCst);
            if got >= count {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("only {got} of {count} deliveries arrived within {timeout:?}");
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

async fn receive(State(sink): State<Sink>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let now = sink.start.elapsed().as_micros() as u64;
    let c = &sink.counters;
    c.deliveries.fetch_add(1, Ordering::Relaxed);
    let _ = c
        .first_micros
        .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
    c.last_micros.fetch_max(now, Ordering::Relaxed);
    let first_delivery = match headers
        .get(JOB_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| uuid::Uuid::parse_str(v).ok())
    {
        Some(id) => lock(&c.seen).insert(id.as_u128()),
        None => true,
    };
    if !first_delivery {
        c.duplicates.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(tick) = headers
        .get(SCHEDULE_TICK_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
    {
        if first_delivery {
            *lock(&c.jobs_per_tick).entry(tick).or_insert(0) += 1;
        }
        if c.record_latency.load(Ordering::Relaxed) {
            let late_micros = unix_micros().saturating_sub(tick.saturating_mul(1000).max(0) as u64);
            lock(&c.latencies).push(late_micros.min(u64::from(u32::MAX)) as u32);
        }
        return StatusCode::OK;
    }
    if c.check_order.load(Ordering::Relaxed) {
        let in_sequence = key_and_sequence(&body).is_some_and(|(key, sequence)| {
            let mut next = lock(&c.next_of_key);
            let expected = next.entry(key).or_insert(0);
            let ok = sequence == *expected;
            *expected = sequence + 1;
            ok
        });
        if !in_sequence {
            c.out_of_order.fetch_add(1, Ordering::Relaxed);
        }
    }
    if c.record_latency.load(Ordering::Relaxed)
        && let Some(sent) = sent_micros(&body)
    {
        let latency = now.saturating_sub(sent).min(u64::from(u32::MAX)) as u32;
        lock(&c.latencies).push(latency);
    }
    StatusCode::OK
}

/// The `"t":<µs>` the load generator put first in the payload.
/// The `"k"` and `"s"` of an ordered benchmark's job.
fn key_and_sequence(body: &[u8]) -> Option<(u64, u64)> {
    let job: serde_json::Value = serde_json::from_slice(body).ok()?;
    Some((job["k"].as_u64()?, job["s"].as_u64()?))
}

fn sent_micros(body: &[u8]) -> Option<u64> {
    let rest = body.strip_prefix(b"{\"t\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// Wall-clock µs since the Unix epoch (ticks are wall-clock times).
fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timestamp_is_read_from_the_payload_head() {
        assert_eq!(sent_micros(b"{\"t\":12345,\"pad\":\"x\"}"), Some(12345));
        assert_eq!(sent_micros(b"{\"pad\":\"x\"}"), None);
    }
}
