//! SQL for the `queues` table. Secrets are sealed on the way in and opened on the way out
//! (`store::sealing`).

use rusqlite::{Connection, OptionalExtension, params};

use super::tx::SqliteTx;
use crate::model::QueueName;
use crate::policy::QueueChange;
use crate::store::dialect::QueueRows;
use crate::store::error::{StoreError, StoreResult};
use crate::store::queue_row::QueueRow;
use crate::store::records::Queue;
use crate::store::sealing;
use crate::store::sealing::Sealing;

/// The columns of a queue, in the order [`queue_row`] reads them.
const COLUMNS: &str = "name, target, secret, created_at, max_attempts, backoff_ms, timeout_ms, \
     concurrency, rate_per_second, burst, max_queued, paused, keep_delivered_ms, signature_scheme, \
     previous_secret, previous_secret_expires_at";

/// Store a new queue; its secret is sealed when `sealing` has a master key.
pub fn insert(conn: &Connection, queue: &Queue, sealing: &Sealing) -> StoreResult<()> {
    let inserted = conn
        .prepare_cached(&format!(
            "INSERT INTO queues({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
             ON CONFLICT(name) DO NOTHING"
        ))?
        .execute(row_values(queue, sealing).as_params())?;
    if inserted == 0 {
        return Err(StoreError::QueueExists);
    }
    keep_cap(conn, &queue.name, queue.policy.max_queued)
}

/// Apply `change` to queue `name` as stored now (in this transaction, so two changes in one
/// batch build on each other) and return the queue as it becomes.
pub fn update(
    conn: &Connection,
    name: &QueueName,
    change: &QueueChange,
    sealing: &Sealing,
) -> StoreResult<Queue> {
    let mut queue = load_one(conn, name, sealing)?.ok_or(StoreError::QueueNotFound)?;
    queue.apply(change);
    conn.prepare_cached(
        "UPDATE queues SET target = ?2, secret = ?3, max_attempts = ?5, backoff_ms = ?6,
                timeout_ms = ?7, concurrency = ?8, rate_per_second = ?9, burst = ?10,
                max_queued = ?11, paused = ?12, keep_delivered_ms = ?13, signature_scheme = ?14,
                previous_secret = ?15, previous_secret_expires_at = ?16
         WHERE name = ?1 AND created_at = ?4",
    )?
    .execute(row_values(&queue, sealing).as_params())?;
    if change.max_queued.is_some() {
        keep_cap(conn, name, queue.policy.max_queued)?;
    }
    Ok(queue)
}

/// Keep `queue_sizes` in step with a queue's `maxQueued`: a capped queue has a row whose
/// `live` the triggers on `jobs` keep exact (counted once here when the cap is set); an
/// uncapped queue has none.
fn keep_cap(conn: &Connection, name: &QueueName, cap: Option<u64>) -> StoreResult<()> {
    let Some(cap) = cap else {
        conn.prepare_cached("DELETE FROM queue_sizes WHERE queue = ?1")?
            .execute([name.as_str()])?;
        return Ok(());
    };
    let cap = i64::try_from(cap).unwrap_or(i64::MAX);
    let updated = conn
        .prepare_cached("UPDATE queue_sizes SET cap = ?2 WHERE queue = ?1")?
        .execute(params![name.as_str(), cap])?;
    if updated == 0 {
        conn.prepare_cached(
            "INSERT INTO queue_sizes(queue, live, cap)
             SELECT ?1, count(*), ?2 FROM jobs WHERE queue = ?1",
        )?
        .execute(params![name.as_str(), cap])?;
    }
    sync_counting(conn)
}

/// The triggers that keep `queue_sizes.live` exact, for the queues that have a row there.
const COUNTING_TRIGGERS: &str = "
    CREATE TRIGGER IF NOT EXISTS jobs_counted_in AFTER INSERT ON jobs
    BEGIN
        UPDATE queue_sizes SET live = live + 1 WHERE queue = NEW.queue;
    END;
    CREATE TRIGGER IF NOT EXISTS jobs_counted_out AFTER DELETE ON jobs
    BEGIN
        UPDATE queue_sizes SET live = live - 1 WHERE queue = OLD.queue;
    END;";

