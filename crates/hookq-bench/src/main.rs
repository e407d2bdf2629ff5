//! `hookq-bench`: the benchmark harness of issue 4. Starts the real release server as a
//! child process on temp databases, an in-process sink standing in for the worker, and a
//! load generator; measures enqueue and end-to-end throughput, latency, backlog drain,
//! resources and the ceilings (raw SQLite, raw HTTP, a storage-free relay) in the same run;
//! prints a table and writes JSON. See `docs/benchmarks.md`.
//!
//! With the hidden `--relay-to <URL>` the binary is instead the relay child process
//! (`relay.rs`) that the end-to-end section measures against.
//!
//! `--quick` only checks that the harness runs (seconds, small counts); it never judges a
//! target.

mod ceilings;
mod cluster;
mod control;
mod fanout;
mod kept;
mod load;
mod pull;
mod quota;
mod recurring;
mod relay;
mod report;
mod search;
mod server;
mod sink;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use reqwest::StatusCode;
use tokio_util::sync::CancellationToken;

use ceilings::QUEUE;
use report::{
    BacklogFigure, BacklogRatio, Ceilings, EndToEndFigure, EnqueueFigure, LatencyFigure, Ratio,
    Report, SqliteCeiling, Stats, StoreCeiling, TargetCheck,
};
use server::{ScratchDir, ServerProcess, ServerSpec};
use sink::Sink;

/// Benchmark a release hookq server: throughput, latency, backlog drain, resources, ceilings.
#[derive(Parser, Debug)]
#[command(about)]
struct Cli {
    /// Small counts and one repetition: checks the harness runs (well under a minute).
    #[arg(long)]
    quick: bool,
    /// Where to write the JSON results.
    #[arg(long, default_value = "target/bench/bench.json")]
    out: PathBuf,
    /// The hookq binary [default: `hookq` next to this executable].
    #[arg(long)]
    server: Option<PathBuf>,
    /// Run only these parts (comma-separated) [default: all].
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Part>,
    /// Repetitions of each measurement [default: 3, or 1 with --quick].
    #[arg(long)]
    repetitions: Option<usize>,
    /// Jobs of each end-to-end run [default: 50000, or 5000 with --quick]: more average out
    /// what lands in a run by chance (PostgreSQL's autovacuum, counted as its CPU). The
    /// fan-out run keeps its own count.
    #[arg(long)]
    e2e_jobs: Option<u64>,
    /// Backlog sizes to drain, comma-separated [default: 10000,100000,1000000; 10000 with --quick].
    #[arg(long, value_delimiter = ',')]
    backlog_sizes: Vec<u64>,
    /// Soak test: this many minutes of steady open-loop load on one server, reported every
    /// 30 s (RSS, latency, database size). Runs only when given; not part of "all".
    #[arg(long)]
    soak_minutes: Option<u64>,
    /// Offered load of the soak test, jobs per second.
    #[arg(long, default_value_t = 2000.0)]
    soak_rate: f64,
    /// A PostgreSQL server (`postgres://…`) for the `cluster` part: each run creates a
    /// database of its own there (and drops it). Without it the part is skipped.
    #[arg(long)]
    db: Option<String>,
    /// Node counts the `cluster` part measures on PostgreSQL (beside one SQLite server),
    /// comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 3])]
    nodes: Vec<usize>,
    /// The `cluster` part only: run each hookq node (and the SQLite server it is compared
    /// with) in a CPU quota of this many cores of its own (cgroup v2 `cpu.max` or v1
    /// `cpu.cfs_quota_us`; needs root), as though each were a small machine; PostgreSQL, the
    /// producers and the sink stay outside. Without it, nodes share the machine's cores.
    #[arg(long)]
    node_cpu: Option<f64>,
    /// The `cluster` part only: give each node this many closed-loop producers of its own
    /// (N nodes, N times as many producers: the same load per node), rather than 64 spread
    /// over all the nodes (the same load in all, a quarter per node with four).
    #[arg(long)]
    producers_per_node: Option<usize>,
    /// The `search` part: jobs stored before the searches are timed [default: 1000000, or
    /// 20000 with --quick].
    #[arg(long)]
    search_jobs: Option<u64>,
    /// Run as the relay child process, forwarding to this URL, until SIGTERM.
    #[arg(long, hide = true)]
    relay_to: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Part {
    Enqueue,
    E2e,
    Latency,
    Backlog,
    Ceilings,
    /// Ordered delivery (1 000 keys, 64 producers) against the same load without keys.
    Ordered,
    /// Rate-limited queues: the measured rate against the setting.
    Rated,
    /// Open-loop overload: answers, memory, every 201 delivered.
    Overload,
    /// Recurring jobs: 100 and 1 000 schedules firing every second (one job per tick each,
    /// lateness from tick to delivery).
    Recurring,
    /// The delivery log: end-to-end with `keepDelivered`, paired with the same run without.
    Kept,
    /// Pull consumers (64, leasing 10 at a time, acking each) against the same jobs pushed.
    Pull,
    /// One SQLite server beside 1, 2, 3 … PostgreSQL nodes on one database, same method,
    /// same run (needs `--db postgres://…`).
    Cluster,
    /// Topics: a publish fanned out to 10 subscribers against as many plain jobs
    /// (deliveries/s end to end, server CPU of the publish), and a topic of 10 000 filtered
    /// subscriptions, one matching, against a topic of that one (publishes/s).
    Fanout,
    /// Search across queues: a million jobs in 20 queues (SQLite, and PostgreSQL with
    /// `--db`), each kind of `GET /admin/search` timed, first page and whole walk.
    Search,
}

/// The order of a paired repetition's two runs (the variant, then the baseline, or the other
/// way round), swapped every repetition so neither always runs on a warmer machine.
fn alternating(rep: usize) -> [bool; 2] {
    if rep.is_multiple_of(2) {
        [true, false]
    } else {
        [false, true]
    }
}

/// The figures of a paired part: each run's rate and server CPU, by side, and the ratio
/// variant / baseline of each repetition.
#[derive(Default)]
struct Paired {
    variant: Vec<f64>,
    baseline: Vec<f64>,
    variant_cpu: Vec<f64>,
    baseline_cpu: Vec<f64>,
    ratios: Vec<f64>,
    pair: [f64; 2],
}

impl Paired {
    /// One run of the current repetition.
    fn record(&mut self, variant: bool, rate: f64, cpu: f64) {
        if variant {
            self.variant.push(rate);
            self.variant_cpu.push(cpu);
            self.pair[0] = rate;
        } else {
            self.baseline.push(rate);
            self.baseline_cpu.push(cpu);
            self.pair[1] = rate;
        }
    }

