//! The backends side by side (`--only cluster --db postgres://… --nodes 1,2,3`): one SQLite
//! server, and N nodes on one PostgreSQL database for each node count, measured by one
//! routine in the same run. For each, a fresh database (a SQLite file in the scratch
//! directory, or a database of its own on that PostgreSQL server), its servers on it and one
//! queue delivering to the sink; then, in order:
//!
//! - **enqueue**: 64 closed-loop producers spread evenly over the nodes (or, with
//!   `--producers-per-node P`, P on each node), the queue paused (the write path alone);
//! - **backlog**: what that left drained by every node once resumed;
//! - **end to end**: jobs enqueued through every node and delivered by all of them;
//! - **idle latency**: one job at a time, enqueued on each node in turn, from the request to
//!   its arrival at the sink (any node may deliver it: the wake-up crosses nodes).
//!
//! Each repetition runs SQLite and every node count, SQLite first in one repetition and last
//! in the next, so neither side always runs on a warmer machine; each throughput is also
//! given as its ratio to SQLite's run of the same repetition. CPU is counted for the hookq
//! nodes together and for PostgreSQL (every process named `postgres` on this machine: run it
//! on a machine where only the bench's cluster runs), per 10 000 jobs, so the paper
//! arithmetic of docs/benchmarks.md can split the cores; SQLite works inside the server.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use reqwest::StatusCode;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::ceilings::QUEUE;
use crate::quota::CpuQuota;
use crate::report::Stats;
use crate::server::{self, ServerProcess, ServerSpec, children_cpu_seconds, process_cpu_seconds};
use crate::{Bench, MANY_PRODUCERS, MAX_WAIT, SMALL_PAYLOAD, load, per_10k, percentile};

/// Jobs sent one at a time for the idle latency.
const IDLE_SAMPLES: usize = 200;

#[derive(Debug, Serialize)]
pub struct ClusterFigure {
    /// `sqlite` (one server on a file) or `postgres` (`nodes` servers on one database).
    pub backend: Backend,
    pub nodes: usize,
    pub enqueue_jobs_per_second: Stats,
    /// Per repetition: this enqueue rate / SQLite's (1 for SQLite itself).
    pub enqueue_to_sqlite: Stats,
    /// CPU-seconds per 10k enqueues: the hookq nodes together, and PostgreSQL (none for
    /// SQLite, whose work is the server's).
    pub enqueue_nodes_cpu_per_10k: Stats,
    pub enqueue_postgres_cpu_per_10k: Option<Stats>,
    pub backlog_jobs: Stats,
    pub backlog_jobs_per_second: Stats,
    pub e2e_jobs: u64,
    pub e2e_jobs_per_second: Stats,
    /// Per repetition: this end-to-end rate / SQLite's (1 for SQLite itself).
    pub e2e_to_sqlite: Stats,
    pub e2e_nodes_cpu_per_10k: Stats,
    pub e2e_postgres_cpu_per_10k: Option<Stats>,
    /// End to end, CPU ms per job of the nodes and PostgreSQL together.
    pub e2e_cpu_ms_per_job: Stats,
    /// Per repetition, on PostgreSQL: e2e(N) / (N × e2e(1 node)), the scaling efficiency
    /// (1: each node adds what one node does). None without a 1-node run.
    pub scaling_efficiency: Option<Stats>,
    /// Per repetition, on PostgreSQL: CPU per job (nodes + PostgreSQL) / the 1-node run's.
    pub e2e_cpu_to_one_node: Option<Stats>,
    /// `--node-cpu`: the cores each node (and the SQLite server) was allowed; none: shared.
    pub node_cpu: Option<f64>,
    /// Closed-loop producers in all, spread evenly over the nodes.
    pub producers: usize,
    pub duplicates: u64,
    /// Enqueue → arrival at the sink, one job at a time, in ms.
    pub idle_latency_p50_ms: Stats,
    pub idle_latency_p99_ms: Stats,
}

