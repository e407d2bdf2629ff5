//! Durable storage behind one port: [`Store`]. The rest of the server enqueues, claims,
//! records outcomes, lists and administers dead letters through it, with the plain values of
//! [`records`], and cannot tell which database holds them.
//!
//! Three layers below the port: the business decisions, written once ([`decisions`]); the
//! contract they are written against ([`dialect::Tx`], the primitives one transaction
//! offers); and each backend's primitives in its own SQL ([`sqlite`], [`postgres`]). Each
//! method of [`Store`] runs one operation in one transaction of its backend
//! (`in_write!`, `in_snapshot!`).
//!
//! - [`records`]: the domain values every backend reads and writes.
//! - [`status`]: the job statuses `jobs.status` stores, one enum for both dialects.
//! - [`error`]: the failures a store operation can end in.
//! - [`registry`]: the queues mirrored in memory, kept in commit order by the backend.
//! - [`sealing`]: queue secrets encrypted at rest under the master key.
//! - [`queue_row`]: a queue as any backend's row holds it.
//! - [`cluster`]: what a database several nodes share offers (duties, shared breakers and
//!   figures, other nodes' wake-ups and queue changes), a no-op alone.
//! - [`sqlite`]: the embedded backend (one file, WAL, a single writer with group commit).
//! - [`postgres`]: the backend for several nodes on one database.
//! - [`search`]: a search across every queue: its query, its hits, the statement it reads
//!   each table with.
//! - [`testing`]: a look into a database for tests (feature `testing`).
//! - [`topics`]: each topic's subscriptions compiled into one matcher, and the publish
//!   counts not yet stored; `topic_ops` holds the port's topic operations.

pub mod api_keys;
pub mod cluster;
mod decisions;
mod dialect;
pub mod error;
/// Public only with the `testing` feature: the tests drive several nodes' stores and look
/// into the database, the bench connects to it; the server reaches it through the port.
#[cfg(feature = "testing")]
pub mod postgres;
#[cfg(not(feature = "testing"))]
pub(crate) mod postgres;
pub mod queue_row;
pub mod records;
pub mod registry;
pub mod sealing;
pub mod search;
pub mod server_keys;
pub mod sqlite;
mod status;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod topics;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use cluster::Cluster;
/// How long the activity history keeps an hour (its roll-up), and an hour, in ms.
pub use decisions::activity::{HOUR_MS, HOURS_KEPT_MS as HISTORY_HOURS_KEPT_MS};
/// How long the activity history keeps a minute, and a minute, in ms.
pub use decisions::activity::{KEPT_MS as HISTORY_KEPT_MS, MINUTE_MS};
pub use error::{StoreError, StoreResult};
pub use records::{
    ActivityBucket, ActivityFigures, ActivityWidth, AttemptRecord, BatchEnqueued, BatchKey,
    BulkReport, Caps, Claimed, ClaimedJob, CountOf, DeadLetter, DeadLetterPage, Delivery, DlqState,
    DlqStats, ERROR_LINE_CHARS, Enqueued, ErrorGroup, ErrorGroupCount, Failure, FailureReason,
    Filter, FiredTick, IdempotencyKey, JobAction, JobRecord, JobState, JobsPage, Last24h, Lease,
    LeaseAnswer, LeaseExpiry, LiveFilter, LiveSelection, NewJob, NewSchedule, Outbox, OutboxEvent,
    Outcome, PageRequest, Position, PreviousSecret, Queue, QueueCounts, ReplayReport, ReplayWalk,
    Saved, Schedule, ScheduleTick, SchedulerRound, Selection, SharedLimits, TextMatch,
};
pub use records::{FoundJob, HeldLease, JobLife, JobPlace, LeaseHolder, ReplayFates, WorkerAnswer};
pub use records::{MessageFate, MessageJob, MessageJobState, StoredMessage};
pub use records::{MessageRef, Published, Routed, Subscribed, Subscription, Topic, TopicRow};
pub use registry::Registry;
pub use sealing::{MasterKey, Sealing};

use crate::event::Event;
use crate::model::{EventId, JobId, QueueName, ScheduleName, UnixMillis};
use crate::policy::QueueChange;
use dialect::{
    ActivityRows as _, DeadLetterRows as _, DeliveryRows as _, Durability, JobRows as _,
    KeyRows as _, OutboxRows as _, QueueRows as _, ScheduleRows as _,
};
use postgres::PgStore;
use sqlite::{SqliteStore, Synchronous};

/// Where the data lives and how it is committed.
#[derive(Debug, Clone)]
pub enum StoreOptions {
    /// One SQLite file (created if missing).
    Sqlite {
        path: PathBuf,
        synchronous: Synchronous,
    },
    /// A PostgreSQL database that several nodes may share (`postgres://…`).
    Postgres { url: String, pool_size: usize },
}

/// Runs right after the operation it was given with has committed, before any later write
/// is acknowledged; dropped without running if the operation fails.
pub type AfterCommit = Box<dyn FnOnce() + Send>;

/// Figures of one committed group of writes, for metrics.
#[derive(Debug, Clone, Copy)]
pub struct BatchStats {
    pub ops: usize,
    pub commit_micros: u64,
}

impl BatchStats {
    /// A group of `ops` writes whose commit began at `started`.
    pub(crate) fn since(ops: usize, started: std::time::Instant) -> Self {
        Self {
            ops,
            commit_micros: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        }
    }
}

/// Signalled once the store has committed its last write and closed the database.
pub struct StoreDone(std_mpsc::Receiver<()>);

impl StoreDone {
    pub(crate) fn new(done: std_mpsc::Receiver<()>) -> Self {
        Self(done)
    }

    /// Block until the store is closed (call after dropping every `Store` clone).
    pub fn wait(self) {
        let _ = self.0.recv();
    }
}