    /// Both runs of the repetition are in.
    fn end_repetition(&mut self) {
        self.ratios.push(self.pair[0] / self.pair[1]);
    }
}

/// Counts and durations of one mode.
struct Plan {
    repetitions: usize,
    enqueue_warmup: Duration,
    enqueue_measure: Duration,
    e2e_warmup_jobs: u64,
    e2e_jobs: u64,
    latency_warmup: Duration,
    latency_measure: Duration,
    backlog_sizes: Vec<u64>,
    ceiling_measure: Duration,
    /// Seconds of backlog a rate-limited run delivers.
    rated_seconds: f64,
    overload_offered: f64,
    overload_duration: Duration,
    /// How long the recurring-jobs run lets its schedules fire.
    recurring_window: Duration,
    /// Messages a fan-out run publishes (each a job in every one of 10 subscribers): a
    /// tenth of the end-to-end run's jobs, so both deliver as many.
    fanout_messages: u64,
    /// Filtered subscriptions of the matching run's big topic.
    matching_subscriptions: usize,
}

impl Plan {
    fn new(cli: &Cli) -> Self {
        let mut plan = if cli.quick {
            Self {
                repetitions: 1,
                enqueue_warmup: Duration::from_millis(300),
                enqueue_measure: Duration::from_secs(1),
                e2e_warmup_jobs: 500,
                e2e_jobs: 5_000,
                latency_warmup: Duration::from_millis(300),
                latency_measure: Duration::from_secs(1),
                backlog_sizes: vec![10_000],
                ceiling_measure: Duration::from_millis(500),
                rated_seconds: 1.0,
                overload_offered: 20_000.0,
                overload_duration: Duration::from_secs(1),
                recurring_window: Duration::from_secs(3),
                fanout_messages: 200,
                matching_subscriptions: 100,
            }
        } else {
            Self {
                repetitions: 3,
                enqueue_warmup: Duration::from_secs(1),
                enqueue_measure: Duration::from_secs(5),
                e2e_warmup_jobs: 2_000,
                e2e_jobs: 50_000,
                latency_warmup: Duration::from_secs(1),
                latency_measure: Duration::from_secs(10),
                backlog_sizes: vec![10_000, 100_000, 1_000_000],
                ceiling_measure: Duration::from_secs(3),
                rated_seconds: 5.0,
                overload_offered: 60_000.0,
                overload_duration: Duration::from_secs(10),
                recurring_window: Duration::from_secs(10),
                fanout_messages: 5_000,
                matching_subscriptions: 10_000,
            }
        };
        if let Some(n) = cli.repetitions {
            plan.repetitions = n.max(1);
        }
        if let Some(jobs) = cli.e2e_jobs {
            plan.e2e_jobs = jobs.max(1);
        }
        if !cli.backlog_sizes.is_empty() {
            plan.backlog_sizes = cli.backlog_sizes.clone();
        }
        plan
    }

