//! The dispatcher: claims due jobs, delivers them concurrently within the in-flight bounds,
//! and records each outcome (delivered, retry later, dead-letter) through the store.
//!
//! No polling on the hot path: an enqueue marks its queue due and wakes the loop at once
//! ([`Wakeups`]); a timer wakes it when the next retry is due; a slow sweep re-checks every
//! queue in case anything was missed. While no job waits to be claimed, an enqueue skips
//! all of this and hands its job straight to a delivery ([`deliveries`]).

pub mod breaker;
pub mod deliver;
pub mod deliveries;
pub mod guard;
pub mod retry;
pub mod wakeups;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use breaker::{Breakers, Permit};
pub use deliver::{AttemptResult, Deliverer};
pub use deliveries::{Deliveries, Handoff, Slot};
pub use retry::RetryPolicy;
pub use wakeups::Wakeups;

use crate::model::{QueueName, UnixMillis, now_millis};
use crate::store::{ClaimedJob, Failure, Outcome, Queue, Store};
use crate::telemetry;

/// The most free slots the dispatcher waits for before claiming again under load.
const MAX_CLAIM_BATCH: usize = 32;

/// How often every queue is re-checked even without a wake-up (a safety net, not the hot path).
const SWEEP_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct DispatchConfig {
    /// Consecutive failed attempts that open a queue's circuit breaker (0: never).
    pub breaker_threshold: u32,
    pub breaker_cooldown: Duration,
    pub max_in_flight: usize,
    pub max_in_flight_per_queue: usize,
    pub lease_timeout: Duration,
    pub shutdown_grace: Duration,
    pub retry: RetryPolicy,
}

/// What one claim round did, for the loop (and for tests driving it step by step).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RoundReport {
    pub claimed: usize,
    /// Some queue may still have due jobs beyond what this round could take.
    pub more_due: bool,
}

pub struct Dispatcher {
    deliveries: Deliveries,
    /// The deliveries' store and wake-ups, at hand.
    store: Store,
    wakeups: Wakeups,
    /// Due queues that had no free slot (theirs or the global ones) at their last round.
    parked: HashSet<QueueName>,
    rotation: usize,
}

impl Dispatcher {
    /// Claims for `deliveries`, within its bounds, from its store.
    pub fn new(deliveries: Deliveries) -> Self {
        Self {
            store: deliveries.inner().store.clone(),
            wakeups: deliveries.inner().wakeups.clone(),
            deliveries,
            parked: HashSet::new(),
            rotation: 0,
        }
    }

