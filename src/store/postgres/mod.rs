//! The PostgreSQL backend, for several hookq nodes on one database (`--db postgres://…`).
//!
//! - [`connect`]: a pool of connections from a `postgres://` / `postgresql://` URL, TLS
//!   through rustls as the URL's `sslmode` asks.
//! - [`migrate`]: the versioned schema (`migrations/postgres/`), applied at start under an
//!   advisory lock, so nodes starting at once apply it once.
//! - [`queues`], [`jobs`], [`dead_letters`], [`delivered`], [`events`], [`schedules`]: the
//!   SQL, one module per table, deciding nothing; [`PgTx`] offers it to the store's shared
//!   decisions as the contract's primitives ([`crate::store::dialect::Tx`]).
//! - [`PgStore`]: the runners every operation goes through ([`PgStore::write`],
//!   [`PgStore::read`]), the queues with a registry that follows other nodes' changes, the
//!   direct hand-off, and what only a shared database has: duties held by one node at a
//!   time, limits and breakers shared by the nodes ([`limits`]), their recent attempts
//!   ([`activity`]).
//! - [`notify`]: wake-ups across nodes (`LISTEN`/`NOTIFY`).
//!
//! What only a shared database has is offered above the port as the store's cluster
//! capability ([`crate::store::cluster`]), down to a queue this node has not seen yet, read
//! on demand ([`PgStore::load_queue`]).

pub mod activity;
mod activity_minutes;
mod api_keys;
mod audit;
pub(crate) mod completer;
pub mod connect;
pub mod dead_letters;
pub mod delivered;
pub mod events;
pub(crate) mod group_commit;
mod groups;
mod idempotency;
pub mod jobs;
pub mod limits;
pub mod lookup;
pub mod migrate;
pub mod notify;
pub mod queues;
pub mod schedules;
mod server_keys;
mod topics;
mod tx;
pub mod waiters;

use anyhow::Context;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use deadpool_postgres::{PoolError, Transaction};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use completer::Completer;
pub use connect::{PgPool, connect};
use group_commit::GroupCommit;
pub use migrate::migrate;
pub use tx::PgTx;

use crate::model::{JobId, QueueName, UnixMillis};
use crate::policy::QueueChange;
use crate::store::audit::{AuditEntry, write_pending};
use crate::store::dialect::Durability;
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{
    ActivityFigures, BreakerNews, Caps, Claimed, Lease, LeaseHolder, NewJob, Outbox, Outcome,
    Queue, SharedLimits,
};
use crate::store::registry::Registry;
use crate::store::sealing::Sealing;
use crate::store::{AfterCommit, BatchStats};

/// What [`PgStore::write`] and [`PgStore::read`] run: an operation over one transaction.
pub trait Work<T>:
    for<'t> FnOnce(PgTx<'t>) -> Pin<Box<dyn Future<Output = StoreResult<T>> + Send + 't>>
{
}

impl<T, F> Work<T> for F where
    F: for<'t> FnOnce(PgTx<'t>) -> Pin<Box<dyn Future<Output = StoreResult<T>> + Send + 't>>
{
}

/// A write that is one statement, on a connection of its own ([`Runner::one_statement`]),
/// given this node's identity.
pub trait OneStatement<T>:
    for<'c> FnOnce(
    &'c deadpool_postgres::Client,
    Uuid,
) -> Pin<Box<dyn Future<Output = StoreResult<T>> + Send + 'c>>
{
}

impl<T, F> OneStatement<T> for F where
    F: for<'c> FnOnce(
        &'c deadpool_postgres::Client,
        Uuid,
    ) -> Pin<Box<dyn Future<Output = StoreResult<T>> + Send + 'c>>
{
}

/// The PostgreSQL store of one node: a connection pool, the node's identity (what its leases
/// carry) and its mirror of the queues ([`Registry`]), kept in step with its own changes at
/// once and with other nodes' through [`PgStore::refresh_queues`].
#[derive(Clone)]
pub struct PgStore {
    /// The pool and this node's identity (what its leases carry), which run its transactions.
    runner: Runner,
    /// The connection settings, for the wake-up listener's own connection.
    config: Arc<tokio_postgres::Config>,
    url: Arc<str>,
    /// Announces stored jobs to every node.
    notifier: notify::Notifier,
    sealing: Arc<Sealing>,
    registry: Registry,
    /// The queue epoch the registry reflects.
    epoch: Arc<AtomicI64>,
    /// Held by this node's own queue changes from before their transaction to their registry
    /// update, and by a refresh from its last epoch check to its replace: a refresh never puts back
    /// a snapshot older than a change this node has just applied.
    registry_writes: Arc<tokio::sync::Mutex<()>>,
    /// Enqueues without keys, committed in groups.
    group_commit: GroupCommit,
    /// Deliveries of jobs not kept, completed in groups.
    completer: Completer,
}