    /// The biggest backlogs are drained once: one run already takes minutes.
    fn backlog_repetitions(&self, jobs: u64) -> usize {
        if jobs >= 1_000_000 {
            1
        } else {
            self.repetitions
        }
    }
}

const SMALL_PAYLOAD: usize = 200;
const LARGE_PAYLOAD: usize = 4096;
const MANY_PRODUCERS: usize = 64;
/// Upper bound on any single wait for deliveries.
const MAX_WAIT: Duration = Duration::from_secs(1800);

/// Everything the phases share.
struct Bench {
    plan: Plan,
    binary: PathBuf,
    scratch: ScratchDir,
    client: reqwest::Client,
    sink: Sink,
    clock: Instant,
    next_db: usize,
    /// `--node-cpu`: the cores each node of the `cluster` part may use.
    node_cpu: Option<f64>,
    /// `--producers-per-node`: each node's own producers in the `cluster` part; none: 64
    /// spread over the nodes.
    producers_per_node: Option<usize>,
}

/// The same allocator as the server (src/main.rs), so the sink, the producers and the relay
/// are measured on the footing hookq itself runs on.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(target) = &cli.relay_to {
        return relay::run(target).await;
    }
    let clock = Instant::now();
    let binary = match &cli.server {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .context("cannot find this executable's path")?
            .with_file_name("hookq"),
    };
    if !binary.is_file() {
        bail!(
            "no server binary at {}: run `cargo build --release` (or pass --server)",
            binary.display()
        );
    }
    let shutdown = CancellationToken::new();
    let sink = Sink::start(clock, shutdown.clone()).await?;
    let mut bench = Bench {
        plan: Plan::new(&cli),
        binary,
        scratch: ScratchDir::new()?,
        client: load::client()?,
        sink,
        clock,
        next_db: 0,
        node_cpu: cli.node_cpu,
        producers_per_node: cli.producers_per_node,
    };
    let wanted = |part: Part| cli.only.is_empty() || cli.only.contains(&part);
    let mut report = Report {
        mode: if cli.quick { "quick" } else { "full" }.into(),
        repetitions: bench.plan.repetitions,
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        server_binary: bench.binary.display().to_string(),
        ..Report::default()
    };
    eprintln!(
        "hookq-bench: server {}, scratch {}",
        bench.binary.display(),
        bench.scratch.path().display()
    );

    if let Some(minutes) = cli.soak_minutes {
        bench
            .soak(Duration::from_secs(minutes * 60), cli.soak_rate)
            .await
            .context("soak")?;
        shutdown.cancel();
        return Ok(());
    }
    if wanted(Part::Ceilings) {
        report.ceilings = Some(bench.ceilings().await.context("ceilings")?);
    }
    if wanted(Part::Enqueue) {
        for (producers, size) in [
            (1, SMALL_PAYLOAD),
            (MANY_PRODUCERS, SMALL_PAYLOAD),
            (1, LARGE_PAYLOAD),
            (MANY_PRODUCERS, LARGE_PAYLOAD),
        ] {
            let figure = bench
                .enqueue(producers, size)
                .await
                .with_context(|| format!("enqueue, {producers} producers, {size} B"))?;
            report.enqueue.push(figure);
        }
    }
    if wanted(Part::E2e) {
        report.end_to_end = Some(bench.end_to_end().await.context("end-to-end")?);
    }
    if wanted(Part::Latency) {
        let max = match &report.end_to_end {
            Some(e2e) => e2e.jobs_per_second.median,
            None => {
                eprintln!("latency: measuring the end-to-end maximum first");
                bench.end_to_end_once(bench.plan.e2e_jobs).await?.0
            }
        };
        let loads = [
            ("fixed 1 000 jobs/s".to_owned(), 1_000.0),
            ("50% of measured max".to_owned(), (max * 0.5).max(1.0)),
        ];
        for (label, rate) in loads {
            let figure = bench
                .latency(label, rate)
                .await
                .with_context(|| format!("latency at {rate:.0} jobs/s"))?;
            report.latency.push(figure);
        }
    }
    if wanted(Part::Backlog) {
        for jobs in bench.plan.backlog_sizes.clone() {
            let figure = bench
                .backlog(jobs)
                .await
                .with_context(|| format!("backlog of {jobs}"))?;
            report.backlog.push(figure);
        }
        let smallest = report.backlog.iter().min_by_key(|f| f.jobs);
        let largest = report.backlog.iter().max_by_key(|f| f.jobs);
        if let (Some(small), Some(large)) = (smallest, largest)
            && large.jobs > small.jobs
        {
            report.backlog_ratio = Some(BacklogRatio {
                large_jobs: large.jobs,
                small_jobs: small.jobs,
                ratio: large.drain_jobs_per_second.median / small.drain_jobs_per_second.median,
            });
        }
    }
    if wanted(Part::Ordered) {
        report.ordered = Some(bench.ordered().await.context("ordered delivery")?);
    }
    if wanted(Part::Rated) {
        for per_second in [50.0, 500.0] {
            let figure = bench
                .rated(per_second)
                .await
                .with_context(|| format!("rate-limited at {per_second}/s"))?;
            report.rated.push(figure);
        }
    }
    if wanted(Part::Overload) {
        let (offered, duration) = (bench.plan.overload_offered, bench.plan.overload_duration);
        report.overload = Some(
            bench
                .overload(offered, duration)
                .await
                .context("overload")?,
        );
    }
    if wanted(Part::Recurring) {
        for schedules in [100, 1_000] {
            let figure = bench
                .recurring(schedules)
                .await
                .with_context(|| format!("recurring, {schedules} schedules"))?;
            report.recurring.push(figure);
        }
    }
    if wanted(Part::Kept) {
        report.kept = Some(bench.kept().await.context("delivery log")?);
    }
    if wanted(Part::Pull) {
        report.pull = Some(bench.pull().await.context("pull consumers")?);
    }
    if wanted(Part::Fanout) {
        report.fanout = Some(bench.fanout().await.context("fan-out")?);
    }
    if wanted(Part::Search) {
        let jobs = cli
            .search_jobs
            .unwrap_or(if cli.quick { 20_000 } else { 1_000_000 });
        report.search = bench
            .search_part(jobs, cli.db.as_deref())
            .await
            .context("search")?;
    }
    if wanted(Part::Cluster) {
        match &cli.db {
            Some(server_url) => {
                report.cluster = bench
                    .cluster(server_url, &cli.nodes)
                    .await
                    .context("cluster")?;
            }
            None if cli.only.contains(&Part::Cluster) => {
                bail!("--only cluster needs --db postgres://… (a PostgreSQL server)")
            }
            None => eprintln!("cluster: skipped (no --db postgres://…)"),
        }
    }
    derive_ratios_and_targets(&mut report);
    report.elapsed_seconds = clock.elapsed().as_secs_f64();
    report::print(&report);

    if let Some(dir) = cli.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let json = serde_json::to_string_pretty(&report).context("cannot serialize the report")?;
    std::fs::write(&cli.out, json + "\n")
        .with_context(|| format!("cannot write {}", cli.out.display()))?;
    println!("JSON written to {}", cli.out.display());
    shutdown.cancel();
    Ok(())
}