impl ClusterFigure {
    /// The figures of `backend`'s runs, each repetition's against SQLite's run of the same
    /// repetition (`sqlite`) and, on PostgreSQL, the 1-node run's (`one_node`).
    fn of(
        (backend, nodes): (Backend, usize),
        e2e_jobs: u64,
        runs: &[ClusterRun],
        sqlite: &[ClusterRun],
        one_node: Option<&[ClusterRun]>,
        node_cpu: Option<f64>,
        producers: usize,
    ) -> Self {
        let stats = |figure: fn(&ClusterRun) -> f64| Stats::of(runs.iter().map(figure).collect());
        let database = |figure: fn(&ClusterRun) -> Option<f64>| {
            runs.iter()
                .map(figure)
                .collect::<Option<Vec<_>>>()
                .map(Stats::of)
        };
        let to_sqlite = |figure: fn(&ClusterRun) -> f64| {
            Stats::of(
                runs.iter()
                    .zip(sqlite)
                    .map(|(run, base)| figure(run) / figure(base))
                    .collect(),
            )
        };
        let against_one_node = |figure: &dyn Fn(&ClusterRun, &ClusterRun) -> f64| {
            one_node
                .filter(|_| backend == Backend::Postgres)
                .map(|one| Stats::of(runs.iter().zip(one).map(|(r, o)| figure(r, o)).collect()))
        };
        let n = nodes as f64;
        Self {
            e2e_cpu_ms_per_job: stats(ClusterRun::e2e_cpu_ms_per_job),
            scaling_efficiency: against_one_node(&|run, one| run.e2e / (n * one.e2e)),
            e2e_cpu_to_one_node: against_one_node(&|run, one| {
                run.e2e_cpu_ms_per_job() / one.e2e_cpu_ms_per_job()
            }),
            node_cpu,
            producers,
            backend,
            nodes,
            enqueue_jobs_per_second: stats(|r| r.enqueue),
            enqueue_to_sqlite: to_sqlite(|r| r.enqueue),
            enqueue_nodes_cpu_per_10k: stats(|r| r.enqueue_cpu.nodes),
            enqueue_postgres_cpu_per_10k: database(|r| r.enqueue_cpu.database),
            backlog_jobs: stats(|r| r.backlog_jobs),
            backlog_jobs_per_second: stats(|r| r.drain),
            e2e_jobs,
            e2e_jobs_per_second: stats(|r| r.e2e),
            e2e_to_sqlite: to_sqlite(|r| r.e2e),
            e2e_nodes_cpu_per_10k: stats(|r| r.e2e_cpu.nodes),
            e2e_postgres_cpu_per_10k: database(|r| r.e2e_cpu.database),
            duplicates: runs.iter().map(|r| r.duplicates).sum(),
            idle_latency_p50_ms: stats(|r| r.idle_p50_ms),
            idle_latency_p99_ms: stats(|r| r.idle_p99_ms),
        }
    }
}

/// What a run's servers keep their jobs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// One server on a fresh SQLite file in the scratch directory (a file takes one server).
    Sqlite,
    /// N servers on a fresh database of the PostgreSQL server given with `--db`.
    Postgres,
}

impl Backend {
    /// The table's name for `nodes` servers on this backend.
    pub fn label(self, nodes: usize) -> String {
        match (self, nodes) {
            (Self::Sqlite, _) => "SQLite, 1 node".to_owned(),
            (Self::Postgres, 1) => "PostgreSQL, 1 node".to_owned(),
            (Self::Postgres, n) => format!("PostgreSQL, {n} nodes"),
        }
    }

    /// CPU seconds the database's own processes have used so far; none for SQLite, which
    /// runs inside the server.
    fn database_cpu_seconds(self) -> Option<f64> {
        match self {
            Self::Sqlite => None,
            Self::Postgres => Some(postgres_cpu_seconds()),
        }
    }
}

/// The figures of one run.
struct ClusterRun {
    enqueue: f64,
    /// Per 10k enqueues.
    enqueue_cpu: Cpu,
    backlog_jobs: f64,
    drain: f64,
    e2e: f64,
    /// Per 10k jobs end to end.
    e2e_cpu: Cpu,
    idle_p50_ms: f64,
    idle_p99_ms: f64,
    duplicates: u64,
}