impl PgStore {
    /// Connect (at most `pool_size` connections), bring the schema up to date and load the
    /// queues. `on_group` sees each committed group of enqueues ([`group_commit`]) and of
    /// deliveries ([`completer`]).
    pub async fn open(
        url: &str,
        pool_size: usize,
        sealing: Sealing,
        on_group: impl Fn(BatchStats) + Send + Sync + 'static,
    ) -> anyhow::Result<Self> {
        let pool = connect(url, pool_size).await?;
        migrate(&pool).await?;
        let relaxed =
            connect::connect_with(url, RELAXED_POOL, connect::Sessions::Completions).await?;
        let node = Uuid::now_v7();
        let on_group: group_commit::OnGroup = Arc::new(on_group);
        let runner = Runner {
            pool: pool.clone(),
            relaxed,
            node,
        };
        let store = Self {
            group_commit: GroupCommit::start(runner.clone(), on_group.clone()),
            completer: Completer::start(runner.clone(), on_group),
            notifier: notify::Notifier::start(pool.clone()),
            config: Arc::new(connect::parse_url(url)?),
            url: url.into(),
            runner,
            sealing: Arc::new(sealing),
            registry: Registry::default(),
            epoch: Arc::new(AtomicI64::new(-1)),
            registry_writes: Arc::default(),
        };
        store.reseal_secrets().await?;
        store.refresh_queues().await?;
        Ok(store)
    }

    /// Tests only: hold every job write (see [`crate::store::testing::WriteHold`]).
    #[cfg(any(test, feature = "testing"))]
    pub(in crate::store) async fn hold_writes(
        &self,
    ) -> StoreResult<crate::store::testing::WriteHold> {
        let (held, is_held) = tokio::sync::oneshot::channel::<StoreResult<()>>();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let pool = self.runner.pool.clone();
        tokio::spawn(async move {
            let mut client = match pool.get().await {
                Ok(client) => client,
                Err(e) => {
                    let _ = held.send(Err(e.into()));
                    return;
                }
            };
            let locked = async {
                let tx = client.transaction().await?;
                tx.batch_execute("LOCK TABLE jobs IN SHARE MODE").await?;
                Ok::<_, StoreError>(tx)
            }
            .await;
            match locked {
                Ok(tx) => {
                    let _ = held.send(Ok(()));
                    // Until the hold is dropped; then the lock goes with the rollback.
                    let _ = released.await;
                    let _ = tx.rollback().await;
                }
                Err(e) => {
                    let _ = held.send(Err(e));
                }
            }
        });
        is_held.await.map_err(|_| StoreError::Closed)??;
        Ok(crate::store::testing::WriteHold::new(release))
    }

    /// Re-seal every queue secret not sealed with the current master key (a rotation).
    async fn reseal_secrets(&self) -> anyhow::Result<()> {
        let sealing = self.sealing.clone();
        let resealed = self
            .write(Durability::Durable, move |pg| {
                Box::pin(async move { queues::reseal_all(pg.tx, &sealing).await })
            })
            .await
            .context("cannot re-seal queue secrets")?;
        if let (Some(key), false) = (self.sealing.current(), resealed.is_empty()) {
            tracing::info!(
                queues = resealed.len(),
                key_id = key.id(),
                "queue secrets sealed with the current master key"
            );
        }
        Ok(())
    }

    /// The database, for logs: its URL without the password.
    pub fn location(&self) -> String {
        connect::redacted(&self.url)
    }

    /// The pool, for tests that look at the database directly.
    #[cfg(any(test, feature = "testing"))]
    pub fn pool(&self) -> &PgPool {
        &self.runner.pool
    }

    /// The completers' pool ([`connect::Sessions::Completions`]), for tests of their plans.
    #[cfg(any(test, feature = "testing"))]
    pub fn completion_pool(&self) -> &PgPool {
        &self.runner.relaxed
    }

