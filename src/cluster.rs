//! Following the other nodes on a shared database: hear the jobs they store (each wakes
//! this node's dispatcher for its queue), and every [`QUEUE_REFRESH`] take in their queue
//! changes and the circuit breakers they opened, and tell them this node's recent attempts
//! (for `_stats`) and its waiting lease requests (for the view of pull workers). Written against the store's [`Cluster`](crate::store::Cluster)
//! capability: a node alone on its database has nobody to follow and starts nothing.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::dispatch::{DeliveryPool, Wakeups};
use crate::model::{QueueName, UnixMillis, now_millis};
use crate::pull::Leases;
use crate::store::{ActivityFigures, Store};

/// How often a node on a shared database looks for queue changes made on other nodes: the
/// bound on how long a change made elsewhere (a pause, new settings, a deletion) takes to
/// hold here. A queue this node has never seen is looked up at once instead
/// ([`Store::queue`]).
pub const QUEUE_REFRESH: Duration = Duration::from_secs(1);

/// The tasks following the other nodes; they end with the token given to [`follow`].
pub struct Following {
    listener: JoinHandle<()>,
    refresher: JoinHandle<()>,
}

impl Following {
    /// Wait for both tasks to end (after their token fired).
    pub async fn finished(self) -> anyhow::Result<()> {
        self.listener
            .await
            .context("wake-up listener task failed")?;
        self.refresher.await.context("queue refresh task failed")?;
        Ok(())
    }
}

/// Start following the nodes `store` shares its database with, until `stop`; `None` when
/// it shares it with nobody. Without a delivery `pool` (`HOOKQ_DISPATCH=off`) there is no
/// breaker to rest and no attempt to tell; wake-ups still reach the lease requests waiting
/// on this node's pull queues, and their counts are still told.
pub fn follow(
    store: &Store,
    wakeups: &Wakeups,
    pool: Option<&DeliveryPool>,
    leases: &Leases,
    stop: &CancellationToken,
) -> Option<Following> {
    if !store.cluster().is_shared() {
        return None;
    }
    let woken = wakeups.clone();
    let listener = {
        let (store, stop) = (store.clone(), stop.clone());
        tokio::spawn(async move {
            // Wakes this node's dispatcher, or the lease requests waiting here.
            let on_due = move |queue: QueueName| woken.mark_due(&queue, now_millis());
            store.cluster().listen_for_wakeups(on_due, stop).await;
        })
    };
    let (store, pool, stop) = (store.clone(), pool.cloned(), stop.clone());
    let (wakeups, leases) = (wakeups.clone(), leases.clone());
    let refresher = tokio::spawn(async move {
        let mut every = tokio::time::interval(QUEUE_REFRESH);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut published = HashMap::new();
        // Breakers closed by hand before this node started are no news to it.
        let mut closed_seen = now_millis();
        let mut had_waiters = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = every.tick() => {
                    if let Err(err) = store.cluster().refresh_queues().await {
                        tracing::warn!(error = %err, "cannot reload the queues");
                    }
                    if let Some(pool) = &pool {
                        follow_breakers(&store, pool, &wakeups, &mut closed_seen).await;
                        publish_activity(&store, pool, &mut published).await;
                    }
                    publish_waiters(&store, &leases, &mut had_waiters).await;
                }
            }
        }
    });
    Some(Following {
        listener,
        refresher,
    })
}

/// Rest the targets whose breaker another node opened, and deliver again to those whose
/// breaker an operator closed (through another node) since `closed_seen`.
async fn follow_breakers(
    store: &Store,
    pool: &DeliveryPool,
    wakeups: &Wakeups,
    closed_seen: &mut UnixMillis,
) {
    let now = now_millis();
    match store.cluster().breaker_news(now, *closed_seen).await {
        Ok(news) => {
            // Closes first: an opening still in force came after the close (a close ends
            // the shared rest).
            for (queue, at) in news.closed {
                *closed_seen = (*closed_seen).max(at);
                if pool.breakers().closed_elsewhere(&queue, at) {
                    wakeups.mark_due(&queue, now);
                }
            }
            for (queue, until) in news.open {
                pool.breakers().opened_elsewhere(&queue, until, now);
            }
        }
        Err(err) => tracing::warn!(error = %err, "cannot read the shared breakers"),
    }
}

/// Write this node's recent attempts of the queues whose figures changed since they were
/// last written (or that had attempts in the last minute, so that their row stays fresh).
async fn publish_activity(
    store: &Store,
    pool: &DeliveryPool,
    published: &mut HashMap<QueueName, ActivityFigures>,
) {
    let now = now_millis();
    let busy: Vec<_> = pool
        .activity()
        .busy_queues(now)
        .into_iter()
        .filter(|(queue, figures)| {
            published.get(queue) != Some(figures)
                || figures.last_minute_delivered + figures.last_minute_failed > 0
        })
        .collect();
    match store.cluster().publish_activity(now, &busy).await {
        Ok(()) => published.extend(busy),
        Err(err) => tracing::warn!(error = %err, "cannot publish this node's activity"),
    }
}

/// Write this node's waiting lease requests per queue: every second while there are some
/// (so that their rows stay fresh), and once more when none are left (to clear them). An
/// idle node writes nothing.
async fn publish_waiters(store: &Store, leases: &Leases, had_waiters: &mut bool) {
    let waiting = leases.waiting();
    if waiting.is_empty() && !*had_waiters {
        return;
    }
    match store
        .cluster()
        .publish_lease_waiters(now_millis(), &waiting)
        .await
    {
        Ok(()) => *had_waiters = !waiting.is_empty(),
        Err(err) => tracing::warn!(error = %err, "cannot publish this node's lease requests"),
    }
}
