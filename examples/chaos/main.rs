//! Crash test: under continuous load, `kill -9` the hookq binary at random moments, restart
//! it on the same database, and check at the end that every job that got a 201 was
//! delivered at least once. Duplicates are counted and compared with the jobs that were in
//! flight at each crash (the only way at-least-once may deliver twice).
//!
//! With `--db postgres://…` it runs `--nodes N` servers on a fresh database of that
//! PostgreSQL server (created, and dropped when the run passes), the producers spread over
//! the nodes that are up, and each kill takes one node down (at random) while the others
//! keep serving; the killed node's leases run out and another node delivers its jobs.
//!
//! ```text
//! tests/chaos/run.sh                      # builds hookq and this example, then runs it
//! cargo run --example chaos -- --kills 5 --producers 4 --seed 42
//! tests/chaos/run.sh --db postgres://hookq@127.0.0.1:5432/postgres --nodes 3
//! ```
//!
//! With `--power-loss N` (and `--fsync-fail N`) each kill is a power cut instead: the
//! database sits on a forgetfs mount that drops every unsynced write at the cut (see
//! `power.rs`); the run ends with the line
//! `power-loss: N cuts, A acknowledged, L lost, D duplicated (bound B)`.
//!
//! With `--pg-restarts N` (and `--pg-dir`, the cluster `tests/postgres/cluster.sh start`
//! made, whose URL `--db` gives) PostgreSQL itself is stopped (`-m fast` or `-m immediate`)
//! and started again N times among the kills, the nodes left running; the run ends with
//! `pg-restarts: N restarts, F failover and K kills of M nodes, A acknowledged, L lost, D
//! duplicated (bound B)`. `--failover` adds a round that kills the primary and promotes a
//! standby the run set up beside it (synchronous; `--async-standby` to count what an
//! asynchronous one loses), the nodes given both servers.
//!
//! With `--pull N` the queue is a pull queue: N consumers lease, work and ack (an ack cut
//! off by a kill is sent again), and the same checks hold.
//!
//! With `--topic N` the producers publish to a topic that N push queues subscribe to
//! (`chaos0`…, one of them filtered to half the messages, one with a filter every message
//! passes): every acknowledged publish must reach every subscriber its payload matches,
//! counted per (message, queue); with `--ordering-keys` each subscriber keeps each key's
//! order on its own.
//!
//! Everything runs on 127.0.0.1: the producers, the server (port 0) and the worker it
//! delivers to. Exit status 0 when no acknowledged job was lost and the duplicates stay
//! within the bound; 1 otherwise.

mod power;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use clap::Parser;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Args {
    /// The hookq binary [default: `hookq` next to this example's directory, i.e. the one
    /// `cargo build` put in the same target directory].
    #[arg(long)]
    bin: Option<PathBuf>,
    /// How many times the server is killed.
    #[arg(long, default_value_t = 5)]
    kills: u32,
    /// Concurrent producers, each enqueueing as fast as it can.
    #[arg(long, default_value_t = 4)]
    producers: usize,
    /// Each run lasts a random time in [min, max] milliseconds before the kill.
    #[arg(long, default_value_t = 700)]
    min_uptime_ms: u64,
    #[arg(long, default_value_t = 4000)]
    max_uptime_ms: u64,
    /// The worker takes a random time in [0, this] ms per delivery, so deliveries are in
    /// flight when the server dies.
    #[arg(long, default_value_t = 40)]
    worker_delay_ms: u64,
    /// How long the last run may take to deliver what is left.
    #[arg(long, default_value_t = 60)]
    drain_secs: u64,
    /// Seed of the random kill times and worker delays [default: from the clock].
    #[arg(long)]
    seed: Option<u64>,
    /// Each producer spreads its jobs over this many ordering keys of its own (0: no keys).
    /// Then every key's jobs must also be first delivered in the order they were sent,
    /// across every crash.
    #[arg(long, default_value_t = 0)]
    ordering_keys: u64,
    /// Pull consumers instead of a pushed-to worker: the queue has no target and this many
    /// consumers lease batches of 10 from the nodes that are up, "work" 0–`worker_delay_ms`
    /// on each batch, and ack every job (an ack cut off by a kill is sent again, to a node
    /// that is up, until it gets an answer).
    #[arg(long, default_value_t = 0)]
    pull: usize,
    /// Publish to a topic that this many push queues subscribe to, instead of enqueueing
    /// to one queue (0: no topic).
    #[arg(long, default_value_t = 0)]
    topic: usize,
    /// A PostgreSQL server (`postgres://…`, any database on it): the run creates a fresh
    /// database there for its nodes [default: a SQLite file in a temporary directory].
    #[arg(long)]
    db: Option<String>,
    /// Servers running at once on the database (more than 1 needs `--db postgres://…`).
    #[arg(long, default_value_t = 1)]
    nodes: usize,
    /// Power cuts instead of kills: the SQLite database on a forgetfs mount, each kill
    /// followed by a cut that drops (or tears) every write not yet fsynced. Needs root and
    /// /dev/fuse (or fusermount3).
    #[arg(long, default_value_t = 0)]
    power_loss: u32,
    /// More power cuts, each after an fsync failed (its pages lost, as Linux loses them):
    /// no 201 may rest on what that fsync covered.
    #[arg(long, default_value_t = 0)]
    fsync_fail: u32,
    /// PostgreSQL stopped (`-m fast` or `-m immediate`, at random) and started again after
    /// 0.5–2 s, this many times, shuffled among the kills; the nodes keep running. Needs
    /// `--pg-dir` and `--db` naming that cluster.
    #[arg(long, default_value_t = 0)]
    pg_restarts: u32,
    /// The PostgreSQL cluster `--pg-restarts` stops and starts: the directory
    /// `tests/postgres/cluster.sh start` made (its `HOOKQ_TEST_POSTGRES_DIR`).
    #[arg(long)]
    pg_dir: Option<PathBuf>,
    /// Once, mid-run, kill the primary (`--pg-dir`) and promote a standby the run sets up
    /// beside it (`tests/postgres/cluster.sh standby`, synchronous); the nodes are given
    /// both servers (`target_session_attrs=read-write`). The primary stays down.
    #[arg(long)]
    failover: bool,
    /// With `--failover`: the standby replicates asynchronously, so the failover may lose
    /// acknowledged jobs (what the replication lag held): to count how many.
    #[arg(long)]
    async_standby: bool,
}

