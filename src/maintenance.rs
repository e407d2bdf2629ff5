//! Periodic sweeps, each through the single writer in small batches and at its own
//! interval so they never hold the writer long or fire together:
//! stale leases back to READY (or dead-lettered if that was their last attempt), TTL expiry
//! (undelivered jobs dead-lettered as `expired`), dead-letter retention (closed records
//! deleted), delivery-log retention (each queue's `keepDelivered`), dead-letter alert
//! signals, and `PRAGMA optimize`.
//!
//! Every sweep takes `now` as an argument, so tests drive them with any clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::dispatch::{DeliveryPool, Wakeups};
use crate::event::Event;
use crate::events::Events;
use crate::model::{QueueName, UnixMillis, now_millis};
use crate::policy::Defaults;
use crate::store::records::ACTIVITY_MINUTES;
use crate::store::{ActivityBucket, ActivityFigures, LeaseExpiry, Store};
use crate::telemetry;

const TTL_INTERVAL: Duration = Duration::from_secs(60);
const RETENTION_INTERVAL: Duration = Duration::from_secs(600);
const DELIVERY_LOG_INTERVAL: Duration = Duration::from_secs(60);
const ALERT_INTERVAL: Duration = Duration::from_secs(60);
const OPTIMIZE_INTERVAL: Duration = Duration::from_secs(3600);
/// The activity history is written once a minute.
const ACTIVITY_INTERVAL: Duration = Duration::from_secs(60);
/// How often each node adds its publish counts to the topics' stored ones, and the duty
/// holder deletes the messages nothing needs any more.
const TOPICS_INTERVAL: Duration = Duration::from_secs(5);
const MINUTE_MS: UnixMillis = 60_000;
/// Rows one sweep statement may touch, so the writer is never held long.
pub const SWEEP_BATCH: usize = 1000;
/// A pending dead letter older than this raises the `oldest_pending_stale` alert.
pub const STALE_PENDING_AGE_MS: i64 = 24 * 3600 * 1000;
/// Replays beyond which a pending dead letter counts as a repeat failure.
pub const REPEAT_FAILURE_REPLAYS: u32 = 2;

/// The dead-letter alert signals: logged once per change, readable by metrics.
#[derive(Debug, Default)]
pub struct DlqAlerts {
    pub too_many_pending: AtomicBool,
    pub oldest_pending_stale: AtomicBool,
    pub repeat_failures: AtomicBool,
}

/// The sweeps' own settings, from the server's configuration.
#[derive(Debug, Clone)]
pub struct MaintenanceConfig {
    /// A job not delivered within this time is dead-lettered as `expired`.
    pub job_ttl: Duration,
    /// Idempotency keys older than this are deleted (they count as absent already).
    pub idempotency_ttl: Duration,
    /// Replayed and acknowledged dead letters are deleted this long after their last change.
    pub dlq_retention: Duration,
    /// Audit-log entries are deleted this long after they were written.
    pub audit_retention: Duration,
    /// More pending dead letters than this raise the `too_many_pending` alert.
    pub dlq_alert_pending: u64,
}

#[derive(Clone)]
pub struct Maintenance {
    pub store: Store,
    pub wakeups: Wakeups,
    pub config: MaintenanceConfig,
    /// How long a claim leases a job (the dispatcher's): stale leases are looked for at a
    /// quarter of it.
    pub lease_timeout: Duration,
    /// The server's settings for queues that set none of their own: the attempt limit
    /// (stale leases) and `HOOKQ_KEEP_DELIVERED` (the delivery log).
    pub defaults: Defaults,
    pub alerts: Arc<DlqAlerts>,
    /// Alerts raised and cleared, and dead letters the sweeps made, for the events target.
    pub events: Events,
    /// This node's delivery pool, whose attempts the activity history records; `None`
    /// when dispatch is off (the other nodes' attempts are still recorded).
    pub pool: Option<DeliveryPool>,
}

/// The sweep a tick is for.
enum Sweep {
    Leases,
    Ttl,
    Alerts,
    DeliveryLog,
    Retention,
    Optimize,
    Activity,
    Topics,
}

impl Maintenance {
    /// How often leases are checked: a stale one waits at most a quarter of the lease
    /// timeout more, and the check runs at most once a second.
    fn lease_check_interval(&self) -> Duration {
        (self.lease_timeout / 4).clamp(Duration::from_secs(1), Duration::from_secs(30))
    }

    /// How long a node holds the maintenance duty of a shared database without renewing
    /// it: three lease checks (each renews it), so one slow round does not pass it on, and a
    /// node that died passes it on within three checks (3 s to 90 s).
    fn duty_hold(&self) -> Duration {
        3 * self.lease_check_interval()
    }

