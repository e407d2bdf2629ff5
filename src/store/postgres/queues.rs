//! SQL for the `queues` table on PostgreSQL. The row's meaning (sealed secret, policy in
//! milliseconds) is [`QueueRow`]'s, shared with SQLite.

use deadpool_postgres::{GenericClient, Transaction};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::tx::PgTx;
use crate::model::QueueName;
use crate::policy::QueueChange;
use crate::store::dialect::QueueRows;
use crate::store::error::{StoreError, StoreResult};
use crate::store::queue_row::QueueRow;
use crate::store::records::{Caps, Queue};
use crate::store::sealing::Sealing;

/// The columns of a queue, in the order [`queue_row`] reads them.
const COLUMNS: &str = "name, target, secret, created_at, max_attempts, backoff_ms, timeout_ms, \
     concurrency, rate_per_second, burst, max_queued, paused, keep_delivered_ms, signature_scheme, \
     previous_secret, previous_secret_expires_at";

/// Store a new queue; its secret is sealed when `sealing` has a master key.
pub async fn insert(tx: &Transaction<'_>, queue: &Queue, sealing: &Sealing) -> StoreResult<()> {
    if queue.policy.max_queued.is_some() {
        count_jobs(tx).await?;
    }
    let row = BoundRow::of(QueueRow::of(queue, sealing));
    let inserted = tx
        .execute(
            &format!(
                "INSERT INTO queues ({COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
                 ON CONFLICT (name) DO NOTHING"
            ),
            &row.params(),
        )
        .await?;
    if inserted == 0 {
        return Err(StoreError::QueueExists);
    }
    keep_cap(tx, &queue.name, queue.policy.max_queued).await?;
    bump_epoch(tx).await
}

/// Apply `change` to queue `name` as stored now (its row locked for the transaction) and
/// return the queue as it becomes.
pub async fn update(
    tx: &Transaction<'_>,
    name: &QueueName,
    change: &QueueChange,
    sealing: &Sealing,
) -> StoreResult<Queue> {
    if matches!(change.max_queued, Some(Some(_))) {
        count_jobs(tx).await?;
    }
    let row = tx
        .query_opt(
            &format!("SELECT {COLUMNS} FROM queues WHERE name = $1 FOR UPDATE"),
            &[&name.as_str()],
        )
        .await?
        .ok_or(StoreError::QueueNotFound)?;
    let mut queue = queue_row(&row).open(&sealing.keys())?;
    queue.apply(change);
    let row = BoundRow::of(QueueRow::of(&queue, sealing));
    tx.execute(
        "UPDATE queues SET target = $2, secret = $3, max_attempts = $5, backoff_ms = $6,
                timeout_ms = $7, concurrency = $8, rate_per_second = $9, burst = $10,
                max_queued = $11, paused = $12, keep_delivered_ms = $13, signature_scheme = $14,
                previous_secret = $15, previous_secret_expires_at = $16
         WHERE name = $1 AND created_at = $4",
        &row.params(),
    )
    .await?;
    if change.max_queued.is_some() {
        keep_cap(tx, name, queue.policy.max_queued).await?;
    }
    bump_epoch(tx).await?;
    Ok(queue)
}

/// Delete a queue; its jobs, dead letters, schedules and log go with it (cascade).
pub async fn delete(tx: &Transaction<'_>, name: &QueueName) -> StoreResult<()> {
    let deleted = tx
        .execute("DELETE FROM queues WHERE name = $1", &[&name.as_str()])
        .await?;
    if deleted == 0 {
        return Err(StoreError::QueueNotFound);
    }
    bump_epoch(tx).await
}

/// Keep `queue_sizes` in step with a queue's `maxQueued`. The queue's row is locked first:
/// every enqueue into the queue holds a key-share lock on it until it commits, so once the
/// lock is ours every earlier enqueue is committed and counted, and later ones wait for
/// this transaction and then meet the cap.
/// A queue's row with its counts as PostgreSQL's INTEGER, ready to bind as `$1`…`$16` in
/// [`COLUMNS`] order (the insert and the update bind the same values).
struct BoundRow {
    row: QueueRow,
    max_attempts: Option<i32>,
    concurrency: Option<i32>,
    burst: Option<i32>,
}

