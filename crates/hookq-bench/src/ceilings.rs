//! The ceilings hookq is measured against, in the same run: SQLite inserting hookq's job row
//! with hookq's pragmas and no HTTP (raw, with the writer's per-operation savepoints, and
//! through the real `Store` writer thread), and the raw HTTP POST rate to the sink.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use rusqlite::Connection;
use tokio::task::JoinSet;

use hookq::config::Synchronous;
use hookq::model::{JobId, QueueName, Target, now_millis};
use hookq::store::{self, Queue, Store};

pub const QUEUE: &str = "bench";

/// A fresh database at `db` with hookq's schema, pragmas (`synchronous=FULL`) and queue
/// `QUEUE` delivering to `target`.
pub fn open_with_queue(db: &Path, target: &str) -> anyhow::Result<(Connection, QueueName)> {
    let mut conn = store::connection::open_writer(db, Synchronous::Full)?;
    store::connection::migrate(&mut conn)?;
    let name = QueueName::parse(QUEUE).map_err(|e| anyhow::anyhow!("queue name: {}", e.0))?;
    let target = Target::parse(target).map_err(|e| anyhow::anyhow!("target: {}", e.0))?;
    store::queues::insert(
        &conn,
        &Queue {
            name: name.clone(),
            target,
            secret: None,
            created_at: now_millis(),
        },
        &store::Sealing::none(),
    )
    .context("cannot create the bench queue")?;
    Ok((conn, name))
}

/// Insert `count` jobs with `payload` in transactions of `batch` rows (the fastest way to
/// fill a backlog with exactly the rows the server writes).
pub fn insert_jobs(
    conn: &Connection,
    queue: &QueueName,
    payload: &str,
    count: u64,
    batch: u64,
) -> anyhow::Result<()> {
    let mut done = 0;
    while done < count {
        let n = batch.min(count - done);
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let now = now_millis();
        for _ in 0..n {
            store::jobs::insert(conn, queue, JobId::new(), payload, now)?;
        }
        conn.execute_batch("COMMIT")?;
        done += n;
    }
    Ok(())
}

/// Raw SQLite insert rate (rows/s) in batches of `batch`, with or without the writer's
/// per-operation savepoints, for about `duration` (at most `max_rows` rows).
pub fn sqlite_insert_rate(
    db: &Path,
    payload: &str,
    batch: u64,
    savepoints: bool,
    duration: Duration,
    max_rows: u64,
) -> anyhow::Result<f64> {
    let (conn, queue) = open_with_queue(db, "http://127.0.0.1:9/")?;
    // Warm-up: one batch, not timed.
    insert_jobs(&conn, &queue, payload, batch, batch)?;
    let started = Instant::now();
    let mut rows = 0u64;
    while rows < max_rows && started.elapsed() < duration {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let now = now_millis();
        for _ in 0..batch {
            if savepoints {
                conn.execute_batch("SAVEPOINT op")?;
            }
            store::jobs::insert(&conn, &queue, JobId::new(), payload, now)?;
            if savepoints {
                conn.execute_batch("RELEASE op")?;
            }
        }
        conn.execute_batch("COMMIT")?;
        rows += batch;
    }
    Ok(rows as f64 / started.elapsed().as_secs_f64())
}

/// What the real writer thread achieved with concurrent callers and no HTTP.
#[derive(Debug, Clone, Copy)]
pub struct StoreRun {
    pub rate: f64,
    pub mean_batch: f64,
    pub mean_commit_micros: f64,
}

/// `callers` tasks calling `Store::enqueue` in a loop for `duration` (at most `max_jobs`).
pub async fn store_enqueue_rate(
    db: &Path,
    payload: &str,
    callers: usize,
    duration: Duration,
    max_jobs: u64,
) -> anyhow::Result<StoreRun> {
    drop(open_with_queue(db, "http://127.0.0.1:9/")?);
    let batches = Arc::new(AtomicU64::new(0));
    let ops = Arc::new(AtomicU64::new(0));
    let commit_micros = Arc::new(AtomicU64::new(0));
    let (b, o, c) = (batches.clone(), ops.clone(), commit_micros.clone());
    let path = db.to_owned();
    let (store, writer_done) = tokio::task::spawn_blocking(move || {
        Store::open(
            &path,
            Synchronous::Full,
            store::Sealing::none(),
            now_millis(),
            move |stats| {
                b.fetch_add(1, Ordering::Relaxed);
                o.fetch_add(stats.ops as u64, Ordering::Relaxed);
                c.fetch_add(stats.commit_micros, Ordering::Relaxed);
            },
        )
    })
    .await
    .context("store open task failed")??;
    let queue = QueueName::parse(QUEUE).map_err(|e| anyhow::anyhow!("queue name: {}", e.0))?;
    let run = async {
        // Warm-up, not timed.
        for _ in 0..100 {
            store
                .enqueue(
                    queue.clone(),
                    JobId::new(),
                    payload.to_owned(),
                    now_millis(),
                )
                .await?;
        }
        let (b0, o0, c0) = (
            batches.load(Ordering::SeqCst),
            ops.load(Ordering::SeqCst),
            commit_micros.load(Ordering::SeqCst),
        );
        let issued = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let mut tasks = JoinSet::new();
        for _ in 0..callers {
            let (store, queue, payload, issued) = (
                store.clone(),
                queue.clone(),
                payload.to_owned(),
                issued.clone(),
            );
            tasks.spawn(async move {
                let mut done = 0u64;
                while issued.fetch_add(1, Ordering::Relaxed) < max_jobs
                    && started.elapsed() < duration
                {
                    store
                        .enqueue(queue.clone(), JobId::new(), payload.clone(), now_millis())
                        .await?;
                    done += 1;
                }
                anyhow::Ok(done)
            });
        }
        let mut jobs = 0u64;
        while let Some(joined) = tasks.join_next().await {
            jobs += joined.context("an enqueue task panicked")??;
        }
        let elapsed = started.elapsed();
        let nb = (batches.load(Ordering::SeqCst) - b0).max(1) as f64;
        let nops = (ops.load(Ordering::SeqCst) - o0) as f64;
        let micros = (commit_micros.load(Ordering::SeqCst) - c0) as f64;
        anyhow::Ok(StoreRun {
            rate: jobs as f64 / elapsed.as_secs_f64(),
            mean_batch: nops / nb,
            mean_commit_micros: micros / nb,
        })
    }
    .await;
    drop(store);
    tokio::task::spawn_blocking(move || writer_done.wait())
        .await
        .context("waiting for the writer failed")?;
    run
}