    /// Call `on_due` with every queue any node announces a job for, until `stop` (one
    /// connection of its own, reconnecting by itself).
    pub fn listen_for_wakeups(
        &self,
        on_due: impl Fn(QueueName) + Send + Sync + 'static,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(notify::listen((*self.config).clone(), on_due, stop))
    }

    /// The queues, mirrored in memory.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Reload the queues if any node changed one since the last look (one single-row read
    /// when nothing changed). Returns whether they were reloaded.
    pub async fn refresh_queues(&self) -> StoreResult<bool> {
        let client = self.runner.pool.get().await?;
        let epoch = queues::epoch(&client).await?;
        if epoch == self.epoch.load(Ordering::Acquire) {
            return Ok(false);
        }
        let loaded = queues::load_all(&client, &self.sealing).await?;
        // A change committed since the epoch was read (here, or on another node) makes
        // `loaded` possibly older than the registry: keep the registry and look again at
        // the next refresh.
        let _writes = self.registry_writes.lock().await;
        if queues::epoch(&client).await? != epoch {
            return Ok(false);
        }
        self.registry.replace_all(loaded);
        self.epoch.store(epoch, Ordering::Release);
        Ok(true)
    }

    /// Create a queue; the registry follows once it is committed. Queue changes hold
    /// `registry_writes` from before their transaction to their registry update, so a
    /// refresh never puts back a state older than their commit.
    pub async fn create_queue(
        &self,
        queue: Queue,
        caps: Caps,
        audit: Option<AuditEntry>,
    ) -> StoreResult<()> {
        let (sealing, stored) = (self.sealing.clone(), queue.clone());
        let _writes = self.registry_writes.lock().await;
        self.write(Durability::Durable, move |pg| {
            Box::pin(async move {
                queues::admit(pg.tx, &stored.name, caps).await?;
                queues::insert(pg.tx, &stored, &sealing).await?;
                write_pending(&pg, audit.as_ref(), None).await
            })
        })
        .await?;
        self.registry.insert(queue);
        Ok(())
    }

    /// Change a queue; the registry follows once the change is committed.
    pub async fn update_queue(
        &self,
        name: QueueName,
        change: QueueChange,
        audit: Option<AuditEntry>,
    ) -> StoreResult<Queue> {
        let sealing = self.sealing.clone();
        let _writes = self.registry_writes.lock().await;
        let queue = self
            .write(Durability::Durable, move |pg| {
                Box::pin(async move {
                    let queue = queues::update(pg.tx, &name, &change, &sealing).await?;
                    write_pending(&pg, audit.as_ref(), None).await?;
                    Ok(queue)
                })
            })
            .await?;
        self.registry.insert(queue.clone());
        Ok(queue)
    }

    /// Delete a queue and everything of it.
    pub async fn delete_queue(
        &self,
        name: QueueName,
        audit: Option<AuditEntry>,
    ) -> StoreResult<()> {
        let deleted = name.clone();
        let _writes = self.registry_writes.lock().await;
        self.write(Durability::Durable, move |pg| {
            Box::pin(async move {
                queues::delete(pg.tx, &deleted).await?;
                write_pending(&pg, audit.as_ref(), None).await
            })
        })
        .await?;
        self.registry.remove(&name);
        Ok(())
    }

    /// Queue `name` as the database holds it now, taken into the registry: a queue another
    /// node created since this node's last [`refresh`](Self::refresh_queues), so that a
    /// request naming it here does not wait for the next refresh. `QueueNotFound` when the
    /// database has no such queue.
    pub async fn load_queue(&self, name: &QueueName) -> StoreResult<Arc<Queue>> {
        let client = self.runner.pool.get().await?;
        let (queue, read_at) = queues::load_one(&client, name, &self.sealing)
            .await?
            .ok_or(StoreError::QueueNotFound)?;
        // Not held while waiting: a queue change holds the lock through its transaction.
        drop(client);
        let _writes = self.registry_writes.lock().await;
        // A refresh since the read put a later state of the queues in the registry: the
        // queue as read may be gone by now, and the registry has the answer.
        if self.epoch.load(Ordering::Acquire) > read_at {
            return self.registry.get(name).ok_or(StoreError::QueueNotFound);
        }
        self.registry.insert(queue);
        self.registry.get(name).ok_or(StoreError::QueueNotFound)
    }

