//! Prometheus metrics: the names hookq records, the recorder behind `GET /metrics`, and the
//! bound on queue-name label values (queue names are user input: their number is capped).
//!
//! A deleted queue's series leave `/metrics` at once and its label goes back to the budget
//! ([`render`], [`queue_deleted`]). The recorder itself cannot forget a series, so the
//! process keeps the values of at most [`MAX_NAMES_KEPT`] names (a re-created queue's
//! counters go on from where they were, which Prometheus reads as a continuing series).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use metrics::{Counter, Histogram, counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::model::{QueueName, TopicName};

pub const JOBS_ENQUEUED: &str = "hookq_jobs_enqueued_total";
pub const JOBS_DELIVERED: &str = "hookq_jobs_delivered_total";
pub const ATTEMPTS_FAILED: &str = "hookq_delivery_attempts_failed_total";
pub const JOBS_DEAD_LETTERED: &str = "hookq_jobs_dead_lettered_total";
pub const JOBS_LEASED: &str = "hookq_jobs_leased_total";
pub const LEASES_WAITING: &str = "hookq_lease_requests_waiting";
pub const DELIVERY_DURATION: &str = "hookq_delivery_duration_seconds";
pub const DELIVERY_LAG: &str = "hookq_enqueue_to_delivery_seconds";
pub const IN_FLIGHT: &str = "hookq_deliveries_in_flight";
pub const QUEUE_READY: &str = "hookq_queue_ready_jobs";
pub const QUEUE_DEAD: &str = "hookq_queue_dead_letters_pending";
pub const QUEUE_JOBS: &str = "hookq_queue_jobs";
pub const QUEUE_OLDEST_READY_AGE: &str = "hookq_queue_oldest_ready_age_seconds";
pub const QUEUE_CONCURRENCY_LIMIT: &str = "hookq_queue_concurrency_limit";
pub const QUEUE_CONCURRENCY_EFFECTIVE: &str = "hookq_queue_concurrency_effective";
pub const QUEUE_PAUSED: &str = "hookq_queue_paused";
pub const WRITER_BATCH: &str = "hookq_writer_batch_size";
pub const WRITER_COMMIT: &str = "hookq_writer_commit_seconds";
pub const DLQ_ALERT: &str = "hookq_dlq_alert";
pub const BREAKER: &str = "hookq_breaker_state";
pub const SCHEDULE_TICKS: &str = "hookq_schedule_ticks_total";
pub const EVENTS: &str = "hookq_events_total";
pub const BUILD_INFO: &str = "hookq_build_info";
pub const CONNECTIONS_OPEN: &str = "hookq_connections_open";
pub const CONNECTIONS_EVICTED: &str = "hookq_connections_evicted_total";
pub const CONNECTIONS_REFUSED: &str = "hookq_connections_refused_total";
pub const TOPIC_PUBLISHED: &str = "hookq_topic_published_total";
pub const TOPIC_FANOUT_JOBS: &str = "hookq_topic_fanout_jobs_total";
pub const TOPIC_SKIPPED: &str = "hookq_topic_skipped_total";

/// `hookq_breaker_state` values.
pub const BREAKER_CLOSED: f64 = 0.0;
pub const BREAKER_HALF_OPEN: f64 = 1.0;
pub const BREAKER_OPEN: f64 = 2.0;

/// Queues that have a label value of their own at once; the rest share `_other`.
pub const MAX_QUEUE_LABELS: usize = 200;

/// Distinct queue names ever given a label in this process (deleted ones included, whose
/// series the recorder keeps): past it, new names share `_other` until a restart.
pub const MAX_NAMES_KEPT: usize = 10 * MAX_QUEUE_LABELS;

