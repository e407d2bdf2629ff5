//! For the benchmark only: the raw SQLite ceiling hookq's enqueue rate is judged against
//! (hookq's own job row, schema and pragmas, no writer thread, no HTTP), and the fastest way
//! to fill a backlog with exactly the rows the server writes. Not used by the server.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use rusqlite::Connection;

use super::{Synchronous, connection, jobs, queues};
use crate::json::{self, CanonicalJson};
use crate::model::{JobId, QueueName, Target, now_millis};
use crate::store::records::{NewJob, Queue};

fn canonical(payload: &str) -> anyhow::Result<CanonicalJson> {
    json::canonicalize(payload.as_bytes())
        .map_err(|e| anyhow::anyhow!("the payload is not JSON: {e}"))
}
use crate::store::sealing::Sealing;

/// The queue the helpers below create.
pub const QUEUE: &str = "bench";

/// A fresh database at `db` with hookq's schema, pragmas (`synchronous=FULL`) and queue
/// `QUEUE` delivering to `target`.
pub fn open_with_queue(db: &Path, target: &str) -> anyhow::Result<(Connection, QueueName)> {
    let mut conn = connection::open_writer(db, Synchronous::Full)?;
    connection::migrate(&mut conn)?;
    let name = QueueName::parse(QUEUE).map_err(|e| anyhow::anyhow!("queue name: {}", e.0))?;
    let target = Target::parse(target).map_err(|e| anyhow::anyhow!("target: {}", e.0))?;
    queues::insert(
        &conn,
        &Queue::new(name.clone(), Some(target), None, now_millis()),
        &Sealing::none(),
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
    let payload = canonical(payload)?;
    let mut done = 0;
    while done < count {
        let n = batch.min(count - done);
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let now = now_millis();
        for _ in 0..n {
            jobs::insert(
                conn,
                queue,
                &NewJob::now(JobId::new(), payload.clone(), now),
            )?;
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
    let payload = canonical(payload)?;
    let started = Instant::now();
    let mut rows = 0u64;
    while rows < max_rows && started.elapsed() < duration {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let now = now_millis();
        for _ in 0..batch {
            if savepoints {
                conn.execute_batch("SAVEPOINT op")?;
            }
            jobs::insert(
                &conn,
                &queue,
                &NewJob::now(JobId::new(), payload.clone(), now),
            )?;
            if savepoints {
                conn.execute_batch("RELEASE op")?;
            }
        }
        conn.execute_batch("COMMIT")?;
        rows += batch;
    }
    Ok(rows as f64 / started.elapsed().as_secs_f64())
}
