//! The cluster capability: what a database shared by several nodes offers beyond storage
//! (duties held by one node at a time, circuit breakers and attempt figures shared between
//! nodes, wake-ups and queue changes from other nodes). Alone on its database (SQLite) a
//! node gets the trivially correct answer from each (every duty is its own, no other node
//! opens a breaker or delivers anything, nothing comes to listen to), so code above the
//! store asks what the store can do, never which backend it is.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::postgres::PgStore;
use super::records::{ActivityFigures, BreakerNews, Queue};
use super::{Backend, Store, StoreError, StoreResult};
use crate::model::{QueueName, UnixMillis};

/// What the store offers about the other nodes sharing its database: a borrowed view,
/// taken with [`Store::cluster`].
pub struct Cluster<'s> {
    /// The database other nodes may share, if this backend is one.
    shared: Option<&'s PgStore>,
}

impl Store {
    /// This store's cluster capability (a no-op when no other node can share it).
    pub fn cluster(&self) -> Cluster<'_> {
        let shared = match &self.backend {
            Backend::Postgres(db) => Some(db),
            Backend::Sqlite(_) => None,
        };
        Cluster { shared }
    }
}

impl Cluster<'_> {
    /// Whether other nodes may share this database (and so store jobs, change queues, open
    /// breakers and deliver beside this one).
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Tell every node sharing the database that `queue` has jobs due, after the commit that
    /// stored them (alone, nothing to tell: this process delivers what it stores).
    pub fn announce_due(&self, queue: &QueueName) {
        if let Some(db) = self.shared {
            db.announce_due(queue);
        }
    }

    /// Whether this node does cluster-wide duty `name` (a sweep, the event sender) now,
    /// holding it for `hold` more: always when alone; on a shared database while it holds
    /// the duty's lease, taken over once the holder stops renewing it. A database error
    /// counts as not holding it (and is logged).
    pub async fn on_duty(&self, name: &str, now: UnixMillis, hold: Duration) -> bool {
        let Some(db) = self.shared else {
            return true;
        };
        let until = now.saturating_add(i64::try_from(hold.as_millis()).unwrap_or(i64::MAX));
        match db.hold_duty(name, now, until).await {
            Ok(held) => held,
            Err(err) => {
                tracing::warn!(duty = name, error = %err, "cannot take the duty");
                false
            }
        }
    }

    /// Call `on_due` with every queue any node announces a job for, until `stop` (on its
    /// own connection, reconnecting by itself). Alone, nothing ever comes: returns at once.
    pub async fn listen_for_wakeups(
        &self,
        on_due: impl Fn(QueueName) + Send + Sync + 'static,
        stop: CancellationToken,
    ) {
        let Some(db) = self.shared else {
            return;
        };
        if let Err(err) = db.listen_for_wakeups(on_due, stop).await {
            tracing::error!(error = %err, "the wake-up listener failed");
        }
    }

    /// Follow the queue changes other nodes made since the last look (one single-row read
    /// when nothing changed). Returns whether the registry was reloaded; alone, the registry
    /// is the database's own order of changes and there is nothing to follow.
    pub async fn refresh_queues(&self) -> StoreResult<bool> {
        match self.shared {
            Some(db) => db.refresh_queues().await,
            None => Ok(false),
        }
    }

    /// Open `queue`'s circuit breaker on every node until `until` (alone, this node's own
    /// breaker is all there is).
    pub async fn open_breaker(&self, queue: &QueueName, until: UnixMillis) -> StoreResult<()> {
        match self.shared {
            Some(db) => db.open_breaker(queue, until).await,
            None => Ok(()),
        }
    }

    /// Close `queue`'s circuit breaker on every node, at `now` (alone, this node's own
    /// breaker is all there is).
    pub async fn close_breaker(&self, queue: &QueueName, now: UnixMillis) -> StoreResult<()> {
        match self.shared {
            Some(db) => db.close_breaker(queue, now).await,
            None => Ok(()),
        }
    }

    /// The breakers some node opened that are still open at `now`, and those an operator
    /// closed after `closed_since` (alone: none but this node's own, which it knows).
    pub async fn breaker_news(
        &self,
        now: UnixMillis,
        closed_since: UnixMillis,
    ) -> StoreResult<BreakerNews> {
        match self.shared {
            Some(db) => db.breaker_news(now, closed_since).await,
            None => Ok(BreakerNews::default()),
        }
    }

    /// Queue `name`, which this node's registry does not hold: on a shared database, read
    /// from it (another node may have created the queue since this node's last refresh)
    /// and taken into the registry. Alone, the registry holds every queue there is, so the
    /// answer is `QueueNotFound` without a read.
    pub async fn queue_created_elsewhere(&self, name: &QueueName) -> StoreResult<Arc<Queue>> {
        match self.shared {
            Some(db) => db.load_queue(name).await,
            None => Err(StoreError::QueueNotFound),
        }
    }

    /// Tell the other nodes this node's recent attempts of each busy queue, taken at `now`
    /// (for their `_stats`).
    pub async fn publish_activity(
        &self,
        now: UnixMillis,
        busy: &[(QueueName, ActivityFigures)],
    ) -> StoreResult<()> {
        match self.shared {
            Some(db) => db.publish_activity(now, busy).await,
            None => Ok(()),
        }
    }

    /// The recent attempts of every queue on every other node, added up per queue, as of
    /// `now` (alone: none). One read for all the queues a page or a minute's history shows.
    pub async fn activity_of_other_nodes_by_queue(
        &self,
        now: UnixMillis,
    ) -> StoreResult<HashMap<QueueName, ActivityFigures>> {
        match self.shared {
            Some(db) => db.activity_of_other_nodes_by_queue(now).await,
            None => Ok(HashMap::new()),
        }
    }

    /// This node's name in the views of several nodes: its id on a shared database,
    /// `this node` alone.
    pub fn node_name(&self) -> String {
        match self.shared {
            Some(db) => db.node().to_string(),
            None => "this node".to_owned(),
        }
    }

    /// Tell the other nodes the lease requests waiting on this one now, per queue
    /// (alone: nobody to tell).
    pub async fn publish_lease_waiters(
        &self,
        now: UnixMillis,
        waiting: &[(QueueName, usize)],
    ) -> StoreResult<()> {
        match self.shared {
            Some(db) => db.publish_lease_waiters(now, waiting).await,
            None => Ok(()),
        }
    }

    /// The lease requests waiting on every other live node, as (node, queue, requests)
    /// (alone: none).
    pub async fn lease_waiters_of_other_nodes(
        &self,
        now: UnixMillis,
    ) -> StoreResult<Vec<(String, QueueName, usize)>> {
        match self.shared {
            Some(db) => db.lease_waiters_of_other_nodes(now).await,
            None => Ok(Vec::new()),
        }
    }

    /// The recent attempts of `queue` on every other node, added up, as of `now` (alone:
    /// none).
    pub async fn activity_of_other_nodes(
        &self,
        queue: &QueueName,
        now: UnixMillis,
    ) -> StoreResult<ActivityFigures> {
        match self.shared {
            Some(db) => db.activity_of_other_nodes(queue, now).await,
            None => Ok(ActivityFigures::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreOptions;
    use crate::store::sealing::Sealing;
    use crate::store::sqlite::Synchronous;

    /// Alone on its database (SQLite), a node holds every duty, hears nobody and follows
    /// nothing: each answer is the trivially correct one, without a database round trip.
    #[tokio::test]
    async fn alone_on_its_database_a_node_holds_every_duty_and_follows_nobody() {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions::Sqlite {
            path: dir.path().join("alone.db"),
            synchronous: Synchronous::Normal,
        };
        let (store, _done) = Store::connect(options, Sealing::none(), 0, |_| {})
            .await
            .unwrap();
        let cluster = store.cluster();
        let queue = QueueName::parse("q").unwrap();
        assert!(!cluster.is_shared());
        assert!(cluster.on_duty("maintenance", 0, Duration::ZERO).await);
        assert!(!cluster.refresh_queues().await.unwrap());
        cluster.open_breaker(&queue, 1_000).await.unwrap();
        cluster.close_breaker(&queue, 500).await.unwrap();
        assert_eq!(
            cluster.breaker_news(0, 0).await.unwrap(),
            BreakerNews::default()
        );
        let busy = ActivityFigures {
            last_minute_delivered: 3,
            ..ActivityFigures::default()
        };
        cluster
            .publish_activity(0, &[(queue.clone(), busy)])
            .await
            .unwrap();
        assert_eq!(
            cluster.activity_of_other_nodes(&queue, 0).await.unwrap(),
            ActivityFigures::default()
        );
        assert!(
            cluster
                .activity_of_other_nodes_by_queue(0)
                .await
                .unwrap()
                .is_empty()
        );
        // Nothing to listen to: it returns at once, not when `stop` fires.
        cluster
            .listen_for_wakeups(|_| panic!("no other node"), CancellationToken::new())
            .await;
    }
}