/// The process-wide recorder (the `metrics` facade has one global recorder), installed on
/// first use. Several servers in one process (tests) share it.
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let seconds = [
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            60.0, 300.0, 3600.0,
        ];
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &seconds)
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full(WRITER_BATCH.into()),
                    &[
                        1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
                    ],
                )
            })
            .map(PrometheusBuilder::build_recorder);
        match recorder {
            Ok(recorder) => {
                let handle = recorder.handle();
                // Fails only if another recorder was installed first; ours still renders.
                let _ = metrics::set_global_recorder(recorder);
                handle
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot configure metric buckets; using defaults");
                let recorder = PrometheusBuilder::new().build_recorder();
                let handle = recorder.handle();
                let _ = metrics::set_global_recorder(recorder);
                handle
            }
        }
    })
}

/// The standard `process_*` series every Prometheus client exports (CPU seconds, resident
/// and virtual memory, open and maximum file descriptors, threads, start time), read from
/// `/proc` at each scrape by the `metrics-process` crate, so that the usual process
/// dashboards and alerts work unchanged. Described once, on first use.
fn process_metrics() -> &'static metrics_process::Collector {
    static COLLECTOR: OnceLock<metrics_process::Collector> = OnceLock::new();
    COLLECTOR.get_or_init(|| {
        handle();
        let collector = metrics_process::Collector::default();
        collector.describe();
        collector
    })
}

/// How often recorded histogram samples are folded into their buckets.
pub const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// Fold histogram samples into buckets every [`UPKEEP_INTERVAL`] until `shutdown`. The
/// exporter keeps every sample until then (its own HTTP listener would run this; we serve
/// `/metrics` ourselves): without it memory grows by every sample between two scrapes, about
/// 70 bytes per delivered job when nothing scrapes (found by the soak test).
pub async fn run_upkeep(shutdown: tokio_util::sync::CancellationToken) {
    let mut ticks = tokio::time::interval(UPKEEP_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            _ = ticks.tick() => handle().run_upkeep(),
        }
    }
}

/// Which queue names have a label of their own now, and which ever had one.
#[derive(Default)]
struct Labels {
    current: HashSet<String>,
    ever: HashSet<String>,
}

fn labels() -> std::sync::MutexGuard<'static, Labels> {
    static LABELS: OnceLock<Mutex<Labels>> = OnceLock::new();
    LABELS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The label value for a queue: its name while fewer than [`MAX_QUEUE_LABELS`] queues have
/// one (and the process has not kept [`MAX_NAMES_KEPT`] names), else `_other`.
pub fn queue_label(queue: &QueueName) -> String {
    let mut labels = labels();
    let name = queue.as_str();
    if labels.current.contains(name) {
        return name.to_owned();
    }
    let room = labels.current.len() < MAX_QUEUE_LABELS
        && (labels.ever.contains(name) || labels.ever.len() < MAX_NAMES_KEPT);
    if !room {
        return "_other".to_owned();
    }
    labels.current.insert(name.to_owned());
    labels.ever.insert(name.to_owned());
    name.to_owned()
}

/// A queue was deleted: its label goes back to the budget and its cached handles go.
pub fn queue_deleted(queue: &QueueName) {
    forget_queues(|name| name != queue.as_str());
}

/// Keep the labels and cached handles of the queues `live` names only.
fn forget_queues(live: impl Fn(&str) -> bool) {
    labels().current.retain(|name| live(name));
    metrics_cache().retain(|queue, _| live(queue.as_str()));
}