/// What ends each round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// `kill -9` the server.
    Kill,
    /// `kill -9`, then lose power.
    PowerCut,
    /// Fail one fsync, then `kill -9` and lose power.
    FsyncFailThenCut,
    /// Stop PostgreSQL and start it again, the nodes left running.
    PgRestart,
    /// Kill the primary and promote the standby.
    Failover,
}

/// What ends each round: `--kills` kills and `--pg-restarts` restarts, or the power cuts
/// (the fsync failures among them), in a random order.
fn faults(args: &Args, rng: &mut Rng) -> Vec<Fault> {
    let mut faults = if args.power_loss == 0 && args.fsync_fail == 0 {
        let mut faults = vec![Fault::Kill; args.kills as usize];
        faults.extend(vec![Fault::PgRestart; args.pg_restarts as usize]);
        if args.failover {
            faults.push(Fault::Failover);
        }
        faults
    } else {
        let mut faults = vec![Fault::PowerCut; args.power_loss as usize];
        faults.extend(vec![Fault::FsyncFailThenCut; args.fsync_fail as usize]);
        faults
    };
    // Fisher-Yates.
    for i in (1..faults.len()).rev() {
        faults.swap(i, rng.below(i as u64 + 1) as usize);
    }
    faults
}

/// xorshift64*: enough randomness for kill times, without another dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound.max(1)
    }
}

/// The worker: counts deliveries per job id, and notes the order in which each ordering
/// key's jobs first arrive.
#[derive(Default)]
struct Worker {
    deliveries: Mutex<HashMap<String, u32>>,
    /// Per key (`"<producer>/<key>"`), the `n` of each job at its first delivery.
    first_by_key: Mutex<HashMap<String, Vec<u64>>>,
    /// Every job id delivered (in topic mode the checks count messages per queue, but a
    /// power cut's forgotten jobs are named by job id).
    job_ids: Mutex<HashSet<String>>,
    in_flight: AtomicUsize,
    delay_ms: u64,
    seed: AtomicU64,
}

async fn receive(
    State(worker): State<Arc<Worker>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    worker.in_flight.fetch_add(1, Ordering::SeqCst);
    // Decremented on drop: when hookq dies mid-request, this handler is dropped unfinished.
    let _busy = Busy(&worker.in_flight);
    tokio::time::sleep(worker.work_time()).await;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let job: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    match (header("x-hookq-message-id"), header("x-hookq-job-id")) {
        // A topic's subscriber (the last path segment names its queue): one delivery of
        // the message to that queue.
        (Some(message), job_id) => {
            if let Some(id) = job_id {
                worker.job_ids.lock().unwrap().insert(id.to_owned());
            }
            let queue = uri.path().rsplit('/').next().unwrap_or_default();
            worker.record(&delivery_key(message, queue), &job, Some(queue));
        }
        (None, Some(id)) => worker.record(id, &job, None),
        (None, None) => {}
    }
    StatusCode::OK
}

/// What the checks count, in topic mode: one message's delivery to one subscriber queue.
fn delivery_key(message: &str, queue: &str) -> String {
    format!("{message}/{queue}")
}

/// The subscriber queues of `--topic N`, each with its filter (`None`: every message).
fn subscribers(count: usize) -> Vec<(String, Option<serde_json::Value>)> {
    (0..count)
        .map(|i| {
            let filter = match i {
                1 => Some(serde_json::json!({ "n": [{ "numeric": [">", 0] }] })),
                2 => Some(serde_json::json!({ "even": [true] })),
                _ => None,
            };
            (format!("chaos{i}"), filter)
        })
        .collect()
}

/// The subscriber queues the message with `n` goes to (as `subscribers`' filters say).
fn matching_subscribers(count: usize, n: u64) -> impl Iterator<Item = String> {
    (0..count)
        .filter(move |i| *i != 2 || n.is_multiple_of(2))
        .map(|i| format!("chaos{i}"))
}

impl Worker {
    /// Job `id` (payload `job`) reached the worker, pushed or leased; in topic mode `id`
    /// is a [`delivery_key`] and `queue` the subscriber (each keeps its keys' order).
    fn record(&self, id: &str, job: &serde_json::Value, queue: Option<&str>) {
        if queue.is_none() {
            self.job_ids.lock().unwrap().insert(id.to_owned());
        }
        let first = {
            let mut deliveries = self.deliveries.lock().unwrap();
            let count = deliveries.entry(id.to_owned()).or_default();
            *count += 1;
            *count == 1
        };
        if let (true, Some(key), Some(n)) = (first, job["key"].as_str(), job["n"].as_u64()) {
            let key = match queue {
                Some(queue) => format!("{queue}|{key}"),
                None => key.to_owned(),
            };
            let mut by_key = self.first_by_key.lock().unwrap();
            by_key.entry(key).or_default().push(n);
        }
    }