/// The storage port: a cheap `Clone` of handles to one backend.
#[derive(Clone)]
pub struct Store {
    backend: Backend,
    /// Enqueues waiting for their commit, bounded: past the bound an enqueue is refused at
    /// once ([`StoreError::Overloaded`]) instead of queuing without limit. Only enqueues
    /// count: claims, outcomes and admin writes keep flowing, so a flood of producers
    /// cannot stop deliveries.
    pending_enqueues: Arc<Semaphore>,
    max_pending_enqueues: usize,
    /// The events the store writes itself, in the transaction of their cause.
    outbox: Outbox,
    /// What clients may create at most.
    caps: Caps,
    /// Each topic's subscriptions, compiled.
    routes: Arc<topics::RouteCache>,
    /// Messages published on this node, not yet in the stored counts.
    published: Arc<topics::PublishCounts>,
    /// The audit entry the next audited action writes in its transaction ([`Store::audited`]);
    /// `None` on the server's own store.
    audit: Option<Arc<audit::AuditEntry>>,
}

/// The default bound on enqueues waiting for their commit. The SQLite writer commits up to
/// 1 024 operations a batch at about 25 000 enqueues/s on 2 cores (docs/benchmarks.md), so
/// 512 waiting is about 20 ms of its work: enough to keep every batch full under load, while
/// a producer past it hears `429` at once rather than waiting behind everybody else. It is
/// half the default connection cap, so reads and health checks keep connections to use.
pub const DEFAULT_MAX_PENDING_ENQUEUES: usize = 512;

/// Expired leases recovered per transaction.
const RECOVERY_BATCH: usize = 1000;

/// Dead letters a replay claims and puts back per transaction.
const REPLAY_CHUNK: usize = 500;

/// Live jobs a bulk action selected by a filter acts on per transaction.
const BULK_CHUNK: usize = 500;

#[derive(Clone)]
enum Backend {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

/// Run `$body` in one write transaction of the backend, committed with `$durability`, with
/// `$tx` bound to its [`Tx`](dialect::Tx): the body is written once and compiled for each
/// backend. `one_statement = true`: the body runs exactly one SQL statement (SQLite then
/// spares it a savepoint).
macro_rules! in_write {
    ($store:expr, $durability:expr, |$tx:ident| $body:expr) => {
        in_write!($store, $durability, one_statement = false, |$tx| $body)
    };
    ($store:expr, $durability:expr, one_statement = $one:expr, |$tx:ident| $body:expr) => {
        match &$store.backend {
            Backend::Sqlite(db) => {
                db.write($durability, $one, move |conn| {
                    let $tx = &sqlite::SqliteTx(conn);
                    dialect::run_now(async move { $body })
                })
                .await
            }
            Backend::Postgres(db) => {
                db.write($durability, move |pg| {
                    Box::pin(async move {
                        let $tx = &pg;
                        $body
                    })
                })
                .await
            }
        }
    };
}

/// Run `$body` in one read-only snapshot of the backend, with `$tx` bound to its
/// [`Tx`](dialect::Tx).
macro_rules! in_snapshot {
    ($store:expr, |$tx:ident| $body:expr) => {
        match &$store.backend {
            Backend::Sqlite(db) => {
                db.read(move |conn| {
                    let $tx = &sqlite::SqliteTx(conn);
                    dialect::run_now(async move { $body })
                })
                .await
            }
            Backend::Postgres(db) => {
                db.read(move |pg| {
                    Box::pin(async move {
                        let $tx = &pg;
                        $body
                    })
                })
                .await
            }
        }
    };
}

/// Run `$call` on the backend, whichever it is.
macro_rules! on_backend {
    ($store:expr, $db:ident => $call:expr) => {
        match &$store.backend {
            Backend::Sqlite($db) => $call,
            Backend::Postgres($db) => $call,
        }
    };
}

// After the macros: its operations use them.
pub mod audit;
mod topic_ops;

impl Store {
    /// Open (or create) the store, migrate its schema, re-seal queue secrets with the current
    /// master key of `sealing` (rotation) and load the queues. On SQLite (one process owns
    /// the file) the leases of a previous run are released; on PostgreSQL (shared by nodes)
    /// they are left to expire. `on_batch` sees every committed group of writes (SQLite's
    /// writes; PostgreSQL's grouped enqueues and completions).
    /// Blocks on SQLite's file work: call it from a blocking context, or use [`Self::connect`].
    pub fn open(
        options: StoreOptions,
        sealing: Sealing,
        now: UnixMillis,
        on_batch: impl Fn(BatchStats) + Send + 'static,
    ) -> anyhow::Result<(Self, StoreDone)> {
        match options {
            StoreOptions::Sqlite { path, synchronous } => {
                let (db, done) = SqliteStore::open(&path, synchronous, sealing, now, on_batch)?;
                Ok((Self::over(Backend::Sqlite(db)), done))
            }
            StoreOptions::Postgres { .. } => {
                anyhow::bail!("a PostgreSQL store is opened with Store::connect (async)")
            }
        }
    }

    /// [`Self::open`] for any backend, from async code.
    pub async fn connect(
        options: StoreOptions,
        sealing: Sealing,
        now: UnixMillis,
        on_batch: impl Fn(BatchStats) + Send + Sync + 'static,
    ) -> anyhow::Result<(Self, StoreDone)> {
        match options {
            StoreOptions::Postgres { url, pool_size } => {
                let db = PgStore::open(&url, pool_size, sealing, on_batch).await?;
                // Nothing to wait for at shutdown: every commit was awaited, and the pool
                // closes when the last handle goes.
                let (_, done) = std_mpsc::channel();
                Ok((Self::over(Backend::Postgres(db)), StoreDone::new(done)))
            }
            sqlite => {
                tokio::task::spawn_blocking(move || Self::open(sqlite, sealing, now, on_batch))
                    .await
                    .map_err(|e| anyhow::anyhow!("store start-up task failed: {e}"))?
            }
        }
    }

