//! SQL for the `queues` table on PostgreSQL. The row's meaning (sealed secret, policy in
//! milliseconds) is [`QueueRow`]'s, shared with SQLite.

use deadpool_postgres::Client;
use tokio_postgres::Row;

use crate::store::error::{StoreError, StoreResult};
use crate::store::queue_row::QueueRow;
use crate::store::records::Queue;
use crate::store::sealing::Sealing;

/// The columns of a queue, in the order [`queue_row`] reads them.
const COLUMNS: &str = "name, target, secret, created_at, max_attempts, backoff_ms, timeout_ms, \
     concurrency, rate_per_second, burst, max_queued, paused, keep_delivered_ms";

/// Store a new queue; its secret is sealed when `sealing` has a master key.
pub async fn insert(client: &Client, queue: &Queue, sealing: &Sealing) -> StoreResult<()> {
    let row = QueueRow::of(queue, sealing);
    let int = |n: Option<u32>| n.map(|n| i32::try_from(n).unwrap_or(i32::MAX));
    let inserted = client
        .execute(
            &format!(
                "INSERT INTO queues ({COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
                 ON CONFLICT (name) DO NOTHING"
            ),
            &[
                &row.name,
                &row.target,
                &row.secret,
                &row.created_at,
                &int(row.max_attempts),
                &row.backoff_ms,
                &row.timeout_ms,
                &int(row.concurrency),
                &row.rate_per_second,
                &int(row.burst),
                &row.max_queued,
                &row.paused,
                &row.keep_delivered_ms,
            ],
        )
        .await?;
    if inserted == 0 {
        return Err(StoreError::QueueExists);
    }
    Ok(())
}

/// Every queue, secrets opened; a secret that cannot be read is an error naming its queue.
pub async fn load_all(client: &Client, sealing: &Sealing) -> StoreResult<Vec<Queue>> {
    let rows = client
        .query(&format!("SELECT {COLUMNS} FROM queues ORDER BY name"), &[])
        .await?;
    let keys = sealing.keys();
    rows.iter().map(|row| queue_row(row).open(&keys)).collect()
}

fn queue_row(row: &Row) -> QueueRow {
    let count = |i: usize| {
        row.get::<_, Option<i32>>(i)
            .and_then(|n| u32::try_from(n).ok())
    };
    QueueRow {
        name: row.get(0),
        target: row.get(1),
        secret: row.get(2),
        created_at: row.get(3),
        max_attempts: count(4),
        backoff_ms: row.get(5),
        timeout_ms: row.get(6),
        concurrency: count(7),
        rate_per_second: row.get(8),
        burst: count(9),
        max_queued: row.get(10),
        paused: row.get(11),
        keep_delivered_ms: row.get(12),
    }
}