/// CPU seconds this bench process has used (producers + sink).
fn bench_cpu_seconds() -> f64 {
    server::process_cpu_seconds("/proc/self/stat").unwrap_or(0.0)
}

fn per_10k(cpu_seconds: f64, jobs: u64) -> f64 {
    cpu_seconds / jobs.max(1) as f64 * 10_000.0
}

impl Bench {
    fn fresh_db(&mut self, label: &str) -> PathBuf {
        self.next_db += 1;
        self.scratch.db(&format!("{label}-{}", self.next_db))
    }

    async fn start_server(&self, db: PathBuf, dispatch: bool) -> anyhow::Result<ServerProcess> {
        self.launch(ServerSpec {
            binary: self.binary.clone(),
            db,
            dispatch,
            max_queues: None,
            quota: None,
        })
        .await
    }

    /// Start a server as `spec` says.
    async fn launch(&self, spec: ServerSpec) -> anyhow::Result<ServerProcess> {
        tokio::task::spawn_blocking(move || ServerProcess::start(spec))
            .await
            .context("server start task failed")?
    }

    async fn stop_server(server: ServerProcess) -> anyhow::Result<()> {
        tokio::task::spawn_blocking(move || server.stop())
            .await
            .context("server stop task failed")?
    }

    /// A fresh server on a fresh database with the bench queue delivering to the sink.
    async fn server_with_queue(
        &mut self,
        label: &str,
        dispatch: bool,
    ) -> anyhow::Result<(ServerProcess, PathBuf, String)> {
        let db = self.fresh_db(label);
        let server = self.start_server(db.clone(), dispatch).await?;
        let base = server.base_url();
        load::create_queue(&self.client, &base, QUEUE, &self.sink.url("deliver")).await?;
        Ok((server, db, format!("{base}/queue/{QUEUE}")))
    }

    async fn enqueue(&mut self, producers: usize, size: usize) -> anyhow::Result<EnqueueFigure> {
        let (mut rates, mut bytes, mut server_cpu, mut bench_cpu) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for rep in 0..self.plan.repetitions {
            eprintln!(
                "enqueue: {producers} producer(s), {size} B, run {}",
                rep + 1
            );
            let (server, db, url) = self.server_with_queue("enqueue", false).await?;
            let body = load::payload(size, 0);
            let warm = load::closed_loop(
                &self.client,
                load::ClosedLoop {
                    url: &url,
                    producers,
                    body: body.clone(),
                    max_requests: u64::MAX,
                    duration: self.plan.enqueue_warmup,
                    expect: StatusCode::CREATED,
                },
            )
            .await?;
            let (cpu0, bench0) = (server.cpu_seconds()?, bench_cpu_seconds());
            let run = load::closed_loop(
                &self.client,
                load::ClosedLoop {
                    url: &url,
                    producers,
                    body,
                    max_requests: u64::MAX,
                    duration: self.plan.enqueue_measure,
                    expect: StatusCode::CREATED,
                },
            )
            .await
            .map_err(|e| e.context(server.log()))?;
            let (cpu1, bench1) = (server.cpu_seconds()?, bench_cpu_seconds());
            rates.push(run.rate());
            bytes.push(server::db_bytes(&db) as f64 / (warm.ok + run.ok).max(1) as f64);
            server_cpu.push(per_10k(cpu1 - cpu0, run.ok));
            bench_cpu.push(per_10k(bench1 - bench0, run.ok));
            Self::stop_server(server).await?;
            server::remove_db(&db);
        }
        Ok(EnqueueFigure {
            producers,
            payload_bytes: size,
            jobs_per_second: Stats::of(rates),
            db_bytes_per_job: Stats::of(bytes),
            server_cpu_seconds_per_10k: Stats::of(server_cpu),
            bench_cpu_seconds_per_10k: Stats::of(bench_cpu),
        })
    }

