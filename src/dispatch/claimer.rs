//! The claim loop: claims due jobs from every due queue, as many as the delivery pool has
//! free slots (shared fairly between the queues), and starts their attempts. It sleeps until
//! woken (an enqueue, a freed slot), until the next retry is due, or until the safety-net
//! sweep; a step of it ([`Claimer::claim_round`]) can be driven on its own by tests.

use std::collections::HashSet;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::breaker::Permit;
use super::pool::{DeliveryPool, Slot};
use super::wakeups::Wakeups;
use crate::model::{QueueName, UnixMillis, now_millis};
use crate::otel;
use crate::store::{Claimed, Store, StoreError};

/// The most free slots the claim loop waits for before claiming again under load.
const MAX_CLAIM_BATCH: usize = 32;

/// What one claim round did, for the loop (and for tests driving it step by step).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RoundReport {
    pub claimed: usize,
    /// Some queue may still have due jobs beyond what this round could take.
    pub more_due: bool,
}

pub struct Claimer {
    pool: DeliveryPool,
    /// The pool's store and wake-ups, at hand.
    store: Store,
    wakeups: Wakeups,
    sweep_interval: Duration,
    /// Due queues that had no free slot (theirs or the global ones) at their last round.
    parked: HashSet<QueueName>,
    rotation: usize,
}

impl Claimer {
    /// Claims for `pool`, within its bounds, from its store.
    pub fn new(pool: DeliveryPool) -> Self {
        Self {
            store: pool.inner().store.clone(),
            wakeups: pool.inner().wakeups.clone(),
            sweep_interval: pool.inner().sweep_interval,
            pool,
            parked: HashSet::new(),
            rotation: 0,
        }
    }