    /// The port over an open PostgreSQL store (tests that look into the database keep the
    /// `PgStore` too).
    #[cfg(any(test, feature = "testing"))]
    pub fn over_postgres(db: PgStore) -> Self {
        Self::over(Backend::Postgres(db))
    }

    fn over(backend: Backend) -> Self {
        Self {
            backend,
            pending_enqueues: Arc::new(Semaphore::new(DEFAULT_MAX_PENDING_ENQUEUES)),
            max_pending_enqueues: DEFAULT_MAX_PENDING_ENQUEUES,
            outbox: Outbox::default(),
            caps: Caps::default(),
            routes: Arc::default(),
            published: Arc::default(),
            audit: None,
        }
    }

    /// Bound the enqueues waiting for their commit to `max` (at least 1).
    /// Refuse creations past `caps` (queues on the server, schedules on a queue).
    pub fn with_caps(mut self, caps: Caps) -> Self {
        self.caps = caps;
        self
    }

    pub fn with_max_pending_enqueues(mut self, max: usize) -> Self {
        self.max_pending_enqueues = max.max(1);
        self.pending_enqueues = Arc::new(Semaphore::new(self.max_pending_enqueues));
        self
    }

    /// Store a `job.dead_lettered` event (in the outbox, for [`crate::events`]) with every
    /// move to the dead letters, and a `topic.subscriber_skipped` one with every full
    /// subscriber a publish skips, in the same transaction.
    pub fn with_dead_letter_events(mut self, on: bool) -> Self {
        self.outbox = Outbox {
            dead_letters: on,
            skipped_subscribers: on,
        };
        self
    }

    /// Enqueues waiting for their commit right now.
    pub fn enqueues_waiting(&self) -> usize {
        self.max_pending_enqueues - self.pending_enqueues.available_permits()
    }

    /// A place among the enqueues waiting for their commit, or `Overloaded`.
    fn admit_enqueue(&self) -> StoreResult<OwnedSemaphorePermit> {
        self.pending_enqueues
            .clone()
            .try_acquire_owned()
            .map_err(|_| StoreError::Overloaded)
    }

    #[cfg(any(test, feature = "testing"))]
    /// Tests only: stop every write until the returned hold is dropped, to fill the
    /// write path on purpose.
    pub(in crate::store) async fn hold_writes(&self) -> StoreResult<testing::WriteHold> {
        match &self.backend {
            Backend::Sqlite(db) => db.hold_writes().await,
            Backend::Postgres(db) => db.hold_writes().await,
        }
    }

    /// Where the data lives, for logs (a PostgreSQL URL without its password).
    pub fn location(&self) -> String {
        match &self.backend {
            Backend::Sqlite(db) => db.path().display().to_string(),
            Backend::Postgres(db) => db.location(),
        }
    }

    /// The queues, mirrored in memory.
    pub fn registry(&self) -> &Registry {
        on_backend!(self, db => db.registry())
    }

    pub async fn create_queue(&self, queue: Queue) -> StoreResult<()> {
        let (caps, audit) = (self.caps, self.audit_entry());
        on_backend!(self, db => db.create_queue(queue, caps, audit).await)
    }

    /// Change a queue's target, secret, policy or pause flag; returns the queue as it becomes.
    /// The registry follows once the change is committed, so the next claim, hand-off and
    /// attempt see it.
    pub async fn update_queue(&self, name: QueueName, change: QueueChange) -> StoreResult<Queue> {
        let audit = self.audit_entry();
        on_backend!(self, db => db.update_queue(name, change, audit).await)
    }

    /// Delete a queue and all its jobs, READY and ERROR alike.
    pub async fn delete_queue(&self, name: QueueName) -> StoreResult<()> {
        let audit = self.audit_entry();
        on_backend!(self, db => db.delete_queue(name, audit).await)
    }

    /// Store a job; returns once it is durably committed.
    /// `Overloaded` at once when too many enqueues are waiting already. With an idempotency
    /// key that still stands for a job of `queue`, stores nothing and names that job.
    pub async fn enqueue(&self, queue: QueueName, job: NewJob) -> StoreResult<Enqueued> {
        let _admitted = self.admit_enqueue()?;
        let announce = self.cluster().is_shared().then(|| queue.clone());
        let one_statement = job.idempotency.is_none();
        let enqueued = match &self.backend {
            // Without keys, PostgreSQL commits it with the enqueues arriving meanwhile.
            Backend::Postgres(db) if postgres::group_commit::groupable(&job) => db
                .enqueue_grouped(queue, job)
                .await
                .map(|()| Enqueued::Stored),
            _ => in_write!(
                self,
                Durability::Durable,
                one_statement = one_statement,
                |tx| decisions::enqueue::enqueue(tx, &queue, &job).await
            ),
        }?;
        if enqueued == Enqueued::Stored
            && let Some(queue) = announce
        {
            self.cluster().announce_due(&queue);
        }
        Ok(enqueued)
    }

