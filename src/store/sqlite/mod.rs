//! The SQLite backend: one database file in WAL mode. A single writer thread applies every
//! write with group commit ([`writer`]), a small pool of read-only connections serves reads
//! ([`reader`]), a thread of its own checkpoints the WAL ([`checkpointer`]). The SQL lives
//! with its table ([`jobs`], [`dead_letters`], [`queues`], [`schedules`], …) and decides
//! nothing; [`SqliteTx`] offers it to the store's shared decisions as the contract's
//! primitives ([`crate::store::dialect::Tx`]). The schema and its migrations are in
//! [`connection`]; the operator's work on the file itself (migrate, backup, check) in
//! [`files`].
//!
//! Nothing outside `store` sees any of this: the rest of the server talks to
//! [`Store`](super::Store).

mod activity_minutes;
mod api_keys;
mod audit;
#[cfg(any(test, feature = "testing"))]
pub mod ceiling;
mod checkpointer;
mod connection;
mod dead_letters;
mod delivered;
mod events;
pub mod files;
mod idempotency;
mod jobs;
mod lookup;
mod queues;
mod reader;
mod resync;
mod schedules;
mod server_keys;
mod topics;
mod tx;
mod writer;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use rusqlite::ErrorCode;

use super::error::{StoreError, StoreResult};
use super::records::{Caps, ClaimedJob, Lease, LeaseHolder, NewJob, Queue};
use super::registry::Registry;
use super::sealing::Sealing;
use super::{AfterCommit, BatchStats, StoreDone};
use crate::model::{JobId, QueueName, UnixMillis};
use crate::policy::QueueChange;
use crate::store::audit::AuditEntry;
use reader::ReadPool;
pub use tx::SqliteTx;
use writer::{Durability, Writer};

pub use connection::SCHEMA_VERSION;

const READ_POOL_SIZE: usize = 4;

/// SQLite's durability level for commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synchronous {
    /// Every durable commit survives a power loss (fsync at commit). The default.
    Full,
    /// Commits survive a crash of the process, not of the machine. Faster.
    Normal,
}

impl Synchronous {
    pub fn pragma_value(self) -> &'static str {
        match self {
            Self::Full => "FULL",
            Self::Normal => "NORMAL",
        }
    }
}

impl std::str::FromStr for Synchronous {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        match raw.to_ascii_lowercase().as_str() {
            "full" => Ok(Self::Full),
            "normal" => Ok(Self::Normal),
            _ => Err(format!("`{raw}` is neither full nor normal")),
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        match err.sqlite_error_code() {
            Some(ErrorCode::DiskFull) => Self::StorageFull,
            _ => Self::Database(Arc::new(err)),
        }
    }
}

#[derive(Clone)]
pub struct SqliteStore {
    writer: Writer,
    reader: ReadPool,
    registry: Registry,
    /// The master keys queue secrets are sealed with (if any).
    sealing: Arc<Sealing>,
    path: Arc<PathBuf>,
    /// Whether the disk has failed for good (`ping` says so).
    health: resync::DiskHealth,
    /// Runs WAL checkpoints until the last clone of the store is dropped.
    _checkpointer: Arc<checkpointer::Checkpointer>,
    /// Held for the store's lifetime: one process per database file.
    _lock: Arc<File>,
}

