//! The delivery pool: the delivery slots (global and per queue), the circuit breakers and the
//! tasks running attempts. Shared by the claim loop and by the enqueue route's direct
//! hand-off, so both draw on the same bounds.
//!
//! **Direct hand-off.** When an enqueue finds nothing waiting to be claimed (in any queue:
//! see [`Wakeups::nothing_waiting`]), its queue's breaker closed and a slot free, the job is
//! stored already leased (attempt 1) and its attempt starts the moment the insert is
//! committed: no claim write, no claim round, no payload read back.
//! Anything else (a backlog anywhere, a resting queue, no room) takes the normal path:
//! stored ready, claimed by the claim loop in order and with fair shares between queues.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::adaptive::AdaptiveConcurrency;
use super::attempt::Attempt;
use super::rate::RateLimits;
use super::{Activity, Breakers, DispatchConfig, RetryPolicy, Wakeups, WebhookClient};
use crate::event::Event;
use crate::events::Events;
use crate::model::{QueueName, UnixMillis};
use crate::policy::Defaults;
use crate::store::{AfterCommit, ClaimedJob, NewJob, Queue, SharedLimits, Store};
use crate::telemetry;

/// The delivery pool, cheap to clone.
#[derive(Clone)]
pub struct DeliveryPool {
    inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) store: Store,
    pub(super) webhook: WebhookClient,
    pub(super) retry: RetryPolicy,
    pub(super) wakeups: Wakeups,
    pub(super) breakers: Breakers,
    pub(super) activity: Activity,
    pub(super) rates: RateLimits,
    pub(super) adaptive: AdaptiveConcurrency,
    /// Operational events (breaker changes, dead letters) for the events target.
    pub(super) events: Events,
    slots: Arc<Semaphore>,
    per_queue: Mutex<HashMap<QueueName, usize>>,
    pub(super) max_in_flight: usize,
    defaults: Defaults,
    lease_timeout: Duration,
    shutdown_grace: Duration,
    pub(super) sweep_interval: Duration,
    /// Hand-offs may start their attempts from a store's thread, outside the runtime.
    runtime: Handle,
    tasks: TaskTracker,
    /// Fired when the shutdown grace period is over: deliveries still running stop.
    abandon: CancellationToken,
}

/// Room for one delivery of one queue, in the global and the per-queue bound. Dropping it
/// gives the room back and wakes the dispatcher.
pub struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    queue: QueueName,
    pool: DeliveryPool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let inner = &self.pool.inner;
        {
            let mut per_queue = lock(&inner.per_queue);
            if let Some(count) = per_queue.get_mut(&self.queue) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    per_queue.remove(&self.queue);
                }
            }
        }
        drop(self.permit.take());
        telemetry::in_flight(self.pool.in_flight_total());
        inner.wakeups.poke();
    }
}

/// What an enqueue needs to hand its job straight to a delivery: the lease to store it
/// under, and the hook that starts the delivery once the insert is committed. Dropped
/// unused (the insert failed), it gives its slot back.
pub struct Handoff {
    pub leased_until: UnixMillis,
    pub after_commit: AfterCommit,
}