    pub async fn run(self, shutdown: CancellationToken) {
        let start = tokio::time::Instant::now();
        // Staggered first runs so the sweeps do not all queue at the writer together.
        let every = |period: Duration, offset: Duration| {
            let mut interval = tokio::time::interval_at(start + offset, period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            interval
        };
        let mut leases = every(self.lease_check_interval(), self.lease_check_interval());
        let mut ttl = every(TTL_INTERVAL, Duration::from_secs(7));
        let mut alerts = every(ALERT_INTERVAL, Duration::from_secs(3));
        let mut retention = every(RETENTION_INTERVAL, Duration::from_secs(17));
        let mut delivery_log = every(DELIVERY_LOG_INTERVAL, Duration::from_secs(23));
        let mut optimize = every(OPTIMIZE_INTERVAL, OPTIMIZE_INTERVAL);
        let mut activity = every(ACTIVITY_INTERVAL, Duration::from_secs(29));
        let mut topics = every(TOPICS_INTERVAL, Duration::from_secs(2));
        loop {
            let sweep = tokio::select! {
                () = shutdown.cancelled() => break,
                _ = leases.tick() => Sweep::Leases,
                _ = ttl.tick() => Sweep::Ttl,
                _ = alerts.tick() => Sweep::Alerts,
                _ = delivery_log.tick() => Sweep::DeliveryLog,
                _ = retention.tick() => Sweep::Retention,
                _ = optimize.tick() => Sweep::Optimize,
                _ = activity.tick() => Sweep::Activity,
                _ = topics.tick() => Sweep::Topics,
            };
            let now = now_millis();
            if matches!(sweep, Sweep::Topics) {
                // Every node's own counts, duty or not.
                self.store_publish_counts().await;
            }
            if !self.on_duty(now).await {
                continue;
            }
            match sweep {
                Sweep::Leases => {
                    self.recover_stale_leases(now).await;
                }
                Sweep::Ttl => {
                    self.expire_jobs(now).await;
                }
                Sweep::Alerts => self.check_alerts(now).await,
                Sweep::DeliveryLog => {
                    self.purge_delivery_log(now).await;
                }
                Sweep::Retention => {
                    self.purge_dead_letters(now).await;
                    self.purge_idempotency_keys(now).await;
                    self.prune_audit(now).await;
                }
                Sweep::Activity => {
                    self.record_activity(now).await;
                }
                Sweep::Topics => {
                    self.purge_messages(now).await;
                }
                Sweep::Optimize => {
                    if let Err(err) = self.store.maintain().await {
                        tracing::warn!(error = %err, "store upkeep failed");
                    }
                }
            }
        }
    }

    /// Whether this node runs the sweeps now. Alone on its database it always does. On a
    /// database several nodes share, one node at a time does: the holder of the
    /// `maintenance` duty, renewed by each of its sweeps and passed on once a node stops
    /// renewing it for [`Self::duty_hold`].
    async fn on_duty(&self, now: UnixMillis) -> bool {
        self.store
            .cluster()
            .on_duty("maintenance", now, self.duty_hold())
            .await
    }

    /// Record the last complete minute of every queue's attempts (this node's and, on a
    /// shared database, the other nodes'), for the charts' day of history. Returns the rows
    /// offered (quiet queues are not stored).
    pub async fn record_activity(&self, now: UnixMillis) -> usize {
        // The other nodes' figures of every queue, in one read.
        let mut others = match self
            .store
            .cluster()
            .activity_of_other_nodes_by_queue(now)
            .await
        {
            Ok(others) => others,
            Err(err) => {
                tracing::warn!(error = %err, "activity history: reading other nodes failed");
                return 0;
            }
        };
        let mut rows = Vec::new();
        for queue in self.store.registry().all().iter() {
            let mut figures = match &self.pool {
                Some(pool) => pool.activity().figures(&queue.name, now),
                None => ActivityFigures::default(),
            };
            if let Some(of_others) = others.remove(&queue.name) {
                figures.add(&of_others);
            }
            rows.push(last_complete_minute(&queue.name, &figures, now));
        }
        let offered = rows.len();
        if let Err(err) = self.store.record_activity(rows, now).await {
            tracing::warn!(error = %err, "activity history: recording a minute failed");
        }
        offered
    }

    /// Expired leases back to READY (or dead-lettered). Returns how many were recovered.
    pub async fn recover_stale_leases(&self, now: UnixMillis) -> usize {
        recover_expired_leases(
            &self.store,
            &self.wakeups,
            &self.events,
            &self.defaults,
            now,
        )
        .await
    }

    /// Dead-letter every READY job older than the TTL, in batches. Returns how many.
    pub async fn expire_jobs(&self, now: UnixMillis) -> usize {
        let cutoff = now.saturating_sub(self.config.job_ttl.as_millis() as i64);
        let mut total = 0;
        loop {
            match self.store.expire_jobs(cutoff, now, SWEEP_BATCH).await {
                Ok(queues) => {
                    let count = queues.len();
                    for queue in &queues {
                        telemetry::job_dead_lettered(queue, "expired");
                        // An expired key head lets the key's next job go.
                        self.wakeups.mark_due(queue, now);
                    }
                    total += count;
                    if count < SWEEP_BATCH {
                        break;
                    }
                }
                Err(err) => {
                    tracing::error!(error = %err, "TTL sweep failed");
                    break;
                }
            }
        }
        if total > 0 {
            self.events.stored();
            tracing::warn!(
                jobs = total,
                "jobs not delivered within their TTL were dead-lettered (reason: expired)"
            );
        }
        total
    }

    /// Delete the audit-log entries older than `HOOKQ_AUDIT_RETENTION`. Returns how many.
    pub async fn prune_audit(&self, now: UnixMillis) -> usize {
        let retention = i64::try_from(self.config.audit_retention.as_millis()).unwrap_or(i64::MAX);
        match self.store.prune_audit(now.saturating_sub(retention)).await {
            Ok(pruned) => {
                if pruned > 0 {
                    tracing::info!(entries = pruned, "deleted audit entries past retention");
                }
                pruned
            }
            Err(err) => {
                tracing::error!(error = %err, "audit retention sweep failed");
                0
            }
        }
    }

    /// Delete replayed/acknowledged dead letters past retention, in batches. Returns how many.
    pub async fn purge_dead_letters(&self, now: UnixMillis) -> usize {
        let before = now.saturating_sub(self.config.dlq_retention.as_millis() as i64);
        let total = in_batches("dead-letter retention sweep", || {
            self.store.purge_dead_letters(before, SWEEP_BATCH)
        })
        .await;
        if total > 0 {
            tracing::info!(
                records = total,
                "deleted closed dead letters past retention"
            );
        }
        total
    }

    /// Delete each queue's delivered jobs kept longer than its `keepDelivered` (all of them
    /// for a queue that keeps none now), in batches. Returns how many.
    pub async fn purge_delivery_log(&self, now: UnixMillis) -> usize {
        let cutoffs: Vec<(QueueName, UnixMillis)> = self
            .store
            .registry()
            .all()
            .iter()
            .map(|queue| {
                let keep = queue
                    .policy
                    .keep_delivered
                    .unwrap_or(self.defaults.keep_delivered);
                let keep = i64::try_from(keep.as_millis()).unwrap_or(i64::MAX);
                (queue.name.clone(), now.saturating_sub(keep))
            })
            .collect();
        let total = in_batches("delivery-log retention sweep", || {
            self.store.purge_delivered(cutoffs.clone(), SWEEP_BATCH)
        })
        .await;
        if total > 0 {
            tracing::info!(records = total, "deleted delivered jobs past keepDelivered");
        }
        total
    }

    /// Add the messages this node published to their topics' stored counts.
    pub async fn store_publish_counts(&self) {
        if let Err(err) = self.store.store_publish_counts().await {
            tracing::warn!(error = %err, "storing the topics' publish counts failed");
        }
    }

    /// Delete the topics' messages no job, dead letter or delivery-log record refers to and
    /// no retention keeps any more, in batches. Returns how many.
    pub async fn purge_messages(&self, now: UnixMillis) -> usize {
        in_batches("message sweep", || {
            self.store.purge_messages(now, SWEEP_BATCH)
        })
        .await
    }

    /// Delete expired idempotency keys, in batches. Returns how many.
    pub async fn purge_idempotency_keys(&self, now: UnixMillis) -> usize {
        let before = now.saturating_sub(self.config.idempotency_ttl.as_millis() as i64);
        in_batches("idempotency key sweep", || {
            self.store.purge_idempotency_keys(before, SWEEP_BATCH)
        })
        .await
    }

    /// Evaluate the alert conditions; log each one when it starts and when it clears.
    pub async fn check_alerts(&self, now: UnixMillis) {
        let stats = match self
            .store
            .dlq_stats(None, now, REPEAT_FAILURE_REPLAYS)
            .await
        {
            Ok(stats) => stats,
            Err(err) => {
                tracing::error!(error = %err, "cannot read dead-letter stats for alerts");
                return;
            }
        };
        let pending = stats.by_status.get("pending").copied().unwrap_or(0);
        let oldest_age = stats.oldest_pending_age_ms.unwrap_or(0);
        update_alert(
            &self.events,
            "too_many_pending",
            &self.alerts.too_many_pending,
            pending > self.config.dlq_alert_pending,
            || {
                format!(
                    "{pending} dead letters pending (threshold {})",
                    self.config.dlq_alert_pending
                )
            },
        );
        update_alert(
            &self.events,
            "oldest_pending_stale",
            &self.alerts.oldest_pending_stale,
            oldest_age > STALE_PENDING_AGE_MS,
            || {
                format!(
                    "the oldest pending dead letter is {} h old",
                    oldest_age / 3_600_000
                )
            },
        );
        update_alert(
            &self.events,
            "repeat_failures",
            &self.alerts.repeat_failures,
            stats.repeat_failures > 0,
            || {
                format!(
                    "{} pending dead letters failed again after more than {REPEAT_FAILURE_REPLAYS} replays",
                    stats.repeat_failures
                )
            },
        );
    }
}

/// Expired leases back to READY, or dead-lettered if that was their last attempt (by their
/// queue's `maxAttempts`, else the server's; a pull queue's job after its backoff); every
/// queue is woken, since their jobs may be due again. Returns how many were recovered. Run by the periodic sweep, and
/// by the pull leases' expiry watch ([`crate::pull`]) as each lease expires.
pub async fn recover_expired_leases(
    store: &Store,
    wakeups: &Wakeups,
    events: &Events,
    defaults: &Defaults,
    now: UnixMillis,
) -> usize {
    let queues = store.registry().all();
    let expiry = LeaseExpiry::of(queues.iter().map(|q| &**q), defaults);
    match store.recover_stale_leases(now, expiry).await {
        Ok(0) => 0,
        Ok(count) => {
            tracing::warn!(jobs = count, "recovered jobs whose lease expired");
            for queue in store.registry().all() {
                wakeups.mark_due(&queue.name, now);
            }
            // Those on their last attempt were dead-lettered, with their events.
            events.stored();
            count
        }
        Err(err) => {
            tracing::error!(error = %err, "stale-lease sweep failed");
            0
        }
    }
}

/// Run `sweep`, which deletes up to [`SWEEP_BATCH`] rows, until a batch comes back short;
/// returns how many rows went in all. Other writes get through between batches. A failure is
/// logged (naming `what`) and ends this round; the next round tries again.
async fn in_batches<F, Fut>(what: &str, sweep: F) -> usize
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = crate::store::StoreResult<usize>>,
{
    let mut total = 0;
    loop {
        match sweep().await {
            Ok(count) => {
                total += count;
                if count < SWEEP_BATCH {
                    return total;
                }
                tokio::task::yield_now().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "{what} failed");
                return total;
            }
        }
    }
}