/// Have the counting triggers exactly while some queue has a cap: each costs about as much
/// per insert or delete as a tenth of the insert itself, which a server without caps need
/// not pay. Creating them in the transaction that counts a newly capped queue keeps every
/// count exact; dropping them when the last cap goes loses nothing (no row is left to count).
pub fn sync_counting(conn: &Connection) -> StoreResult<()> {
    let any_cap: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM queue_sizes)")?
        .query_row([], |row| row.get(0))?;
    if any_cap {
        conn.execute_batch(COUNTING_TRIGGERS)?;
    } else {
        conn.execute_batch(
            "DROP TRIGGER IF EXISTS jobs_counted_in; DROP TRIGGER IF EXISTS jobs_counted_out;",
        )?;
    }
    Ok(())
}

/// A queue's row, ready to bind as `?1`…`?16` in [`COLUMNS`] order.
struct RowValues {
    values: [rusqlite::types::Value; 16],
}

impl RowValues {
    fn as_params(&self) -> rusqlite::ParamsFromIter<std::slice::Iter<'_, rusqlite::types::Value>> {
        rusqlite::params_from_iter(self.values.iter())
    }
}

fn row_values(queue: &Queue, sealing: &Sealing) -> RowValues {
    use rusqlite::types::Value;
    let row = QueueRow::of(queue, sealing);
    let integer = |v: Option<i64>| v.map_or(Value::Null, Value::Integer);
    let text = |v: Option<String>| v.map_or(Value::Null, Value::Text);
    RowValues {
        values: [
            Value::Text(row.name),
            Value::Text(row.target),
            text(row.secret),
            Value::Integer(row.created_at),
            integer(row.max_attempts.map(i64::from)),
            text(row.backoff_ms),
            integer(row.timeout_ms),
            integer(row.concurrency.map(i64::from)),
            row.rate_per_second.map_or(Value::Null, Value::Real),
            integer(row.burst.map(i64::from)),
            integer(row.max_queued),
            Value::Integer(row.paused.into()),
            integer(row.keep_delivered_ms),
            Value::Text(row.signature_scheme),
            text(row.previous_secret),
            integer(row.previous_secret_expires_at),
        ],
    }
}

/// Delete a queue; its jobs go with it (foreign key `ON DELETE CASCADE`).
pub fn delete(conn: &Connection, name: &QueueName) -> StoreResult<()> {
    let deleted = conn
        .prepare_cached("DELETE FROM queues WHERE name = ?1")?
        .execute([name.as_str()])?;
    if deleted == 0 {
        return Err(StoreError::QueueNotFound);
    }
    // Its `queue_sizes` row went with it (cascade): maybe the last cap.
    sync_counting(conn)
}

/// Every queue, with its secret opened (sealed with the current or the previous master key,
/// or stored in clear). A secret that cannot be read is an error naming its queue, never a
/// queue without its secret.
pub fn load_all(conn: &Connection, sealing: &Sealing) -> StoreResult<Vec<Queue>> {
    let mut stmt = conn.prepare(&format!("SELECT {COLUMNS} FROM queues ORDER BY name"))?;
    let rows = stmt.query_map([], queue_row)?;
    let keys = sealing.keys();
    let mut queues = Vec::new();
    for row in rows {
        queues.push(row?.open(&keys)?);
    }
    Ok(queues)
}

/// One queue, as [`load_all`] reads it.
pub fn load_one(
    conn: &Connection,
    name: &QueueName,
    sealing: &Sealing,
) -> StoreResult<Option<Queue>> {
    let stored = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM queues WHERE name = ?1"))?
        .query_row([name.as_str()], queue_row)
        .optional()?;
    stored.map(|s| s.open(&sealing.keys())).transpose()
}