    /// Store every job of `jobs` in one commit, or none of them. With a `key` that stands
    /// for this same batch already, stores nothing and names the first batch's jobs; for
    /// another batch, [`StoreError::BatchKeyReused`]. The jobs' own idempotency keys are
    /// not consulted: a batch is keyed as a whole. The batch counts as one enqueue against
    /// the pending-write bound (it is one write).
    pub async fn enqueue_batch(
        &self,
        queue: QueueName,
        jobs: Vec<NewJob>,
        key: Option<BatchKey>,
    ) -> StoreResult<BatchEnqueued> {
        let _admitted = self.admit_enqueue()?;
        let announce = self.cluster().is_shared().then(|| queue.clone());
        let enqueued = in_write!(self, Durability::Durable, |tx| {
            decisions::enqueue::enqueue_batch(tx, &queue, &jobs, key.as_ref()).await
        })?;
        if enqueued == BatchEnqueued::Stored
            && let Some(queue) = announce
        {
            self.cluster().announce_due(&queue);
        }
        Ok(enqueued)
    }

    /// Record each queue's attempts of a minute and their hour's roll-up (see
    /// `decisions::activity`), and forget the minutes older than a day before `now` and the
    /// hours older than 7 days; how many were forgotten. Losing the last
    /// moments to a power cut only loses a chart's minute.
    pub async fn record_activity(
        &self,
        rows: Vec<ActivityBucket>,
        now: UnixMillis,
    ) -> StoreResult<usize> {
        in_write!(self, Durability::Relaxed, |tx| {
            decisions::activity::record(tx, &rows, now).await
        })
    }

    /// The recorded attempts per minute over the day before `now` of `queue` (or of every
    /// queue).
    pub async fn activity_last_day(
        &self,
        now: UnixMillis,
        queue: Option<QueueName>,
    ) -> StoreResult<Vec<ActivityBucket>> {
        self.activity_since(ActivityWidth::Minute, now - HISTORY_KEPT_MS + 1, queue)
            .await
    }

    /// The recorded attempts per minute (kept a day) or per hour (the minutes' roll-up,
    /// kept 7 days) from `since` on of `queue` (or of every queue), by queue then start.
    pub async fn activity_since(
        &self,
        width: ActivityWidth,
        since: UnixMillis,
        queue: Option<QueueName>,
    ) -> StoreResult<Vec<ActivityBucket>> {
        in_snapshot!(self, |tx| {
            tx.activity_since(width, since, queue.as_ref()).await
        })
    }

    /// Delete up to `limit` idempotency keys recorded before `before` (expired ones).
    pub async fn purge_idempotency_keys(
        &self,
        before: UnixMillis,
        limit: usize,
    ) -> StoreResult<usize> {
        in_write!(self, Durability::Durable, |tx| {
            tx.purge_idempotency_keys(before, limit).await
        })
    }

    /// Store a job due at once already in flight (attempt 1, leased until `leased_until`)
    /// for a delivery that `after_commit` starts right after the commit; returns once it is
    /// durably committed. If the insert fails, `after_commit` is dropped without running.
    pub async fn enqueue_leased(
        &self,
        queue: QueueName,
        job: NewJob,
        leased_until: UnixMillis,
        after_commit: AfterCommit,
    ) -> StoreResult<()> {
        let _admitted = self.admit_enqueue()?;
        on_backend!(self, db => db.enqueue_leased(queue, job, leased_until, after_commit).await)
    }

    /// Lease up to `limit` due jobs of `queue`, oldest first.
    pub async fn claim(
        &self,
        queue: QueueName,
        now: UnixMillis,
        leased_until: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<ClaimedJob>> {
        // Relaxed: a claim lost to a power cut or a database crash only means its jobs are
        // delivered again (released at SQLite's next start; expired on PostgreSQL), which
        // at-least-once allows. One UPDATE … RETURNING on SQLite: no savepoint needed.
        in_write!(self, Durability::Relaxed, one_statement = true, |tx| {
            tx.claim(&queue, now, leased_until, limit).await
        })
    }

    /// [`Self::claim`] within `limits` held across every node sharing the database. On
    /// SQLite (one process, which holds the limits itself before it claims) the same as
    /// `claim`.
    pub async fn claim_within(
        &self,
        queue: QueueName,
        now: UnixMillis,
        leased_until: UnixMillis,
        want: usize,
        limits: SharedLimits,
    ) -> StoreResult<Claimed> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(Claimed {
                jobs: self.claim(queue, now, leased_until, want).await?,
                held_back_until: None,
            }),
            Backend::Postgres(db) => {
                // A push delivery: the dispatcher holds it, no worker to name.
                db.claim_within(queue, now, leased_until, want, limits, None)
                    .await
            }
        }
    }

    /// Record an attempt's outcome. False (nothing changed) if the lease was lost meanwhile.
    pub async fn record_outcome(
        &self,
        id: JobId,
        lease: Lease,
        outcome: Outcome,
    ) -> StoreResult<bool> {
        // Relaxed: an outcome lost to a power cut means the job is delivered again, which
        // at-least-once allows.
        let outbox = self.outbox;
        match &self.backend {
            // A delivered job not kept: PostgreSQL deletes it with the others meanwhile.
            Backend::Postgres(db) if outcome.is_plain_delivery() => {
                db.complete_grouped(id, lease, outcome, outbox).await
            }
            // SQLite in one statement, without a savepoint, when that is all it takes.
            Backend::Sqlite(db)
                if outcome.is_plain_delivery() && db.delete_delivered(None, id, lease).await? =>
            {
                Ok(true)
            }
            _ => in_write!(self, Durability::Relaxed, |tx| {
                decisions::outcomes::record_outcome(tx, id, lease, &outcome, outbox).await
            }),
        }
    }

