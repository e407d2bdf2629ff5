//! The bench's results: repeated measurements summarised as median and spread, the JSON
//! document written to `--out`, and the table printed to stdout.

use serde::Serialize;

/// Repeated measurements of one figure: median, min and max, and every run.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: Vec<f64>,
}

impl Stats {
    pub fn of(runs: Vec<f64>) -> Self {
        let mut sorted = runs.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = match n {
            0 => f64::NAN,
            _ if !n.is_multiple_of(2) => sorted[n / 2],
            _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        };
        Self {
            median,
            min: sorted.first().copied().unwrap_or(f64::NAN),
            max: sorted.last().copied().unwrap_or(f64::NAN),
            runs,
        }
    }

    /// `median (min–max)` with `decimals` places.
    pub fn show(&self, decimals: usize) -> String {
        if self.runs.len() <= 1 {
            format!("{:.decimals$}", self.median)
        } else {
            format!(
                "{:.decimals$} ({:.decimals$}–{:.decimals$})",
                self.median, self.min, self.max
            )
        }
    }
}

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub mode: String,
    pub repetitions: usize,
    pub cpus: usize,
    pub server_binary: String,
    pub enqueue: Vec<EnqueueFigure>,
    pub end_to_end: Option<EndToEndFigure>,
    pub latency: Vec<LatencyFigure>,
    pub backlog: Vec<BacklogFigure>,
    /// Drain throughput at the largest backlog / at 10k.
    pub backlog_ratio: Option<BacklogRatio>,
    pub ceilings: Option<Ceilings>,
    pub ordered: Option<OrderedFigure>,
    pub rated: Vec<RatedFigure>,
    pub overload: Option<OverloadFigure>,
    pub recurring: Vec<RecurringFigure>,
    pub kept: Option<KeptFigure>,
    pub pull: Option<PullFigure>,
    pub fanout: Option<FanoutFigure>,
    pub search: Vec<crate::search::SearchFigure>,
    pub cluster: Vec<crate::cluster::ClusterFigure>,
    pub ratios: Vec<Ratio>,
    pub targets: Vec<TargetCheck>,
    pub elapsed_seconds: f64,
}

#[derive(Debug, Serialize)]
pub struct EnqueueFigure {
    pub producers: usize,
    pub payload_bytes: usize,
    pub jobs_per_second: Stats,
    /// Database + WAL bytes after the run, per stored job.
    pub db_bytes_per_job: Stats,
    pub server_cpu_seconds_per_10k: Stats,
    pub bench_cpu_seconds_per_10k: Stats,
}

/// End-to-end runs, each paired with the raw HTTP POST ceiling and the relay measured just
/// before it: the CPU speed of the machine drifts too much between sections for a ratio of
/// medians taken minutes apart to mean much.
#[derive(Debug, Serialize)]
pub struct EndToEndFigure {
    pub jobs: u64,
    pub producers: usize,
    pub payload_bytes: usize,
    pub jobs_per_second: Stats,
    pub server_cpu_seconds_per_10k: Stats,
    pub bench_cpu_seconds_per_10k: Stats,
    pub duplicates: u64,
    /// Raw HTTP POSTs straight to the sink, same producers and payload.
    pub raw_post_per_second: Stats,
    /// The relay (no storage, two HTTP hops), same jobs, producers and payload.
    pub relay_jobs_per_second: Stats,
    pub relay_cpu_seconds_per_10k: Stats,
    pub relay_bench_cpu_seconds_per_10k: Stats,
    /// Per-run ratios: end-to-end / raw POST, relay / raw POST, end-to-end / relay.
    pub ratio_to_raw_post: Stats,
    pub relay_ratio_to_raw_post: Stats,
    pub ratio_to_relay: Stats,
}

/// Ordered delivery over many keys, paired run by run with the same load without keys.
#[derive(Debug, Serialize)]
pub struct OrderedFigure {
    pub jobs: u64,
    pub keys: u64,
    pub producers: usize,
    /// First enqueue to last delivery.
    pub keyed_jobs_per_second: Stats,
    pub plain_jobs_per_second: Stats,
    /// Per pair: keyed / plain.
    pub keyed_to_plain: Stats,
    pub keyed_server_cpu_seconds_per_10k: Stats,
    pub plain_server_cpu_seconds_per_10k: Stats,
    /// Keyed deliveries that broke their key's order (must be 0).
    pub out_of_order: u64,
    pub duplicates: u64,
}