    /// One end-to-end run: (jobs/s, server CPU-s per 10k, bench CPU-s per 10k, duplicates).
    async fn end_to_end_once(&mut self, jobs: u64) -> anyhow::Result<(f64, f64, f64, u64)> {
        let (server, db, url) = self.server_with_queue("e2e", true).await?;
        let run = self.deliver_through(&server, &url, jobs).await?;
        Self::stop_server(server).await?;
        server::remove_db(&db);
        Ok(run)
    }

    /// One relay run: (jobs/s, relay CPU-s per 10k, bench CPU-s per 10k).
    async fn relay_once(&mut self, jobs: u64) -> anyhow::Result<(f64, f64, f64)> {
        let sink_url = self.sink.url("deliver");
        let relay = tokio::task::spawn_blocking(move || ServerProcess::start_relay(&sink_url))
            .await
            .context("relay start task failed")??;
        let url = format!("{}/queue/{QUEUE}", relay.base_url());
        let (rate, relay_cpu, bench_cpu, _) = self.deliver_through(&relay, &url, jobs).await?;
        Self::stop_server(relay).await?;
        Ok((rate, relay_cpu, bench_cpu))
    }

    /// A closed loop of `jobs` POSTs (64 producers, 200 B, expecting 201) to `url` on
    /// `process`, after a warm-up, timed from the first request to the sink's last delivery:
    /// (jobs/s, process CPU-s per 10k, bench CPU-s per 10k, duplicates).
    async fn deliver_through(
        &self,
        process: &ServerProcess,
        url: &str,
        jobs: u64,
    ) -> anyhow::Result<(f64, f64, f64, u64)> {
        self.deliver_fanned(process, url, jobs, 1).await
    }

    /// [`Self::deliver_through`] with each of the `requests` POSTs making `fan` jobs (a
    /// topic's subscribers), the warm-up as many jobs as the end-to-end run's: (jobs
    /// delivered/s, process CPU-s per 10k jobs, bench CPU-s per 10k jobs, duplicates). Every
    /// job must reach the sink: `fan` × the requests answered.
    async fn deliver_fanned(
        &self,
        process: &ServerProcess,
        url: &str,
        requests: u64,
        fan: u64,
    ) -> anyhow::Result<(f64, f64, f64, u64)> {
        let fan = fan.max(1);
        let body = load::payload(SMALL_PAYLOAD, 0);
        let closed = |max_requests| load::ClosedLoop {
            url,
            producers: MANY_PRODUCERS,
            body: body.clone(),
            max_requests,
            duration: MAX_WAIT,
            expect: StatusCode::CREATED,
        };
        self.sink.reset(false);
        let warm_requests = (self.plan.e2e_warmup_jobs / fan).max(1);
        let warm = load::closed_loop(&self.client, closed(warm_requests))
            .await
            .map_err(|e| e.context(process.log()))?;
        self.sink.wait_for(warm.ok * fan, MAX_WAIT).await?;
        self.sink.reset(false);
        let (cpu0, bench0) = (process.cpu_seconds()?, bench_cpu_seconds());
        let started = self.clock.elapsed();
        let run = load::closed_loop(&self.client, closed(requests))
            .await
            .map_err(|e| e.context(process.log()))?;
        let jobs = run.ok * fan;
        self.sink
            .wait_for(jobs, MAX_WAIT)
            .await
            .map_err(|e| e.context(process.log()))?;
        let (cpu1, bench1) = (process.cpu_seconds()?, bench_cpu_seconds());
        let seen = self.sink.snapshot();
        if seen.deliveries - seen.duplicates != jobs {
            bail!(
                "{jobs} jobs enqueued but {} delivered",
                seen.deliveries - seen.duplicates
            );
        }
        let last = seen.last.context("no delivery recorded")?;
        let rate = jobs as f64 / (last.saturating_sub(started)).as_secs_f64().max(1e-9);
        Ok((
            rate,
            per_10k(cpu1 - cpu0, jobs),
            per_10k(bench1 - bench0, jobs),
            seen.duplicates,
        ))
    }

    /// The raw HTTP POST ceiling: `MANY_PRODUCERS` closed-loop POSTs of `SMALL_PAYLOAD`
    /// bytes straight to the sink, after a warm-up of a third of the measurement.
    async fn raw_post_rate(&self) -> anyhow::Result<f64> {
        let url = self.sink.url("raw");
        let closed = |duration| load::ClosedLoop {
            url: &url,
            producers: MANY_PRODUCERS,
            body: load::payload(SMALL_PAYLOAD, 0),
            max_requests: u64::MAX,
            duration,
            expect: StatusCode::OK,
        };
        let measure = self.plan.ceiling_measure;
        load::closed_loop(&self.client, closed(measure / 3)).await?;
        Ok(load::closed_loop(&self.client, closed(measure))
            .await?
            .rate())
    }

