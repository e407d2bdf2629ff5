//! PostgreSQL scale-out (`--only cluster --db postgres://… --nodes 1,2,3`): the same server,
//! N nodes on one database. For each node count, a fresh database on that PostgreSQL server,
//! N servers on it and one queue delivering to the sink; then, in order:
//!
//! - **enqueue**: 64 closed-loop producers spread evenly over the nodes, the queue paused
//!   (the write path alone);
//! - **backlog**: what that left (a few thousand jobs) drained by every node once resumed;
//! - **end to end**: jobs enqueued through every node and delivered by all of them;
//! - **idle latency**: one job at a time, enqueued on each node in turn, from the request to
//!   its arrival at the sink (any node may deliver it: the wake-up crosses nodes).
//!
//! CPU is counted for the hookq nodes together and for PostgreSQL (every process named
//! `postgres` on this machine: run it on a machine where only the bench's cluster runs), per
//! 10 000 jobs, so the paper arithmetic of docs/benchmarks.md can split the cores.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use reqwest::StatusCode;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::ceilings::QUEUE;
use crate::report::Stats;
use crate::server::{ServerProcess, children_cpu_seconds, process_cpu_seconds};
use crate::{Bench, MANY_PRODUCERS, MAX_WAIT, SMALL_PAYLOAD, load, per_10k};

/// Jobs sent one at a time for the idle latency.
const IDLE_SAMPLES: usize = 200;

#[derive(Debug, Serialize)]
pub struct ClusterFigure {
    pub nodes: usize,
    pub enqueue_jobs_per_second: Stats,
    /// CPU-seconds per 10k enqueues: the hookq nodes together, and PostgreSQL.
    pub enqueue_nodes_cpu_per_10k: Stats,
    pub enqueue_postgres_cpu_per_10k: Stats,
    pub backlog_jobs: Stats,
    pub backlog_jobs_per_second: Stats,
    pub e2e_jobs: u64,
    pub e2e_jobs_per_second: Stats,
    pub e2e_nodes_cpu_per_10k: Stats,
    pub e2e_postgres_cpu_per_10k: Stats,
    pub duplicates: u64,
    /// Enqueue → arrival at the sink, one job at a time, in ms.
    pub idle_latency_p50_ms: Stats,
    pub idle_latency_p99_ms: Stats,
}

/// One database on the PostgreSQL server, dropped when the run is done.
struct Database {
    server_url: String,
    name: String,
    url: String,
}

impl Database {
    async fn create(server_url: &str, label: &str) -> anyhow::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let name = format!("hookq_bench_{label}_{nanos}");
        admin(server_url, &format!("CREATE DATABASE {name}")).await?;
        let mut url = reqwest::Url::parse(server_url).context("--db is not a URL")?;
        url.set_path(&name);
        Ok(Self {
            server_url: server_url.to_owned(),
            name,
            url: url.to_string(),
        })
    }

    async fn drop_database(self) -> anyhow::Result<()> {
        admin(
            &self.server_url,
            &format!("DROP DATABASE {} WITH (FORCE)", self.name),
        )
        .await
    }
}

async fn admin(server_url: &str, sql: &str) -> anyhow::Result<()> {
    let pool = hookq::store::postgres::connect(server_url, 1).await?;
    let client = pool.get().await?;
    client
        .batch_execute(sql)
        .await
        .with_context(|| format!("{sql} on the bench's PostgreSQL server"))?;
    Ok(())
}

/// CPU seconds used so far by every process named `postgres` (live backends, and through
/// the postmaster's children counters, the ones that exited).
fn postgres_cpu_seconds() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "postgres")
        })
        .map(|e| {
            let stat = e.path().join("stat");
            let stat = stat.to_string_lossy();
            process_cpu_seconds(&stat).unwrap_or(0.0) + children_cpu_seconds(&stat).unwrap_or(0.0)
        })
        .sum()
}

/// The nodes of one run.
struct Nodes {
    servers: Vec<ServerProcess>,
}

impl Nodes {
    fn queue_urls(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|s| format!("{}/queue/{QUEUE}", s.base_url()))
            .collect()
    }

    fn cpu_seconds(&self) -> anyhow::Result<f64> {
        self.servers.iter().map(ServerProcess::cpu_seconds).sum()
    }

    fn logs(&self) -> String {
        self.servers
            .iter()
            .map(ServerProcess::log)
            .collect::<Vec<_>>()
            .join("\n---\n")
    }
}