/// A rate-limited queue (burst 1) draining a backlog.
#[derive(Debug, Serialize)]
pub struct RatedFigure {
    pub setting_per_second: f64,
    pub jobs: u64,
    /// Deliveries per second, first to last.
    pub measured_per_second: Stats,
    /// (measured − setting) / setting, in percent.
    pub error_percent: Stats,
}

/// The end-to-end run with the delivery log on (`keepDelivered`), paired run by run with
/// the same run without it.
#[derive(Debug, Serialize)]
pub struct KeptFigure {
    pub jobs: u64,
    pub kept_jobs_per_second: Stats,
    pub plain_jobs_per_second: Stats,
    /// Per pair: kept / plain.
    pub kept_to_plain: Stats,
    pub kept_server_cpu_seconds_per_10k: Stats,
    pub plain_server_cpu_seconds_per_10k: Stats,
    /// Growth of the database file and its WAL per kept job (200 B payloads).
    pub disk_bytes_per_kept_job: Stats,
}

/// Pull consumers (leasing batches, acking each job) against hookq pushing the same jobs.
#[derive(Debug, Serialize)]
pub struct PullFigure {
    pub jobs: u64,
    pub consumers: usize,
    pub lease_batch: usize,
    pub pull_jobs_per_second: Stats,
    pub push_jobs_per_second: Stats,
    /// Per pair: pull / push.
    pub pull_to_push: Stats,
    pub pull_server_cpu_seconds_per_10k: Stats,
    pub push_server_cpu_seconds_per_10k: Stats,
}

/// Topics: one publish making a job in each matching subscriber. Each figure is paired,
/// run by run, with plain queues doing the same work, since what a topic must show is that
/// routing adds little to the jobs it makes.
#[derive(Debug, Serialize)]
pub struct FanoutFigure {
    /// Unfiltered subscribers of the fan-out and publish-CPU topics.
    pub subscribers: usize,
    /// Messages each fan-out and publish-CPU run publishes (the plain runs make as many
    /// jobs: `subscribers` × this).
    pub messages: u64,
    pub producers: usize,
    pub payload_bytes: usize,
    /// Deliveries per second to the sink, first publish to last delivery.
    pub fanout_deliveries_per_second: Stats,
    /// The end-to-end run of as many jobs, on one queue.
    pub plain_jobs_per_second: Stats,
    pub fanout_server_cpu_seconds_per_10k_deliveries: Stats,
    pub plain_server_cpu_seconds_per_10k_jobs: Stats,
    pub duplicates: u64,
    /// Publishing to `subscribers` paused queues (storing, no delivery): server CPU per
    /// message.
    pub publish_server_cpu_micros_per_message: Stats,
    /// Enqueueing to one paused queue: server CPU per 10 (`subscribers`) enqueues, as many
    /// stored jobs as one message makes.
    pub plain_server_cpu_micros_per_10_enqueues: Stats,
    pub publish_messages_per_second: Stats,
    pub plain_enqueues_per_second: Stats,
    /// Filtered subscriptions (`{"n": [i]}`) of the matching topic, exactly one matching
    /// each message; the other topic has only that one.
    pub matching_subscriptions: usize,
    /// Publishes (201) per second to the topic of `matching_subscriptions` subscriptions.
    pub matching_publishes_per_second: Stats,
    /// The same to the topic of the one matching subscription.
    pub single_publishes_per_second: Stats,
    pub matching_server_cpu_micros_per_message: Stats,
    pub single_server_cpu_micros_per_message: Stats,
    pub ratio_to_plain: FanoutRatios,
}

/// The paired ratios of the fan-out part, each repetition's variant over its baseline.
#[derive(Debug, Serialize)]
pub struct FanoutRatios {
    /// Fan-out deliveries/s ÷ plain end-to-end jobs/s (goal ≥ 0.9).
    pub deliveries_per_second: Stats,
    /// Server CPU per message published to the paused subscribers ÷ per as many enqueues
    /// (goal ≤ 0.3).
    pub publish_cpu: Stats,
    /// Publishes/s with the many filtered subscriptions ÷ with the one (goal ≥ 0.5).
    pub matching_10k: Stats,
}

