//! The dispatcher: claims due jobs, delivers them concurrently within the in-flight bounds,
//! and records each outcome (delivered, retry later, dead-letter) through the store.
//!
//! No polling on the hot path: an enqueue marks its queue due and wakes the loop at once
//! ([`Wakeups`]); a timer wakes it when the next retry is due; a slow sweep re-checks every
//! queue in case anything was missed.

pub mod breaker;
pub mod deliver;
pub mod guard;
pub mod retry;
pub mod wakeups;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use breaker::{Breakers, Permit};
pub use deliver::{AttemptResult, Deliverer};
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
    store: Store,
    deliverer: Deliverer,
    config: DispatchConfig,
    wakeups: Wakeups,
    slots: Arc<Semaphore>,
    per_queue: Arc<Mutex<HashMap<QueueName, usize>>>,
    deliveries: JoinSet<()>,
    /// Due queues that had no free slot (theirs or the global ones) at their last round.
    parked: HashSet<QueueName>,
    breakers: Breakers,
    rotation: usize,
}

impl Dispatcher {
    pub fn new(
        store: Store,
        deliverer: Deliverer,
        config: DispatchConfig,
        wakeups: Wakeups,
    ) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(config.max_in_flight)),
            breakers: Breakers::new(config.breaker_threshold, config.breaker_cooldown),
            store,
            deliverer,
            config,
            wakeups,
            per_queue: Arc::default(),
            deliveries: JoinSet::new(),
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
            while self.deliveries.try_join_next().is_some() {}
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
        self.drain().await;
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
        let mut free = self.slots.available_permits();
        let queue_count = due.len();
        for (index, name) in due.into_iter().enumerate() {
            let Some(queue) = self.store.registry().get(&name) else {
                continue; // deleted since it was marked
            };
            let queue_free = self
                .config
                .max_in_flight_per_queue
                .saturating_sub(self.in_flight(&name));
            // A fair share of the free slots for each queue still to be served this round.
            let share = free.div_ceil(queue_count - index);
            let permit = self.breakers.permit(&name, now);
            let want = match permit {
                Permit::Any => share.min(queue_free),
                Permit::Probe => share.min(queue_free).min(1),
                Permit::Wait(until) => {
                    // Resting after repeated failures: look again when the pause ends.
                    self.wakeups.mark_due(&name, until);
                    continue;
                }
            };
            if want == 0 {
                if permit == Permit::Probe {
                    self.breakers.probe_unused(&name);
                }
                // No room: park it until a delivery finishes and frees a slot.
                self.parked.insert(name);
                continue;
            }
            let leased_until = now + self.config.lease_timeout.as_millis() as i64;
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
                self.breakers.probe_unused(&name);
            }
            free -= got.min(free);
            report.claimed += got;
            if got == want {
                // There may be more: look again as soon as there is room.
                self.wakeups.mark_due(&name, now);
                report.more_due = true;
            } else {
                self.remember_next_due(&name).await;
            }
            for job in claimed {
                self.start_delivery(queue.clone(), job);
            }
        }
        report
    }

    /// Whether enough slots are free for a claim round. Under load, claiming for every single
    /// slot that frees up would cost one write per job; waiting until a batch's worth is free
    /// (while deliveries are still running, so nothing stalls) claims many jobs per write.
    fn may_claim(&self) -> bool {
        let free = self.slots.available_permits();
        let busy = self.config.max_in_flight - free;
        free > 0 && (busy == 0 || free >= self.claim_batch())
    }

    /// The free slots worth a claim round while deliveries are running.
    fn claim_batch(&self) -> usize {
        (self.config.max_in_flight / 8).clamp(1, MAX_CLAIM_BATCH)
    }

    /// Parked queues that have room again become due again.
    fn unpark(&mut self, now: UnixMillis) {
        if self.parked.is_empty() || self.slots.available_permits() == 0 {
            return;
        }
        let limit = self.config.max_in_flight_per_queue;
        let per_queue = lock(&self.per_queue);
        let wakeups = &self.wakeups;
        self.parked.retain(|name| {
            let has_room = per_queue.get(name).copied().unwrap_or(0) < limit;
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

    fn in_flight(&self, queue: &QueueName) -> usize {
        lock(&self.per_queue).get(queue).copied().unwrap_or(0)
    }

    fn start_delivery(&mut self, queue: Arc<Queue>, job: ClaimedJob) {
        let Ok(permit) = self.slots.clone().try_acquire_owned() else {
            // Cannot happen (we claim no more than the free slots), but if it did the
            // lease would expire and the job come back: never lost.
            tracing::error!(job_id = %job.id, "no free delivery slot for a claimed job");
            return;
        };
        *lock(&self.per_queue).entry(queue.name.clone()).or_insert(0) += 1;
        let delivery = Delivery {
            store: self.store.clone(),
            deliverer: self.deliverer.clone(),
            retry: self.config.retry.clone(),
            wakeups: self.wakeups.clone(),
            per_queue: self.per_queue.clone(),
            breakers: self.breakers.clone(),
            slots: self.slots.clone(),
            max_in_flight: self.config.max_in_flight,
            permit: Some(permit),
        };
        telemetry::in_flight(self.config.max_in_flight - self.slots.available_permits());
        self.deliveries.spawn(delivery.run(queue, job));
    }

    async fn drain(&mut self) {
        let pending = self.deliveries.len();
        if pending > 0 {
            tracing::info!(
                deliveries = pending,
                "waiting for in-flight deliveries to finish"
            );
        }
        let finished = tokio::time::timeout(self.config.shutdown_grace, async {
            while self.deliveries.join_next().await.is_some() {}
        })
        .await;
        if finished.is_err() {
            tracing::warn!(
                deliveries = self.deliveries.len(),
                "grace period over; abandoning deliveries (they will be retried after restart)"
            );
            self.deliveries.shutdown().await;
        }
    }
}

/// One job's attempt, from POST to recorded outcome. Owns its delivery slot.
struct Delivery {
    store: Store,
    deliverer: Deliverer,
    retry: RetryPolicy,
    wakeups: Wakeups,
    per_queue: Arc<Mutex<HashMap<QueueName, usize>>>,
    breakers: Breakers,
    slots: Arc<Semaphore>,
    max_in_flight: usize,
    /// Held while the worker is being called; `None` once released.
    permit: Option<OwnedSemaphorePermit>,
}

impl Delivery {
    #[tracing::instrument(level = "debug", skip_all, fields(queue = %queue.name, job_id = %job.id, attempt = job.attempt))]
    async fn run(mut self, queue: Arc<Queue>, job: ClaimedJob) {
        let lease = job.lease();
        let result = self
            .deliverer
            .deliver(&queue, job.id, job.attempt, job.payload, now_millis())
            .await;
        // The worker is done with us: its slot can serve the next job while the outcome
        // commits (the lease fences a late outcome, so this is safe).
        self.release_slot(&queue.name);
        let now = now_millis();
        self.breakers
            .record(&queue.name, target_is_healthy(&result), now);
        record_attempt_metrics(&queue.name, &result, job.created_at, now);
        let outcome = outcome_of(&self.retry, result, job.attempt, now);
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
        match self.store.record_outcome(job.id, lease, outcome).await {
            Ok(true) => {
                if let Some(at) = retry_at {
                    self.wakeups.mark_due(&queue.name, at);
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

    /// Give back the delivery slot (global and per queue) and wake the dispatcher.
    fn release_slot(&mut self, queue: &QueueName) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        {
            let mut per_queue = lock(&self.per_queue);
            if let Some(count) = per_queue.get_mut(queue) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    per_queue.remove(queue);
                }
            }
        }
        drop(permit);
        telemetry::in_flight(self.max_in_flight - self.slots.available_permits());
        self.wakeups.poke();
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