    /// Each repetition runs, back to back, the raw HTTP POST ceiling, the relay and the
    /// end-to-end run, so their ratios compare runs made at the same CPU speed.
    async fn end_to_end(&mut self) -> anyhow::Result<EndToEndFigure> {
        let mut figures: [Vec<f64>; 10] = Default::default();
        let mut duplicates = 0;
        let jobs = self.plan.e2e_jobs;
        for rep in 0..self.plan.repetitions {
            eprintln!(
                "end-to-end: raw HTTP POST, {MANY_PRODUCERS} concurrent, run {}",
                rep + 1
            );
            let raw = self.raw_post_rate().await.context("raw HTTP POST")?;
            eprintln!(
                "end-to-end: relay (no storage), {jobs} jobs, run {}",
                rep + 1
            );
            let (relay, relay_cpu, relay_bench_cpu) =
                self.relay_once(jobs).await.context("relay")?;
            eprintln!("end-to-end: {jobs} jobs, run {}", rep + 1);
            let (rate, server_cpu, bench_cpu, dup) = self.end_to_end_once(jobs).await?;
            for (slot, value) in figures.iter_mut().zip([
                rate,
                server_cpu,
                bench_cpu,
                raw,
                relay,
                relay_cpu,
                relay_bench_cpu,
                rate / raw,
                relay / raw,
                rate / relay,
            ]) {
                slot.push(value);
            }
            duplicates += dup;
        }
        let [
            rate,
            server_cpu,
            bench_cpu,
            raw,
            relay,
            relay_cpu,
            relay_bench_cpu,
            to_raw,
            relay_to_raw,
            to_relay,
        ] = figures;
        Ok(EndToEndFigure {
            jobs,
            producers: MANY_PRODUCERS,
            payload_bytes: SMALL_PAYLOAD,
            jobs_per_second: Stats::of(rate),
            server_cpu_seconds_per_10k: Stats::of(server_cpu),
            bench_cpu_seconds_per_10k: Stats::of(bench_cpu),
            duplicates,
            raw_post_per_second: Stats::of(raw),
            relay_jobs_per_second: Stats::of(relay),
            relay_cpu_seconds_per_10k: Stats::of(relay_cpu),
            relay_bench_cpu_seconds_per_10k: Stats::of(relay_bench_cpu),
            ratio_to_raw_post: Stats::of(to_raw),
            relay_ratio_to_raw_post: Stats::of(relay_to_raw),
            ratio_to_relay: Stats::of(to_relay),
        })
    }

    async fn latency(&mut self, label: String, rate: f64) -> anyhow::Result<LatencyFigure> {
        let mut figures: [Vec<f64>; 5] = Default::default();
        let (mut samples, mut slips) = (0u64, 0u64);
        for rep in 0..self.plan.repetitions {
            eprintln!("latency: {label}, {rate:.0} jobs/s, run {}", rep + 1);
            let (server, db, url) = self.server_with_queue("latency", true).await?;
            let open = |duration| load::OpenLoop {
                url: &url,
                rate,
                duration,
                size: SMALL_PAYLOAD,
                clock: self.clock,
            };
            self.sink.reset(false);
            let warm = load::open_loop(&self.client, open(self.plan.latency_warmup)).await?;
            self.sink.wait_for(warm.ok, MAX_WAIT).await?;
            self.sink.reset(true);
            let run = load::open_loop(&self.client, open(self.plan.latency_measure))
                .await
                .map_err(|e| e.context(server.log()))?;
            if run.ok != run.sent {
                bail!(
                    "{} requests sent but only {} answered 201",
                    run.sent,
                    run.ok
                );
            }
            self.sink.wait_for(run.ok, MAX_WAIT).await?;
            let latencies = self.sink.take_latencies();
            self.sink.reset(false);
            let ms = |q: f64| percentile(&latencies, q) / 1000.0;
            for (slot, value) in figures.iter_mut().zip([
                run.ok as f64 / run.elapsed.as_secs_f64(),
                ms(0.50),
                ms(0.99),
                ms(0.999),
                ms(1.0),
            ]) {
                slot.push(value);
            }
            samples += latencies.len() as u64;
            slips += run.slipped;
            Self::stop_server(server).await?;
            server::remove_db(&db);
        }
        let [achieved, p50, p99, p999, max] = figures;
        Ok(LatencyFigure {
            label,
            offered_jobs_per_second: rate,
            achieved_jobs_per_second: Stats::of(achieved),
            p50_ms: Stats::of(p50),
            p99_ms: Stats::of(p99),
            p999_ms: Stats::of(p999),
            max_ms: Stats::of(max),
            samples,
            schedule_slips: slips,
        })
    }