impl DeliveryPool {
    /// Must be called inside the tokio runtime the attempts will run on.
    pub fn new(
        store: Store,
        webhook: WebhookClient,
        config: &DispatchConfig,
        wakeups: Wakeups,
        events: Events,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                webhook,
                retry: config.retry(),
                wakeups,
                breakers: Breakers::new(config.breaker_threshold, config.breaker_cooldown),
                activity: Activity::default(),
                rates: RateLimits::default(),
                adaptive: AdaptiveConcurrency::default(),
                events,
                slots: Arc::new(Semaphore::new(config.max_in_flight)),
                per_queue: Mutex::default(),
                max_in_flight: config.max_in_flight,
                defaults: config.defaults.clone(),
                lease_timeout: config.lease_timeout,
                shutdown_grace: config.shutdown_grace,
                sweep_interval: config.sweep_interval,
                runtime: Handle::current(),
                tasks: TaskTracker::new(),
                abandon: CancellationToken::new(),
            }),
        }
    }

    pub(super) fn inner(&self) -> &Inner {
        &self.inner
    }

    pub fn breakers(&self) -> &Breakers {
        &self.inner.breakers
    }

    /// An operator closed `queue`'s circuit breaker: deliveries resume now, failures counted
    /// from zero, and `queue.breaker_closed` is told if it was open here. Whether it was.
    pub fn close_breaker(&self, queue: &QueueName) -> bool {
        let was_open = self.inner.breakers.close(queue);
        if was_open {
            self.inner.events.emit(Event::BreakerClosed {
                queue: queue.clone(),
            });
        }
        was_open
    }

    /// `queue` is gone: drop its breaker and its last minute.
    pub fn forget(&self, queue: &QueueName) {
        self.inner.breakers.forget(queue);
        self.inner.activity.forget(queue);
        self.inner.rates.forget(queue);
        self.inner.adaptive.forget(queue);
    }

    /// The per-queue rate limits.
    pub fn rates(&self) -> &RateLimits {
        &self.inner.rates
    }

    /// What each queue's attempts ended in over the last minute.
    pub fn activity(&self) -> &Activity {
        &self.inner.activity
    }

    /// Free slots in the global bound.
    pub fn free(&self) -> usize {
        self.inner.slots.available_permits()
    }

    /// Deliveries running, all queues.
    pub fn in_flight_total(&self) -> usize {
        self.inner.max_in_flight - self.free()
    }

    /// Deliveries of `queue` running.
    pub fn in_flight(&self, queue: &QueueName) -> usize {
        lock(&self.inner.per_queue).get(queue).copied().unwrap_or(0)
    }

    /// When a lease of a job of `queue` taken at `now` expires: the server's lease timeout,
    /// longer by as much as the queue's attempt timeout exceeds the server's, so a lease
    /// always outlasts its attempt.
    pub fn lease_until(&self, now: UnixMillis, queue: &Queue) -> UnixMillis {
        let inner = &self.inner;
        let longer = queue
            .policy
            .timeout(&inner.defaults)
            .saturating_sub(inner.defaults.timeout);
        let lease = inner.lease_timeout + longer;
        now.saturating_add(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX))
    }

    /// The queue's `concurrency` (or the server's).
    pub fn concurrency_limit_of(&self, queue: &Queue) -> usize {
        queue.policy.concurrency(&self.inner.defaults) as usize
    }

    /// Deliveries of `queue` allowed in flight now: its limit, lowered while its target
    /// says it is overloaded (see [`adaptive`](super::adaptive)).
    pub fn concurrency_of(&self, queue: &Queue) -> usize {
        self.inner
            .adaptive
            .effective(&queue.name, self.concurrency_limit_of(queue))
    }

    /// The limits a claim of `queue` must hold across every node sharing the database: its
    /// own `concurrency` (as adaptive concurrency lowers it here) and `ratePerSecond`. The
    /// server-wide per-queue bound stays per node: it protects the node, not the target.
    pub fn shared_limits_of(&self, queue: &Queue) -> SharedLimits {
        SharedLimits {
            concurrency: queue.policy.concurrency.map(|_| self.concurrency_of(queue)),
            rate: queue.policy.rate,
        }
    }

    /// The retry schedule of `queue`: the server's, unless the queue sets its own attempts
    /// or backoff.
    pub fn retry_of(&self, queue: &Queue) -> Cow<'_, RetryPolicy> {
        self.inner.retry.for_queue(queue, &self.inner.defaults)
    }

    /// Whether `queue` keeps its delivered jobs in the delivery log.
    pub fn keeps_delivered(&self, queue: &Queue) -> bool {
        !queue.policy.keep_delivered(&self.inner.defaults).is_zero()
    }

    /// One attempt's time limit for `queue`.
    pub fn timeout_of(&self, queue: &Queue) -> Duration {
        queue.policy.timeout(&self.inner.defaults)
    }

    /// A slot for one delivery of `queue`, if both bounds have room.
    pub fn try_slot(&self, queue: &Queue) -> Option<Slot> {
        let inner = &self.inner;
        let name = &queue.name;
        let mut per_queue = lock(&inner.per_queue);
        if per_queue.get(name).copied().unwrap_or(0) >= self.concurrency_of(queue) {
            return None;
        }
        let permit = inner.slots.clone().try_acquire_owned().ok()?;
        *per_queue.entry(name.clone()).or_insert(0) += 1;
        drop(per_queue);
        telemetry::in_flight(self.in_flight_total());
        Some(Slot {
            permit: Some(permit),
            queue: name.clone(),
            pool: self.clone(),
        })
    }

    /// A direct hand-off for `job` of `queue`, about to be enqueued at `now`: only when no job of any queue waits to be claimed (the job must not overtake older
    /// ones, nor take a slot the dispatcher owes another queue's backlog), the queue's
    /// breaker is closed and a slot is free. `None`: enqueue it the normal way.
    pub fn try_handoff(
        &self,
        queue: &Arc<Queue>,
        job: &NewJob,
        now: UnixMillis,
    ) -> Option<Handoff> {
        let inner = &self.inner;
        if queue.paused
            || queue.is_pull()
            || !inner.wakeups.nothing_waiting(now)
            || !inner.breakers.is_closed(&queue.name)
        {
            return None;
        }
        // On a shared database a queue's own limits are counted at the claim, across the
        // nodes: its jobs go through the claim loop.
        if inner.store.cluster().is_shared() && !self.shared_limits_of(queue).is_none() {
            return None;
        }
        let slot = self.try_slot(queue)?;
        // A rate-limited queue's hand-off needs a token like any delivery; without one the
        // job waits for the claim loop (dropping the slot gives it back).
        if let Some(rate) = queue.policy.rate
            && inner
                .rates
                .take(&queue.name, rate, 1, std::time::Instant::now())
                == 0
        {
            return None;
        }
        let leased_until = self.lease_until(now, queue);
        let job = ClaimedJob {
            id: job.id,
            payload: job.payload.clone(),
            attempt: 1,
            created_at: now,
            leased_until,
            priority: job.priority,
            ordering_key: None,
            schedule: None,
            trace: job.trace.clone(),
            message: None,
        };
        let pool = self.clone();
        let queue = queue.clone();
        Some(Handoff {
            leased_until,
            after_commit: Box::new(move || pool.start(queue, job, slot)),
        })
    }

    /// Deliver `job` of `queue` in `slot`, on a task of its own.
    pub fn start(&self, queue: Arc<Queue>, job: ClaimedJob, slot: Slot) {
        let attempt = Attempt {
            pool: self.clone(),
            slot: Some(slot),
        };
        let abandon = self.inner.abandon.clone();
        self.inner.tasks.spawn_on(
            async move {
                tokio::select! {
                    () = abandon.cancelled() => {}
                    () = attempt.run(queue, job) => {}
                }
            },
            &self.inner.runtime,
        );
    }

    /// Wait up to the shutdown grace period for the running deliveries, then abandon the
    /// rest: their leases bring their jobs back after a restart.
    pub async fn drain(&self) {
        let tasks = &self.inner.tasks;
        tasks.close();
        if !tasks.is_empty() {
            tracing::info!(
                deliveries = tasks.len(),
                "waiting for in-flight deliveries to finish"
            );
        }
        if tokio::time::timeout(self.inner.shutdown_grace, tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                deliveries = tasks.len(),
                "grace period over; abandoning deliveries (they will be retried after restart)"
            );
            self.inner.abandon.cancel();
            tasks.wait().await;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::Egress;
    use crate::model::{JobId, Target, now_millis};
    use crate::store::Sealing;
    use crate::store::StoreOptions;
    use crate::store::sqlite::Synchronous;

    struct Fixture {
        pool: DeliveryPool,
        wakeups: Wakeups,
        queue: Arc<Queue>,
        _store: Store,
        _dir: tempfile::TempDir,
    }

    /// Deliveries with room for 2 (1 per queue) and a breaker that opens on one failure.
    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let (store, _done) = Store::open(
            StoreOptions::Sqlite {
                path: dir.path().join("d.db"),
                synchronous: Synchronous::Normal,
            },
            Sealing::none(),
            now_millis(),
            |_| {},
        )
        .unwrap();
        let config = DispatchConfig {
            breaker_threshold: 1,
            breaker_cooldown: Duration::from_secs(60),
            max_in_flight: 2,
            defaults: Defaults {
                max_attempts: 3,
                backoff: vec![Duration::from_secs(1)],
                timeout: Duration::from_secs(1),
                concurrency: 1,
                keep_delivered: Duration::ZERO,
            },
            jitter: 0.0,
            lease_timeout: Duration::from_secs(300),
            shutdown_grace: Duration::from_secs(1),
            sweep_interval: Duration::from_secs(5),
        };
        let webhook = WebhookClient::new(Duration::from_secs(1), Egress::default()).unwrap();
        let wakeups = Wakeups::default();
        let pool = DeliveryPool::new(
            store.clone(),
            webhook,
            &config,
            wakeups.clone(),
            crate::events::Events::off(),
        );
        let queue = Arc::new(Queue::new(
            QueueName::parse("q").unwrap(),
            Some(Target::parse("http://127.0.0.1:9/").unwrap()),
            None,
            0,
        ));
        Fixture {
            pool,
            wakeups,
            queue,
            _store: store,
            _dir: dir,
        }
    }

    fn handoff(f: &Fixture, now: UnixMillis) -> Option<Handoff> {
        let payload = crate::json::canonicalize(b"{}").expect("JSON");
        let job = NewJob::now(JobId::new(), payload, now);
        f.pool.try_handoff(&f.queue, &job, now)
    }

    #[tokio::test]
    async fn with_nothing_waiting_and_room_a_handoff_holds_a_slot_until_dropped() {
        let f = fixture();
        let first = handoff(&f, 100).expect("nothing waits, room");
        assert_eq!(first.leased_until, 100 + 300_000);
        assert_eq!(f.pool.in_flight(&f.queue.name), 1);
        assert!(handoff(&f, 100).is_none(), "the queue's one slot is taken");
        drop(first); // the insert failed: the hook never runs
        assert_eq!(f.pool.in_flight(&f.queue.name), 0);
        assert_eq!(f.pool.free(), 2);
        assert!(handoff(&f, 100).is_some());
    }

    #[tokio::test]
    async fn no_handoff_while_older_jobs_wait_to_be_claimed() {
        let f = fixture();
        f.wakeups.mark_due(&f.queue.name, 100);
        assert!(handoff(&f, 100).is_none(), "a job is due");
        f.wakeups.take_due(100);
        assert!(
            handoff(&f, 100).is_none(),
            "the claim round has not caught up"
        );
        f.wakeups.settle(&f.queue.name);
        assert!(handoff(&f, 100).is_some());
    }

    #[tokio::test]
    async fn no_handoff_while_another_queue_has_a_backlog() {
        let f = fixture();
        let other = QueueName::parse("other").unwrap();
        f.wakeups.mark_due(&other, 100);
        assert!(handoff(&f, 100).is_none());
        f.wakeups.take_due(100);
        f.wakeups.settle(&other);
        assert!(handoff(&f, 100).is_some());
    }

    #[tokio::test]
    async fn no_handoff_while_the_breaker_is_not_closed() {
        let f = fixture();
        f.pool.breakers().record(&f.queue.name, false, 100);
        assert!(handoff(&f, 100).is_none());
        assert!(
            handoff(&f, 100 + 60_000).is_none(),
            "the probe is the dispatcher's"
        );
        assert_eq!(f.pool.free(), 2, "no slot was taken");
    }

    #[tokio::test]
    async fn a_queue_with_a_longer_timeout_gets_a_longer_lease_and_its_own_concurrency() {
        let f = fixture();
        assert_eq!(f.pool.lease_until(1000, &f.queue), 1000 + 300_000);
        let mut slow = (*f.queue).clone();
        slow.policy.timeout = Some(Duration::from_secs(11));
        // 10 s beyond the server's 1 s timeout: the lease is 10 s longer, so it still
        // outlasts the attempt.
        assert_eq!(f.pool.lease_until(1000, &slow), 1000 + 310_000);
        slow.policy.timeout = Some(Duration::from_millis(100));
        assert_eq!(
            f.pool.lease_until(1000, &slow),
            1000 + 300_000,
            "never shorter"
        );
        let mut wide = (*f.queue).clone();
        wide.policy.concurrency = Some(2);
        let slots = (f.pool.try_slot(&wide), f.pool.try_slot(&wide));
        assert!(slots.0.is_some() && slots.1.is_some(), "two for this queue");
        assert!(
            f.pool.try_slot(&f.queue).is_none(),
            "the global bound of 2 is reached"
        );
    }

    #[tokio::test]
    async fn no_handoff_to_a_paused_queue() {
        let f = fixture();
        let mut paused = (*f.queue).clone();
        paused.paused = true;
        let payload = crate::json::canonicalize(b"{}").expect("JSON");
        let job = NewJob::now(JobId::new(), payload, 100);
        assert!(f.pool.try_handoff(&Arc::new(paused), &job, 100).is_none());
        assert_eq!(f.pool.free(), 2, "no slot was taken");
    }

    #[tokio::test]
    async fn slots_respect_both_bounds() {
        let f = fixture();
        let other = QueueName::parse("other").unwrap();
        let third = QueueName::parse("third").unwrap();
        let queue_named = |name: QueueName| {
            Queue::new(
                name,
                Some(Target::parse("http://127.0.0.1:9/").unwrap()),
                None,
                0,
            )
        };
        let a = f.pool.try_slot(&f.queue).unwrap();
        assert!(f.pool.try_slot(&f.queue).is_none(), "per queue");
        let b = f.pool.try_slot(&queue_named(other)).unwrap();
        assert!(f.pool.try_slot(&queue_named(third)).is_none(), "global");
        assert_eq!(f.pool.in_flight_total(), 2);
        drop((a, b));
        assert_eq!(f.pool.in_flight_total(), 0);
    }
}