    /// Every queue, secrets opened, read from the database (tests compare it with the
    /// registry).
    #[cfg(any(test, feature = "testing"))]
    pub async fn load_queues(&self) -> StoreResult<Vec<Queue>> {
        let client = self.runner.pool.get().await?;
        queues::load_all(&client, &self.sealing).await
    }

    /// Store a job due at once already leased to this node for its first attempt, then run
    /// `after_commit` (which starts the delivery); dropped without running if the insert
    /// fails.
    pub async fn enqueue_leased(
        &self,
        queue: QueueName,
        job: NewJob,
        leased_until: UnixMillis,
        after_commit: AfterCommit,
    ) -> StoreResult<()> {
        self.group_commit
            .enqueue(queue, job, Some((leased_until, after_commit)))
            .await
    }

    /// Record the `Delivered` outcome of a job not kept ([`Outcome::is_plain_delivery`]) of job
    /// `id` under `lease` with the next group of outcomes. False if the lease was lost.
    pub async fn complete_grouped(
        &self,
        id: JobId,
        lease: Lease,
        outcome: Outcome,
        outbox: Outbox,
    ) -> StoreResult<bool> {
        self.completer.record(id, lease, outcome, outbox).await
    }

    /// Store `job`, one without keys ([`group_commit::groupable`]), with the next group of
    /// enqueues.
    pub async fn enqueue_grouped(&self, queue: QueueName, job: NewJob) -> StoreResult<()> {
        self.group_commit.enqueue(queue, job, None).await
    }

    /// A claim within `limits` counted across every node (see [`limits`]). The commit is
    /// relaxed: a claim lost in a database crash only means the job is delivered again.
    pub async fn claim_within(
        &self,
        queue: QueueName,
        now: UnixMillis,
        leased_until: UnixMillis,
        want: usize,
        shared: SharedLimits,
        holder: Option<LeaseHolder>,
    ) -> StoreResult<Claimed> {
        self.write(Durability::Relaxed, move |pg| {
            Box::pin(async move {
                let holder = holder.as_ref();
                if shared.is_none() {
                    let jobs = jobs::claim(pg.tx, &queue, now, leased_until, want, pg.node, holder)
                        .await?;
                    return Ok(Claimed {
                        jobs,
                        held_back_until: None,
                    });
                }
                limits::claim_within(
                    pg.tx,
                    &queue,
                    now,
                    leased_until,
                    want,
                    shared,
                    pg.node,
                    holder,
                )
                .await
            })
        })
        .await
    }

    /// Write this node's recent attempts of each busy queue, taken at `now`, for the other
    /// nodes' `_stats`; once a minute, also forget rows nobody wrote for an hour.
    pub async fn publish_activity(
        &self,
        now: UnixMillis,
        busy: &[(QueueName, ActivityFigures)],
    ) -> StoreResult<()> {
        let client = self.runner.pool.get().await?;
        if !busy.is_empty() {
            activity::publish(&client, self.runner.node, now, busy).await?;
        }
        if now.rem_euclid(60_000) < 1_000 {
            activity::purge_stale(&client, now).await?;
        }
        Ok(())
    }

    /// The recent attempts of `queue` on every other node, added up, as of `now`.
    pub async fn activity_of_other_nodes(
        &self,
        queue: &QueueName,
        now: UnixMillis,
    ) -> StoreResult<ActivityFigures> {
        let client = self.runner.pool.get().await?;
        let mut sums =
            activity::of_other_nodes(&client, self.runner.node, Some(queue), now).await?;
        Ok(sums.remove(queue).unwrap_or_default())
    }

    /// The recent attempts of every queue on every other node, added up per queue, as of
    /// `now` (a queue no other node delivered for is absent).
    pub async fn activity_of_other_nodes_by_queue(
        &self,
        now: UnixMillis,
    ) -> StoreResult<HashMap<QueueName, ActivityFigures>> {
        let client = self.runner.pool.get().await?;
        activity::of_other_nodes(&client, self.runner.node, None, now).await
    }

    /// This node's id among the nodes sharing the database.
    pub fn node(&self) -> Uuid {
        self.runner.node
    }

    /// Tell the other nodes the lease requests waiting here now, per queue.
    pub async fn publish_lease_waiters(
        &self,
        now: UnixMillis,
        waiting: &[(QueueName, usize)],
    ) -> StoreResult<()> {
        let mut client = self.runner.pool.get().await?;
        waiters::publish(&mut client, self.runner.node, now, waiting).await
    }