    /// Steady open-loop load on one server for `total`, one line per 30 s window: RSS should
    /// stay flat and latency steady over time.
    async fn soak(&mut self, total: Duration, rate: f64) -> anyhow::Result<()> {
        const WINDOW: Duration = Duration::from_secs(30);
        let (server, db, url) = self.server_with_queue("soak", true).await?;
        println!("soak: {rate:.0} jobs/s for {} min", total.as_secs() / 60);
        println!("window  delivered  p50 ms  p99 ms  p99.9 ms  RSS MB  db+wal MB");
        let windows = (total.as_secs() / WINDOW.as_secs()).max(1);
        for window in 1..=windows {
            self.sink.reset(true);
            let run = load::open_loop(
                &self.client,
                load::OpenLoop {
                    url: &url,
                    rate,
                    duration: WINDOW,
                    size: SMALL_PAYLOAD,
                    clock: self.clock,
                },
            )
            .await
            .map_err(|e| e.context(server.log()))?;
            self.sink.wait_for(run.ok, MAX_WAIT).await?;
            let latencies = self.sink.take_latencies();
            let ms = |q: f64| percentile(&latencies, q) / 1000.0;
            println!(
                "{window:>6}  {:>9}  {:>6.2}  {:>6.2}  {:>8.2}  {:>6.1}  {:>9.1}",
                latencies.len(),
                ms(0.5),
                ms(0.99),
                ms(0.999),
                server.rss_bytes()? as f64 / 1e6,
                server::db_bytes(&db) as f64 / 1e6,
            );
        }
        Self::stop_server(server).await?;
        server::remove_db(&db);
        Ok(())
    }

    /// Fill a database with `jobs` ready jobs, then drain it with a dispatching server.
    async fn backlog(&mut self, jobs: u64) -> anyhow::Result<BacklogFigure> {
        eprintln!("backlog: pre-filling {jobs} jobs");
        let template = self.fresh_db("backlog-template");
        let prefill_started = Instant::now();
        {
            let (template, target) = (template.clone(), self.sink.url("deliver"));
            let payload = String::from_utf8(load::payload(SMALL_PAYLOAD, 0).to_vec())?;
            tokio::task::spawn_blocking(move || {
                let (conn, queue) = ceilings::open_with_queue(&template, &target)?;
                ceilings::insert_jobs(&conn, &queue, &payload, jobs, 10_000)?;
                // Closing the last connection checkpoints the WAL into the database file.
                conn.close().map_err(|(_, e)| e)?;
                anyhow::Ok(())
            })
            .await
            .context("prefill task failed")??;
        }
        let prefill_seconds = prefill_started.elapsed().as_secs_f64();
        let db_bytes_per_job = server::db_bytes(&template) as f64 / jobs.max(1) as f64;

        let mut figures: [Vec<f64>; 4] = Default::default();
        let mut duplicates = 0;
        for rep in 0..self.plan.backlog_repetitions(jobs) {
            eprintln!("backlog: draining {jobs} jobs, run {}", rep + 1);
            let db = self.fresh_db("backlog");
            std::fs::copy(&template, &db).context("cannot copy the pre-filled database")?;
            self.sink.reset(false);
            let spawned = self.clock.elapsed();
            let server = self.start_server(db.clone(), true).await?;
            let cpu0 = server.cpu_seconds()?;
            self.sink
                .wait_for(jobs, MAX_WAIT)
                .await
                .map_err(|e| e.context(server.log()))?;
            let cpu1 = server.cpu_seconds()?;
            let rss = server.peak_rss_bytes()?;
            let seen = self.sink.snapshot();
            let (first, last) = (
                seen.first.context("no delivery")?,
                seen.last.context("no delivery")?,
            );
            let drain = (jobs.saturating_sub(1)).max(1) as f64
                / last.saturating_sub(first).as_secs_f64().max(1e-9);
            for (slot, value) in figures.iter_mut().zip([
                first.saturating_sub(spawned).as_secs_f64(),
                drain,
                per_10k(cpu1 - cpu0, jobs),
                rss as f64,
            ]) {
                slot.push(value);
            }
            duplicates += seen.duplicates;
            Self::stop_server(server).await?;
            server::remove_db(&db);
        }
        server::remove_db(&template);
        let [startup, drain, cpu, rss] = figures;
        Ok(BacklogFigure {
            jobs,
            prefill_seconds,
            startup_seconds: Stats::of(startup),
            drain_jobs_per_second: Stats::of(drain),
            server_cpu_seconds_per_10k: Stats::of(cpu),
            peak_rss_bytes: Stats::of(rss),
            db_bytes_per_job,
            duplicates,
        })
    }

    async fn ceilings(&mut self) -> anyhow::Result<Ceilings> {
        let payload = String::from_utf8(load::payload(SMALL_PAYLOAD, 0).to_vec())?;
        let measure = self.plan.ceiling_measure;

        let mut sqlite = Vec::new();
        for (batch, savepoints) in [(1, false), (64, false), (64, true), (1024, false)] {
            let mut rates = Vec::new();
            for rep in 0..self.plan.repetitions {
                eprintln!(
                    "ceiling: SQLite batch {batch} savepoints {savepoints}, run {}",
                    rep + 1
                );
                let db = self.fresh_db("sqlite");
                let (path, payload) = (db.clone(), payload.clone());
                let rate = tokio::task::spawn_blocking(move || {
                    ceilings::sqlite_insert_rate(
                        &path, &payload, batch, savepoints, measure, 5_000_000,
                    )
                })
                .await
                .context("SQLite ceiling task failed")??;
                rates.push(rate);
                server::remove_db(&db);
            }
            sqlite.push(SqliteCeiling {
                batch,
                savepoints,
                rows_per_second: Stats::of(rates),
            });
        }

        let mut store_runs: [Vec<f64>; 3] = Default::default();
        for rep in 0..self.plan.repetitions {
            eprintln!(
                "ceiling: Store::enqueue, {MANY_PRODUCERS} callers, run {}",
                rep + 1
            );
            let db = self.fresh_db("store");
            let run =
                ceilings::store_enqueue_rate(&db, &payload, MANY_PRODUCERS, measure, 5_000_000)
                    .await?;
            for (slot, value) in
                store_runs
                    .iter_mut()
                    .zip([run.rate, run.mean_batch, run.mean_commit_micros])
            {
                slot.push(value);
            }
            server::remove_db(&db);
        }
        let [rate, batch, commit] = store_runs;

        let mut http = Vec::new();
        for rep in 0..self.plan.repetitions {
            eprintln!(
                "ceiling: raw HTTP POST, {MANY_PRODUCERS} concurrent, run {}",
                rep + 1
            );
            http.push(self.raw_post_rate().await?);
        }
        self.sink.reset(false);
        Ok(Ceilings {
            sqlite,
            store_writer: StoreCeiling {
                callers: MANY_PRODUCERS,
                jobs_per_second: Stats::of(rate),
                mean_batch: Stats::of(batch),
                mean_commit_micros: Stats::of(commit),
            },
            http_post_per_second: Stats::of(http),
            http_producers: MANY_PRODUCERS,
        })
    }
}

