//! The SQLite backend: one database file in WAL mode. A single writer thread applies every
//! write with group commit ([`writer`]), a small pool of read-only connections serves reads
//! ([`reader`]), a thread of its own checkpoints the WAL ([`checkpointer`]). The SQL lives
//! with its table ([`jobs`], [`dead_letters`], [`queues`], [`schedules`]); what moves a job
//! between tables
//! is in [`moves`]; the schema and its migrations in [`connection`]; the operator's work on
//! the file itself (migrate, backup, check) in [`files`].
//!
//! Nothing outside `store` sees any of this: the rest of the server talks to
//! [`Store`](super::Store).

mod api_keys;
pub mod ceiling;
mod checkpointer;
mod connection;
mod dead_letters;
mod delivered;
mod events;
pub mod files;
mod idempotency;
mod jobs;
mod moves;
mod queues;
mod reader;
mod schedules;
mod writer;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use rusqlite::ErrorCode;

use super::error::{StoreError, StoreResult};
use super::records::{
    AttemptRecord, BatchEnqueued, BatchKey, Caps, ClaimedJob, DeadLetterPage, DlqState, DlqStats,
    Enqueued, Filter, JobRecord, Lease, NewJob, NewSchedule, Outbox, OutboxEvent, Outcome,
    PageRequest, Position, Queue, QueueCounts, ReplayReport, ReplayWalk, Saved, Schedule,
    SchedulerRound, Selection,
};
use super::registry::Registry;
use super::sealing::Sealing;
use super::{AfterCommit, BatchStats, StoreDone};
use crate::event::Event;
use crate::model::{EventId, JobId, QueueName, ScheduleName, UnixMillis};
use crate::policy::QueueChange;
use reader::ReadPool;
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
    /// The events the store writes itself (see [`Outbox`]).
    outbox: Outbox,
    /// What clients may create at most.
    caps: Caps,
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
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the directory {}", dir.display()))?;
        }
        let lock = lock_database(path)?;
        let mut conn = connection::open_writer(path, synchronous)?;
        connection::migrate(&mut conn)?;
        queues::sync_counting(&conn).context("cannot set up the counts of capped queues")?;
        let released = jobs::release_all_leases(&conn, now)
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
        let reader = ReadPool::open(path, READ_POOL_SIZE)?;
        let rewind = checkpointer::RewindFlag::default();
        let checkpointer = checkpointer::Checkpointer::spawn(path, synchronous, rewind.clone())?;
        let (writer, done) = Writer::spawn(conn, synchronous, rewind, on_batch)
            .context("cannot start the writer")?;
        Ok((
            Self {
                writer,
                reader,
                registry,
                sealing: Arc::new(sealing),
                path: Arc::new(path.to_owned()),
                outbox: Outbox::default(),
                caps: Caps::default(),
                _checkpointer: Arc::new(checkpointer),
                _lock: Arc::new(lock),
            },
            StoreDone::new(done),
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub async fn create_queue(&self, queue: Queue) -> StoreResult<()> {
        let caps = self.caps;
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
                    queues::insert(conn, &queue, &sealing)
                },
                Some(Box::new(move |_: &()| registry.insert(stored))),
            )
            .await
    }

    /// Reads the queue back inside the write (two changes in one batch build on each other)
    /// and mirrors the result in the registry after the commit.
    pub async fn update_queue(&self, name: QueueName, change: QueueChange) -> StoreResult<Queue> {
        let registry = self.registry.clone();
        let sealing = self.sealing.clone();
        self.writer
            .write_then(
                move |conn| queues::update(conn, &name, &change, &sealing),
                Some(Box::new(move |queue: &Queue| {
                    registry.insert(queue.clone())
                })),
            )
            .await
    }

    /// Jobs, dead letters and history go with it (foreign keys `ON DELETE CASCADE`).
    pub async fn delete_queue(&self, name: QueueName) -> StoreResult<()> {
        let registry = self.registry.clone();
        let removed = name.clone();
        self.writer
            .write_then(
                move |conn| queues::delete(conn, &name),
                Some(Box::new(move |_: &()| registry.remove(&removed))),
            )
            .await
    }

    /// Without an idempotency key, one INSERT … SELECT (no savepoint needed: the hot path);
    /// with one, a lookup, the insert and the key's record, in a savepoint of their own.
    pub async fn enqueue(&self, queue: QueueName, job: NewJob) -> StoreResult<Enqueued> {
        match job.idempotency.clone() {
            None => {
                self.writer
                    .write_one_statement(
                        Durability::Required,
                        move |conn| jobs::insert(conn, &queue, &job).map(|()| Enqueued::Stored),
                        None,
                    )
                    .await
            }
            Some(key) => {
                self.writer
                    .write(move |conn| moves::enqueue_once(conn, &queue, &job, &key))
                    .await
            }
        }
    }

    /// Every job in one savepoint: one fails, none is stored.
    pub async fn enqueue_batch(
        &self,
        queue: QueueName,
        jobs: Vec<NewJob>,
        key: Option<BatchKey>,
    ) -> StoreResult<BatchEnqueued> {
        self.writer
            .write(move |conn| moves::enqueue_batch(conn, &queue, &jobs, key.as_ref()))
            .await
    }

    pub async fn purge_idempotency_keys(
        &self,
        before: UnixMillis,
        limit: usize,
    ) -> StoreResult<usize> {
        self.writer
            .write(move |conn| idempotency::purge(conn, before, limit))
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
                Durability::Required,
                move |conn| jobs::insert_leased(conn, &queue, &job, leased_until),
                Some(Box::new(move |_: &()| after_commit())),
            )
            .await
    }

    pub async fn claim(
        &self,
        queue: QueueName,
        now: UnixMillis,
        leased_until: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<ClaimedJob>> {
        // Relaxed: a claim lost to a power cut is released at the next start. One
        // UPDATE … RETURNING: no savepoint needed (were a returned row unreadable, its jobs
        // would stay leased until the lease expires: delivered late, never lost).
        self.writer
            .write_one_statement(
                Durability::Relaxed,
                move |conn| jobs::claim(conn, &queue, now, leased_until, limit),
                None,
            )
            .await
    }

    pub async fn record_outcome(
        &self,
        id: JobId,
        lease: Lease,
        outcome: Outcome,
    ) -> StoreResult<bool> {
        // Relaxed: an outcome lost to a power cut means the job is delivered again, which
        // at-least-once allows.
        let outbox = self.outbox;
        self.writer
            .write_relaxed(move |conn| moves::record_outcome(conn, id, lease, &outcome, outbox))
            .await
    }

    pub async fn cancel(&self, queue: QueueName, id: JobId, now: UnixMillis) -> StoreResult<()> {
        self.writer
            .write(move |conn| moves::cancel(conn, &queue, id, now))
            .await
    }

    pub async fn recover_stale_leases(
        &self,
        now: UnixMillis,
        max_attempts: u32,
    ) -> StoreResult<usize> {
        let outbox = self.outbox;
        self.writer
            .write(move |conn| moves::recover_stale_leases(conn, now, max_attempts, outbox))
            .await
    }

    /// Periodic upkeep: let SQLite refresh its query planner's statistics, if stale.
    pub async fn maintain(&self) -> StoreResult<()> {
        self.writer
            .write(|conn| Ok(conn.execute_batch("PRAGMA optimize")?))
            .await
    }

    pub async fn list_ready(
        &self,
        queue: QueueName,
        after: Option<JobId>,
        limit: usize,
    ) -> StoreResult<Vec<JobRecord>> {
        self.reader
            .read(move |conn| {
                queues::require(conn, &queue)?;
                jobs::list(conn, &queue, after, limit)
            })
            .await
    }

    pub async fn list_dead_letters(
        &self,
        filter: Filter,
        page: PageRequest,
    ) -> StoreResult<DeadLetterPage> {
        self.reader
            .read(move |conn| {
                if let Some(queue) = &filter.queue {
                    queues::require(conn, queue)?;
                }
                dead_letters::list(conn, &filter, page)
            })
            .await
    }

    pub async fn get_job(
        &self,
        queue: QueueName,
        id: JobId,
    ) -> StoreResult<(JobRecord, Vec<AttemptRecord>)> {
        self.reader
            .read(move |conn| {
                let record = match jobs::get(conn, &queue, id)? {
                    Some(record) => record,
                    None => match delivered::get(conn, &queue, id)? {
                        Some(record) => record,
                        // A `replayed` record is only audit: its job is live again (found
                        // above) or delivered since.
                        None => dead_letters::get(conn, Some(&queue), id)?
                            .filter(|letter| letter.status != DlqState::Replayed)
                            .ok_or(StoreError::JobNotFound)?
                            .into_job_record(),
                    },
                };
                Ok((record, jobs::history(conn, id)?))
            })
            .await
    }

    pub async fn dlq_stats(
        &self,
        now: UnixMillis,
        repeat_after_replays: u32,
    ) -> StoreResult<DlqStats> {
        self.reader
            .read(move |conn| dead_letters::stats(conn, now, repeat_after_replays))
            .await
    }

    /// In chunks of 500 records, each claimed in one write and put back in the next, so the
    /// writer is never held long.
    pub async fn replay(
        &self,
        selection: Selection,
        now: UnixMillis,
        run_at: UnixMillis,
    ) -> StoreResult<(usize, ReplayReport)> {
        const CHUNK: usize = 500;
        let mut walk = ReplayWalk::new(selection, CHUNK);
        while let Some(chunk) = walk.next_chunk() {
            let claimed = self
                .writer
                .write(move |conn| dead_letters::claim_for_replay(conn, &chunk, now, CHUNK))
                .await?;
            if !walk.claimed(claimed.len()) {
                break;
            }
            let report = self
                .writer
                .write(move |conn| moves::replay_claimed(conn, &claimed, now, run_at))
                .await?;
            walk.put_back(report);
        }
        Ok(walk.finish())
    }

    pub async fn acknowledge(&self, selection: Selection, now: UnixMillis) -> StoreResult<usize> {
        self.writer
            .write(move |conn| dead_letters::acknowledge(conn, &selection, now))
            .await
    }

    pub async fn delete_dead_letters(&self, selection: Selection) -> StoreResult<usize> {
        self.writer
            .write(move |conn| moves::delete(conn, &selection))
            .await
    }

    pub async fn expire_jobs(
        &self,
        cutoff: UnixMillis,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<QueueName>> {
        let outbox = self.outbox;
        self.writer
            .write(move |conn| moves::expire(conn, cutoff, now, limit, outbox))
            .await
    }

    pub async fn purge_dead_letters(&self, before: UnixMillis, limit: usize) -> StoreResult<usize> {
        self.writer
            .write(move |conn| moves::purge_closed(conn, before, limit))
            .await
    }

    pub fn set_outbox(&mut self, outbox: Outbox) {
        self.outbox = outbox;
    }

    /// Refuse creations past `caps`.
    pub fn set_caps(&mut self, caps: Caps) {
        self.caps = caps;
    }

    pub async fn record_event(&self, event: Event, now: UnixMillis) -> StoreResult<()> {
        self.writer
            .write(move |conn| events::insert(conn, EventId::new(), &event, now))
            .await
    }

    pub async fn due_events(&self, now: UnixMillis, limit: usize) -> StoreResult<Vec<OutboxEvent>> {
        self.reader
            .read(move |conn| events::due(conn, now, limit))
            .await
    }

    pub async fn next_event_due(&self) -> StoreResult<Option<UnixMillis>> {
        self.reader.read(events::next_due).await
    }

    pub async fn events_pending(&self) -> StoreResult<u64> {
        self.reader.read(events::pending).await
    }

    /// Relaxed: an outcome lost to a power cut means the event is sent again.
    pub async fn remove_event(&self, id: EventId) -> StoreResult<()> {
        self.writer
            .write_relaxed(move |conn| events::remove(conn, id))
            .await
    }

    pub async fn reschedule_event(
        &self,
        id: EventId,
        next_at: UnixMillis,
        error: String,
    ) -> StoreResult<()> {
        self.writer
            .write_relaxed(move |conn| events::reschedule(conn, id, next_at, &error))
            .await
    }

    pub async fn list_delivered(
        &self,
        queue: QueueName,
        before: Option<Position>,
        limit: usize,
    ) -> StoreResult<Vec<JobRecord>> {
        self.reader
            .read(move |conn| {
                queues::require(conn, &queue)?;
                delivered::list(conn, &queue, before, limit)
            })
            .await
    }

    /// One write for every queue: a queue with nothing to delete costs one index seek, and
    /// a round that deletes nothing commits nothing.
    pub async fn purge_delivered(
        &self,
        cutoffs: Vec<(QueueName, UnixMillis)>,
        limit: usize,
    ) -> StoreResult<usize> {
        self.writer
            .write(move |conn| {
                let mut deleted = 0;
                for (queue, before) in &cutoffs {
                    if deleted >= limit {
                        break;
                    }
                    deleted += moves::purge_delivered(conn, queue, *before, limit - deleted)?;
                }
                Ok(deleted)
            })
            .await
    }

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

    pub async fn queue_counts(
        &self,
        queue: QueueName,
        now: UnixMillis,
    ) -> StoreResult<QueueCounts> {
        self.reader
            .read(move |conn| {
                queues::require(conn, &queue)?;
                let mut counts = jobs::counts(conn, Some(&queue), now)?
                    .remove(&queue)
                    .unwrap_or_default();
                counts.dead = dead_letters::pending_count(conn, &queue)?;
                Ok(counts)
            })
            .await
    }

    pub async fn next_due(&self, queue: QueueName) -> StoreResult<Option<UnixMillis>> {
        self.reader
            .read(move |conn| jobs::next_due(conn, &queue))
            .await
    }

    pub async fn all_queue_counts(
        &self,
        now: UnixMillis,
    ) -> StoreResult<Vec<(QueueName, QueueCounts)>> {
        self.reader
            .read(move |conn| {
                let mut live = jobs::counts(conn, None, now)?;
                let mut all = Vec::new();
                for (queue, dead) in dead_letters::pending_counts(conn)? {
                    let counts = live.remove(&queue).unwrap_or_default();
                    all.push((queue, QueueCounts { dead, ..counts }));
                }
                Ok(all)
            })
            .await
    }

    pub async fn put_schedule(
        &self,
        queue: QueueName,
        schedule: NewSchedule,
        now: UnixMillis,
    ) -> StoreResult<Saved> {
        let caps = self.caps;
        self.writer
            .write(move |conn| {
                queues::require(conn, &queue)?;
                schedules::upsert(conn, &queue, &schedule, now, caps)
            })
            .await
    }

    pub async fn list_schedules(&self, queue: QueueName) -> StoreResult<Vec<Schedule>> {
        self.reader
            .read(move |conn| {
                queues::require(conn, &queue)?;
                schedules::list(conn, &queue)
            })
            .await
    }

    pub async fn get_schedule(
        &self,
        queue: QueueName,
        name: ScheduleName,
    ) -> StoreResult<Schedule> {
        self.reader
            .read(move |conn| {
                schedules::get(conn, &queue, &name)?.ok_or(StoreError::ScheduleNotFound)
            })
            .await
    }

    pub async fn delete_schedule(&self, queue: QueueName, name: ScheduleName) -> StoreResult<()> {
        self.writer
            .write(move |conn| schedules::delete(conn, &queue, &name))
            .await
    }

    pub async fn pause_schedule(
        &self,
        queue: QueueName,
        name: ScheduleName,
        paused: bool,
        now: UnixMillis,
    ) -> StoreResult<Schedule> {
        self.writer
            .write(move |conn| schedules::set_paused(conn, &queue, &name, paused, now))
            .await
    }

    /// Durable like an enqueue: a tick whose commit were lost after its job was delivered
    /// would fire again.
    pub async fn fire_due_schedules(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<SchedulerRound> {
        self.writer
            .write(move |conn| moves::fire_due_schedules(conn, now, limit))
            .await
    }

    pub async fn ping(&self) -> StoreResult<()> {
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