    /// The lease requests waiting on every other node, per queue, as last published.
    pub async fn lease_waiters_of_other_nodes(
        &self,
        now: UnixMillis,
    ) -> StoreResult<Vec<(String, QueueName, usize)>> {
        let client = self.runner.pool.get().await?;
        waiters::of_other_nodes(&client, self.runner.node, now).await
    }

    /// Open `queue`'s circuit breaker on every node until `until`.
    pub async fn open_breaker(&self, queue: &QueueName, until: UnixMillis) -> StoreResult<()> {
        let client = self.runner.pool.get().await?;
        limits::open_breaker(&client, queue, until).await
    }

    /// Close `queue`'s circuit breaker on every node, at `now`.
    pub async fn close_breaker(&self, queue: &QueueName, now: UnixMillis) -> StoreResult<()> {
        let client = self.runner.pool.get().await?;
        limits::close_breaker(&client, queue, now).await
    }

    /// The breakers still open at `now`, and those closed by hand after `closed_since`.
    pub async fn breaker_news(
        &self,
        now: UnixMillis,
        closed_since: UnixMillis,
    ) -> StoreResult<BreakerNews> {
        let client = self.runner.pool.get().await?;
        limits::breaker_news(&client, now, closed_since).await
    }

    /// PostgreSQL keeps its planner statistics itself (autovacuum's analyze): nothing to do
    /// here, unlike SQLite's `PRAGMA optimize`.
    pub async fn maintain(&self) -> StoreResult<()> {
        Ok(())
    }

    /// When `queue` next has a job due.
    pub async fn next_due(&self, queue: QueueName) -> StoreResult<Option<UnixMillis>> {
        self.read(move |pg| Box::pin(async move { jobs::next_due(pg.tx, &queue).await }))
            .await
    }

    /// Hold the cluster-wide duty `name` (a periodic sweep, the scheduler) until `until`:
    /// true when this node holds it now, taken or renewed; false while another node's hold
    /// has not run out. A node that stops renewing loses the duty once its hold runs out,
    /// so a crashed node's duties move on by themselves.
    pub async fn hold_duty(
        &self,
        name: &str,
        now: UnixMillis,
        until: UnixMillis,
    ) -> StoreResult<bool> {
        let client = self.runner.pool.get().await?;
        let held = client
            .query_opt(
                "INSERT INTO cluster_leases (name, holder, until) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
                 WHERE cluster_leases.holder = excluded.holder OR cluster_leases.until <= $4
                 RETURNING holder",
                &[&name, &self.runner.node, &until, &now],
            )
            .await?;
        Ok(held.is_some())
    }

    /// Run `work` in one transaction of this node, committed with `durability` (see
    /// [`Runner::write`]).
    pub async fn write<T>(&self, durability: Durability, work: impl Work<T>) -> StoreResult<T> {
        self.runner.write(durability, work).await
    }

    /// Run `work` in a read-only transaction on one snapshot (see [`Runner::read`]).
    pub async fn read<T>(&self, work: impl Work<T>) -> StoreResult<T> {
        self.runner.read(work).await
    }

    /// Tell every node (this one too) that `queue` has jobs due.
    pub fn announce_due(&self, queue: &QueueName) {
        self.notifier.due(queue);
    }

    /// Whether the database answers (`/readyz`).
    pub async fn ping(&self) -> StoreResult<()> {
        let client = self.runner.pool.get().await?;
        client.simple_query("SELECT 1").await?;
        Ok(())
    }
}

/// Connections of a node's relaxed pool: one group of completions commits at a time.
const RELAXED_POOL: usize = 2;

/// What runs this node's transactions: its pools and its identity (what its leases carry).
/// The one place a PostgreSQL transaction begins and commits.
#[derive(Clone)]
pub(super) struct Runner {
    pool: PgPool,
    /// Sessions committing with `synchronous_commit = off`, for
    /// [`Runner::one_relaxed_statement`].
    relaxed: PgPool,
    node: Uuid,
}