impl ClusterRun {
    /// End to end, CPU ms per job of the nodes and the database together.
    fn e2e_cpu_ms_per_job(&self) -> f64 {
        // CPU-seconds per 10k jobs → ms per job.
        (self.e2e_cpu.nodes + self.e2e_cpu.database.unwrap_or(0.0)) / 10.0
    }
}

/// CPU-seconds of the hookq nodes together and of the database's own processes (none for
/// SQLite): used so far, or per 10 000 jobs.
struct Cpu {
    nodes: f64,
    database: Option<f64>,
}

impl Cpu {
    fn used_so_far(nodes: &Nodes, backend: Backend) -> anyhow::Result<Self> {
        Ok(Self {
            nodes: nodes.cpu_seconds()?,
            database: backend.database_cpu_seconds(),
        })
    }

    /// From this reading to a `later` one, per 10k of `jobs`.
    fn per_10k_until(&self, later: &Self, jobs: u64) -> Self {
        Self {
            nodes: per_10k(later.nodes - self.nodes, jobs),
            database: later
                .database
                .zip(self.database)
                .map(|(after, before)| per_10k(after - before, jobs)),
        }
    }
}

/// One database on the PostgreSQL server, dropped when the run is done.
pub(crate) struct Database {
    server_url: String,
    name: String,
    pub(crate) url: String,
}