/// Schedules firing every second on one queue.
#[derive(Debug, Serialize)]
pub struct RecurringFigure {
    pub schedules: usize,
    pub window_seconds: f64,
    /// Whole-second ticks checked (over every run), each expected to enqueue one job per
    /// schedule.
    pub ticks_checked: u64,
    /// Jobs a checked tick should have delivered and did not (a tick fired late as a
    /// catch-up for a later one, or never).
    pub jobs_missed: u64,
    /// Jobs beyond one per schedule and tick (a tick fired twice: must be 0).
    pub jobs_extra: u64,
    pub duplicate_deliveries: u64,
    /// From a job's tick to its arrival at the worker.
    pub lateness_p50_ms: Stats,
    pub lateness_p99_ms: Stats,
    pub lateness_max_ms: Stats,
    /// Server CPU µs per job fired (firing, storing, claiming, delivering).
    pub server_cpu_micros_per_job: Stats,
}

/// Open-loop overload: offered load far above what one server stores.
#[derive(Debug, Serialize)]
pub struct OverloadFigure {
    pub offered_per_second: f64,
    pub seconds: f64,
    pub sent: u64,
    pub created: u64,
    pub created_per_second: f64,
    pub too_many_requests: u64,
    pub unavailable: u64,
    /// Answers other than 201, 429, 503 (must be 0).
    pub other_answers: u64,
    /// Requests that got no HTTP answer (must be 0).
    pub transport_errors: u64,
    /// Times the generator's in-flight cap was full when a request was due.
    pub schedule_slips: u64,
    pub rss_before_mib: f64,
    pub peak_rss_mib: f64,
    /// From the end of the load until every 201 was delivered.
    pub drain_seconds_after_load: f64,
    /// Distinct jobs delivered that were never answered 201 (must be 0).
    pub delivered_without_201: u64,
}

#[derive(Debug, Serialize)]
pub struct LatencyFigure {
    pub label: String,
    pub offered_jobs_per_second: f64,
    pub achieved_jobs_per_second: Stats,
    pub p50_ms: Stats,
    pub p99_ms: Stats,
    pub p999_ms: Stats,
    pub max_ms: Stats,
    pub samples: u64,
    /// Times the generator's in-flight cap was full when a request was due.
    pub schedule_slips: u64,
}

#[derive(Debug, Serialize)]
pub struct BacklogFigure {
    pub jobs: u64,
    pub prefill_seconds: f64,
    /// Server start to first delivery (opening a large database, first claim).
    pub startup_seconds: Stats,
    /// Deliveries per second from the first to the last delivery.
    pub drain_jobs_per_second: Stats,
    pub server_cpu_seconds_per_10k: Stats,
    pub peak_rss_bytes: Stats,
    /// Database bytes per queued job after the prefill (file + WAL).
    pub db_bytes_per_job: f64,
    pub duplicates: u64,
}

#[derive(Debug, Serialize)]
pub struct BacklogRatio {
    pub large_jobs: u64,
    pub small_jobs: u64,
    pub ratio: f64,
}

#[derive(Debug, Serialize)]
pub struct Ceilings {
    pub sqlite: Vec<SqliteCeiling>,
    pub store_writer: StoreCeiling,
    pub http_post_per_second: Stats,
    pub http_producers: usize,
}

#[derive(Debug, Serialize)]
pub struct SqliteCeiling {
    pub batch: u64,
    /// With the writer's per-operation `SAVEPOINT`/`RELEASE`.
    pub savepoints: bool,
    pub rows_per_second: Stats,
}

#[derive(Debug, Serialize)]
pub struct StoreCeiling {
    pub callers: usize,
    pub jobs_per_second: Stats,
    pub mean_batch: Stats,
    pub mean_commit_micros: Stats,
}

#[derive(Debug, Serialize)]
pub struct Ratio {
    pub name: String,
    pub value: f64,
}

#[derive(Debug, Serialize)]
pub struct TargetCheck {
    pub target: String,
    pub measured: String,
    pub met: bool,
}

fn kib(bytes: usize) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

fn row(label: &str, value: &str) {
    println!("  {label:<58} {value}");
}