    /// Lease up to `want` due jobs of pull queue `queue` to a worker until `leased_until`,
    /// within `limits`: its `concurrency` counts the jobs leased at once (on every node);
    /// on PostgreSQL its `ratePerSecond` too, shared by the nodes (on SQLite the caller
    /// holds the rate in memory, as the dispatcher does). The jobs record `holder` and
    /// `now` as who holds them since when, in the claim's own statement.
    pub async fn lease(
        &self,
        queue: QueueName,
        now: UnixMillis,
        leased_until: UnixMillis,
        want: usize,
        limits: SharedLimits,
        holder: LeaseHolder,
    ) -> StoreResult<Claimed> {
        match &self.backend {
            Backend::Sqlite(db) => Ok(Claimed {
                jobs: db
                    .claim_within_concurrency(
                        queue,
                        now,
                        leased_until,
                        want,
                        limits.concurrency,
                        holder,
                    )
                    .await?,
                held_back_until: None,
            }),
            Backend::Postgres(db) => {
                db.claim_within(queue, now, leased_until, want, limits, Some(holder))
                    .await
            }
        }
    }

    /// Up to `limit` pull leases held at `now` (of jobs, and of dead letters leased through
    /// `{queue}-dlq`), of `queue` or of every queue, soonest expiry first, after `after`
    /// (the previous page's last expiry and id).
    pub async fn held_leases(
        &self,
        queue: Option<QueueName>,
        after: Position,
        limit: usize,
        now: UnixMillis,
    ) -> StoreResult<Vec<HeldLease>> {
        in_snapshot!(self, |tx| decisions::reads::held_leases(
            tx,
            queue.as_ref(),
            after,
            limit,
            now
        )
        .await)
    }

    /// A pull worker's ack or nack of job `id` of `queue`, leased under `lease`: recorded
    /// as that attempt's `outcome` unless the lease was lost or the job is not there.
    pub async fn settle_lease(
        &self,
        queue: QueueName,
        id: JobId,
        lease: Lease,
        outcome: Outcome,
    ) -> StoreResult<LeaseAnswer> {
        // Relaxed, as a push delivery's outcome: an answer lost to a power cut means the job
        // is leased again, which at-least-once allows. On SQLite an ack of a job not kept,
        // without a key and never failed is one statement, as a push delivery's is.
        if let Backend::Sqlite(db) = &self.backend
            && outcome.is_plain_delivery()
            && db.delete_delivered(Some(queue.clone()), id, lease).await?
        {
            return Ok(LeaseAnswer::Done);
        }
        let outbox = self.outbox;
        in_write!(self, Durability::Relaxed, |tx| {
            decisions::pull::settle(tx, &queue, id, lease, &outcome, outbox).await
        })
    }

    /// Move the expiry of a pull worker's lease on job `id` of `queue` to `until`.
    pub async fn extend_lease(
        &self,
        queue: QueueName,
        id: JobId,
        lease: Lease,
        until: UnixMillis,
    ) -> StoreResult<LeaseAnswer> {
        // Relaxed: an extension lost to a power cut lets the lease expire sooner, and the
        // job is leased again (at least once).
        in_write!(self, Durability::Relaxed, |tx| {
            decisions::pull::extend(tx, &queue, id, lease, until).await
        })
    }

    /// Lease the oldest free pending dead letter of `queue` until `until` to `holder`, a
    /// consumer of its dead letters (Forq's `{queue}-dlq`): its id and payload.
    pub async fn lease_dead_letter(
        &self,
        queue: QueueName,
        now: UnixMillis,
        until: UnixMillis,
        holder: LeaseHolder,
    ) -> StoreResult<Option<(JobId, crate::json::CanonicalJson)>> {
        in_write!(self, Durability::Relaxed, one_statement = true, |tx| {
            tx.lease_dead_letter(&queue, now, until, &holder).await
        })
    }

    /// Answer a leased dead letter: acknowledge it (`hide_until: None`) or hide it until
    /// then (a nack), fenced by `lease` (any pending record without one). Whether it
    /// changed.
    pub async fn answer_dead_letter(
        &self,
        queue: QueueName,
        id: JobId,
        lease: Option<UnixMillis>,
        hide_until: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        in_write!(self, Durability::Durable, one_statement = true, |tx| {
            tx.answer_dead_letter(&queue, id, lease, hide_until, now)
                .await
        })
    }

    /// The lease job `id` of `queue` is in flight under, if it is.
    pub async fn current_lease(&self, queue: QueueName, id: JobId) -> StoreResult<Option<Lease>> {
        in_snapshot!(self, |tx| tx.lease_of(&queue, id).await)
    }

    /// When the leases workers hold on pull queues run out, earliest first, at most `limit`.
    pub async fn pull_lease_expiries(&self, limit: usize) -> StoreResult<Vec<UnixMillis>> {
        in_snapshot!(self, |tx| tx.pull_lease_expiries(limit).await)
    }

    /// Hand leased jobs back unused, each ready again at once without its attempt counted;
    /// how many were still leased.
    pub async fn release_leases(&self, leases: Vec<(JobId, Lease)>) -> StoreResult<usize> {
        // Relaxed: lost to a power cut, the lease expires and the job comes back anyway.
        in_write!(self, Durability::Relaxed, |tx| {
            decisions::pull::release(tx, &leases).await
        })
    }

    /// Remove a READY job that is not being delivered, at `now` (the next job of its
    /// ordering key goes next), with the audit entry of an [`audited`](Store::audited)
    /// store.
    pub async fn cancel(&self, queue: QueueName, id: JobId, now: UnixMillis) -> StoreResult<()> {
        let audit = self.audit_entry();
        in_write!(self, Durability::Durable, |tx| {
            decisions::outcomes::cancel(tx, &queue, id, now).await?;
            audit::write_pending(tx, audit.as_ref(), None).await
        })
    }