impl BoundRow {
    fn of(row: QueueRow) -> Self {
        let int = |n: Option<u32>| n.map(|n| i32::try_from(n).unwrap_or(i32::MAX));
        Self {
            max_attempts: int(row.max_attempts),
            concurrency: int(row.concurrency),
            burst: int(row.burst),
            row,
        }
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 16] {
        let row = &self.row;
        [
            &row.name,
            &row.target,
            &row.secret,
            &row.created_at,
            &self.max_attempts,
            &row.backoff_ms,
            &row.timeout_ms,
            &self.concurrency,
            &row.rate_per_second,
            &self.burst,
            &row.max_queued,
            &row.paused,
            &row.keep_delivered_ms,
            &row.signature_scheme,
            &row.previous_secret,
            &row.previous_secret_expires_at,
        ]
    }
}

/// Have every later insert and delete of `jobs` counted for the capped queues:
/// `hookq_start_counting()` (migration 0017) creates the counting triggers if they are not
/// there, under a lock on `jobs` that waits out every write in progress, so the count
/// [`keep_cap`] then takes misses none; once they are, it takes no lock. First in its
/// transaction: taken after the queue's row, the lock could deadlock with an enqueue
/// waiting for that row. They stay once created: dropping them would take that lock again,
/// for a saving only while no queue has a cap.
async fn count_jobs(tx: &Transaction<'_>) -> StoreResult<()> {
    tx.execute("SELECT hookq_start_counting()", &[]).await?;
    Ok(())
}

async fn keep_cap(tx: &Transaction<'_>, name: &QueueName, cap: Option<u64>) -> StoreResult<()> {
    let Some(cap) = cap else {
        tx.execute(
            "DELETE FROM queue_sizes WHERE queue = $1",
            &[&name.as_str()],
        )
        .await?;
        return Ok(());
    };
    let cap = i64::try_from(cap).unwrap_or(i64::MAX);
    tx.execute(
        "SELECT 1 FROM queues WHERE name = $1 FOR UPDATE",
        &[&name.as_str()],
    )
    .await?;
    tx.execute(
        "INSERT INTO queue_sizes (queue, live, cap)
         SELECT $1::text, count(*), $2::bigint FROM jobs WHERE queue = $1
         ON CONFLICT (queue) DO UPDATE SET cap = excluded.cap",
        &[&name.as_str(), &cap],
    )
    .await?;
    Ok(())
}

async fn bump_epoch(tx: &Transaction<'_>) -> StoreResult<()> {
    tx.execute("UPDATE queue_epoch SET epoch = epoch + 1", &[])
        .await?;
    Ok(())
}

/// The queue epoch: it moves with every queue change, on any node.
pub async fn epoch(client: &impl GenericClient) -> StoreResult<i64> {
    Ok(client
        .query_one("SELECT epoch FROM queue_epoch", &[])
        .await?
        .get(0))
}

/// `QueueNotFound` unless queue `name` exists.
pub async fn require(client: &impl GenericClient, name: &QueueName) -> StoreResult<()> {
    client
        .query_opt("SELECT 1 FROM queues WHERE name = $1", &[&name.as_str()])
        .await?
        .map(|_| ())
        .ok_or(StoreError::QueueNotFound)
}

/// The advisory lock queue creations take (`pg_advisory_xact_lock`): "hookq-qc".
const CREATION_LOCK: i64 = 0x68_6f_6f_6b_71_2d_71_63;

/// Whether a new queue `name` fits under the server's cap on queues. Creations take one
/// lock for the count and the insert, so nodes creating queues at once cannot overshoot
/// (creating a queue is rare; enqueues never take it). A name taken already passes: the
/// insert answers `QueueExists`.
pub async fn admit(tx: &Transaction<'_>, name: &QueueName, caps: Caps) -> StoreResult<()> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CREATION_LOCK])
        .await?;
    if require(tx, name).await.is_ok() {
        return Ok(());
    }
    let count: i64 = tx
        .query_one("SELECT count(*) FROM queues", &[])
        .await?
        .get(0);
    caps.admit_queue(u64::try_from(count).unwrap_or(0))
}