/// Print the report as a readable table.
pub fn print(report: &Report) {
    println!();
    println!(
        "hookq-bench ({} mode, {} repetition(s), {} CPUs) — median (min–max)",
        report.mode, report.repetitions, report.cpus
    );
    if !report.enqueue.is_empty() {
        println!("\nEnqueue throughput, dispatch off (durable 201/s)");
        for f in &report.enqueue {
            row(
                &format!(
                    "{} producer(s), {} payload",
                    f.producers,
                    kib(f.payload_bytes)
                ),
                &format!(
                    "{} jobs/s   {} B/job on disk   server {} CPU-s/10k",
                    f.jobs_per_second.show(0),
                    f.db_bytes_per_job.show(0),
                    f.server_cpu_seconds_per_10k.show(2)
                ),
            );
        }
    }
    if let Some(f) = &report.end_to_end {
        println!("\nEnd-to-end (first enqueue to last delivery)");
        row(
            &format!(
                "{} jobs, {} producers, {}",
                f.jobs,
                f.producers,
                kib(f.payload_bytes)
            ),
            &format!(
                "{} jobs/s   server {} CPU-s/10k   bench {} CPU-s/10k   dup {}",
                f.jobs_per_second.show(0),
                f.server_cpu_seconds_per_10k.show(2),
                f.bench_cpu_seconds_per_10k.show(2),
                f.duplicates
            ),
        );
        row(
            "relay (no storage), same load, each run just before",
            &format!(
                "{} jobs/s   relay {} CPU-s/10k   bench {} CPU-s/10k",
                f.relay_jobs_per_second.show(0),
                f.relay_cpu_seconds_per_10k.show(2),
                f.relay_bench_cpu_seconds_per_10k.show(2)
            ),
        );
        row(
            &format!(
                "raw HTTP POST to the sink, {} concurrent, each run before",
                f.producers
            ),
            &format!("{} req/s", f.raw_post_per_second.show(0)),
        );
        row(
            "paired ratio end-to-end / raw HTTP POST",
            &f.ratio_to_raw_post.show(2),
        );
        row(
            "paired ratio relay / raw HTTP POST",
            &f.relay_ratio_to_raw_post.show(2),
        );
        row("paired ratio end-to-end / relay", &f.ratio_to_relay.show(2));
    }
    if !report.latency.is_empty() {
        println!("\nLatency enqueue→delivery (open loop), ms");
        for f in &report.latency {
            row(
                &format!("{} (offered {:.0}/s)", f.label, f.offered_jobs_per_second),
                &format!(
                    "p50 {}  p99 {}  p99.9 {}  max {}  ({} samples, achieved {}/s)",
                    f.p50_ms.show(2),
                    f.p99_ms.show(2),
                    f.p999_ms.show(2),
                    f.max_ms.show(1),
                    f.samples,
                    f.achieved_jobs_per_second.show(0)
                ),
            );
        }
    }
    if !report.backlog.is_empty() {
        println!("\nBacklog drain (pre-filled, dispatch on)");
        for f in &report.backlog {
            row(
                &format!("{} jobs", f.jobs),
                &format!(
                    "{} jobs/s   start {} s   server {} CPU-s/10k   peak RSS {} MB   {:.0} B/job",
                    f.drain_jobs_per_second.show(0),
                    f.startup_seconds.show(2),
                    f.server_cpu_seconds_per_10k.show(2),
                    Stats::of(f.peak_rss_bytes.runs.iter().map(|b| b / 1e6).collect()).show(1),
                    f.db_bytes_per_job
                ),
            );
        }
        if let Some(r) = &report.backlog_ratio {
            row(
                &format!("ratio {} / {}", r.large_jobs, r.small_jobs),
                &format!("{:.2}", r.ratio),
            );
        }
    }
    if let Some(c) = &report.ceilings {
        println!("\nCeilings (same run)");
        for s in &c.sqlite {
            row(
                &format!(
                    "SQLite insert, batch {}{}",
                    s.batch,
                    if s.savepoints { " + savepoints" } else { "" }
                ),
                &format!("{} rows/s", s.rows_per_second.show(0)),
            );
        }
        row(
            &format!(
                "Store::enqueue, {} callers, no HTTP",
                c.store_writer.callers
            ),
            &format!(
                "{} jobs/s   mean batch {}   commit {} µs",
                c.store_writer.jobs_per_second.show(0),
                c.store_writer.mean_batch.show(1),
                c.store_writer.mean_commit_micros.show(0)
            ),
        );
        row(
            &format!("raw HTTP POST to the sink, {} concurrent", c.http_producers),
            &format!("{} req/s", c.http_post_per_second.show(0)),
        );
    }
    print_control(report);
    print_fanout(report);
    print_search(report);
    print_cluster(&report.cluster, report.repetitions);
    if !report.ratios.is_empty() {
        println!("\nRatios to ceilings");
        for r in &report.ratios {
            row(&r.name, &format!("{:.2}", r.value));
        }
    }
    if !report.targets.is_empty() {
        println!("\nTargets (issue 4)");
        for t in &report.targets {
            row(
                &t.target,
                &format!("{}  {}", t.measured, if t.met { "met" } else { "MISSED" }),
            );
        }
    }
    println!("\n(took {:.0} s)", report.elapsed_seconds);
}