    /// A random time in [0, `delay_ms`] for the next piece of work.
    fn work_time(&self) -> Duration {
        let seed = self
            .seed
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        Duration::from_millis(Rng(seed | 1).below(self.delay_ms + 1))
    }
}

/// The next node that is up, taking turns from `turn` (with one node: that node).
fn node_up(base: &RwLock<Vec<Option<String>>>, turn: usize) -> Option<String> {
    let nodes = base.read().unwrap();
    let count = nodes.len().max(1);
    (0..count).find_map(|i| nodes[(turn + i) % count].clone())
}

/// A pull consumer: lease up to 10 jobs, work on them, ack each, until `stop`. The jobs it
/// holds count as the worker's `in_flight` (a kill may cut their acks off).
async fn consume(
    id: usize,
    http: reqwest::Client,
    base: Arc<RwLock<Vec<Option<String>>>>,
    worker: Arc<Worker>,
    stop: CancellationToken,
) {
    let lease_body = serde_json::json!({ "max": 10, "wait": "1s", "visibility": "5s" });
    let mut turn = id;
    while !stop.is_cancelled() {
        turn += 1;
        let Some(url) = node_up(&base, turn) else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let leased = http
            .post(format!("{url}/queue/chaos/_lease"))
            .header("content-type", "application/json")
            .body(lease_body.to_string())
            .send()
            .await;
        let jobs = match leased {
            Ok(response) if response.status() == StatusCode::OK => {
                match response.bytes().await.map(|b| serde_json::from_slice(&b)) {
                    Ok(Ok::<serde_json::Value, _>(body)) => {
                        body["jobs"].as_array().cloned().unwrap_or_default()
                    }
                    // The server died while answering: those jobs come back when their
                    // leases run out; this consumer never saw them.
                    _ => continue,
                }
            }
            _ => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        worker.in_flight.fetch_add(jobs.len(), Ordering::SeqCst);
        for job in &jobs {
            if let Some(id) = job["id"].as_str() {
                worker.record(id, &job["job"], None);
            }
        }
        tokio::time::sleep(worker.work_time()).await;
        for job in &jobs {
            ack(&http, &base, &mut turn, job, &stop).await;
            worker.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Ack `job` until a node answers (200, or 409 when its lease ran out while every node was
/// down: the job is leased again, a duplicate within the bound).
async fn ack(
    http: &reqwest::Client,
    base: &RwLock<Vec<Option<String>>>,
    turn: &mut usize,
    job: &serde_json::Value,
    stop: &CancellationToken,
) {
    let (Some(id), Some(lease)) = (job["id"].as_str(), job["leaseId"].as_str()) else {
        return;
    };
    let body = serde_json::json!({ "leaseId": lease }).to_string();
    while !stop.is_cancelled() {
        if let Some(url) = node_up(base, *turn) {
            let sent = http
                .post(format!("{url}/queue/chaos/{id}/_ack"))
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await;
            if sent.is_ok() {
                return;
            }
        }
        *turn += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

struct Busy<'a>(&'a AtomicUsize);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the producers saw.
#[derive(Default)]
struct Produced {
    acknowledged: Mutex<HashSet<String>>,
    /// Requests that failed without an answer (the server died under them): their jobs may
    /// or may not have been stored.
    unanswered: AtomicU64,
    /// Answers other than 201.
    refused: AtomicU64,
    /// Publishes acknowledged, in topic mode (`acknowledged` then holds their deliveries
    /// due, one per matching subscriber).
    publishes: AtomicU64,
}

/// One run of the server.
struct Server {
    child: Child,
    addr: SocketAddr,
    /// Jobs the server found in flight from the previous run (from its start-up log).
    released: Arc<AtomicU64>,
}

async fn start_server(bin: &PathBuf, db: &str, log: &PathBuf) -> anyhow::Result<Server> {
    let mut child = Command::new(bin)
        .arg("--db")
        .arg(db)
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("HOOKQ_API_KEY")
        .env("HOOKQ_LOG", "info")
        .env("NO_COLOR", "1")
        .env("HOOKQ_BACKOFF", "100ms")
        .env("HOOKQ_MAX_ATTEMPTS", "10")
        // On a shared database a killed node's leases are left to expire: keep them short
        // so the drain does not wait long (the delivery timeout must stay below).
        .env("HOOKQ_DELIVERY_TIMEOUT", "5s")
        .env("HOOKQ_LEASE_TIMEOUT", "8s")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let stderr = child.stderr.take().context("stderr is piped")?;
    let (addr_tx, addr_rx) = oneshot::channel();
    let released = Arc::new(AtomicU64::new(0));
    let mut log_file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .await?;
    let seen = released.clone();
    tokio::spawn(async move {
        let mut addr_tx = Some(addr_tx);
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = log_file.write_all(format!("{line}\n").as_bytes()).await;
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(name))
                    .map(str::to_owned)
            };
            if line.contains("found jobs in flight")
                && let Some(n) = field("jobs=").and_then(|n| n.parse().ok())
            {
                seen.store(n, Ordering::SeqCst);
            }
            if line.contains("hookq listening")
                && let (Some(tx), Some(addr)) = (addr_tx.take(), field("addr="))
            {
                let _ = tx.send(addr);
            }
        }
    });
    let addr = tokio::time::timeout(Duration::from_secs(15), addr_rx)
        .await
        .context("the server did not start listening within 15 s")?
        .context("the server exited before listening")?
        .parse()?;
    Ok(Server {
        child,
        addr,
        released,
    })
}

async fn produce(
    id: usize,
    keys: u64,
    topic: usize,
    http: reqwest::Client,
    base: Arc<RwLock<Vec<Option<String>>>>,
    produced: Arc<Produced>,
    stop: CancellationToken,
) {
    let mut n = 0u64;
    while !stop.is_cancelled() {
        // The next node that is up, taking turns (with one node: that node).
        let Some(url) = node_up(&base, id + n as usize) else {
            // Every server is down: try again shortly (a client's back-off, not a sync point).
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        n += 1;
        let path = if topic > 0 {
            "topic/chaos"
        } else {
            "queue/chaos"
        };
        let (target, mut body) = if keys == 0 {
            (
                format!("{url}/{path}"),
                serde_json::json!({ "producer": id, "n": n }),
            )
        } else {
            let key = format!("{id}/{}", n % keys);
            (
                format!("{url}/{path}?orderingKey={key}"),
                serde_json::json!({ "producer": id, "n": n, "key": key }),
            )
        };
        if topic > 0 {
            body["even"] = serde_json::Value::from(n.is_multiple_of(2));
        }
        let sent = http
            .post(target)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await;
        match sent {
            Ok(response) if response.status() == StatusCode::CREATED => {
                match response.bytes().await.map(|b| serde_json::from_slice(&b)) {
                    Ok(Ok::<serde_json::Value, _>(body)) => {
                        if let Some(job) = body["id"].as_str() {
                            let mut acknowledged = produced.acknowledged.lock().unwrap();
                            if topic == 0 {
                                acknowledged.insert(job.to_owned());
                            } else {
                                produced.publishes.fetch_add(1, Ordering::Relaxed);
                                acknowledged.extend(
                                    matching_subscribers(topic, n)
                                        .map(|queue| delivery_key(job, &queue)),
                                );
                            }
                        }
                    }
                    // The 201 head arrived but the body did not: not acknowledged.
                    _ => {
                        produced.unanswered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            Ok(_) => {
                produced.refused.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                produced.unanswered.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

async fn get_json(http: &reqwest::Client, url: &str) -> anyhow::Result<serde_json::Value> {
    let body = http.get(url).send().await?.bytes().await?;
    serde_json::from_slice(&body).with_context(|| format!("GET {url} did not answer JSON"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let bin = match args.bin.clone() {
        Some(bin) => bin,
        None => std::env::current_exe()?
            .parent()
            .and_then(|examples| examples.parent())
            .context("cannot locate the target directory")?
            .join("hookq"),
    };
    if !bin.exists() {
        bail!(
            "{} does not exist: run `cargo build --bin hookq` first (or pass --bin)",
            bin.display()
        );
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let mut rng = Rng(seed | 1);
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("hookq.log");
    let mut shared = match &args.db {
        Some(url)
            if matches!(
                hookq::config::Database::named(std::path::Path::new(url)),
                Ok(hookq::config::Database::Postgres(_))
            ) =>
        {
            Some(FreshDatabase::create(url, seed).await?)
        }
        Some(other) => bail!("--db takes a postgres:// URL ({other:?} is not one)"),
        None => None,
    };
    if args.topic > 0 && args.pull > 0 {
        bail!("--topic publishes to push subscribers: not with --pull");
    }
    // The queues the run delivers from: `chaos`, or the topic's subscribers.
    let queues: Vec<String> = if args.topic > 0 {
        subscribers(args.topic)
            .into_iter()
            .map(|(q, _)| q)
            .collect()
    } else {
        vec!["chaos".to_owned()]
    };
    if args.nodes == 0 || (args.nodes > 1 && shared.is_none()) {
        bail!("--nodes 2 or more needs --db postgres://… (a SQLite file has one server)");
    }
    if (args.pg_restarts > 0 || args.failover) && (shared.is_none() || args.pg_dir.is_none()) {
        bail!(
            "--pg-restarts and --failover stop a PostgreSQL cluster of the run's own: give its \
             directory (--pg-dir, from tests/postgres/cluster.sh start) and its URL (--db)"
        );
    }
    if args.async_standby && !args.failover {
        bail!("--async-standby goes with --failover");
    }
    // The cluster PostgreSQL restarts stop (the standby's, once it is promoted), and the
    // standby of `--failover`.
    let mut primary_dir = args.pg_dir.clone();
    let standby = match (&args.pg_dir, &mut shared) {
        (Some(dir), Some(fresh)) if args.failover => {
            let standby = Standby::beside(dir, args.async_standby).await?;
            fresh.also_at(&standby.host_port);
            Some(standby)
        }
        _ => None,
    };
    let faults = faults(&args, &mut rng);
    let power = if args.power_loss == 0 && args.fsync_fail == 0 {
        None
    } else if shared.is_some() {
        bail!("--power-loss and --fsync-fail cut the power of a SQLite file's disk: no --db")
    } else {
        Some(power::PowerDisk::mount()?)
    };
    let db = match (&shared, &power) {
        (Some(fresh), _) => fresh.url(),
        (None, Some(disk)) => disk.database().display().to_string(),
        (None, None) => dir.path().join("chaos.db").display().to_string(),
    };
    println!(
        "chaos: {} {}, {} nodes, {} producers, {} ordering keys each, {}, seed {seed}, db {}",
        faults.len(),
        if power.is_some() {
            format!("power cuts ({} after a failed fsync)", args.fsync_fail)
        } else if args.pg_restarts > 0 || args.failover {
            format!(
                "rounds ({} kills, {} PostgreSQL restarts{})",
                args.kills,
                args.pg_restarts,
                if args.failover { ", a failover" } else { "" }
            )
        } else {
            "kills".to_owned()
        },
        args.nodes,
        args.producers,
        args.ordering_keys,
        if args.pull > 0 {
            format!("pulled by {} consumers", args.pull)
        } else if args.topic > 0 {
            format!("published to a topic of {} subscribers", args.topic)
        } else {
            "pushed to one worker".to_owned()
        },
        db_shown(&db)
    );

    // The worker.
    let worker = Arc::new(Worker {
        delay_ms: args.worker_delay_ms,
        seed: AtomicU64::new(seed),
        ..Worker::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let worker_url = format!("http://{}/hook", listener.local_addr()?);
    let app = Router::new().fallback(receive).with_state(worker.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()?;
    let base: Arc<RwLock<Vec<Option<String>>>> = Arc::new(RwLock::new(vec![None; args.nodes]));
    let produced = Arc::new(Produced::default());
    let stop_producers = CancellationToken::new();
    let stop_consumers = CancellationToken::new();
    let started = Instant::now();
    let mut released_total = 0;
    let mut in_flight_at_kills = 0;
    let mut pg_restarts_done = 0u32;
    let mut failovers_done = 0u32;

    let mut servers = Vec::new();
    for _ in 0..args.nodes {
        servers.push(start_server(&bin, &db, &log).await?);
    }
    let url = format!("http://{}", servers[0].addr);
    let put = |path: String, body: String| {
        let http = http.clone();
        async move {
            let answer = http
                .put(path.clone())
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await?;
            if answer.status() != StatusCode::CREATED {
                bail!("PUT {path}: {}", answer.text().await?);
            }
            anyhow::Ok(())
        }
    };
    if args.topic > 0 {
        put(format!("{url}/topic/chaos"), "{}".to_owned()).await?;
        for (queue, filter) in subscribers(args.topic) {
            let target = format!("{worker_url}/{queue}");
            let body = serde_json::json!({ "target": target, "secret": "chaos" });
            put(format!("{url}/queue/{queue}"), body.to_string()).await?;
            let body = filter.map_or_else(
                || "{}".to_owned(),
                |f| serde_json::json!({ "filter": f }).to_string(),
            );
            put(format!("{url}/topic/chaos/_subscriptions/{queue}"), body).await?;
        }
    } else {
        put(
            format!("{url}/queue/chaos"),
            if args.pull > 0 {
                // No target: a pull queue.
                "{}".to_owned()
            } else {
                serde_json::json!({ "target": worker_url, "secret": "chaos" }).to_string()
            },
        )
        .await?;
    }
    for (i, server) in servers.iter().enumerate() {
        let url = format!("http://{}", server.addr);
        // The other nodes load the new queue within a second.
        let knows = Instant::now() + Duration::from_secs(10);
        let last = &queues[queues.len() - 1];
        while get_json(&http, &format!("{url}/queue/{last}/_stats")).await?["ok"] == false {
            if Instant::now() > knows {
                bail!("node {i} did not learn of the queue within 10 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        base.write().unwrap()[i] = Some(url);
    }
    let producers: Vec<_> = (0..args.producers)
        .map(|p| {
            tokio::spawn(produce(
                p,
                args.ordering_keys,
                args.topic,
                http.clone(),
                base.clone(),
                produced.clone(),
                stop_producers.clone(),
            ))
        })
        .collect();

    let consumers: Vec<_> = (0..args.pull)
        .map(|c| {
            tokio::spawn(consume(
                c,
                http.clone(),
                base.clone(),
                worker.clone(),
                stop_consumers.clone(),
            ))
        })
        .collect();

    let mut fsync_failures_met = 0;
    let mut power_failures = Vec::new();
    for (round, fault) in (1..).zip(faults.iter().copied()) {
        let span = args.max_uptime_ms.saturating_sub(args.min_uptime_ms);
        let uptime = Duration::from_millis(args.min_uptime_ms + rng.below(span + 1));
        if let (Fault::Failover, Some(standby), Some(old)) = (fault, &standby, &primary_dir) {
            tokio::time::sleep(uptime).await;
            let in_flight = in_flight_now(&http, &base, round, &queues).await?;
            let worker_busy = worker.in_flight.load(Ordering::SeqCst) as u64;
            released_total += in_flight.max(worker_busy);
            let acknowledged = produced.acknowledged.lock().unwrap().len();
            cluster_script(&["crash"], old).await?;
            cluster_script(&["promote"], &standby.dir).await?;
            println!(
                "round {round}: failover after {uptime:?} up: the primary killed, the {} \
                 standby promoted; {acknowledged} jobs acknowledged so far; {in_flight} in \
                 flight, {worker_busy} at the worker",
                if args.async_standby {
                    "asynchronous"
                } else {
                    "synchronous"
                }
            );
            primary_dir = Some(standby.dir.clone());
            failovers_done += 1;
            continue;
        }
        if let (Fault::PgRestart, Some(cluster)) = (fault, &primary_dir) {
            tokio::time::sleep(uptime).await;
            let in_flight = in_flight_now(&http, &base, round, &queues).await?;
            let worker_busy = worker.in_flight.load(Ordering::SeqCst) as u64;
            released_total += in_flight.max(worker_busy);
            let acknowledged = produced.acknowledged.lock().unwrap().len();
            let how = if rng.below(2) == 0 { "halt" } else { "crash" };
            cluster_script(&[how], cluster).await?;
            // How long the database stays away (a chaos parameter, not a wait for an event).
            let down = Duration::from_millis(500 + rng.below(1501));
            tokio::time::sleep(down).await;
            cluster_script(&["resume"], cluster).await?;
            println!(
                "round {round}: PostgreSQL stopped ({}) after {uptime:?} up; {acknowledged} \
                 jobs acknowledged so far; {in_flight} in flight, {worker_busy} at the worker; \
                 started again after {down:?}",
                if how == "halt" {
                    "-m fast"
                } else {
                    "-m immediate"
                }
            );
            pg_restarts_done += 1;
            continue;
        }
        if let (Fault::FsyncFailThenCut, Some(disk)) = (fault, &power) {
            tokio::time::sleep(uptime / 2).await;
            let acknowledged = produced.acknowledged.lock().unwrap().len();
            let met = disk.fail_next_fsync(Duration::from_secs(10)).await;
            fsync_failures_met += u32::from(met);
            println!(
                "round {round}: an fsync failed ({}) after {acknowledged} jobs acknowledged",
                if met { "met" } else { "no fsync within 10 s" }
            );
            tokio::time::sleep(uptime / 2).await;
        } else {
            tokio::time::sleep(uptime).await;
        }
        let victim = rng.below(args.nodes as u64) as usize;
        let worker_busy = worker.in_flight.load(Ordering::SeqCst);
        servers[victim]
            .child
            .kill()
            .await
            .context("kill -9 the server")?;
        base.write().unwrap()[victim] = None;
        in_flight_at_kills += worker_busy;
        let acknowledged = produced.acknowledged.lock().unwrap().len();
        // After a power cut, the jobs the worker has seen that the disk still holds: their
        // completion (or their claim) was not yet synced, so they will be delivered again.
        let mut forgotten = 0;
        if let Some(disk) = &power {
            match disk.cut(&bin, rng.below(u64::MAX)).await {
                Ok(cut) => {
                    let delivered = worker.job_ids.lock().unwrap();
                    forgotten = cut
                        .pending
                        .iter()
                        .filter(|id| delivered.contains(*id))
                        .count() as u64;
                    println!(
                        "round {round}: power cut after {uptime:?} up; {acknowledged} jobs \
                         acknowledged so far; the cut undid {}; {} jobs on disk, {forgotten} \
                         of them already delivered; {worker_busy} deliveries at the worker",
                        cut.report,
                        cut.pending.len()
                    );
                }
                Err(err) => {
                    println!("round {round}: {err:#}");
                    power_failures.push(format!("round {round}: {err:#}"));
                }
            }
        }
        servers[victim] = start_server(&bin, &db, &log).await?;
        let url = format!("http://{}", servers[victim].addr);
        // The jobs the dead node held: SQLite releases them at restart (and says how many);
        // on PostgreSQL they stay leased until they expire, so every job in flight now (on
        // any node) bounds them. After a power cut: those the disk forgot were delivered,
        // and those at the worker.
        let released = if power.is_some() {
            forgotten + worker_busy as u64
        } else if shared.is_some() {
            let mut in_flight = 0;
            for queue in &queues {
                in_flight +=
                    get_json(&http, &format!("{url}/queue/{queue}/_stats")).await?["inFlight"]
                        .as_u64()
                        .unwrap_or(0);
            }
            in_flight
        } else {
            servers[victim].released.load(Ordering::SeqCst)
        };
        released_total += released;
        if power.is_none() {
            println!(
                "kill {round}: node {victim} after {uptime:?} up; {acknowledged} jobs \
                 acknowledged so far; {worker_busy} {} when killed; {released} jobs {} at \
                 restart",
                if args.pull > 0 {
                    "jobs held by consumers"
                } else {
                    "deliveries at the worker"
                },
                if shared.is_some() {
                    "in flight"
                } else {
                    "found in flight"
                }
            );
        }
        base.write().unwrap()[victim] = Some(url);
    }

    // The last run: a little more load, then stop producing and let it drain.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop_producers.cancel();
    for producer in producers {
        producer.await?;
    }
    let acknowledged = produced.acknowledged.lock().unwrap().clone();
    let url = format!("http://{}", servers[0].addr);
    let deadline = Instant::now() + Duration::from_secs(args.drain_secs);
    let missing = loop {
        let delivered = worker.deliveries.lock().unwrap().clone();
        let missing: Vec<&String> = acknowledged
            .iter()
            .filter(|id| !delivered.contains_key(*id))
            .collect();
        let mut idle = true;
        for queue in &queues {
            let ready =
                get_json(&http, &format!("{url}/queue/{queue}?status=READY&limit=1")).await?;
            idle &= ready["jobs"].as_array().is_some_and(Vec::is_empty);
        }
        if (missing.is_empty() && idle) || Instant::now() > deadline {
            break missing.into_iter().cloned().collect::<Vec<_>>();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    stop_consumers.cancel();
    for consumer in consumers {
        consumer.await?;
    }
    // A pull consumer's ack cut off by a kill is sent again, so a job leased again is one
    // whose lease ran out meanwhile, or one the restart released: the jobs consumers held at
    // the kills bound them, beside those in flight at the restarts.
    let bound = released_total
        + if args.pull > 0 {
            in_flight_at_kills as u64
        } else {
            0
        };
    let mut errors = 0;
    for queue in &queues {
        errors += get_json(
            &http,
            &format!("{url}/queue/{queue}?status=ERROR&limit=1000"),
        )
        .await?["jobs"]
            .as_array()
            .map_or(0, Vec::len);
    }

    // A graceful stop at the end, of every node.
    let mut exit = None;
    for server in &mut servers {
        let pid = server.child.id().context("the server is running")?;
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()?;
    }
    for server in &mut servers {
        let status = tokio::time::timeout(Duration::from_secs(15), server.child.wait())
            .await
            .context("a server did not stop within 15 s of SIGTERM")??;
        if exit.is_none() || !status.success() {
            exit = Some(status);
        }
    }
    let exit = exit.context("no server ran")?;

    let delivered = worker.deliveries.lock().unwrap().clone();
    let deliveries: u64 = delivered.values().map(|&n| u64::from(n)).sum();
    let duplicates: Vec<(&String, &u32)> = delivered.iter().filter(|(_, n)| **n > 1).collect();
    let extra_deliveries: u64 = duplicates.iter().map(|(_, n)| u64::from(**n - 1)).sum();
    let unacknowledged_delivered = delivered
        .keys()
        .filter(|id| !acknowledged.contains(*id))
        .count();
    println!();
    println!(
        "elapsed:                              {:?}",
        started.elapsed()
    );
    println!(
        "kills (SIGKILL):                      {}",
        faults.len() - (pg_restarts_done + failovers_done) as usize
    );
    if pg_restarts_done > 0 {
        println!("PostgreSQL restarts:                  {pg_restarts_done}");
    }
    if power.is_some() {
        println!(
            "fsync failures (armed, met):          {}, {fsync_failures_met}",
            args.fsync_fail
        );
    }
    if args.topic > 0 {
        println!(
            "publishes acknowledged (201):         {}",
            produced.publishes.load(Ordering::Relaxed)
        );
        println!("deliveries due (message × matching subscriber), counted as jobs below:");
    }
    println!(
        "jobs acknowledged (201):              {}",
        acknowledged.len()
    );
    println!("distinct jobs delivered:              {}", delivered.len());
    println!("deliveries (incl. duplicates):        {deliveries}");
    println!("acknowledged jobs lost:               {}", missing.len());
    println!(
        "jobs delivered more than once:        {} ({extra_deliveries} extra deliveries)",
        duplicates.len()
    );
    println!("jobs in flight at the restarts:       {released_total}");
    if args.pull > 0 {
        println!("jobs consumers held at the kills:     {in_flight_at_kills}");
    } else {
        println!("deliveries at the worker at kills:    {in_flight_at_kills}");
    }
    println!("bound on extra deliveries:            {bound}");
    println!(
        "enqueues unanswered (server died):    {}",
        produced.unanswered.load(Ordering::Relaxed)
    );
    println!("  of which stored and delivered:      {unacknowledged_delivered}");
    println!(
        "enqueues refused (non-201):           {}",
        produced.refused.load(Ordering::Relaxed)
    );
    println!("dead letters at the end:              {errors}");
    // Each key's jobs were sent in increasing `n`; their first deliveries must keep it.
    let by_key = worker.first_by_key.lock().unwrap().clone();
    let out_of_order: Vec<(&String, &Vec<u64>)> = by_key
        .iter()
        .filter(|(_, ns)| ns.windows(2).any(|w| w[0] >= w[1]))
        .collect();
    if args.ordering_keys > 0 {
        let keyed: usize = by_key.values().map(Vec::len).sum();
        println!(
            "ordering keys: {} keys, {keyed} jobs, {} keys out of order",
            by_key.len(),
            out_of_order.len()
        );
    }
    println!("final SIGTERM exit (worst node):      {exit}");

    let mut failed = Vec::new();
    if !missing.is_empty() {
        failed.push(format!(
            "{} acknowledged jobs were never delivered, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        ));
    }
    if extra_deliveries > bound {
        failed.push(format!(
            "{extra_deliveries} extra deliveries exceed the bound of {bound} (jobs in flight at the crashes)"
        ));
    }
    if errors > 0 {
        failed.push(format!("{errors} jobs were dead-lettered"));
    }
    if let Some((key, ns)) = out_of_order.first() {
        failed.push(format!(
            "{} ordering keys were first delivered out of order, e.g. {key}: {ns:?}",
            out_of_order.len()
        ));
    }
    if !exit.success() {
        failed.push(format!("the final graceful stop exited with {exit}"));
    }
    failed.extend(power_failures);
    if args.topic > 0 {
        println!(
            "topic: {} publishes to {} subscribers, {} deliveries due, {} lost, \
             {extra_deliveries} duplicated (bound {bound})",
            produced.publishes.load(Ordering::Relaxed),
            args.topic,
            acknowledged.len(),
            missing.len()
        );
    }
    if pg_restarts_done > 0 || failovers_done > 0 {
        println!(
            "pg-restarts: {pg_restarts_done} restarts, {failovers_done} failover{} and {} kills \
             of {} nodes, {} acknowledged, {} lost, {extra_deliveries} duplicated (bound {bound})",
            if args.async_standby {
                " (asynchronous standby)"
            } else {
                ""
            },
            args.kills,
            args.nodes,
            acknowledged.len(),
            missing.len()
        );
    }
    if power.is_some() {
        println!(
            "power-loss: {} cuts, {} acknowledged, {} lost, {extra_deliveries} duplicated \
             (bound {bound})",
            faults.len(),
            acknowledged.len(),
            missing.len()
        );
    }
    if failed.is_empty() {
        if let Some(fresh) = shared {
            fresh.drop_database().await?;
        }
        println!("\nPASS");
        Ok(())
    } else {
        let kept = dir.keep();
        println!(
            "\nFAIL (server log kept in {}; database {})",
            kept.display(),
            db_shown(&db)
        );
        for failure in &failed {
            println!("  - {failure}");
        }
        std::process::exit(1);
    }
}

/// A database of its own on a PostgreSQL server, for one run.
/// The jobs in flight in `queues` now, as the next node up says (0 if none is up). Taken
/// before the database goes away: those may be delivered again if their outcome cannot be
/// written before their lease ends, so they count toward the duplicate bound.
async fn in_flight_now(
    http: &reqwest::Client,
    base: &RwLock<Vec<Option<String>>>,
    turn: usize,
    queues: &[String],
) -> anyhow::Result<u64> {
    let mut in_flight = 0;
    if let Some(url) = node_up(base, turn) {
        for queue in queues {
            in_flight += get_json(http, &format!("{url}/queue/{queue}/_stats")).await?["inFlight"]
                .as_u64()
                .unwrap_or(0);
        }
    }
    Ok(in_flight)
}

/// The standby of `--failover`: a cluster of its own beside `--pg-dir`'s, removed at the end.
struct Standby {
    dir: PathBuf,
    host_port: String,
}

impl Standby {
    async fn beside(primary: &std::path::Path, asynchronous: bool) -> anyhow::Result<Self> {
        let out = Command::new("bash")
            .arg(cluster_script_path())
            .arg("standby")
            .arg(primary)
            .args(asynchronous.then_some("async"))
            .output()
            .await?;
        if !out.status.success() {
            bail!(
                "cluster.sh standby: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let out = String::from_utf8_lossy(&out.stdout);
        let var = |name: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}=")))
                .map(str::to_owned)
                .with_context(|| format!("cluster.sh standby printed no {name}"))
        };
        let url = var("HOOKQ_TEST_STANDBY_URL")?;
        let host_port = url
            .split_once('@')
            .and_then(|(_, rest)| rest.split('/').next())
            .context("the standby's URL has no host")?
            .to_owned();
        Ok(Self {
            dir: PathBuf::from(var("HOOKQ_TEST_STANDBY_DIR")?),
            host_port,
        })
    }
}

impl Drop for Standby {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(cluster_script_path())
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

fn cluster_script_path() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/postgres/cluster.sh")
}

/// `tests/postgres/cluster.sh COMMAND DIR` (halt, crash, resume) on the cluster in `dir`.
async fn cluster_script(command: &[&str], dir: &std::path::Path) -> anyhow::Result<()> {
    let script = cluster_script_path();
    let status = Command::new("bash")
        .arg(&script)
        .args(command)
        .arg(dir)
        .status()
        .await
        .with_context(|| format!("run {}", script.display()))?;
    if !status.success() {
        bail!("cluster.sh {command:?} {} failed: {status}", dir.display());
    }
    Ok(())
}

struct FreshDatabase {
    /// The server's URL, to drop the database at the end.
    admin: String,
    name: String,
    url: String,
    /// `host:port` of the standby of `--failover`: the URLs name it after the primary.
    standby: Option<String>,
}

impl FreshDatabase {
    async fn create(admin: &str, seed: u64) -> anyhow::Result<Self> {
        let name = format!("hookq_chaos_{seed:x}");
        Self::admin(admin)
            .await?
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .with_context(|| format!("CREATE DATABASE {name}"))?;
        let mut url = reqwest::Url::parse(admin).context("--db is not a URL")?;
        url.set_path(&name);
        Ok(Self {
            admin: admin.to_owned(),
            name,
            url: url.to_string(),
            standby: None,
        })
    }

    /// From now on the database is reached on the primary or on the standby at `host_port`,
    /// whichever takes writes.
    fn also_at(&mut self, host_port: &str) {
        self.standby = Some(host_port.to_owned());
    }

    /// The database's URL for the nodes.
    fn url(&self) -> String {
        self.with_standby(&self.url)
    }

    /// `url` naming the standby too (`postgres://u@primary,standby/db?target_session_attrs=
    /// read-write`), as tokio-postgres takes several hosts.
    fn with_standby(&self, url: &str) -> String {
        let Some(standby) = &self.standby else {
            return url.to_owned();
        };
        let authority = url.find("://").map_or(0, |i| i + 3);
        let end = url[authority..]
            .find(['/', '?'])
            .map_or(url.len(), |i| authority + i);
        let joined = format!("{},{standby}{}", &url[..end], &url[end..]);
        let glue = if joined.contains('?') { '&' } else { '?' };
        format!("{joined}{glue}target_session_attrs=read-write")
    }

    async fn drop_database(self) -> anyhow::Result<()> {
        Self::admin(&self.with_standby(&self.admin))
            .await?
            .batch_execute(&format!("DROP DATABASE {} WITH (FORCE)", self.name))
            .await?;
        Ok(())
    }

    /// A plain connection (a test server on loopback: no TLS).
    async fn admin(url: &str) -> anyhow::Result<tokio_postgres::Client> {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .with_context(|| {
                format!(
                    "cannot connect to {}",
                    hookq::store::postgres::connect::redacted(url)
                )
            })?;
        tokio::spawn(connection);
        Ok(client)
    }
}

/// The database as a log may show it (a URL without its password).
fn db_shown(db: &str) -> String {
    match hookq::config::Database::named(std::path::Path::new(db)) {
        Ok(database) => database.to_string(),
        Err(err) => err.to_string(),
    }
}