/// Set alert `name`'s signal; when it changes, log it and emit a `dlq.alert` event.
fn update_alert(
    events: &Events,
    name: &'static str,
    flag: &AtomicBool,
    raised: bool,
    describe: impl FnOnce() -> String,
) {
    telemetry::dlq_alert(name, raised);
    let was = flag.swap(raised, Ordering::Relaxed);
    let message = match (was, raised) {
        (false, true) => {
            let message = describe();
            tracing::warn!(alert = %message, "dead-letter alert raised");
            message
        }
        (true, false) => {
            tracing::info!(alert = name, "dead-letter alert cleared");
            format!("{name} cleared")
        }
        _ => return,
    };
    events.emit(Event::DlqAlert {
        alert: name.to_owned(),
        raised,
        message,
    });
}

/// `queue`'s attempts in the last minute complete at `now` (the one before the current
/// minute, still counting), as the activity history stores it.
fn last_complete_minute(
    queue: &QueueName,
    figures: &ActivityFigures,
    now: UnixMillis,
) -> ActivityBucket {
    // The hour's last entry is the current minute; the one before it is complete.
    let last_complete = ACTIVITY_MINUTES - 2;
    ActivityBucket {
        queue: queue.clone(),
        start: now - now.rem_euclid(MINUTE_MS) - MINUTE_MS,
        delivered: figures.hour_delivered[last_complete],
        failed: figures.hour_failed[last_complete],
        latency: figures.latency[0],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_takes_the_minute_before_the_current_one() {
        let mut figures = ActivityFigures::default();
        figures.hour_delivered[ACTIVITY_MINUTES - 1] = 99; // the current minute: not yet
        figures.hour_delivered[ACTIVITY_MINUTES - 2] = 7;
        figures.hour_failed[ACTIVITY_MINUTES - 2] = 3;
        figures.latency[0].record(40);
        figures.latency[1].record(9_000); // the current minute's: not yet
        let queue = QueueName::parse("q").expect("a valid name");
        let now = 10 * MINUTE_MS + 42_000;
        assert_eq!(
            last_complete_minute(&queue, &figures, now),
            ActivityBucket {
                queue,
                start: 9 * MINUTE_MS,
                delivered: 7,
                failed: 3,
                latency: figures.latency[0],
            }
        );
    }
}