/// The delivery-control figures: ordered, rate-limited, overload.
fn print_control(report: &Report) {
    if let Some(f) = &report.ordered {
        println!("\nOrdered delivery (first enqueue to last delivery)");
        row(
            &format!(
                "{} jobs over {} keys, {} producers",
                f.jobs, f.keys, f.producers
            ),
            &format!(
                "{} jobs/s   server {} CPU-s/10k   out of order {}   dup {}",
                f.keyed_jobs_per_second.show(0),
                f.keyed_server_cpu_seconds_per_10k.show(2),
                f.out_of_order,
                f.duplicates
            ),
        );
        row(
            "same load without keys",
            &format!(
                "{} jobs/s   server {} CPU-s/10k",
                f.plain_jobs_per_second.show(0),
                f.plain_server_cpu_seconds_per_10k.show(2)
            ),
        );
        row("keyed / without keys (paired)", &f.keyed_to_plain.show(2));
    }
    if !report.rated.is_empty() {
        println!("\nRate-limited queue (burst 1), backlog drained");
        for f in &report.rated {
            row(
                &format!("ratePerSecond {}, {} jobs", f.setting_per_second, f.jobs),
                &format!(
                    "{} deliveries/s   error {} %",
                    f.measured_per_second.show(1),
                    f.error_percent.show(2)
                ),
            );
        }
    }
    if !report.recurring.is_empty() {
        println!("\nRecurring jobs: schedules every second on one queue");
        for f in &report.recurring {
            row(
                &format!("{} schedules, {:.0} s", f.schedules, f.window_seconds),
                &format!(
                    "ticks {}  missed {}  extra {}  dup {}   late p50 {} ms  p99 {} ms  max {} ms   server {} CPU-µs/job",
                    f.ticks_checked,
                    f.jobs_missed,
                    f.jobs_extra,
                    f.duplicate_deliveries,
                    f.lateness_p50_ms.show(1),
                    f.lateness_p99_ms.show(1),
                    f.lateness_max_ms.show(1),
                    f.server_cpu_micros_per_job.show(0),
                ),
            );
        }
    }
    if let Some(f) = &report.kept {
        println!("\nDelivery log: end-to-end with keepDelivered, paired with the same run without");
        row(
            &format!("{} jobs, kept / not kept", f.jobs),
            &format!(
                "{} / {} jobs/s   server CPU-s per 10k {} / {}",
                f.kept_jobs_per_second.show(0),
                f.plain_jobs_per_second.show(0),
                f.kept_server_cpu_seconds_per_10k.show(2),
                f.plain_server_cpu_seconds_per_10k.show(2)
            ),
        );
        row("kept / not kept (paired)", &f.kept_to_plain.show(2));
        row(
            "disk per kept job",
            &format!("{} B", f.disk_bytes_per_kept_job.show(0)),
        );
    }
    if let Some(f) = &report.pull {
        println!(
            "\nPull: {} consumers leasing {} at a time and acking each, paired with pushing",
            f.consumers, f.lease_batch
        );
        row(
            &format!("{} jobs, pull / push", f.jobs),
            &format!(
                "{} / {} jobs/s   server CPU-s per 10k {} / {}",
                f.pull_jobs_per_second.show(0),
                f.push_jobs_per_second.show(0),
                f.pull_server_cpu_seconds_per_10k.show(2),
                f.push_server_cpu_seconds_per_10k.show(2)
            ),
        );
        row("pull / push (paired)", &f.pull_to_push.show(2));
    }
    if let Some(f) = &report.overload {
        println!(
            "\nOpen-loop overload ({:.0} enqueues/s offered)",
            f.offered_per_second
        );
        row(
            &format!("{} sent in {:.1} s", f.sent, f.seconds),
            &format!(
                "201 {} ({:.0}/s)   429 {}   503 {}   other {}   no answer {}   slips {}",
                f.created,
                f.created_per_second,
                f.too_many_requests,
                f.unavailable,
                f.other_answers,
                f.transport_errors,
                f.schedule_slips
            ),
        );
        row(
            "server memory, every 201 delivered",
            &format!(
                "RSS {:.0} MiB before, peak {:.0} MiB   drained {:.1} s after the load   \
                 delivered without a 201: {}",
                f.rss_before_mib,
                f.peak_rss_mib,
                f.drain_seconds_after_load,
                f.delivered_without_201
            ),
        );
    }
}