/// The `q` quantile (0..=1) of sorted samples, nearest-rank.
fn percentile(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    f64::from(sorted[rank.clamp(1, sorted.len()) - 1])
}

fn derive_ratios_and_targets(report: &mut Report) {
    let enqueue_64 = report
        .enqueue
        .iter()
        .find(|f| f.producers == MANY_PRODUCERS && f.payload_bytes == SMALL_PAYLOAD)
        .map(|f| f.jobs_per_second.median);
    let e2e = report.end_to_end.as_ref().map(|f| f.jobs_per_second.median);
    let mut ratios = Vec::new();
    if let Some(c) = &report.ceilings {
        let sqlite = |batch| {
            c.sqlite
                .iter()
                .find(|s| s.batch == batch && !s.savepoints)
                .map(|s| s.rows_per_second.median)
        };
        let http = c.http_post_per_second.median;
        let store = c.store_writer.jobs_per_second.median;
        if let Some(enq) = enqueue_64 {
            if let Some(raw) = sqlite(64) {
                ratios.push((
                    "enqueue (64 producers, 200 B) / SQLite insert, batch 64",
                    enq / raw,
                ));
            }
            ratios.push((
                "enqueue (64 producers, 200 B) / Store::enqueue, no HTTP",
                enq / store,
            ));
            ratios.push(("enqueue (64 producers, 200 B) / raw HTTP POST", enq / http));
        }
    }
    // Paired with the end-to-end runs (each run's ceilings measured just before it), not with
    // the Ceilings section.
    if let Some(f) = &report.end_to_end {
        ratios.push(("end-to-end / raw HTTP POST", f.ratio_to_raw_post.median));
        ratios.push((
            "relay (no storage) / raw HTTP POST",
            f.relay_ratio_to_raw_post.median,
        ));
        ratios.push(("end-to-end / relay", f.ratio_to_relay.median));
    }
    report.ratios = ratios
        .into_iter()
        .map(|(name, value)| Ratio {
            name: name.into(),
            value,
        })
        .collect();

    let mut targets = Vec::new();
    let mut check = |target: &str, measured: String, met: bool| {
        targets.push(TargetCheck {
            target: target.into(),
            measured,
            met,
        })
    };
    if let Some(enq) = enqueue_64 {
        check(
            "enqueue ≥ 20 000 jobs/s (64 producers, 200 B)",
            format!("{enq:.0}"),
            enq >= 20_000.0,
        );
    }
    if let Some(e2e) = e2e {
        check(
            "end-to-end ≥ 10 000 jobs/s",
            format!("{e2e:.0}"),
            e2e >= 10_000.0,
        );
    }
    if let Some(f) = &report.end_to_end {
        let ratio = f.ratio_to_raw_post.median;
        check(
            "end-to-end ≥ 50% of raw HTTP POST",
            format!("{:.0}%", ratio * 100.0),
            ratio >= 0.5,
        );
    }
    if let Some(l) = report.latency.first() {
        check(
            "latency at 1 000/s: p50 ≤ 3 ms",
            format!("{:.2} ms", l.p50_ms.median),
            l.p50_ms.median <= 3.0,
        );
        check(
            "latency at 1 000/s: p99 ≤ 20 ms",
            format!("{:.2} ms", l.p99_ms.median),
            l.p99_ms.median <= 20.0,
        );
    }
    if let Some(r) = &report.backlog_ratio {
        check(
            &format!("backlog {} ≥ 80% of {}", r.large_jobs, r.small_jobs),
            format!("{:.0}%", r.ratio * 100.0),
            r.ratio >= 0.8,
        );
    }
    if let Some(large) = report.backlog.iter().max_by_key(|f| f.jobs) {
        let mb = large.peak_rss_bytes.max / 1e6;
        check(
            &format!("peak RSS ≤ 150 MB ({} queued)", large.jobs),
            format!("{mb:.1} MB"),
            mb <= 150.0,
        );
    }
    report.targets = targets;
}