    /// Run until `shutdown`, then give in-flight attempts the grace period to finish.
    /// Deliveries still running after it are abandoned: their leases make the jobs come back.
    pub async fn run(mut self, shutdown: CancellationToken) {
        self.mark_all_due();
        let mut next_sweep = tokio::time::Instant::now() + self.sweep_interval;
        loop {
            let report = self.claim_round().await;
            if report.more_due && self.may_claim() {
                continue;
            }
            let now = now_millis();
            let wake_at = self
                .wakeups
                .next_due()
                .filter(|_| self.may_claim())
                .map(|at| {
                    tokio::time::Instant::now()
                        + Duration::from_millis(at.saturating_sub(now).max(0) as u64)
                })
                .map_or(next_sweep, |at| at.min(next_sweep));
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = self.wakeups.notified() => {}
                () = tokio::time::sleep_until(wake_at) => {}
            }
            if tokio::time::Instant::now() >= next_sweep {
                self.mark_all_due();
                next_sweep = tokio::time::Instant::now() + self.sweep_interval;
            }
        }
        self.pool.drain().await;
    }

    /// One claim round: claim from every due queue as many jobs as there are free slots
    /// (shared fairly between the queues), and start their deliveries.
    pub async fn claim_round(&mut self) -> RoundReport {
        if !self.may_claim() {
            return RoundReport::default();
        }
        let now = now_millis();
        self.unpark(now);
        let mut due = self.wakeups.take_due(now);
        if due.is_empty() {
            return RoundReport::default();
        }
        // Start each round at a different queue so none is always served last.
        self.rotation = self.rotation.wrapping_add(1);
        let offset = self.rotation % due.len();
        due.rotate_left(offset);

        let mut report = RoundReport::default();
        let mut free = self.pool.free();
        let queue_count = due.len();
        for (index, name) in due.into_iter().enumerate() {
            // A wake-up may name a queue another node has just created: the store looks it
            // up rather than leaving its jobs to the next sweep.
            let queue = match self.store.queue(&name).await {
                Ok(queue) => queue,
                Err(StoreError::QueueNotFound) => {
                    self.wakeups.forget(&name); // deleted since it was marked
                    continue;
                }
                Err(err) => {
                    tracing::error!(queue = %name, error = %err, "cannot look the queue up");
                    self.wakeups.mark_due(&name, now + 1000);
                    continue;
                }
            };
            if queue.is_pull() {
                // Workers lease its jobs: a job fell due, so wake whoever waits for one.
                // Its later jobs mark it due again when they fall due.
                self.wakeups.wake_lease_waiters(&name);
                self.wakeups.settle(&name);
                continue;
            }
            if queue.paused {
                // Nothing of it is claimed until it resumes (which marks it due again); its
                // jobs wait for no slot meanwhile, so they hold up no hand-off.
                self.wakeups.settle(&name);
                continue;
            }
            let queue_free = self
                .pool
                .concurrency_of(&queue)
                .saturating_sub(self.pool.in_flight(&name));
            // A fair share of the free slots for each queue still to be served this round.
            let share = free.div_ceil(queue_count - index);
            let breakers = self.pool.breakers();
            let permit = breakers.permit(&name, now);
            let want = match permit {
                Permit::Any => share.min(queue_free),
                Permit::Probe => share.min(queue_free).min(1),
                Permit::Wait(until) => {
                    // Resting after repeated failures: look again when the pause ends. Its
                    // jobs are not waiting for a slot meanwhile, so they hold up no hand-off
                    // (its own queue's are refused by its breaker).
                    self.wakeups.mark_due(&name, until);
                    self.wakeups.settle(&name);
                    continue;
                }
            };
            // Slots first, then the claim: a direct hand-off may take a slot at any moment,
            // and a claimed job must never wait for one.
            let mut slots: Vec<Slot> = (0..want)
                .map_while(|_| self.pool.try_slot(&queue))
                .collect();
            if slots.is_empty() {
                if permit == Permit::Probe {
                    breakers.probe_unused(&name);
                }
                // No room: park it until a delivery finishes and frees a slot.
                self.parked.insert(name);
                continue;
            }
            // A rate-limited queue starts no more deliveries than it has tokens.
            if let Some(rate) = queue.policy.rate {
                let instant = std::time::Instant::now();
                let allowed = self.pool.rates().take(&name, rate, slots.len(), instant);
                slots.truncate(allowed); // dropped slots are given back
                if slots.is_empty() {
                    if permit == Permit::Probe {
                        breakers.probe_unused(&name);
                    }
                    // Look again when the next token is there; meanwhile its jobs wait
                    // for no slot, so they hold up no hand-off.
                    let wait = self.pool.rates().next_token_in(&name, instant);
                    let wait_ms = i64::try_from(wait.as_millis()).unwrap_or(i64::MAX);
                    self.wakeups.mark_due(&name, now + wait_ms.max(1));
                    self.wakeups.settle(&name);
                    continue;
                }
            }
            let want = slots.len();
            let leased_until = self.pool.lease_until(now, &queue);
            let limits = self.pool.shared_limits_of(&queue);
            let span = otel::claim(&name);
            let Claimed {
                jobs: claimed,
                held_back_until,
            } = match self
                .store
                .claim_within(name.clone(), now, leased_until, want, limits)
                .await
            {
                Ok(claimed) => claimed,
                Err(err) => {
                    if queue.policy.rate.is_some() {
                        self.pool.rates().give_back(&name, want);
                    }
                    tracing::error!(queue = %name, error = %err, "claim failed; will retry");
                    self.wakeups.mark_due(&name, now + 1000);
                    continue;
                }
            };
            otel::claimed(span.as_ref(), &claimed);
            drop(span);
            let got = claimed.len();
            if queue.policy.rate.is_some() {
                self.pool.rates().give_back(&name, want - got);
            }
            if got == 0 && permit == Permit::Probe {
                self.pool.breakers().probe_unused(&name);
            }
            free -= got.min(free);
            report.claimed += got;
            if got == want {
                // There may be more: look again as soon as there is room.
                self.wakeups.mark_due(&name, now);
                report.more_due = true;
            } else if let Some(at) = held_back_until {
                // Other nodes hold the queue's concurrency, or its shared rate has no start
                // left: look again then; its jobs wait for no slot of this node meanwhile.
                self.wakeups.mark_due(&name, at);
                self.wakeups.settle(&name);
            } else {
                // Caught up: every due job of the queue is claimed. Once no queue has jobs
                // waiting, an enqueue may hand its job over directly.
                self.remember_next_due(&name).await;
                self.wakeups.settle(&name);
            }
            // Slots left over (fewer jobs than slots) are given back as they drop.
            for (job, slot) in claimed.into_iter().zip(slots) {
                self.pool.start(queue.clone(), job, slot);
            }
        }
        report
    }

    /// Whether enough slots are free for a claim round. Under load, claiming for every single
    /// slot that frees up would cost one write per job; waiting until a batch's worth is free
    /// (while deliveries are still running, so nothing stalls) claims many jobs per write.
    fn may_claim(&self) -> bool {
        let free = self.pool.free();
        let busy = self.pool.inner().max_in_flight - free;
        free > 0 && (busy == 0 || free >= self.claim_batch())
    }

    /// The free slots worth a claim round while deliveries are running.
    fn claim_batch(&self) -> usize {
        (self.pool.inner().max_in_flight / 8).clamp(1, MAX_CLAIM_BATCH)
    }

    /// Parked queues that have room again become due again.
    fn unpark(&mut self, now: UnixMillis) {
        if self.parked.is_empty() || self.pool.free() == 0 {
            return;
        }
        let pool = &self.pool;
        let wakeups = &self.wakeups;
        let registry = self.store.registry();
        self.parked.retain(|name| {
            let Some(queue) = registry.get(name) else {
                return false; // deleted
            };
            let has_room = pool.in_flight(name) < pool.concurrency_of(&queue);
            if has_room {
                wakeups.mark_due(name, now);
            }
            !has_room
        });
    }

    /// Read when `queue` next has a job due and keep it as its wake-up time.
    async fn remember_next_due(&self, name: &QueueName) {
        match self.store.next_due(name.clone()).await {
            Ok(Some(at)) => self.wakeups.mark_due(name, at),
            Ok(None) => {}
            Err(err) => {
                tracing::error!(queue = %name, error = %err, "cannot read next due time");
                self.wakeups.mark_due(name, now_millis() + 1000);
            }
        }
    }

    fn mark_all_due(&self) {
        let now = now_millis();
        for queue in self.store.registry().all() {
            self.wakeups.mark_due(&queue.name, now);
        }
    }
}