impl Database {
    pub(crate) async fn create(server_url: &str, label: &str) -> anyhow::Result<Self> {
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

    pub(crate) async fn drop_database(self) -> anyhow::Result<()> {
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

/// The database of one run, removed when the run is done.
enum RunDb {
    File(PathBuf),
    Postgres(Database),
}

impl RunDb {
    /// What each server gets as `--db`.
    fn arg(&self) -> PathBuf {
        match self {
            Self::File(path) => path.clone(),
            Self::Postgres(db) => PathBuf::from(&db.url),
        }
    }

    async fn remove(self) -> anyhow::Result<()> {
        match self {
            Self::File(path) => {
                server::remove_db(&path);
                Ok(())
            }
            Self::Postgres(db) => db.drop_database().await,
        }
    }
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

/// The closed-loop producers of a run of `nodes` nodes: `per_node` each
/// (`--producers-per-node`), or 64 spread over them.
fn producers_of(per_node: Option<usize>, nodes: usize) -> usize {
    per_node.map_or(MANY_PRODUCERS, |each| each * nodes)
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
    /// One SQLite server and each node count on the PostgreSQL server at `server_url`, every
    /// repetition running SQLite first and last in turn. SQLite's figure comes first.
    pub async fn cluster(
        &mut self,
        server_url: &str,
        node_counts: &[usize],
    ) -> anyhow::Result<Vec<ClusterFigure>> {
        let setups: Vec<(Backend, usize)> = std::iter::once((Backend::Sqlite, 1))
            .chain(node_counts.iter().map(|&n| (Backend::Postgres, n.max(1))))
            .collect();
        let jobs = self.plan.e2e_jobs;
        let mut runs: Vec<Vec<ClusterRun>> = setups.iter().map(|_| Vec::new()).collect();
        for rep in 0..self.plan.repetitions {
            for sqlite_turn in crate::alternating(rep) {
                for (&(backend, nodes), runs) in setups.iter().zip(&mut runs) {
                    if (backend == Backend::Sqlite) != sqlite_turn {
                        continue;
                    }
                    let label = backend.label(nodes);
                    eprintln!("cluster: {label}, run {}", rep + 1);
                    let run = self
                        .cluster_run(server_url, backend, nodes, jobs)
                        .await
                        .with_context(|| format!("{label}, run {}", rep + 1))?;
                    runs.push(run);
                }
            }
        }
        let sqlite = &runs[0];
        let one_node = setups
            .iter()
            .position(|&setup| setup == (Backend::Postgres, 1))
            .map(|i| runs[i].as_slice());
        Ok(setups
            .iter()
            .zip(&runs)
            .map(|(&setup, runs)| {
                let producers = self.cluster_producers(setup.1);
                ClusterFigure::of(
                    setup,
                    jobs,
                    runs,
                    sqlite,
                    one_node,
                    self.node_cpu,
                    producers,
                )
            })
            .collect())
    }

    /// One run of `nodes` servers on a fresh database of `backend`, removed afterwards.
    async fn cluster_run(
        &mut self,
        server_url: &str,
        backend: Backend,
        nodes: usize,
        jobs: u64,
    ) -> anyhow::Result<ClusterRun> {
        let db = match backend {
            Backend::Sqlite => RunDb::File(self.fresh_db("cluster")),
            Backend::Postgres => {
                RunDb::Postgres(Database::create(server_url, &format!("{nodes}n")).await?)
            }
        };
        let run = self.cluster_once(&db.arg(), backend, nodes, jobs).await;
        db.remove().await?;
        run
    }

    /// One dispatching server on `db`, in a CPU quota of its own with `--node-cpu`.
    async fn start_node(&self, db: PathBuf) -> anyhow::Result<ServerProcess> {
        let quota = self.node_cpu.map(CpuQuota::new).transpose()?;
        self.launch(ServerSpec {
            binary: self.binary.clone(),
            db,
            dispatch: true,
            max_queues: None,
            quota,
        })
        .await
    }

    /// One run: `nodes` servers on the `backend` database at `db` (a path or a URL).
    async fn cluster_once(
        &mut self,
        db: &Path,
        backend: Backend,
        nodes: usize,
        jobs: u64,
    ) -> anyhow::Result<ClusterRun> {
        let mut servers = Vec::new();
        for _ in 0..nodes {
            servers.push(self.start_node(db.to_owned()).await?);
        }
        let nodes = Nodes { servers };
        let first = nodes.servers[0].base_url();
        // Created paused, so that no node delivers while the enqueue figure is taken.
        let settings = serde_json::json!({ "target": self.sink.url("deliver"), "paused": true });
        load::create_queue_with(&self.client, &first, QUEUE, settings).await?;
        self.wait_known_everywhere(&nodes).await?;
        let urls = nodes.queue_urls();
        let producers = self.cluster_producers(nodes.servers.len());

        // Enqueue, paused: the write path alone.
        let measure = |duration| spread(&self.client, &urls, producers, u64::MAX, duration);
        let warm = measure(self.plan.enqueue_warmup)
            .await
            .map_err(|e| e.context(nodes.logs()))?;
        let cpu0 = Cpu::used_so_far(&nodes, backend)?;
        let run = measure(self.plan.enqueue_measure)
            .await
            .map_err(|e| e.context(nodes.logs()))?;
        let cpu1 = Cpu::used_so_far(&nodes, backend)?;
        let (enqueue, enqueue_cpu) = (run.rate(), cpu0.per_10k_until(&cpu1, run.ok));

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
        let cpu0 = Cpu::used_so_far(&nodes, backend)?;
        let started = Instant::now();
        let run = spread(&self.client, &urls, producers, jobs, MAX_WAIT)
            .await
            .map_err(|e| e.context(nodes.logs()))?;
        self.sink
            .wait_for(run.ok, MAX_WAIT)
            .await
            .map_err(|e| e.context(nodes.logs()))?;
        let e2e = run.ok as f64 / started.elapsed().as_secs_f64().max(1e-9);
        let cpu1 = Cpu::used_so_far(&nodes, backend)?;
        let seen = self.sink.snapshot();
        if seen.deliveries - seen.duplicates != run.ok {
            bail!(
                "{} jobs enqueued but {} delivered",
                run.ok,
                seen.deliveries - seen.duplicates
            );
        }
        let e2e_cpu = cpu0.per_10k_until(&cpu1, run.ok);

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
        let ms = |q: f64| percentile(&latencies, q) / 1000.0;

        for server in nodes.servers {
            Self::stop_server(server).await?;
        }
        Ok(ClusterRun {
            enqueue,
            enqueue_cpu,
            backlog_jobs: backlog as f64,
            drain,
            e2e,
            e2e_cpu,
            idle_p50_ms: ms(0.5),
            idle_p99_ms: ms(0.99),
            duplicates: seen.duplicates,
        })
    }

    /// The closed-loop producers of a run of `nodes` nodes.
    fn cluster_producers(&self, nodes: usize) -> usize {
        producers_of(self.producers_per_node, nodes)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(enqueue: f64, e2e: f64, database_cpu: Option<f64>) -> ClusterRun {
        let cpu = || Cpu {
            nodes: 1.0,
            database: database_cpu,
        };
        ClusterRun {
            enqueue,
            enqueue_cpu: cpu(),
            backlog_jobs: 100.0,
            drain: 1.0,
            e2e,
            e2e_cpu: cpu(),
            idle_p50_ms: 1.0,
            idle_p99_ms: 2.0,
            duplicates: 0,
        }
    }

    #[test]
    fn each_ratio_is_taken_against_sqlites_run_of_the_same_repetition() {
        let sqlite = [run(1000.0, 400.0, None), run(2000.0, 800.0, None)];
        let postgres = [run(500.0, 200.0, Some(3.0)), run(500.0, 100.0, Some(3.0))];
        let figure = ClusterFigure::of(
            (Backend::Postgres, 3),
            10,
            &postgres,
            &sqlite,
            None,
            None,
            64,
        );
        assert_eq!(figure.enqueue_to_sqlite.runs, [0.5, 0.25]);
        assert_eq!(figure.e2e_to_sqlite.runs, [0.5, 0.125]);
        assert_eq!(
            figure.e2e_postgres_cpu_per_10k.map(|s| s.runs),
            Some(vec![3.0, 3.0])
        );
    }

    #[test]
    fn producers_are_64_in_all_or_grow_with_the_nodes() {
        assert_eq!(producers_of(None, 1), 64);
        assert_eq!(
            producers_of(None, 4),
            64,
            "a quarter of the load on each of four"
        );
        assert_eq!(producers_of(Some(64), 1), 64);
        assert_eq!(
            producers_of(Some(64), 4),
            256,
            "the same load on each of four"
        );
    }

    #[test]
    fn sqlite_has_no_database_cpu_of_its_own_and_a_ratio_of_one() {
        let sqlite = [run(1000.0, 400.0, None)];
        let figure = ClusterFigure::of((Backend::Sqlite, 1), 10, &sqlite, &sqlite, None, None, 64);
        assert!(figure.enqueue_postgres_cpu_per_10k.is_none());
        assert_eq!(figure.e2e_to_sqlite.runs, [1.0]);
        assert!(figure.scaling_efficiency.is_none());
    }

    #[test]
    fn efficiency_and_cpu_are_taken_against_the_one_node_run_of_the_same_repetition() {
        let sqlite = [run(1000.0, 400.0, None), run(1000.0, 400.0, None)];
        // CPU-s per 10k: nodes 1.0 + PostgreSQL → ms per job = (1 + db) / 10.
        let one = [run(500.0, 200.0, Some(1.0)), run(500.0, 100.0, Some(1.0))];
        let four = [run(500.0, 640.0, Some(1.5)), run(500.0, 400.0, Some(3.0))];
        let figure = ClusterFigure::of(
            (Backend::Postgres, 4),
            10,
            &four,
            &sqlite,
            Some(&one),
            Some(0.15),
            64,
        );
        let close = |got: Vec<f64>, want: [f64; 2]| {
            assert!(
                got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9),
                "{got:?} against {want:?}"
            );
        };
        close(figure.scaling_efficiency.unwrap().runs, [0.8, 1.0]);
        close(figure.e2e_cpu_to_one_node.unwrap().runs, [1.25, 2.0]);
        close(figure.e2e_cpu_ms_per_job.runs, [0.25, 0.4]);
        assert_eq!(figure.node_cpu, Some(0.15));
    }
}