impl Runner {
    /// Run `work` in one transaction of this node, committed with `durability`. A relaxed
    /// transaction's `SET LOCAL` goes out with `work`'s first statement, in one round trip
    /// (the connection runs them in the order sent).
    pub async fn write<T>(&self, durability: Durability, work: impl Work<T>) -> StoreResult<T> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let pg = PgTx {
            tx: &tx,
            node: self.node,
        };
        let result = match durability {
            Durability::Durable => work(pg).await?,
            Durability::Relaxed => {
                let relax = async {
                    tx.batch_execute("SET LOCAL synchronous_commit = off")
                        .await
                        .map_err(StoreError::from)
                };
                futures_util::future::try_join(relax, work(pg)).await?.1
            }
        };
        tx.commit().await?;
        Ok(result)
    }

    /// Run `write`, one statement, on its own: PostgreSQL commits it as it returns,
    /// durably (every session commits with `synchronous_commit = on`, see
    /// [`connect`](connect::connect)), and a failed statement leaves nothing behind. One
    /// round trip, where [`write`](Self::write) adds a `BEGIN` and a `COMMIT`.
    pub async fn one_statement<T>(&self, write: impl OneStatement<T>) -> StoreResult<T> {
        let client = self.pool.get().await?;
        write(&client, self.node).await
    }

    /// Run `write`, one statement whose loss in a database crash only means a delivery
    /// again, on its own on a relaxed session (`synchronous_commit = off`): one round trip,
    /// where [`write`](Self::write) with [`Durability::Relaxed`] adds a `BEGIN`, a
    /// `SET LOCAL` and a `COMMIT`.
    pub async fn one_relaxed_statement<T>(&self, write: impl OneStatement<T>) -> StoreResult<T> {
        let client = self.relaxed.get().await?;
        write(&client, self.node).await
    }

    /// Run `work` in a read-only transaction on one snapshot (`REPEATABLE READ`): its
    /// statements see the database as of its first, as a read on SQLite does.
    pub async fn read<T>(&self, work: impl Work<T>) -> StoreResult<T> {
        let mut client = self.pool.get().await?;
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        self.run(tx, work).await
    }

    /// Run `work` in `tx`, then commit it (a failure rolls it back as `tx` drops).
    async fn run<T>(&self, tx: Transaction<'_>, work: impl Work<T>) -> StoreResult<T> {
        let result = work(PgTx {
            tx: &tx,
            node: self.node,
        })
        .await?;
        tx.commit().await?;
        Ok(result)
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> Self {
        use tokio_postgres::error::SqlState;
        match error.code() {
            Some(code) if *code == SqlState::DISK_FULL => StoreError::StorageFull,
            // Raised by the `jobs_counted_in` trigger: the queue holds its maxQueued jobs
            // (migrations/postgres/0014_statement_counts.sql).
            Some(code) if code.code() == "HQ001" => StoreError::QueueFull,
            // A row naming a queue deleted by another transaction meanwhile (its insert
            // waited on the deletion's lock, then found the queue gone): as though the
            // queue had been gone before.
            Some(code)
                if *code == SqlState::FOREIGN_KEY_VIOLATION
                    && error
                        .as_db_error()
                        .and_then(|db| db.constraint())
                        .is_some_and(|c| c.ends_with("_queue_fkey")) =>
            {
                StoreError::QueueNotFound
            }
            Some(code)
                if *code == SqlState::T_R_DEADLOCK_DETECTED
                    || *code == SqlState::T_R_SERIALIZATION_FAILURE =>
            {
                StoreError::Contended(Arc::new(error))
            }
            // Connection exceptions (class 08) and the server shutting down, crashed or
            // starting (57P01–57P03).
            Some(code)
                if code.code().starts_with("08")
                    || ["57P01", "57P02", "57P03"].contains(&code.code()) =>
            {
                StoreError::Unavailable(Arc::new(error))
            }
            // No SQLSTATE: the connection itself failed (closed, refused, reset).
            None if error.is_closed() || is_io(&error) => StoreError::Unavailable(Arc::new(error)),
            _ => StoreError::Database(Arc::new(error)),
        }
    }
}

/// Whether `error` comes from the connection's socket.
fn is_io(error: &tokio_postgres::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if cause.is::<std::io::Error>() {
            return true;
        }
        source = cause.source();
    }
    false
}

impl From<PoolError> for StoreError {
    fn from(error: PoolError) -> Self {
        match error {
            PoolError::Backend(error) => error.into(),
            // No connection came free, or none could be opened, in time.
            PoolError::Timeout(_) => StoreError::Unavailable(Arc::new(error)),
            other => StoreError::Database(Arc::new(other)),
        }
    }
}