/// `producers` closed-loop producers spread evenly over `urls`, `max_requests` in all.
async fn spread(
    client: &reqwest::Client,
    urls: &[String],
    producers: usize,
    max_requests: u64,
    duration: Duration,
) -> anyhow::Result<load::LoadResult> {
    let mut runs = JoinSet::new();
    let n = urls.len().max(1);
    for (i, url) in urls.iter().enumerate() {
        let (client, url) = (client.clone(), url.clone());
        let producers = producers / n + usize::from(i < producers % n);
        let max = max_requests / n as u64 + u64::from((i as u64) < max_requests % n as u64);
        runs.spawn(async move {
            load::closed_loop(
                &client,
                load::ClosedLoop {
                    url: &url,
                    producers,
                    body: load::payload(SMALL_PAYLOAD, 0),
                    max_requests: max,
                    duration,
                    expect: StatusCode::CREATED,
                },
            )
            .await
        });
    }
    let (mut ok, mut elapsed) = (0, Duration::ZERO);
    while let Some(run) = runs.join_next().await {
        let run = run.context("a producer group panicked")??;
        ok += run.ok;
        elapsed = elapsed.max(run.elapsed);
    }
    Ok(load::LoadResult { ok, elapsed })
}

impl Bench {
    /// Every figure of `nodes` nodes on one database of the PostgreSQL server at
    /// `server_url`, repeated as the plan says.
    pub async fn cluster(
        &mut self,
        server_url: &str,
        nodes: usize,
    ) -> anyhow::Result<ClusterFigure> {
        let mut f: [Vec<f64>; 10] = Default::default();
        let mut duplicates = 0;
        let jobs = self.plan.e2e_jobs;
        for rep in 0..self.plan.repetitions {
            eprintln!("cluster: {nodes} node(s) on PostgreSQL, run {}", rep + 1);
            let db = Database::create(server_url, &format!("{nodes}n")).await?;
            let run = self.cluster_once(&db.url, nodes, jobs).await;
            db.drop_database().await?;
            let run = run?;
            for (figures, value) in f.iter_mut().zip(run.0) {
                figures.push(value);
            }
            duplicates += run.1;
        }
        let [
            eq,
            eq_nodes,
            eq_pg,
            backlog,
            drain,
            e2e,
            e2e_nodes,
            e2e_pg,
            p50,
            p99,
        ] = f;
        Ok(ClusterFigure {
            nodes,
            enqueue_jobs_per_second: Stats::of(eq),
            enqueue_nodes_cpu_per_10k: Stats::of(eq_nodes),
            enqueue_postgres_cpu_per_10k: Stats::of(eq_pg),
            backlog_jobs: Stats::of(backlog),
            backlog_jobs_per_second: Stats::of(drain),
            e2e_jobs: jobs,
            e2e_jobs_per_second: Stats::of(e2e),
            e2e_nodes_cpu_per_10k: Stats::of(e2e_nodes),
            e2e_postgres_cpu_per_10k: Stats::of(e2e_pg),
            duplicates,
            idle_latency_p50_ms: Stats::of(p50),
            idle_latency_p99_ms: Stats::of(p99),
        })
    }

