//! The PostgreSQL backend, for several hookq nodes on one database (in progress: it is not
//! yet behind the store's port, and the server accepts a `postgres://` database only once
//! every operation is there).
//!
//! - [`connect`]: a pool of connections from a `postgres://` / `postgresql://` URL, TLS
//!   through rustls as the URL's `sslmode` asks.
//! - [`migrate`]: the versioned schema (`migrations/postgres/`), applied at start under an
//!   advisory lock, so nodes starting at once apply it once.
//! - [`queues`], [`jobs`]: the SQL; [`PgStore`]: each operation in its transaction.
//!
//! Done so far: queues (create, load), enqueue (ordering keys, idempotency keys), claim,
//! outcomes (delivered, kept, retried, dead-lettered with its event), stale-lease
//! recovery. Still to come before it goes behind the port: batches, caps (`maxQueued`),
//! hand-offs, queue changes and deletion, listings, the dead-letter admin, TTL and
//! retention sweeps, schedules, the event outbox's sender side, cross-node wake-ups.

pub mod connect;
pub mod jobs;
pub mod migrate;
pub mod queues;

use std::sync::Arc;

use deadpool_postgres::PoolError;
use uuid::Uuid;

pub use connect::{PgPool, connect, is_postgres_url};
pub use migrate::{Migrated, migrate};

use crate::model::{JobId, QueueName, UnixMillis};
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{ClaimedJob, Enqueued, Lease, NewJob, Outbox, Outcome, Queue};
use crate::store::sealing::Sealing;

/// The PostgreSQL store of one node: a connection pool and the node's identity (what its
/// leases carry).
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    sealing: Arc<Sealing>,
    node: Uuid,
    outbox: Outbox,
}

impl PgStore {
    /// Connect (at most `pool_size` connections) and bring the schema up to date.
    pub async fn open(url: &str, pool_size: usize, sealing: Sealing) -> anyhow::Result<Self> {
        let pool = connect(url, pool_size).await?;
        migrate(&pool).await?;
        Ok(Self {
            pool,
            sealing: Arc::new(sealing),
            node: Uuid::now_v7(),
            outbox: Outbox::default(),
        })
    }

    /// Record a `job.dead_lettered` event with each dead-lettering (an events target is set).
    pub fn with_dead_letter_events(mut self, on: bool) -> Self {
        self.outbox.dead_letters = on;
        self
    }

    /// This node's identity, as its leases carry it (`jobs.leased_by`).
    pub fn node(&self) -> Uuid {
        self.node
    }

    /// The pool, for tests and tools that look at the database directly.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub async fn create_queue(&self, queue: Queue) -> StoreResult<()> {
        let client = self.pool.get().await?;
        queues::insert(&client, &queue, &self.sealing).await
    }

    /// Every queue, secrets opened.
    pub async fn load_queues(&self) -> StoreResult<Vec<Queue>> {
        let client = self.pool.get().await?;
        queues::load_all(&client, &self.sealing).await
    }

    /// Store a job; returns once it is committed (at the server's `synchronous_commit`).
    pub async fn enqueue(&self, queue: QueueName, job: NewJob) -> StoreResult<Enqueued> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let enqueued = jobs::enqueue(&tx, &queue, &job).await?;
        tx.commit().await?;
        Ok(enqueued)
    }

    /// Lease up to `limit` due jobs of `queue` to this node. The commit is relaxed
    /// (`synchronous_commit = off`): a claim lost in a database crash only means the job is
    /// delivered again, which at-least-once allows.
    pub async fn claim(
        &self,
        queue: QueueName,
        now: UnixMillis,
        leased_until: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<ClaimedJob>> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        tx.batch_execute("SET LOCAL synchronous_commit = off")
            .await?;
        let claimed = jobs::claim(&tx, &queue, now, leased_until, limit, self.node).await?;
        tx.commit().await?;
        Ok(claimed)
    }

    /// Record an attempt's outcome. False (nothing changed) if the lease was lost.
    pub async fn record_outcome(
        &self,
        id: JobId,
        lease: Lease,
        outcome: Outcome,
    ) -> StoreResult<bool> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let recorded = jobs::record_outcome(&tx, id, lease, &outcome, self.outbox).await?;
        tx.commit().await?;
        Ok(recorded)
    }

    /// Expired leases, whichever node held them, back to READY or to the dead letters; at
    /// most `limit` per call. Leases still running are never touched.
    pub async fn recover_stale_leases(
        &self,
        now: UnixMillis,
        default_max_attempts: u32,
        limit: usize,
    ) -> StoreResult<usize> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let recovered =
            jobs::recover_stale_leases(&tx, now, default_max_attempts, limit, self.outbox).await?;
        tx.commit().await?;
        Ok(recovered)
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> Self {
        use tokio_postgres::error::SqlState;
        match error.code() {
            Some(code) if *code == SqlState::DISK_FULL => StoreError::StorageFull,
            _ => StoreError::Database(Arc::new(error)),
        }
    }
}

impl From<PoolError> for StoreError {
    fn from(error: PoolError) -> Self {
        match error {
            PoolError::Backend(error) => error.into(),
            other => StoreError::Database(Arc::new(other)),
        }
    }
}
