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