/// `/metrics`: every metric in Prometheus text, without the series of queues that `live`
/// does not name (deleted ones, here or on another node), whose labels are released too.
pub fn render(live: impl Fn(&str) -> bool) -> String {
    forget_queues(&live);
    process_metrics().collect();
    let text = handle().render();
    let mut kept = String::with_capacity(text.len());
    for line in text.lines() {
        let queue = line
            .split_once("queue=\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(name, _)| name);
        let gone = !line.starts_with('#') && queue.is_some_and(|q| q != "_other" && !live(q));
        if !gone {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

/// The metric handles of one queue, looked up once: recording then costs no label
/// allocation or registry lookup on the hot path.
struct QueueMetrics {
    enqueued: Counter,
    delivered: Counter,
    delivery_duration: Histogram,
    delivery_lag: Histogram,
}

fn metrics_cache() -> std::sync::MutexGuard<'static, HashMap<QueueName, Arc<QueueMetrics>>> {
    static CACHE: OnceLock<Mutex<HashMap<QueueName, Arc<QueueMetrics>>>> = OnceLock::new();
    CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn queue_metrics(queue: &QueueName) -> Arc<QueueMetrics> {
    if let Some(metrics) = metrics_cache().get(queue) {
        return metrics.clone();
    }
    // The label first, the cache's lock after: never both locks at once.
    let label = queue_label(queue);
    let metrics = Arc::new(QueueMetrics {
        enqueued: counter!(JOBS_ENQUEUED, "queue" => label.clone()),
        delivered: counter!(JOBS_DELIVERED, "queue" => label.clone()),
        delivery_duration: histogram!(DELIVERY_DURATION, "queue" => label.clone()),
        delivery_lag: histogram!(DELIVERY_LAG, "queue" => label),
    });
    // Bounded like the labels: past the cap, names share the `_other` handles uncached.
    let mut cache = metrics_cache();
    if cache.len() < MAX_QUEUE_LABELS {
        cache.insert(queue.clone(), metrics.clone());
    }
    metrics
}

/// `2xx`…`5xx` for an HTTP status, `transport` for none.
pub fn status_class(status: Option<u16>) -> &'static str {
    match status {
        Some(100..=199) => "1xx",
        Some(200..=299) => "2xx",
        Some(300..=399) => "3xx",
        Some(400..=499) => "4xx",
        Some(_) => "5xx",
        None => "transport",
    }
}

/// A topic's label value: its name, for the first [`MAX_QUEUE_LABELS`] topics seen by
/// this process (topic names are input too), `_other` past them.
fn topic_label(topic: &TopicName) -> String {
    static SEEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let mut seen = SEEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if seen.contains(topic.as_str()) || seen.len() < MAX_QUEUE_LABELS {
        seen.insert(topic.as_str().to_owned());
        topic.as_str().to_owned()
    } else {
        "_other".to_owned()
    }
}

/// A publish to `topic` stored `messages`, giving subscribers `jobs` jobs in all and
/// skipping the full queues of `skipped` (one entry per message and queue).
pub fn topic_published(topic: &TopicName, messages: u64, jobs: u64, skipped: &[&QueueName]) {
    let label = topic_label(topic);
    counter!(TOPIC_PUBLISHED, "topic" => label.clone()).increment(messages);
    counter!(TOPIC_FANOUT_JOBS, "topic" => label.clone()).increment(jobs);
    for queue in skipped {
        counter!(TOPIC_SKIPPED, "topic" => label.clone(), "queue" => queue_label(queue))
            .increment(1);
    }
}

pub fn job_enqueued(queue: &QueueName) {
    queue_metrics(queue).enqueued.increment(1);
}

pub fn job_delivered(queue: &QueueName, latency: Duration, lag: Duration) {
    let metrics = queue_metrics(queue);
    metrics.delivered.increment(1);
    metrics.delivery_duration.record(latency.as_secs_f64());
    metrics.delivery_lag.record(lag.as_secs_f64());
}

pub fn attempt_failed(queue: &QueueName, status: Option<u16>, latency: Duration) {
    let label = queue_label(queue);
    counter!(ATTEMPTS_FAILED, "queue" => label.clone(), "status_class" => status_class(status))
        .increment(1);
    histogram!(DELIVERY_DURATION, "queue" => label).record(latency.as_secs_f64());
}

/// `count` jobs of pull queue `queue` leased to a worker.
pub fn jobs_leased(queue: &QueueName, count: usize) {
    counter!(JOBS_LEASED, "queue" => queue_label(queue)).increment(count as u64);
}

/// A pull worker nacked its job of `queue`, `latency` after leasing it.
pub fn lease_nacked(queue: &QueueName, latency: Duration) {
    let label = queue_label(queue);
    counter!(ATTEMPTS_FAILED, "queue" => label.clone(), "status_class" => NACK).increment(1);
    histogram!(DELIVERY_DURATION, "queue" => label).record(latency.as_secs_f64());
}

/// Lease requests waiting for a job now, on this node.
pub fn leases_waiting(count: usize) {
    gauge!(LEASES_WAITING).set(count as f64);
}

pub fn job_dead_lettered(queue: &QueueName, reason: &'static str) {
    counter!(JOBS_DEAD_LETTERED, "queue" => queue_label(queue), "reason" => reason).increment(1);
}

/// A schedule's tick fired: `enqueued` (its job stored) or `skipped` (its queue was full).
pub fn schedule_tick(queue: &QueueName, outcome: &'static str) {
    counter!(SCHEDULE_TICKS, "queue" => queue_label(queue), "outcome" => outcome).increment(1);
}

/// An operational event's POST to the events target: `sent`, `failed` (tried again later)
/// or `dropped` (given up on).
pub fn event_sent(kind: &str, outcome: &'static str) {
    counter!(EVENTS, "type" => kind.to_owned(), "outcome" => outcome).increment(1);
}

/// Deliveries in flight on this node, set as each starts and ends: twice a job, so the
/// gauge's handle is looked up once (a registry lookup is a hash and a lock; it was 4 % of
/// a capped node's CPU in a profile), after the recorder is installed.
pub fn in_flight(count: usize) {
    static GAUGE: OnceLock<metrics::Gauge> = OnceLock::new();
    GAUGE
        .get_or_init(|| {
            handle();
            gauge!(IN_FLIGHT)
        })
        .set(count as f64);
}

/// A client connection opened (its task started) or closed.
pub fn connection_opened() {
    gauge!(CONNECTIONS_OPEN).increment(1.0);
}

pub fn connection_closed() {
    gauge!(CONNECTIONS_OPEN).decrement(1.0);
}

/// The server asked a connection to close: `idle_timeout`, `cap` or `peer_cap`
/// (`connections::Eviction`).
pub fn connection_evicted(reason: &'static str) {
    counter!(CONNECTIONS_EVICTED, "reason" => reason).increment(1);
}

/// A new connection refused: its address had every connection it may hold busy.
pub fn connection_refused() {
    counter!(CONNECTIONS_REFUSED).increment(1);
}

pub fn writer_batch(ops: usize, commit: Duration) {
    histogram!(WRITER_BATCH).record(ops as f64);
    histogram!(WRITER_COMMIT).record(commit.as_secs_f64());
}

/// A queue's figures at one moment, as `GET /queue/{name}/_stats` shows them.
#[derive(Debug, Clone, Copy)]
pub struct QueueFigures {
    pub ready: u64,
    pub scheduled: u64,
    pub blocked: u64,
    pub in_flight: u64,
    pub dead: u64,
    pub oldest_ready_age: Option<Duration>,
    pub concurrency_limit: u32,
    pub concurrency_effective: u32,
    pub paused: bool,
}

/// `hookq_build_info{version,backend} 1`, and the process-wide series at zero: what a
/// dashboard joins on, present from the first scrape.
pub fn started(backend: &'static str) {
    gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION"), "backend" => backend).set(1.0);
    gauge!(IN_FLIGHT).set(0.0);
    // Not set: several servers in one process (tests) add to one gauge.
    gauge!(CONNECTIONS_OPEN).increment(0.0);
    for reason in crate::connections::Eviction::ALL {
        counter!(CONNECTIONS_EVICTED, "reason" => reason.as_str()).increment(0);
    }
    counter!(CONNECTIONS_REFUSED).increment(0);
}

/// The status classes a failed attempt is counted under, all shown from the first scrape.
const FAILURE_CLASSES: [&str; 4] = ["4xx", "5xx", "transport", NACK];

/// The `status_class` of a pull worker's nack.
const NACK: &str = "nack";

/// The reasons a job is dead-lettered for, all shown from the first scrape.
const DEAD_LETTER_REASONS: [&str; 2] = ["max_attempts_reached", "expired"];

/// Set a queue's gauges (at scrape time), and register its counters, so that every series
/// of a queue exists (at 0) from the first scrape after it is created: a series that
/// appears only with the first event breaks `rate()` and `absent()` alerts. Queues beyond
/// the label cap share `_other`, whose gauges then show the last of them.
pub fn queue_figures(queue: &QueueName, figures: &QueueFigures) {
    // Looking a queue's handles up registers them: its enqueue and delivery series.
    queue_metrics(queue);
    let label = queue_label(queue);
    for class in FAILURE_CLASSES {
        counter!(ATTEMPTS_FAILED, "queue" => label.clone(), "status_class" => class).increment(0);
    }
    for reason in DEAD_LETTER_REASONS {
        counter!(JOBS_DEAD_LETTERED, "queue" => label.clone(), "reason" => reason).increment(0);
    }
    let live = figures.ready + figures.scheduled + figures.blocked + figures.in_flight;
    gauge!(QUEUE_READY, "queue" => label.clone()).set(live as f64);
    gauge!(QUEUE_DEAD, "queue" => label.clone()).set(figures.dead as f64);
    for (state, count) in [
        ("ready", figures.ready),
        ("scheduled", figures.scheduled),
        ("blocked", figures.blocked),
        ("in_flight", figures.in_flight),
    ] {
        gauge!(QUEUE_JOBS, "queue" => label.clone(), "state" => state).set(count as f64);
    }
    let age = figures
        .oldest_ready_age
        .map_or(0.0, |age| age.as_secs_f64());
    gauge!(QUEUE_OLDEST_READY_AGE, "queue" => label.clone()).set(age);
    gauge!(QUEUE_CONCURRENCY_LIMIT, "queue" => label.clone())
        .set(f64::from(figures.concurrency_limit));
    gauge!(QUEUE_CONCURRENCY_EFFECTIVE, "queue" => label.clone())
        .set(f64::from(figures.concurrency_effective));
    gauge!(QUEUE_PAUSED, "queue" => label).set(if figures.paused { 1.0 } else { 0.0 });
}

/// A queue's circuit breaker state: 0 closed, 1 half-open, 2 open.
pub fn breaker_state(queue: &QueueName, state: f64) {
    gauge!(BREAKER, "queue" => queue_label(queue)).set(state);
}

pub fn dlq_alert(alert: &'static str, raised: bool) {
    gauge!(DLQ_ALERT, "alert" => alert).set(if raised { 1.0 } else { 0.0 });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_classes() {
        assert_eq!(status_class(Some(503)), "5xx");
        assert_eq!(status_class(Some(404)), "4xx");
        assert_eq!(status_class(Some(302)), "3xx");
        assert_eq!(status_class(None), "transport");
    }

    #[test]
    fn recorded_metrics_render_in_prometheus_text() {
        let handle = handle();
        let queue = QueueName::parse("telemetry-test").unwrap();
        job_enqueued(&queue);
        attempt_failed(&queue, Some(500), Duration::from_millis(3));
        let text = handle.render();
        assert!(
            text.contains("hookq_jobs_enqueued_total{queue=\"telemetry-test\"}"),
            "{text}"
        );
        assert!(text.contains("status_class=\"5xx\""), "{text}");
        assert!(
            text.contains("hookq_delivery_duration_seconds_bucket"),
            "{text}"
        );
    }

    #[test]
    fn a_deleted_queues_series_are_not_rendered_and_its_label_is_free_again() {
        handle();
        let queue = QueueName::parse("telemetry-deleted").unwrap();
        job_enqueued(&queue);
        let series = "hookq_jobs_enqueued_total{queue=\"telemetry-deleted\"}";
        assert!(render(|_| true).contains(series));
        queue_deleted(&queue);
        assert!(!labels().current.contains("telemetry-deleted"));
        let text = render(|name| name != "telemetry-deleted");
        assert!(!text.contains(series), "{text}");
        assert!(text.contains("# TYPE hookq_jobs_enqueued_total counter"));
    }
}
