//! Periodic sweeps through the single writer: stale leases back to READY (or dead-lettered if
//! that was their last attempt), and `PRAGMA optimize` to keep query plans fresh.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::dispatch::Wakeups;
use crate::model::now_millis;
use crate::store::Store;

const OPTIMIZE_INTERVAL: Duration = Duration::from_secs(3600);

pub struct Maintenance {
    pub store: Store,
    pub wakeups: Wakeups,
    pub lease_timeout: Duration,
    pub max_attempts: u32,
}

impl Maintenance {
    /// How often leases are checked: often enough that a stale one waits at most a quarter of
    /// the lease timeout more, never more often than once a second.
    fn lease_check_interval(&self) -> Duration {
        (self.lease_timeout / 4).clamp(Duration::from_secs(1), Duration::from_secs(30))
    }

    pub async fn run(self, shutdown: CancellationToken) {
        let mut leases = tokio::time::interval(self.lease_check_interval());
        let mut optimize = tokio::time::interval(OPTIMIZE_INTERVAL);
        leases.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        optimize.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick of an interval is immediate; start-up already did both jobs.
        leases.tick().await;
        optimize.tick().await;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                _ = leases.tick() => self.recover_stale_leases().await,
                _ = optimize.tick() => {
                    if let Err(err) = self.store.optimize().await {
                        tracing::warn!(error = %err, "PRAGMA optimize failed");
                    }
                }
            }
        }
    }

    /// One sweep of expired leases.
    pub async fn recover_stale_leases(&self) {
        let now = now_millis();
        match self.store.recover_stale_leases(now, self.max_attempts).await {
            Ok(0) => {}
            Ok(count) => {
                tracing::warn!(jobs = count, "recovered jobs whose delivery lease expired");
                for queue in self.store.registry().all() {
                    self.wakeups.mark_due(&queue.name, now);
                }
            }
            Err(err) => tracing::error!(error = %err, "stale-lease sweep failed"),
        }
    }
}