/// Re-seal, in `tx`, every queue secret not sealed with the current master key (the
/// rotation a restart with a new key performs); returns the queues re-sealed. Their rows
/// stay locked until `tx` ends, so two nodes starting at once re-seal each secret once.
pub async fn reseal_all(tx: &Transaction<'_>, sealing: &Sealing) -> StoreResult<Vec<QueueName>> {
    if sealing.current().is_none() {
        return Ok(Vec::new());
    }
    let rows = tx
        .query(
            "SELECT name, secret, previous_secret FROM queues
             WHERE secret IS NOT NULL OR previous_secret IS NOT NULL ORDER BY name FOR UPDATE",
            &[],
        )
        .await?;
    let keys = sealing.keys();
    let mut resealed = Vec::new();
    for row in rows {
        let (name, secret, previous): (String, Option<String>, Option<String>) =
            (row.get(0), row.get(1), row.get(2));
        let needs =
            |stored: &Option<String>| stored.as_deref().is_some_and(|s| sealing.needs_reseal(s));
        if !needs(&secret) && !needs(&previous) {
            continue;
        }
        let reseal = |stored: Option<String>| -> StoreResult<Option<String>> {
            stored
                .map(|stored| {
                    let plain =
                        crate::store::sealing::open(&keys, &stored, &name).map_err(|e| {
                            StoreError::Other(std::sync::Arc::new(anyhow::anyhow!(
                                "cannot read the secret of queue {name}: {e}"
                            )))
                        })?;
                    Ok(sealing.to_stored(&plain, &name))
                })
                .transpose()
        };
        let (secret, previous) = (reseal(secret)?, reseal(previous)?);
        tx.execute(
            "UPDATE queues SET secret = $2, previous_secret = $3 WHERE name = $1",
            &[&name, &secret, &previous],
        )
        .await?;
        resealed.push(QueueName::from_stored(name));
    }
    Ok(resealed)
}

/// Queue `name` as stored now, its secret opened, with the queue epoch it was read at (one
/// statement, so one snapshot); `None` when there is no such queue.
pub async fn load_one(
    client: &impl GenericClient,
    name: &QueueName,
    sealing: &Sealing,
) -> StoreResult<Option<(Queue, i64)>> {
    let row = client
        .query_opt(
            &format!(
                "SELECT {COLUMNS}, (SELECT epoch FROM queue_epoch) FROM queues WHERE name = $1"
            ),
            &[&name.as_str()],
        )
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let epoch: i64 = row.get(16);
    Ok(Some((queue_row(&row).open(&sealing.keys())?, epoch)))
}

/// Every queue, secrets opened; a secret that cannot be read is an error naming its queue.
pub async fn load_all(client: &impl GenericClient, sealing: &Sealing) -> StoreResult<Vec<Queue>> {
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
        signature_scheme: row.get(13),
        previous_secret: row.get(14),
        previous_secret_expires_at: row.get(15),
    }
}

impl QueueRows for PgTx<'_> {
    /// Lock `queue`'s row against other schedule creations (not against enqueues: their
    /// foreign key takes KEY SHARE, which NO KEY UPDATE lets through), so a count of its
    /// schedules holds until the commit. `QueueNotFound` if it does not exist.
    async fn lock_queue_for_schedules(&self, queue: &QueueName) -> StoreResult<()> {
        self.tx
            .query_opt(
                "SELECT 1 FROM queues WHERE name = $1 FOR NO KEY UPDATE",
                &[&queue.as_str()],
            )
            .await?
            .map(|_| ())
            .ok_or(StoreError::QueueNotFound)
    }

    async fn require_queue(&self, queue: &QueueName) -> StoreResult<()> {
        require(self.tx, queue).await
    }

    /// `FOR KEY SHARE`: the lock a job's foreign key takes anyway, taken first for all of
    /// them, so no insert can meet a deletion half way.
    async fn lock_subscribers(&self, queues: &[QueueName]) -> StoreResult<Vec<QueueName>> {
        if queues.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<&str> = queues.iter().map(QueueName::as_str).collect();
        Ok(super::jobs::prepared::query(
            self.tx,
            "SELECT name FROM queues WHERE name = ANY($1) ORDER BY name COLLATE \"C\" FOR KEY SHARE",
            &[&names],
        )
        .await?
        .iter()
        .map(|row| QueueName::from_stored(row.get(0)))
        .collect())
    }
}