/// The topic figures, each paired ratio beside its goal.
fn print_fanout(report: &Report) {
    let Some(f) = &report.fanout else {
        return;
    };
    let goal = |ratio: &Stats, text: &str, met: bool| {
        format!(
            "{}   goal {text}  {}",
            ratio.show(2),
            if met { "met" } else { "MISSED" }
        )
    };
    let r = &f.ratio_to_plain;
    println!(
        "\nTopics: fan-out to {} subscribers, paired with plain queues ({} producers, {})",
        f.subscribers,
        f.producers,
        kib(f.payload_bytes)
    );
    row(
        &format!(
            "{} messages ({} deliveries), fan-out / plain jobs",
            f.messages,
            f.messages * f.subscribers as u64
        ),
        &format!(
            "{} / {} deliveries/s   server CPU-s per 10k {} / {}   dup {}",
            f.fanout_deliveries_per_second.show(0),
            f.plain_jobs_per_second.show(0),
            f.fanout_server_cpu_seconds_per_10k_deliveries.show(2),
            f.plain_server_cpu_seconds_per_10k_jobs.show(2),
            f.duplicates
        ),
    );
    row(
        "fan-out / plain deliveries/s (paired)",
        &goal(
            &r.deliveries_per_second,
            "≥ 0.9",
            r.deliveries_per_second.median >= 0.9,
        ),
    );
    row(
        &format!(
            "publish to {} paused / {} enqueues to one, server CPU",
            f.subscribers, f.subscribers
        ),
        &format!(
            "{} / {} µs   ({} messages/s, {} enqueues/s)",
            f.publish_server_cpu_micros_per_message.show(1),
            f.plain_server_cpu_micros_per_10_enqueues.show(1),
            f.publish_messages_per_second.show(0),
            f.plain_enqueues_per_second.show(0)
        ),
    );
    row(
        "publish CPU / as many enqueues' CPU (paired)",
        &goal(&r.publish_cpu, "≤ 0.3", r.publish_cpu.median <= 0.3),
    );
    row(
        &format!(
            "publish, 1 of {} filtered subscriptions / 1 of 1",
            f.matching_subscriptions
        ),
        &format!(
            "{} / {} messages/s   server CPU {} / {} µs per message",
            f.matching_publishes_per_second.show(0),
            f.single_publishes_per_second.show(0),
            f.matching_server_cpu_micros_per_message.show(1),
            f.single_server_cpu_micros_per_message.show(1)
        ),
    );
    row(
        &format!(
            "{} subscriptions / 1, publishes/s (paired)",
            f.matching_subscriptions
        ),
        &goal(&r.matching_10k, "≥ 0.5", r.matching_10k.median >= 0.5),
    );
}

