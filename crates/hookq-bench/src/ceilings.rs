//! The ceilings hookq is measured against, in the same run: SQLite inserting hookq's job row
//! with hookq's pragmas and no HTTP (raw, with the writer's per-operation savepoints, and
//! through the real `Store` writer thread), and the raw HTTP POST rate to the sink.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::task::JoinSet;

use hookq::model::{JobId, QueueName, now_millis};
use hookq::store::sqlite::Synchronous;
use hookq::store::{self, NewJob, Store, StoreOptions};

pub use hookq::store::sqlite::ceiling::{QUEUE, insert_jobs, open_with_queue, sqlite_insert_rate};

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
            StoreOptions::Sqlite {
                path,
                synchronous: Synchronous::Full,
            },
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
    let payload = hookq::json::canonicalize(payload.as_bytes())
        .map_err(|e| anyhow::anyhow!("the bench payload is not JSON: {e}"))?;
    let run = async {
        // Warm-up, not timed.
        for _ in 0..100 {
            store
                .enqueue(
                    queue.clone(),
                    NewJob::now(JobId::new(), payload.clone(), now_millis()),
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
                payload.clone(),
                issued.clone(),
            );
            tasks.spawn(async move {
                let mut done = 0u64;
                while issued.fetch_add(1, Ordering::Relaxed) < max_jobs
                    && started.elapsed() < duration
                {
                    store
                        .enqueue(
                            queue.clone(),
                            NewJob::now(JobId::new(), payload.clone(), now_millis()),
                        )
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