/// A queue's row as read (`COLUMNS` order), its secret still sealed.
fn queue_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<QueueRow> {
    Ok(QueueRow {
        name: row.get(0)?,
        target: row.get(1)?,
        secret: row.get(2)?,
        created_at: row.get(3)?,
        max_attempts: row.get(4)?,
        backoff_ms: row.get(5)?,
        timeout_ms: row.get(6)?,
        concurrency: row.get(7)?,
        rate_per_second: row.get(8)?,
        burst: row.get(9)?,
        max_queued: row.get(10)?,
        paused: row.get(11)?,
        keep_delivered_ms: row.get(12)?,
        signature_scheme: row.get(13)?,
        previous_secret: row.get(14)?,
        previous_secret_expires_at: row.get(15)?,
    })
}

/// Rotation: re-seal with the current master key every secret stored in clear or sealed
/// with another (the previous) key. Returns the queues rewritten. Without a master key,
/// does nothing. Run it inside the start-up transaction, before [`load_all`].
pub fn reseal_all(conn: &Connection, sealing: &Sealing) -> StoreResult<Vec<QueueName>> {
    if sealing.current().is_none() {
        return Ok(Vec::new());
    }
    let stale = {
        let mut stmt = conn.prepare(
            "SELECT name, secret, previous_secret FROM queues
             WHERE secret IS NOT NULL OR previous_secret IS NOT NULL ORDER BY name",
        )?;
        let rows = stmt.query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, Option<String>>(1)?,
                row.get::<_, Option<String>>(2)?,
            ))
        })?;
        let mut stale = Vec::new();
        for row in rows {
            let (name, secret, previous) = row?;
            let needs = |stored: &Option<String>| {
                stored.as_deref().is_some_and(|s| sealing.needs_reseal(s))
            };
            if needs(&secret) || needs(&previous) {
                stale.push((name, secret, previous));
            }
        }
        stale
    };
    let keys = sealing.keys();
    let mut update =
        conn.prepare("UPDATE queues SET secret = ?2, previous_secret = ?3 WHERE name = ?1")?;
    let mut resealed = Vec::with_capacity(stale.len());
    for (name, secret, previous) in stale {
        let reseal = |stored: Option<String>| -> StoreResult<Option<String>> {
            stored
                .map(|stored| {
                    let plain = sealing::open(&keys, &stored, &name).map_err(|e| {
                        anyhow::anyhow!("cannot read the secret of queue {name}: {e}")
                    })?;
                    Ok(sealing.to_stored(&plain, &name))
                })
                .transpose()
        };
        let (secret, previous) = (reseal(secret)?, reseal(previous)?);
        update.execute(params![name, secret, previous])?;
        resealed.push(QueueName::from_stored(name));
    }
    Ok(resealed)
}

/// `QueueNotFound` unless queue `name` exists: what reads and writes within one queue check
/// first.
pub fn require(conn: &Connection, name: &QueueName) -> StoreResult<()> {
    conn.prepare_cached("SELECT 1 FROM queues WHERE name = ?1")?
        .query_row([name.as_str()], |_| Ok(()))
        .optional()?
        .ok_or(StoreError::QueueNotFound)
}

/// How many queues there are.
pub fn count(conn: &Connection) -> StoreResult<u64> {
    Ok(conn
        .prepare_cached("SELECT count(*) FROM queues")?
        .query_row([], |row| row.get::<_, i64>(0))
        .map(|n| u64::try_from(n).unwrap_or(0))?)
}

impl QueueRows for SqliteTx<'_> {
    async fn lock_queue_for_schedules(&self, queue: &QueueName) -> StoreResult<()> {
        require(self.0, queue)
    }

    async fn require_queue(&self, queue: &QueueName) -> StoreResult<()> {
        require(self.0, queue)
    }

    /// Nothing to read: the routes were compiled in this very snapshot, and the jobs'
    /// insert checks each queue again ([`super::jobs`]'s `insert_message_jobs` joins
    /// `queues`, a publish naming a missing one is run again with fresh routes).
    async fn lock_subscribers(&self, queues: &[QueueName]) -> StoreResult<Vec<QueueName>> {
        Ok(queues.to_vec())
    }
}