    /// Run now, cancel or re-prioritise the waiting jobs of `queue` that `selection` names
    /// (never one in flight; see `decisions::bulk` for how ordering keys keep their order),
    /// at `now`. Ids act in one transaction; a filter walks every job it finds, a chunk of
    /// [`BULK_CHUNK`] per transaction, and only those created before `now`. The audit entry
    /// of an [`audited`](Store::audited) store commits with the last chunk, counting every
    /// job changed. Other nodes hear of jobs made due (run now, a key's next after a cancel).
    pub async fn act_on_jobs(
        &self,
        queue: QueueName,
        selection: LiveSelection,
        action: JobAction,
        now: UnixMillis,
    ) -> StoreResult<BulkReport> {
        let audit = self.audit_entry();
        let selection = Arc::new(selection);
        let mut report = BulkReport::default();
        let mut after = None;
        loop {
            let (queue, selection, audit) = (queue.clone(), selection.clone(), audit.clone());
            let changed_before = report.changed;
            let done = in_write!(self, Durability::Durable, |tx| {
                let chunk = decisions::bulk::Chunk {
                    queue: &queue,
                    selection: &selection,
                    after,
                    action,
                    now,
                    limit: BULK_CHUNK,
                    changed_before,
                };
                decisions::bulk::act_chunk(tx, &chunk, audit.as_ref()).await
            })?;
            report.add(done.report);
            match done.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        if report.changed > 0 && !matches!(action, JobAction::SetPriority(_)) {
            self.cluster().announce_due(&queue);
        }
        Ok(report)
    }

    /// Expired leases back to READY, or dead-lettered if that was their last attempt (by
    /// their queue's `maxAttempts`, else `expiry`'s default); a pull queue's job after its
    /// backoff ([`LeaseExpiry`]).
    pub async fn recover_stale_leases(
        &self,
        now: UnixMillis,
        expiry: LeaseExpiry,
    ) -> StoreResult<usize> {
        let outbox = self.outbox;
        let expiry = Arc::new(expiry);
        let mut total = 0;
        loop {
            let expiry = expiry.clone();
            let recovered = in_write!(self, Durability::Durable, |tx| {
                decisions::outcomes::recover_stale_leases(tx, now, &expiry, RECOVERY_BATCH, outbox)
                    .await
            })?;
            total += recovered;
            if recovered < RECOVERY_BATCH {
                return Ok(total);
            }
        }
    }

    /// The backend's periodic upkeep (SQLite: refresh the query planner's statistics).
    pub async fn maintain(&self) -> StoreResult<()> {
        on_backend!(self, db => db.maintain().await)
    }

    /// One page of a queue's READY jobs (live), by creation.
    pub async fn list_ready(
        &self,
        queue: QueueName,
        page: JobsPage<JobId>,
    ) -> StoreResult<Vec<JobRecord>> {
        in_snapshot!(self, |tx| {
            tx.require_queue(&queue).await?;
            tx.list_live(&queue, &page).await
        })
    }

    /// One page of the dead letters matching `filter`.
    pub async fn list_dead_letters(
        &self,
        filter: Filter,
        page: PageRequest,
    ) -> StoreResult<DeadLetterPage> {
        in_snapshot!(self, |tx| {
            if let Some(queue) = &filter.queue {
                tx.require_queue(queue).await?;
            }
            tx.list_dead_letters(&filter, page).await
        })
    }

    /// Store an operational event in the outbox, due at once.
    pub async fn record_event(&self, event: Event, now: UnixMillis) -> StoreResult<()> {
        in_write!(self, Durability::Durable, |tx| {
            tx.insert_event(EventId::new(), &event, now).await
        })
    }

    /// Up to `limit` outbox events due at `now`, oldest first.
    pub async fn due_events(&self, now: UnixMillis, limit: usize) -> StoreResult<Vec<OutboxEvent>> {
        in_snapshot!(self, |tx| tx.due_events(now, limit).await)
    }

    /// When the next outbox event falls due, if any waits.
    pub async fn next_event_due(&self) -> StoreResult<Option<UnixMillis>> {
        in_snapshot!(self, |tx| tx.next_event_due().await)
    }

    /// Outbox events waiting to be sent.
    pub async fn events_pending(&self) -> StoreResult<u64> {
        in_snapshot!(self, |tx| tx.events_pending().await)
    }

    /// An outbox event was sent, or given up on.
    pub async fn remove_event(&self, id: EventId) -> StoreResult<()> {
        // Relaxed: lost to a power cut, the event is sent again (at least once).
        in_write!(self, Durability::Relaxed, |tx| tx.remove_event(id).await)
    }

    /// An outbox event's attempt failed: try again at `next_at`.
    pub async fn reschedule_event(
        &self,
        id: EventId,
        next_at: UnixMillis,
        error: String,
    ) -> StoreResult<()> {
        in_write!(self, Durability::Relaxed, |tx| {
            tx.reschedule_event(id, next_at, &error).await
        })
    }

    /// One page of a queue's delivery log, by delivery time.
    pub async fn list_delivered(
        &self,
        queue: QueueName,
        page: JobsPage<Position>,
    ) -> StoreResult<Vec<JobRecord>> {
        in_snapshot!(self, |tx| {
            tx.require_queue(&queue).await?;
            tx.list_delivered(&queue, &page).await
        })
    }

    /// Delete up to `limit` records of the delivery log, with their attempt history: of
    /// each queue in `cutoffs`, those delivered before its cutoff. Returns how many.
    pub async fn purge_delivered(
        &self,
        cutoffs: Vec<(QueueName, UnixMillis)>,
        limit: usize,
    ) -> StoreResult<usize> {
        in_write!(self, Durability::Durable, |tx| {
            decisions::dead_letters::purge_delivered(tx, &cutoffs, limit).await
        })
    }

    /// A job of `queue`, live, delivered and kept, or dead-lettered, with its attempt
    /// history.
    pub async fn get_job(
        &self,
        queue: QueueName,
        id: JobId,
    ) -> StoreResult<(JobRecord, Vec<AttemptRecord>)> {
        in_snapshot!(self, |tx| decisions::reads::get_job(tx, &queue, id).await)
    }

    /// Job `id` of `queue` with everything known of its life (see [`JobLife`]), read in one
    /// snapshot.
    pub async fn job_life(&self, queue: QueueName, id: JobId) -> StoreResult<JobLife> {
        in_snapshot!(self, |tx| decisions::reads::job_life(tx, &queue, id).await)
    }

    /// Up to `limit` places of the jobs whose ids start with `prefix`, whichever queue holds
    /// them (see [`FoundJob`]), by id.
    pub async fn find_jobs(
        &self,
        prefix: crate::model::JobIdPrefix,
        limit: usize,
    ) -> StoreResult<Vec<FoundJob>> {
        in_snapshot!(self, |tx| decisions::reads::find_jobs(
            tx,
            prefix.first(),
            prefix.last(),
            limit
        )
        .await)
    }

    /// A page of `query`'s hits across every queue, from `upper` down (`QueueNotFound` for
    /// an unknown queue), read in one snapshot within `walk`'s bounds.
    pub async fn search(
        &self,
        query: search::SearchQuery,
        upper: crate::model::JobId,
        limit: usize,
        walk: search::SearchWalk,
    ) -> StoreResult<search::SearchPage> {
        in_snapshot!(self, |tx| {
            if let Some(queue) = &query.queue {
                tx.require_queue(queue).await?;
            }
            decisions::search::search(tx, &query, upper, limit, walk).await
        })
    }

    /// What became of the replayed jobs `ids` since (delivered, dead again, waiting), read in
    /// one snapshot.
    pub async fn replay_fates(&self, ids: Vec<JobId>) -> StoreResult<ReplayFates> {
        in_snapshot!(self, |tx| decisions::reads::replay_fates(tx, &ids).await)
    }

    /// Dead-letter figures at `now`, of `queue`'s letters only when one is given
    /// (`QueueNotFound` if it does not exist); a pending record replayed more than
    /// `repeat_after_replays` times counts as a repeat failure.
    pub async fn dlq_stats(
        &self,
        queue: Option<QueueName>,
        now: UnixMillis,
        repeat_after_replays: u32,
    ) -> StoreResult<DlqStats> {
        in_snapshot!(self, |tx| {
            if let Some(queue) = &queue {
                tx.require_queue(queue).await?;
            }
            tx.dlq_stats(queue.as_ref(), now, repeat_after_replays)
                .await
        })
    }

    /// Replay dead letters: claim `pending` records (so concurrent replays never send a job
    /// twice), put their jobs back as READY due at `run_at`, mark them `replayed`; failures
    /// roll back to `pending`. Returns how many records were claimed, and what happened.
    pub async fn replay(
        &self,
        selection: Selection,
        now: UnixMillis,
        run_at: UnixMillis,
    ) -> StoreResult<(usize, ReplayReport)> {
        // A chunk is claimed and put back in one transaction: a replay cut short (a crash,
        // a lost connection) leaves no record `replaying`.
        let mut walk = ReplayWalk::new(selection, REPLAY_CHUNK);
        while let Some(chunk) = walk.next_chunk() {
            let (claimed, report) = in_write!(self, Durability::Durable, |tx| {
                decisions::dead_letters::replay_chunk(tx, &chunk, now, run_at, REPLAY_CHUNK).await
            })?;
            if !walk.claimed(claimed) {
                break;
            }
            walk.put_back(report);
        }
        Ok(walk.finish())
    }

    /// The pending dead letters of `queue` (`None`: of every queue) grouped by how they
    /// failed, the `limit` largest groups first, each with its count per queue and how many
    /// failed in the hour and the day before `now` ([`ErrorGroup`]).
    pub async fn error_groups(
        &self,
        queue: Option<QueueName>,
        limit: usize,
        now: UnixMillis,
    ) -> StoreResult<Vec<ErrorGroupCount>> {
        in_snapshot!(self, |tx| {
            if let Some(queue) = &queue {
                tx.require_queue(queue).await?;
            }
            tx.error_groups(queue.as_ref(), limit, now).await
        })
    }

    pub async fn acknowledge(&self, selection: Selection, now: UnixMillis) -> StoreResult<usize> {
        let audit = self.audit_entry();
        in_write!(self, Durability::Durable, |tx| {
            let acknowledged = tx.acknowledge(&selection, now).await?;
            audit::write_pending(tx, audit.as_ref(), Some(acknowledged)).await?;
            Ok::<_, StoreError>(acknowledged)
        })
    }

    /// Edit and resend pending dead letter `letter` of `queue`: store `job` and acknowledge
    /// the letter naming it, in one durable transaction (with the audit entry of an
    /// [`audited`](Store::audited) store). Other nodes hear of the new job.
    pub async fn resend(
        &self,
        queue: QueueName,
        letter: JobId,
        job: NewJob,
        now: UnixMillis,
    ) -> StoreResult<()> {
        let _admitted = self.admit_enqueue()?;
        let audit = self.audit_entry();
        let announce = self.cluster().is_shared().then(|| queue.clone());
        in_write!(self, Durability::Durable, |tx| {
            decisions::dead_letters::resend(tx, &queue, letter, &job, now).await?;
            audit::write_pending(tx, audit.as_ref(), None).await?;
            Ok::<_, StoreError>(())
        })?;
        if let Some(queue) = announce {
            self.cluster().announce_due(&queue);
        }
        Ok(())
    }

    /// Delete dead letters for good, whatever their state.
    pub async fn delete_dead_letters(&self, selection: Selection) -> StoreResult<usize> {
        let audit = self.audit_entry();
        in_write!(self, Durability::Durable, |tx| {
            let deleted = decisions::dead_letters::delete(tx, &selection).await?;
            audit::write_pending(tx, audit.as_ref(), Some(deleted)).await?;
            Ok::<_, StoreError>(deleted)
        })
    }

    /// Dead-letter (reason `expired`) up to `limit` ready jobs created before `cutoff`;
    /// returns the queue of each.
    pub async fn expire_jobs(
        &self,
        cutoff: UnixMillis,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<QueueName>> {
        let outbox = self.outbox;
        in_write!(self, Durability::Durable, |tx| {
            decisions::outcomes::expire(tx, cutoff, now, limit, outbox).await
        })
    }

    /// Delete up to `limit` replayed/acknowledged dead letters last changed before `before`.
    pub async fn purge_dead_letters(&self, before: UnixMillis, limit: usize) -> StoreResult<usize> {
        in_write!(self, Durability::Durable, |tx| {
            decisions::dead_letters::purge_closed(tx, before, limit).await
        })
    }

    /// Where `queue`'s jobs stand at `now`: due, scheduled, blocked, in flight, dead.
    pub async fn queue_counts(
        &self,
        queue: QueueName,
        now: UnixMillis,
    ) -> StoreResult<QueueCounts> {
        in_snapshot!(self, |tx| decisions::reads::queue_counts(tx, &queue, now)
            .await)
    }

    /// The earliest `run_at` among the ready jobs of `queue`.
    pub async fn next_due(&self, queue: QueueName) -> StoreResult<Option<UnixMillis>> {
        on_backend!(self, db => db.next_due(queue).await)
    }

    /// [`queue_counts`](Self::queue_counts) of every queue, in name order (for the
    /// metrics).
    pub async fn all_queue_counts(
        &self,
        now: UnixMillis,
    ) -> StoreResult<Vec<(QueueName, QueueCounts)>> {
        in_snapshot!(self, |tx| decisions::reads::all_queue_counts(tx, now).await)
    }

    /// Create or replace a schedule of `queue` at `now` (see [`Schedule`]).
    pub async fn put_schedule(
        &self,
        queue: QueueName,
        schedule: NewSchedule,
        now: UnixMillis,
    ) -> StoreResult<Saved> {
        let caps = self.caps;
        in_write!(self, Durability::Durable, |tx| {
            decisions::schedules::put(tx, &queue, &schedule, now, caps).await
        })
    }

    /// Every queue with a schedule, by name: how many, and the earliest next tick of its
    /// active ones (one read for every queue: the dashboard's).
    pub async fn schedule_summaries(
        &self,
    ) -> StoreResult<Vec<(QueueName, u64, Option<UnixMillis>)>> {
        in_snapshot!(self, |tx| tx.schedule_summaries().await)
    }

    /// `queue`'s schedules, by name.
    pub async fn list_schedules(&self, queue: QueueName) -> StoreResult<Vec<Schedule>> {
        in_snapshot!(self, |tx| {
            tx.require_queue(&queue).await?;
            tx.schedules(&queue).await
        })
    }

    pub async fn get_schedule(
        &self,
        queue: QueueName,
        name: ScheduleName,
    ) -> StoreResult<Schedule> {
        in_snapshot!(self, |tx| {
            tx.schedule(&queue, &name)
                .await?
                .ok_or(StoreError::ScheduleNotFound)
        })
    }

    pub async fn delete_schedule(&self, queue: QueueName, name: ScheduleName) -> StoreResult<()> {
        in_write!(self, Durability::Durable, |tx| {
            tx.delete_schedule(&queue, &name).await
        })
    }

    /// Pause a schedule, or resume it from its first tick after `now` (ticks missed while
    /// paused are not made up). Returns the schedule as it becomes.
    pub async fn pause_schedule(
        &self,
        queue: QueueName,
        name: ScheduleName,
        paused: bool,
        now: UnixMillis,
    ) -> StoreResult<Schedule> {
        in_write!(self, Durability::Durable, |tx| {
            decisions::schedules::pause(tx, &queue, &name, paused, now).await
        })
    }

    /// Fire schedule `name` of `queue` once now, by hand: its job is stored as a tick's would
    /// be, the schedule's next tick unchanged (see `decisions::schedules::run_now`).
    pub async fn run_schedule_now(
        &self,
        queue: QueueName,
        name: ScheduleName,
        now: UnixMillis,
    ) -> StoreResult<JobId> {
        let announce = queue.clone();
        let id = in_write!(self, Durability::Durable, |tx| {
            decisions::schedules::run_now(tx, &queue, &name, now).await
        })?;
        self.cluster().announce_due(&announce);
        Ok(id)
    }

    /// Fire the ticks due at `now` of up to `limit` schedules: each stores its job and moves
    /// its schedule on in one commit, so a tick stores at most one job, across restarts and
    /// crashes. Missed ticks fire once (the latest). See `SchedulerRound`.
    pub async fn fire_due_schedules(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<SchedulerRound> {
        in_write!(self, Durability::Durable, |tx| {
            decisions::schedules::fire_due(tx, now, limit).await
        })
    }

    /// A read that proves the database answers.
    pub async fn ping(&self) -> StoreResult<()> {
        on_backend!(self, db => db.ping().await)
    }

    /// Queue `name`, or `QueueNotFound`: from the registry, or, when the registry does not
    /// hold it, from the database if other nodes share it (a queue one of them has just
    /// created). Every "no such queue" answer of the API and the dispatcher comes from
    /// here, so a queue created on one node is known on every node at once.
    pub async fn queue(&self, name: &QueueName) -> StoreResult<Arc<Queue>> {
        match self.registry().get(name) {
            Some(queue) => Ok(queue),
            None => self.cluster().queue_created_elsewhere(name).await,
        }
    }
}