    /// One run; the figures in [`ClusterFigure`]'s order, and the duplicates.
    async fn cluster_once(
        &mut self,
        db_url: &str,
        nodes: usize,
        jobs: u64,
    ) -> anyhow::Result<([f64; 10], u64)> {
        let mut servers = Vec::new();
        for _ in 0..nodes {
            servers.push(self.start_server(PathBuf::from(db_url), true).await?);
        }
        let nodes = Nodes { servers };
        let first = nodes.servers[0].base_url();
        // Created paused, so that no node delivers while the enqueue figure is taken.
        let settings = serde_json::json!({ "target": self.sink.url("deliver"), "paused": true });
        load::create_queue_with(&self.client, &first, QUEUE, settings).await?;
        self.wait_known_everywhere(&nodes).await?;
        let urls = nodes.queue_urls();

        // Enqueue, paused: the write path alone.
        let measure = |duration| spread(&self.client, &urls, MANY_PRODUCERS, u64::MAX, duration);
        let warm = measure(self.plan.enqueue_warmup)
            .await
            .map_err(|e| e.context(nodes.logs()))?;
        let (cpu0, pg0) = (nodes.cpu_seconds()?, postgres_cpu_seconds());
        let run = measure(self.plan.enqueue_measure)
            .await
            .map_err(|e| e.context(nodes.logs()))?;
        let (cpu1, pg1) = (nodes.cpu_seconds()?, postgres_cpu_seconds());
        let enqueue = [
            run.rate(),
            per_10k(cpu1 - cpu0, run.ok),
            per_10k(pg1 - pg0, run.ok),
        ];

        // The backlog that left, drained by every node.
        let backlog = warm.ok + run.ok;
        self.sink.reset(false);
        let started = Instant::now();
        self.resume(&first).await?;
        self.sink
            .wait_for(backlog, MAX_WAIT)
            .await
            .map_err(|e| e.context(nodes.logs()))?;
        let drain = backlog as f64 / started.elapsed().as_secs_f64().max(1e-9);

        // End to end.
        self.sink.reset(false);
        let (cpu0, pg0) = (nodes.cpu_seconds()?, postgres_cpu_seconds());
        let started = Instant::now();
        let run = spread(&self.client, &urls, MANY_PRODUCERS, jobs, MAX_WAIT)
            .await
            .map_err(|e| e.context(nodes.logs()))?;
        self.sink
            .wait_for(run.ok, MAX_WAIT)
            .await
            .map_err(|e| e.context(nodes.logs()))?;
        let e2e_rate = run.ok as f64 / started.elapsed().as_secs_f64().max(1e-9);
        let (cpu1, pg1) = (nodes.cpu_seconds()?, postgres_cpu_seconds());
        let seen = self.sink.snapshot();
        if seen.deliveries - seen.duplicates != run.ok {
            bail!(
                "{} jobs enqueued but {} delivered",
                run.ok,
                seen.deliveries - seen.duplicates
            );
        }
        let e2e = [
            e2e_rate,
            per_10k(cpu1 - cpu0, run.ok),
            per_10k(pg1 - pg0, run.ok),
        ];

        // Idle latency: one job at a time, each enqueued on the next node.
        self.sink.reset(true);
        for i in 0..IDLE_SAMPLES {
            let sent = self.clock.elapsed().as_micros() as u64;
            let body = load::payload(SMALL_PAYLOAD, sent);
            load::post(
                &self.client,
                &urls[i % urls.len()],
                body,
                StatusCode::CREATED,
            )
            .await?;
            self.sink
                .wait_for(i as u64 + 1, Duration::from_secs(30))
                .await
                .map_err(|e| e.context(nodes.logs()))?;
        }
        let latencies = self.sink.take_latencies();
        let at = |q: f64| {
            let index = ((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len());
            f64::from(latencies[index - 1]) / 1000.0
        };
        let (p50, p99) = if latencies.is_empty() {
            (f64::NAN, f64::NAN)
        } else {
            (at(0.5), at(0.99))
        };

        for server in nodes.servers {
            Self::stop_server(server).await?;
        }
        Ok((
            [
                enqueue[0],
                enqueue[1],
                enqueue[2],
                backlog as f64,
                drain,
                e2e[0],
                e2e[1],
                e2e[2],
                p50,
                p99,
            ],
            seen.duplicates,
        ))
    }

    /// Resume the bench queue (every node sees it within a second).
    async fn resume(&self, base: &str) -> anyhow::Result<()> {
        let response = self
            .client
            .post(format!("{base}/queue/{QUEUE}/_resume"))
            .send()
            .await?;
        if !response.status().is_success() {
            bail!("_resume: {}", response.text().await?);
        }
        Ok(())
    }

    /// Every node has loaded the queue (a node reloads queues within a second).
    async fn wait_known_everywhere(&self, nodes: &Nodes) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        for server in &nodes.servers {
            let url = format!("{}/queue/{QUEUE}/_stats", server.base_url());
            while self.client.get(&url).send().await?.status() != StatusCode::OK {
                if Instant::now() > deadline {
                    bail!("a node did not learn of the queue within 30 s");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(())
    }
}
