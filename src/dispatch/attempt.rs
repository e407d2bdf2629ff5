//! One delivery attempt: POST the job to its queue's target, tell the breaker how the
//! target answered, count it, turn the answer into an outcome with the retry schedule, and
//! record that outcome under the job's lease.

use std::sync::Arc;
use std::time::Duration;

use super::adaptive::Load;
use super::breaker::Transition;
use super::pool::{DeliveryPool, Slot};
use super::retry::{RetryPolicy, random_spread};
use super::webhook::{AttemptResult, Outgoing};
use crate::event::Event;
use crate::model::{JobId, QueueName, UnixMillis, now_millis};
use crate::store::{
    ClaimedJob, Delivery, Failure, Lease, Outcome, Queue, Store, StoreError, StoreResult,
};
use crate::{otel, telemetry};

/// One job's attempt, from POST to recorded outcome. Owns its delivery slot.
pub(super) struct Attempt {
    pub(super) pool: DeliveryPool,
    /// Held while the worker is being called; `None` once released.
    pub(super) slot: Option<Slot>,
}

impl Attempt {
    #[tracing::instrument(level = "debug", skip_all, fields(queue = %queue.name, job_id = %job.id, attempt = job.attempt))]
    pub(super) async fn run(mut self, queue: Arc<Queue>, job: ClaimedJob) {
        let lease = job.lease();
        let keyed = job.ordering_key.is_some();
        let timeout = self.pool.timeout_of(&queue);
        let keep = self.pool.keeps_delivered(&queue);
        let (span, trace) = otel::attempt(&queue.name, &job);
        let result = self
            .pool
            .inner()
            .webhook
            .post(
                &queue,
                Outgoing {
                    id: job.id,
                    attempt: job.attempt,
                    payload: job.payload,
                    schedule: job.schedule.as_ref(),
                    trace: trace.as_ref(),
                    message: job.message.as_ref(),
                },
                timeout,
                now_millis(),
                keep,
            )
            .await;
        if span.is_some() {
            let (status, latency_ms, error) = match &result {
                AttemptResult::Delivered {
                    status, latency_ms, ..
                } => (Some(*status), *latency_ms, None),
                AttemptResult::Failed {
                    status,
                    latency_ms,
                    error,
                    ..
                } => (*status, *latency_ms, Some(error.as_str())),
            };
            otel::attempted(span.as_ref(), status, latency_ms, error);
        }
        drop(span);
        // The worker is done with us: its slot can serve the next job while the outcome
        // commits (the lease fences a late outcome, so this is safe).
        drop(self.slot.take());
        let inner = self.pool.inner();
        let now = now_millis();
        let transition = inner
            .breakers
            .record(&queue.name, target_is_healthy(&result), now);
        if let Some(Transition::Opened { cooldown_ms } | Transition::Reopened { cooldown_ms }) =
            transition
            && inner.store.cluster().is_shared()
        {
            // Every node rests the target, not only the one that saw it fail.
            let (store, name) = (inner.store.clone(), queue.name.clone());
            tokio::spawn(async move {
                let shared = store.cluster().open_breaker(&name, now + cooldown_ms).await;
                if let Err(err) = shared {
                    tracing::warn!(queue = %name, error = %err, "cannot share the open breaker");
                }
            });
        }
        match transition {
            Some(Transition::Opened { cooldown_ms }) => inner.events.emit(Event::BreakerOpened {
                queue: queue.name.clone(),
                failures: inner.breakers.threshold(),
                cooldown_ms,
            }),
            Some(Transition::Closed) => inner.events.emit(Event::BreakerClosed {
                queue: queue.name.clone(),
            }),
            // A failed probe: the breaker was open already, and said so.
            Some(Transition::Reopened { .. }) | None => {}
        }
        let delivered = matches!(result, AttemptResult::Delivered { .. });
        inner
            .activity
            .record(&queue.name, delivered, result.latency_ms(), now);
        inner.adaptive.record(
            &queue.name,
            load_of(&result),
            self.pool.concurrency_limit_of(&queue),
            std::time::Instant::now(),
        );
        record_attempt_metrics(&queue.name, &result, job.created_at, now);
        let outcome = outcome_of(&self.pool.retry_of(&queue), result, job.attempt, now, keep);
        match &outcome {
            Outcome::Delivered { .. } => tracing::debug!("delivered"),
            Outcome::Retry { run_at, failure } => {
                tracing::info!(queue = %queue.name, job_id = %job.id, attempt = job.attempt, status = ?failure.status, error = %truncate(&failure.error), retry_in_ms = run_at - now, "attempt failed; will retry");
            }
            Outcome::Dead { failure } => {
                let why = if failure.status == Some(GONE) {
                    "worker answered 410 Gone; job dead-lettered"
                } else {
                    "attempts spent; job dead-lettered"
                };
                tracing::warn!(queue = %queue.name, job_id = %job.id, attempt = job.attempt, status = ?failure.status, error = %truncate(&failure.error), "{why}");
            }
        }
        let retry_at = match &outcome {
            Outcome::Retry { run_at, .. } => Some(*run_at),
            _ => None,
        };
        let dead = matches!(outcome, Outcome::Dead { .. });
        match record_while_leased(&inner.store, job.id, lease, outcome).await {
            Ok(true) => {
                if let Some(at) = retry_at {
                    inner.wakeups.mark_due(&queue.name, at);
                } else if keyed {
                    // The job left: the next job of its key may be ready now.
                    inner.wakeups.mark_due(&queue.name, now);
                }
                if dead {
                    telemetry::job_dead_lettered(&queue.name, "max_attempts_reached");
                    // The store wrote its `job.dead_lettered` event with the move.
                    inner.events.stored();
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

/// The first pause before recording an outcome again, and the longest.
const RECORD_AGAIN_FIRST: Duration = Duration::from_millis(100);
const RECORD_AGAIN_MAX: Duration = Duration::from_secs(1);

/// Record `outcome` under `lease`; while the database cannot be reached (PostgreSQL
/// restarting, a failover) or aborts the write over a lock conflict, again, until the lease
/// ends. The delivery happened: recorded once the database is back, it spares the job an
/// attempt and its worker a duplicate. A retry is safe even when the failed commit did land:
/// the lease fences it (`Ok(false)`). Past the lease the job is another attempt's. SQLite is
/// never unreachable: there the outcome is recorded once, without a copy kept.
async fn record_while_leased(
    store: &Store,
    id: JobId,
    lease: Lease,
    outcome: Outcome,
) -> StoreResult<bool> {
    if !store.cluster().is_shared() {
        return store.record_outcome(id, lease, outcome).await;
    }
    let mut pause = RECORD_AGAIN_FIRST;
    let mut told = false;
    loop {
        match store.record_outcome(id, lease, outcome.clone()).await {
            Err(err @ (StoreError::Unavailable(_) | StoreError::Contended(_)))
                if now_millis().saturating_add(pause.as_millis() as i64) < lease.until =>
            {
                if !told {
                    tracing::warn!(job_id = %id, error = %err, "cannot record the outcome yet; trying again while the lease holds");
                    told = true;
                }
                // A backoff between tries, not a wait for an event.
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RECORD_AGAIN_MAX);
            }
            other => return other,
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

/// What an attempt's result says about the target's load (adaptive concurrency).
fn load_of(result: &AttemptResult) -> Load {
    match result {
        AttemptResult::Delivered { .. } => Load::Coping,
        AttemptResult::Failed {
            timed_out: true, ..
        }
        | AttemptResult::Failed {
            status: Some(429 | 503),
            ..
        } => Load::Overloaded,
        AttemptResult::Failed { .. } => Load::Unrelated,
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

/// A worker's answer that dead-letters its job at once, whatever attempts are left.
const GONE: u16 = 410;

/// Turn an attempt's result into what the store records: delivered (kept in the delivery
/// log with `keep`), a retry, or a dead letter once the retry schedule is spent or the
/// worker answered `410 Gone`.
pub fn outcome_of(
    retry: &RetryPolicy,
    result: AttemptResult,
    attempt: u32,
    now: UnixMillis,
    keep: bool,
) -> Outcome {
    match result {
        AttemptResult::Delivered {
            status,
            latency_ms,
            answer,
        } => Outcome::Delivered {
            delivery: Delivery {
                at: now,
                status,
                latency_ms,
                answer,
            },
            keep,
        },
        AttemptResult::Failed {
            error,
            status,
            retry_after,
            latency_ms,
            headers,
            ..
        } => {
            let failure = Failure {
                error,
                status,
                latency_ms,
                at: now,
                headers,
            };
            // 410 Gone is the worker saying "stop": no attempt left would be answered
            // differently (the Standard Webhooks guidance).
            if failure.status == Some(GONE) {
                return Outcome::Dead { failure };
            }
            match retry.next_attempt_at(attempt, now, retry_after, random_spread()) {
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