    /// Run until `shutdown`, then give in-flight deliveries the grace period to finish.
    /// Deliveries still running after it are abandoned: their leases make the jobs come back.
    pub async fn run(mut self, shutdown: CancellationToken) {
        self.mark_all_due();
        let mut next_sweep = tokio::time::Instant::now() + SWEEP_INTERVAL;
        loop {
            let report = self.dispatch_once().await;
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
                next_sweep = tokio::time::Instant::now() + SWEEP_INTERVAL;
            }
        }
        self.deliveries.drain().await;
    }

    /// One claim round: claim from every due queue as many jobs as there are free slots
    /// (shared fairly between the queues), and start their deliveries.
    pub async fn dispatch_once(&mut self) -> RoundReport {
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
        let mut free = self.deliveries.free();
        let queue_count = due.len();
        for (index, name) in due.into_iter().enumerate() {
            let Some(queue) = self.store.registry().get(&name) else {
                self.wakeups.forget(&name); // deleted since it was marked
                continue;
            };
            let queue_free = self
                .deliveries
                .inner()
                .max_in_flight_per_queue
                .saturating_sub(self.deliveries.in_flight(&name));
            // A fair share of the free slots for each queue still to be served this round.
            let share = free.div_ceil(queue_count - index);
            let breakers = self.deliveries.breakers();
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
            let slots: Vec<Slot> = (0..want)
                .map_while(|_| self.deliveries.try_slot(&name))
                .collect();
            if slots.is_empty() {
                if permit == Permit::Probe {
                    breakers.probe_unused(&name);
                }
                // No room: park it until a delivery finishes and frees a slot.
                self.parked.insert(name);
                continue;
            }
            let want = slots.len();
            let leased_until = self.deliveries.lease_until(now);
            let claimed = match self
                .store
                .claim(name.clone(), now, leased_until, want)
                .await
            {
                Ok(jobs) => jobs,
                Err(err) => {
                    tracing::error!(queue = %name, error = %err, "claim failed; will retry");
                    self.wakeups.mark_due(&name, now + 1000);
                    continue;
                }
            };
            let got = claimed.len();
            if got == 0 && permit == Permit::Probe {
                self.deliveries.breakers().probe_unused(&name);
            }
            free -= got.min(free);
            report.claimed += got;
            if got == want {
                // There may be more: look again as soon as there is room.
                self.wakeups.mark_due(&name, now);
                report.more_due = true;
            } else {
                // Caught up: every due job of the queue is claimed. Once no queue has jobs
                // waiting, an enqueue may hand its job over directly.
                self.remember_next_due(&name).await;
                self.wakeups.settle(&name);
            }
            // Slots left over (fewer jobs than slots) are given back as they drop.
            for (job, slot) in claimed.into_iter().zip(slots) {
                self.deliveries.start(queue.clone(), job, slot);
            }
        }
        report
    }

    /// Whether enough slots are free for a claim round. Under load, claiming for every single
    /// slot that frees up would cost one write per job; waiting until a batch's worth is free
    /// (while deliveries are still running, so nothing stalls) claims many jobs per write.
    fn may_claim(&self) -> bool {
        let free = self.deliveries.free();
        let busy = self.deliveries.inner().max_in_flight - free;
        free > 0 && (busy == 0 || free >= self.claim_batch())
    }

    /// The free slots worth a claim round while deliveries are running.
    fn claim_batch(&self) -> usize {
        (self.deliveries.inner().max_in_flight / 8).clamp(1, MAX_CLAIM_BATCH)
    }

    /// Parked queues that have room again become due again.
    fn unpark(&mut self, now: UnixMillis) {
        if self.parked.is_empty() || self.deliveries.free() == 0 {
            return;
        }
        let limit = self.deliveries.inner().max_in_flight_per_queue;
        let deliveries = &self.deliveries;
        let wakeups = &self.wakeups;
        self.parked.retain(|name| {
            let has_room = deliveries.in_flight(name) < limit;
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

/// One job's attempt, from POST to recorded outcome. Owns its delivery slot.
struct Delivery {
    deliveries: Deliveries,
    /// Held while the worker is being called; `None` once released.
    slot: Option<Slot>,
}

impl Delivery {
    #[tracing::instrument(level = "debug", skip_all, fields(queue = %queue.name, job_id = %job.id, attempt = job.attempt))]
    async fn run(mut self, queue: Arc<Queue>, job: ClaimedJob) {
        let lease = job.lease();
        let result = self
            .deliveries
            .inner()
            .deliverer
            .deliver(&queue, job.id, job.attempt, job.payload, now_millis())
            .await;
        // The worker is done with us: its slot can serve the next job while the outcome
        // commits (the lease fences a late outcome, so this is safe).
        drop(self.slot.take());
        let inner = self.deliveries.inner();
        let now = now_millis();
        inner
            .breakers
            .record(&queue.name, target_is_healthy(&result), now);
        record_attempt_metrics(&queue.name, &result, job.created_at, now);
        let outcome = outcome_of(&inner.retry, result, job.attempt, now);
        match &outcome {
            Outcome::Delivered => tracing::debug!("delivered"),
            Outcome::Retry { run_at, failure } => {
                tracing::info!(queue = %queue.name, job_id = %job.id, attempt = job.attempt, status = ?failure.status, error = %truncate(&failure.error), retry_in_ms = run_at - now, "attempt failed; will retry");
            }
            Outcome::Dead { failure } => {
                tracing::warn!(queue = %queue.name, job_id = %job.id, attempt = job.attempt, status = ?failure.status, error = %truncate(&failure.error), "attempts spent; job dead-lettered");
            }
        }
        let retry_at = match &outcome {
            Outcome::Retry { run_at, .. } => Some(*run_at),
            _ => None,
        };
        let dead = matches!(outcome, Outcome::Dead { .. });
        match inner.store.record_outcome(job.id, lease, outcome).await {
            Ok(true) => {
                if let Some(at) = retry_at {
                    inner.wakeups.mark_due(&queue.name, at);
                }
                if dead {
                    telemetry::job_dead_lettered(&queue.name, "max_attempts_reached");
                }
            }
            Ok(false) => {
                tracing::info!(queue = %queue.name, job_id = %job.id, "lease lost before the outcome was recorded; ignored")
            }
            Err(err) => tracing::error!(
                queue = %queue.name,
                job_id = %job.id,
                error = %err,
                "cannot record the outcome; the lease will expire and the job be delivered again"
            ),
        }
    }
}

/// Count one attempt. Dead-lettering is counted from the recorded outcome, so the retry
/// policy stays the one place that decides it.
fn record_attempt_metrics(
    queue: &QueueName,
    result: &AttemptResult,
    created_at: UnixMillis,
    now: UnixMillis,
) {
    match result {
        AttemptResult::Delivered { latency_ms, .. } => telemetry::job_delivered(
            queue,
            Duration::from_millis(*latency_ms),
            Duration::from_millis(now.saturating_sub(created_at).max(0) as u64),
        ),
        AttemptResult::Failed {
            status, latency_ms, ..
        } => telemetry::attempt_failed(queue, *status, Duration::from_millis(*latency_ms)),
    }
}

/// Whether an attempt's result speaks for the target being up: a 2xx, or a 4xx about the job
/// itself (but not 408 or 429, which say the target is struggling). Breakers count the rest.
fn target_is_healthy(result: &AttemptResult) -> bool {
    match result {
        AttemptResult::Delivered { .. } => true,
        AttemptResult::Failed {
            status: Some(status),
            ..
        } => (400..500).contains(status) && !matches!(status, 408 | 429),
        AttemptResult::Failed { status: None, .. } => false,
    }
}

/// Turn an attempt's result into what the store records.
pub fn outcome_of(
    retry: &RetryPolicy,
    result: AttemptResult,
    attempt: u32,
    now: UnixMillis,
) -> Outcome {
    match result {
        AttemptResult::Delivered { .. } => Outcome::Delivered,
        AttemptResult::Failed {
            error,
            status,
            retry_after,
            latency_ms,
        } => {
            let failure = Failure {
                error,
                status,
                latency_ms,
                at: now,
            };
            match retry.next_attempt_at(attempt, now, retry_after) {
                Some(run_at) => Outcome::Retry { run_at, failure },
                None => Outcome::Dead { failure },
            }
        }
    }
}

fn truncate(text: &str) -> &str {
    let end = text
        .char_indices()
        .nth(200)
        .map_or(text.len(), |(index, _)| index);
    &text[..end]
}