/// The backends side by side, one row each: medians, ratios to SQLite's, CPU per job.
fn print_cluster(figures: &[crate::cluster::ClusterFigure], repetitions: usize) {
    let Some(first) = figures.first() else {
        return;
    };
    // The SQLite run has one node, so its producers are each node's under
    // `--producers-per-node`.
    let producers = if figures.iter().all(|f| f.producers == first.producers) {
        format!("{} producers spread over the nodes", first.producers)
    } else {
        format!("{} producers per node", first.producers)
    };
    println!(
        "\nSQLite and PostgreSQL side by side ({producers}, 200 B; end to end {} jobs)",
        first.e2e_jobs
    );
    println!(
        "  medians of {repetitions} repetition(s), every run in the JSON; × SQLite: the median of \
         each repetition's\n  ratio to SQLite's run; CPU ms per job: the hookq nodes together / \
         PostgreSQL; efficiency: e2e(N) / (N × e2e(1 node));\n  CPU × 1 node: end-to-end CPU \
         per job (nodes + PostgreSQL) / the 1-node run's"
    );
    match first.node_cpu {
        Some(cores) => println!(
            "  each node (and the SQLite server) in a CPU quota of {cores} cores of its own; \
             PostgreSQL, producers and sink outside"
        ),
        None => println!("  every node shares the machine's cores (no --node-cpu)"),
    }
    let against_one = |figure: &Option<Stats>| {
        figure
            .as_ref()
            .map_or("—".to_owned(), |s| format!("{:.2}", s.median))
    };
    // CPU-seconds per 10k jobs → ms per job.
    let cpu = |nodes: &Stats, database: &Option<Stats>| {
        let database = database
            .as_ref()
            .map_or("—".to_owned(), |d| format!("{:.3}", d.median / 10.0));
        format!("{:.3} / {database}", nodes.median / 10.0)
    };
    let mut rows = vec![
        [
            "backend",
            "enqueue/s",
            "× SQLite",
            "e2e/s",
            "× SQLite",
            "enqueue CPU ms",
            "e2e CPU ms",
            "efficiency",
            "CPU × 1 node",
            "idle p50 ms",
            "idle p99 ms",
            "backlog drain/s (jobs)",
            "dup",
        ]
        .map(str::to_owned),
    ];
    for f in figures {
        rows.push([
            f.backend.label(f.nodes),
            format!("{:.0}", f.enqueue_jobs_per_second.median),
            format!("{:.2}", f.enqueue_to_sqlite.median),
            format!("{:.0}", f.e2e_jobs_per_second.median),
            format!("{:.2}", f.e2e_to_sqlite.median),
            cpu(
                &f.enqueue_nodes_cpu_per_10k,
                &f.enqueue_postgres_cpu_per_10k,
            ),
            cpu(&f.e2e_nodes_cpu_per_10k, &f.e2e_postgres_cpu_per_10k),
            against_one(&f.scaling_efficiency),
            against_one(&f.e2e_cpu_to_one_node),
            format!("{:.2}", f.idle_latency_p50_ms.median),
            format!("{:.2}", f.idle_latency_p99_ms.median),
            format!(
                "{:.0} ({:.0})",
                f.backlog_jobs_per_second.median, f.backlog_jobs.median
            ),
            f.duplicates.to_string(),
        ]);
    }
    table(&rows);
}

/// Rows of cells in columns as wide as their widest cell: the first column to the left, the
/// others (figures) to the right.
fn table<const N: usize>(rows: &[[String; N]]) {
    let width = |column: usize| {
        rows.iter()
            .map(|row| row[column].chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..N).map(width).collect();
    for row in rows {
        let mut line = String::from(" ");
        for (column, (cell, &w)) in row.iter().zip(&widths).enumerate() {
            if column == 0 {
                line.push_str(&format!(" {cell:<w$}"));
            } else {
                line.push_str(&format!("  {cell:>w$}"));
            }
        }
        println!("{line}");
    }
}

/// Each search's first answer and whole walk, per backend.
fn print_search(report: &Report) {
    for f in &report.search {
        let Some(backend) = f.timings.first().map(|t| t.backend.as_str()) else {
            continue;
        };
        println!(
            "\nSearch across {} queues, {} jobs on {backend} (filled in {:.0} s): \
             first page ms (×7), then the whole walk",
            f.queues, f.jobs, f.fill_seconds
        );
        for t in &f.timings {
            row(
                &format!(
                    "{} ({})",
                    t.search,
                    if t.walked { "walks" } else { "seeks" }
                ),
                &format!(
                    "{} ms   {} jobs, {} rows read   walk: {} pages, {:.2} s, {} jobs, slowest {:.0} ms",
                    t.first_page_ms.show(1),
                    t.jobs_on_first_page,
                    t.rows_read_first_page,
                    t.walk_pages,
                    t.walk_seconds,
                    t.walk_jobs,
                    t.walk_slowest_page_ms
                ),
            );
        }
    }
}