/// Each operation's contract is documented once, on the port ([`Store`](super::Store)); the
/// comments here say only how SQLite does it.
impl SqliteStore {
    /// Open (or create) the database at `path`, migrate it, release leases left by a previous
    /// process, re-seal queue secrets with the current master key of `sealing` (rotation),
    /// and start the writer thread.
    pub fn open(
        path: &Path,
        synchronous: Synchronous,
        sealing: Sealing,
        now: UnixMillis,
        on_batch: impl Fn(BatchStats) + Send + 'static,
    ) -> anyhow::Result<(Self, StoreDone)> {
        if !sqlite_heap::install() {
            tracing::debug!(
                "SQLite was initialized before the store opened: it keeps the C library's malloc"
            );
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the directory {}", dir.display()))?;
        }
        let lock = lock_database(path)?;
        let mut conn = connection::open_writer(path, synchronous)?;
        connection::migrate(&mut conn)?;
        queues::sync_counting(&conn).context("cannot set up the counts of capped queues")?;
        let released = jobs::release_push_leases(&conn, now)
            .context("cannot release the leases of the previous run")?;
        if released > 0 {
            tracing::warn!(
                jobs = released,
                "found jobs in flight from a previous run; they will be delivered again"
            );
        }
        let reset = dead_letters::reset_interrupted_replays(&conn, now)
            .context("cannot reset interrupted replays")?;
        if reset > 0 {
            tracing::warn!(
                records = reset,
                "a replay was interrupted; its records are pending again"
            );
        }
        let registry = Registry::new(load_queues(&mut conn, &sealing)?);
        conn.execute_batch("PRAGMA optimize=0x10002")?;
        // Before serving: what this start found and wrote is on disk, whatever became of the
        // previous process's syncs, and a new file's directory entry with it (see resync).
        resync::resync(&conn).context("cannot make the database durable at start-up")?;
        let reader = ReadPool::open(path, READ_POOL_SIZE)?;
        let rewind = checkpointer::RewindFlag::default();
        let health = resync::DiskHealth::default();
        let checkpointer =
            checkpointer::Checkpointer::spawn(path, synchronous, rewind.clone(), health.clone())?;
        let (writer, done) = Writer::spawn(conn, synchronous, rewind, health.clone(), on_batch)
            .context("cannot start the writer")?;
        Ok((
            Self {
                writer,
                reader,
                registry,
                sealing: Arc::new(sealing),
                path: Arc::new(path.to_owned()),
                health,
                _checkpointer: Arc::new(checkpointer),
                _lock: Arc::new(lock),
            },
            StoreDone::new(done),
        ))
    }

    /// Run `op` in the writer's next batch, committed with `durability`; `one_statement`:
    /// it runs exactly one SQL statement, which needs no savepoint of its own (see
    /// [`Writer::write_one_statement`]).
    pub async fn write<T, F>(
        &self,
        durability: Durability,
        one_statement: bool,
        op: F,
    ) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> StoreResult<T> + Send + 'static,
    {
        if one_statement {
            self.writer.write_one_statement(durability, op, None).await
        } else if durability == Durability::Relaxed {
            self.writer.write_relaxed(op).await
        } else {
            self.writer.write(op).await
        }
    }

    /// Run `query` on a reader connection, in one snapshot.
    pub async fn read<T, F>(&self, query: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> StoreResult<T> + Send + 'static,
    {
        self.reader.read_in_snapshot(query).await
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Create a queue unless the server holds `caps.queues` already.
    pub async fn create_queue(
        &self,
        queue: Queue,
        caps: Caps,
        audit: Option<AuditEntry>,
    ) -> StoreResult<()> {
        let registry = self.registry.clone();
        let sealing = self.sealing.clone();
        let stored = queue.clone();
        self.writer
            .write_then(
                move |conn| {
                    // A name taken already is `QueueExists` (from the insert), cap or not.
                    if queues::require(conn, &queue.name).is_err() {
                        caps.admit_queue(queues::count(conn)?)?;
                    }
                    queues::insert(conn, &queue, &sealing)?;
                    audit::insert_pending(conn, audit.as_ref())
                },
                Some(Box::new(move |_: &()| registry.insert(stored))),
            )
            .await
    }

    /// Reads the queue back inside the write (two changes in one batch build on each other)
    /// and mirrors the result in the registry after the commit.
    pub async fn update_queue(
        &self,
        name: QueueName,
        change: QueueChange,
        audit: Option<AuditEntry>,
    ) -> StoreResult<Queue> {
        let registry = self.registry.clone();
        let sealing = self.sealing.clone();
        self.writer
            .write_then(
                move |conn| {
                    let queue = queues::update(conn, &name, &change, &sealing)?;
                    audit::insert_pending(conn, audit.as_ref())?;
                    Ok(queue)
                },
                Some(Box::new(move |queue: &Queue| {
                    registry.insert(queue.clone())
                })),
            )
            .await
    }

    /// Jobs, dead letters and history go with it (foreign keys `ON DELETE CASCADE`).
    pub async fn delete_queue(
        &self,
        name: QueueName,
        audit: Option<AuditEntry>,
    ) -> StoreResult<()> {
        let registry = self.registry.clone();
        let removed = name.clone();
        self.writer
            .write_then(
                move |conn| {
                    queues::delete(conn, &name)?;
                    audit::insert_pending(conn, audit.as_ref())
                },
                Some(Box::new(move |_: &()| registry.remove(&removed))),
            )
            .await
    }

    /// `after_commit` runs on the writer thread, before the next batch.
    pub async fn enqueue_leased(
        &self,
        queue: QueueName,
        job: NewJob,
        leased_until: UnixMillis,
        after_commit: AfterCommit,
    ) -> StoreResult<()> {
        self.writer
            .write_one_statement(
                Durability::Durable,
                move |conn| jobs::insert_leased(conn, &queue, &job, leased_until),
                Some(Box::new(move |_: &()| after_commit())),
            )
            .await
    }

    /// Periodic upkeep: let SQLite refresh its query planner's statistics, if stale.
    pub async fn maintain(&self) -> StoreResult<()> {
        self.writer
            .write(|conn| Ok(conn.execute_batch("PRAGMA optimize")?))
            .await
    }

    #[cfg(any(test, feature = "testing"))]
    /// The writer runs an operation that waits until the hold is dropped.
    pub async fn hold_writes(&self) -> StoreResult<crate::store::testing::WriteHold> {
        let (entered, has_entered) = tokio::sync::oneshot::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let writer = self.writer.clone();
        tokio::spawn(async move {
            writer
                .write(move |_| {
                    let _ = entered.send(());
                    let _ = released.recv();
                    Ok(())
                })
                .await
        });
        has_entered.await.map_err(|_| StoreError::Closed)?;
        Ok(crate::store::testing::WriteHold::new(release))
    }

    /// Complete a delivery of a job not kept in one statement, if that is all it takes:
    /// `true` when the job, in flight under `lease`, had no ordering key and no failed
    /// attempt (so no history, no next job to let go) and is gone. `false` leaves everything
    /// as it was, for the whole decision (keyed jobs, failed-before jobs, a lost lease).
    /// One statement needs no savepoint: two statements and the page copies of a
    /// sub-journal fewer per delivered job. With `queue`, only a job of that queue (a pull
    /// worker's ack names its queue).
    pub async fn delete_delivered(
        &self,
        queue: Option<QueueName>,
        id: JobId,
        lease: Lease,
    ) -> StoreResult<bool> {
        self.writer
            .write_one_statement(
                Durability::Relaxed,
                move |conn| jobs::delete_delivered(conn, queue.as_ref(), id, lease),
                None,
            )
            .await
    }

    /// Lease up to `want` due jobs of `queue`, no more than `concurrency` (if any) in flight
    /// at once, in one write: the single writer makes the count and the claim exact.
    pub async fn claim_within_concurrency(
        &self,
        queue: QueueName,
        now: UnixMillis,
        leased_until: UnixMillis,
        want: usize,
        concurrency: Option<usize>,
        holder: LeaseHolder,
    ) -> StoreResult<Vec<ClaimedJob>> {
        self.write(Durability::Relaxed, false, move |conn| {
            let room = match concurrency {
                Some(limit) => limit.saturating_sub(jobs::in_flight_of(conn, &queue)?),
                None => want,
            };
            if room == 0 {
                return Ok(Vec::new());
            }
            jobs::claim(
                conn,
                &queue,
                now,
                leased_until,
                want.min(room),
                Some(&holder),
            )
        })
        .await
    }

    pub async fn next_due(&self, queue: QueueName) -> StoreResult<Option<UnixMillis>> {
        self.reader
            .read(move |conn| jobs::next_due(conn, &queue))
            .await
    }

    pub async fn ping(&self) -> StoreResult<()> {
        self.health.check()?;
        self.reader
            .read(|conn| Ok(conn.query_row("SELECT 1", [], |_| Ok(()))?))
            .await
    }
}

/// Load the queues, first re-sealing (in the same transaction) every secret not sealed with
/// the current master key. Fails, naming the queue, on a secret no configured key opens.
fn load_queues(conn: &mut rusqlite::Connection, sealing: &Sealing) -> anyhow::Result<Vec<Queue>> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let resealed = queues::reseal_all(&tx, sealing).context("cannot re-seal queue secrets")?;
    let loaded = queues::load_all(&tx, sealing).context("cannot load queues")?;
    tx.commit()?;
    if let (Some(key), false) = (sealing.current(), resealed.is_empty()) {
        tracing::info!(
            queues = resealed.len(),
            key_id = key.id(),
            "queue secrets sealed with the current master key"
        );
    }
    Ok(loaded)
}

/// One hookq process per database: a second one would hand out the same jobs and release
/// the first one's leases at start-up.
pub fn lock_database(path: &Path) -> anyhow::Result<File> {
    let mut lock_path = path.as_os_str().to_owned();
    lock_path.push(".lock");
    let lock_path = PathBuf::from(lock_path);
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("cannot open the lock file {}", lock_path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => bail!(
            "{} is in use by another hookq process (lock file {} is held)",
            path.display(),
            lock_path.display()
        ),
        Err(fs::TryLockError::Error(err)) => {
            Err(err).with_context(|| format!("cannot lock {}", lock_path.display()))
        }
    }
}
