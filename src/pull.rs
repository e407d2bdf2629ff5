//! Pull delivery: a pull queue's jobs leased to workers over HTTP, and what their answers
//! do. The same lease machine as a push delivery, seen from the other side: a lease is a
//! claim held by a worker instead of the dispatcher, an ack or a nack is the attempt's
//! outcome, an expired lease a failed attempt. Every delivery control applies at the claim
//! (priorities, ordering keys, delays, pause), and the queue's own `concurrency` (jobs
//! leased at once) and `ratePerSecond` (jobs leased per second) hold as they do for push.
//!
//! - A lease request may wait (long poll): it listens to its queue's wake-ups
//!   ([`Wakeups::lease_waiters`]), which every job falling due fires, on any node.
//! - Jobs claimed for a request whose client went away are handed back at once, their
//!   attempt not counted ([`Leased`]).
//! - Each lease's expiry is watched, so an expired lease is a failed attempt within about a
//!   second, not at the next slow sweep.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::dispatch::rate::RateLimits;
use crate::dispatch::retry::random_spread;
use crate::dispatch::{DeliveryPool, RetryPolicy, Wakeups};
use crate::events::Events;
use crate::model::{InvalidInput, JobId, QueueName, UnixMillis, now_millis};
use crate::policy::Defaults;
use crate::store::{
    Claimed, ClaimedJob, Delivery, Failure, Lease, LeaseAnswer, LeaseHolder, Outcome, Queue,
    SharedLimits, Store, StoreError, WorkerAnswer,
};
use crate::{maintenance, telemetry};

/// Jobs one lease request takes at most.
pub const MAX_LEASE_BATCH: usize = 100;
/// The longest a lease request waits for a job.
pub const MAX_WAIT: Duration = Duration::from_secs(30);
/// The shortest and longest lease a worker may ask for.
pub const MIN_VISIBILITY: Duration = Duration::from_secs(1);
pub const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3600);
/// The longest error a nack may record.
pub const MAX_NACK_ERROR: usize = 4096;
/// What a nack without an error records.
const NACKED: &str = "nacked by the worker";

/// What a worker holds for one leased job, and names in its ack, nack or extend: the lease
/// (attempt and the expiry its claim set, which an extension keeps as its identity), when
/// it was taken (for the delivery's latency), and a signature over both and the job's id
/// under the server's lease key ([`LeaseSigner`]). Written
/// `attempt-until-leasedAt-signature`. Only a lease `_lease` or a Forq consume handed out
/// carries a valid signature: nobody can answer a lease they were not given (another
/// worker's, read off `leaseExpiresAt`; a push delivery's), nor set the latency recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseId {
    pub lease: Lease,
    pub leased_at: UnixMillis,
    signature: [u8; SIGNATURE_LEN],
}

/// Bytes of HMAC-SHA256 a lease id keeps: 128 bits, beyond guessing.
const SIGNATURE_LEN: usize = 16;

impl LeaseId {
    /// A lease id as a worker sent it; its signature is checked where it is used
    /// ([`Leases::ack`], [`Leases::nack`], [`Leases::extend`], [`LeaseSigner::check`]).
    pub fn parse(raw: &str) -> Result<Self, InvalidInput> {
        let invalid = || InvalidInput("leaseId is not one this server handed out".into());
        let mut parts = raw.splitn(4, '-');
        let mut next = || parts.next().ok_or_else(invalid);
        let attempt = next()?.parse().map_err(|_| invalid())?;
        let until = next()?.parse().map_err(|_| invalid())?;
        let leased_at = next()?.parse().map_err(|_| invalid())?;
        let mut signature = [0; SIGNATURE_LEN];
        hex::decode_to_slice(next()?, &mut signature).map_err(|_| invalid())?;
        Ok(Self {
            lease: Lease { attempt, until },
            leased_at,
            signature,
        })
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}-{}-{}",
            self.lease.attempt,
            self.lease.until,
            self.leased_at,
            hex::encode(self.signature)
        )
    }
}

/// Signs and checks lease ids under the server's lease key, which the database keeps
/// (`store::server_keys`), so every node and every restart accepts the leases any of them
/// handed out.
#[derive(Clone)]
pub struct LeaseSigner {
    key: crate::store::server_keys::ServerKey,
}

impl LeaseSigner {
    pub fn new(key: crate::store::server_keys::ServerKey) -> Self {
        Self { key }
    }

    /// The lease id of `lease` on job `id`, taken at `leased_at`.
    pub fn issue(&self, id: JobId, lease: Lease, leased_at: UnixMillis) -> LeaseId {
        LeaseId {
            lease,
            leased_at,
            signature: self.signature(id, lease, leased_at),
        }
    }

    /// Whether `lease` was handed out by this server for job `id` (compared in constant
    /// time).
    pub fn check(&self, id: JobId, lease: &LeaseId) -> bool {
        use subtle::ConstantTimeEq;
        let expected = self.signature(id, lease.lease, lease.leased_at);
        expected.ct_eq(&lease.signature).into()
    }

    fn signature(&self, id: JobId, lease: Lease, leased_at: UnixMillis) -> [u8; SIGNATURE_LEN] {
        use hmac::{KeyInit, Mac};
        // HMAC takes keys of any length: this cannot fail.
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.key)
            .expect("HMAC accepts keys of any length");
        mac.update(id.as_bytes());
        mac.update(&lease.attempt.to_be_bytes());
        mac.update(&lease.until.to_be_bytes());
        mac.update(&leased_at.to_be_bytes());
        let full = mac.finalize().into_bytes();
        let mut signature = [0; SIGNATURE_LEN];
        signature.copy_from_slice(&full[..SIGNATURE_LEN]);
        signature
    }
}

/// One lease request, its values checked by the caller.
#[derive(Debug, Clone)]
pub struct LeaseRequest {
    /// 1–[`MAX_LEASE_BATCH`].
    pub max: usize,
    /// How long to wait for a job when none is due (0: answer at once).
    pub wait: Duration,
    /// How long the lease lasts; `None`: the queue's attempt timeout.
    pub visibility: Option<Duration>,
    /// Who asks: recorded on each job leased, for the view of pull workers.
    pub holder: LeaseHolder,
}

/// Why a lease request, an ack, a nack or an extension was refused.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error("queue is a push queue: its jobs are delivered to its target, not leased")]
    NotPull,
    #[error("too many lease requests are waiting; retry later")]
    TooManyWaiting,
    #[error("lease lost")]
    LeaseLost,
    #[error("leaseId was not handed out for this job: only a lease from _lease can be answered")]
    NotHandedOut,
    #[error("job not found")]
    JobNotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Jobs leased to one request. Dropped before [`Leased::handed`] (the request's client
/// went away, the answer could not be built), its jobs are handed back at once.
pub struct Leased {
    pub jobs: Vec<ClaimedJob>,
    pub leased_at: UnixMillis,
    /// The queue and the leases to hand them back to, until handed.
    owner: Option<(QueueName, Leases)>,
}

impl Leased {
    /// The jobs reached their worker's answer: they stay leased.
    pub fn handed(mut self) -> Vec<ClaimedJob> {
        self.owner = None;
        std::mem::take(&mut self.jobs)
    }
}

impl Drop for Leased {
    fn drop(&mut self) {
        if let Some((queue, leases)) = self.owner.take()
            && !self.jobs.is_empty()
        {
            leases.release(queue, std::mem::take(&mut self.jobs));
        }
    }
}

/// The pull side of delivery: a cheap `Clone` of one shared state.
#[derive(Clone)]
pub struct Leases {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    wakeups: Wakeups,
    events: Events,
    /// The delivery pool, for the per-queue activity the dashboard shows; `None` when
    /// dispatch is off.
    pool: Option<DeliveryPool>,
    defaults: Defaults,
    retry: RetryPolicy,
    /// Each rate-limited pull queue's lease schedule, on SQLite (one node). On PostgreSQL
    /// the schedule lives in the database, shared by the nodes.
    rates: RateLimits,
    /// Lease requests waiting right now, in all and per queue, and how many may.
    waiting: AtomicUsize,
    waiting_by_queue: Mutex<HashMap<QueueName, usize>>,
    max_waiting: usize,
    /// The expiries of the leases this node handed out and has not seen pass yet.
    expiries: Mutex<BTreeSet<UnixMillis>>,
    expiry_news: Notify,
    signer: LeaseSigner,
}

/// The settings of pull delivery, from the server's configuration.
pub struct PullConfig {
    pub defaults: Defaults,
    pub retry: RetryPolicy,
    pub max_waiting: usize,
    /// Signs the lease ids handed out (the database's lease key).
    pub signer: LeaseSigner,
}

impl Leases {
    pub fn new(
        store: Store,
        wakeups: Wakeups,
        events: Events,
        pool: Option<DeliveryPool>,
        config: PullConfig,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                wakeups,
                events,
                pool,
                defaults: config.defaults,
                retry: config.retry,
                rates: RateLimits::default(),
                waiting: AtomicUsize::new(0),
                waiting_by_queue: Mutex::default(),
                max_waiting: config.max_waiting,
                expiries: Mutex::default(),
                expiry_news: Notify::new(),
                signer: config.signer,
            }),
        }
    }

    /// What signs and checks the lease ids handed to workers.
    pub fn signer(&self) -> &LeaseSigner {
        &self.inner.signer
    }

    /// The lease `lease` names on job `id` of queue `name`, if this server handed it out.
    /// A job that is not there (or not in flight) is not found, whatever the lease.
    async fn opened(
        &self,
        name: &QueueName,
        id: JobId,
        lease: &LeaseId,
    ) -> Result<Lease, PullError> {
        if self.inner.signer.check(id, lease) {
            return Ok(lease.lease);
        }
        match self.inner.store.current_lease(name.clone(), id).await? {
            Some(_) => Err(PullError::NotHandedOut),
            None => Err(PullError::JobNotFound),
        }
    }

    /// Lease requests waiting for a job of `queue` right now, on this node.
    pub fn waiting_on(&self, queue: &QueueName) -> usize {
        lock(&self.inner.waiting_by_queue)
            .get(queue)
            .copied()
            .unwrap_or(0)
    }

    /// Lease requests waiting right now on this node, per queue (those with any), by name.
    pub fn waiting(&self) -> Vec<(QueueName, usize)> {
        let mut waiting: Vec<_> = lock(&self.inner.waiting_by_queue)
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(queue, n)| (queue.clone(), *n))
            .collect();
        waiting.sort();
        waiting
    }

    /// The pull queue `name`, or why it cannot be leased from.
    async fn pull_queue(&self, name: &QueueName) -> Result<Arc<Queue>, PullError> {
        let queue = self.inner.store.queue(name).await?;
        if queue.is_pull() {
            Ok(queue)
        } else {
            Err(PullError::NotPull)
        }
    }

    /// Lease up to `request.max` due jobs of pull queue `name`; with `request.wait`, wait
    /// that long for one when none is due. Empty when the wait ended with nothing.
    pub async fn lease(
        &self,
        name: &QueueName,
        request: LeaseRequest,
    ) -> Result<Leased, PullError> {
        let deadline = tokio::time::Instant::now() + request.wait.min(MAX_WAIT);
        let waiters = self.inner.wakeups.lease_waiters(name);
        let mut waiting: Option<WaitingSeat> = None;
        loop {
            // Listen before looking, so a job due between the look and the wait wakes us.
            let notified = waiters.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let queue = self.pull_queue(name).await?;
            let mut look_again_at = None;
            if !queue.paused {
                let (leased, held_back_until) = self.lease_now(&queue, &request).await?;
                if !leased.jobs.is_empty() {
                    return Ok(leased);
                }
                look_again_at = held_back_until;
                // A job due later: look again then (a wake-up may come sooner).
                if request.wait > Duration::ZERO
                    && let Some(at) = self.inner.store.next_due(name.clone()).await?
                {
                    let wait = u64::try_from(at.saturating_sub(now_millis())).unwrap_or(0);
                    if wait > 0 {
                        let at = tokio::time::Instant::now() + Duration::from_millis(wait);
                        look_again_at = Some(look_again_at.map_or(at, |t| t.min(at)));
                    }
                }
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(self.nothing());
            }
            if waiting.is_none() {
                waiting = Some(self.take_seat(name)?);
            }
            let until = look_again_at.map_or(deadline, |at: tokio::time::Instant| at.min(deadline));
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }

    fn nothing(&self) -> Leased {
        Leased {
            jobs: Vec::new(),
            leased_at: now_millis(),
            owner: None,
        }
    }

    /// A place among the waiting lease requests, or `TooManyWaiting`: every wait for a
    /// job of `queue` holds one (Forq's consumers of a queue not created yet, or of dead
    /// letters, too), so waits are bounded by `HOOKQ_MAX_LEASE_WAITERS`.
    pub fn take_seat(&self, queue: &QueueName) -> Result<WaitingSeat, PullError> {
        let inner = &self.inner;
        let taken = inner
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < inner.max_waiting).then_some(n + 1)
            });
        match taken {
            Ok(before) => {
                telemetry::leases_waiting(before + 1);
                *lock(&inner.waiting_by_queue)
                    .entry(queue.clone())
                    .or_insert(0) += 1;
                Ok(WaitingSeat(self.inner.clone(), queue.clone()))
            }
            Err(_) => Err(PullError::TooManyWaiting),
        }
    }

    /// One look for due jobs of `queue`, within its limits: the jobs leased, and when to
    /// look again if a limit held some back.
    async fn lease_now(
        &self,
        queue: &Queue,
        request: &LeaseRequest,
    ) -> Result<(Leased, Option<tokio::time::Instant>), PullError> {
        let inner = &self.inner;
        let name = &queue.name;
        let shared = inner.store.cluster().is_shared();
        let mut want = request.max.clamp(1, MAX_LEASE_BATCH);
        let mut limits = SharedLimits {
            concurrency: queue.policy.concurrency.map(|c| c as usize),
            rate: queue.policy.rate,
        };
        // One node holds a rate in memory, as the dispatcher does; several share it in the
        // database (the claim keeps it).
        let local_rate = if shared { None } else { limits.rate.take() };
        if let Some(rate) = local_rate {
            let instant = std::time::Instant::now();
            want = inner.rates.take(name, rate, want, instant);
            if want == 0 {
                let wait = inner.rates.next_token_in(name, instant);
                return Ok((self.nothing(), Some(tokio::time::Instant::now() + wait)));
            }
        }
        let visibility = request
            .visibility
            .unwrap_or_else(|| queue.policy.timeout(&inner.defaults));
        let now = now_millis();
        let leased_until = now.saturating_add(millis(visibility));
        let claimed = self
            .claim_for_caller(
                name.clone(),
                now,
                leased_until,
                want,
                limits,
                request.holder.clone(),
            )
            .await;
        if local_rate.is_some() {
            let got = claimed.as_ref().map_or(0, |c| c.jobs.len());
            inner.rates.give_back(name, want - got);
        }
        let Claimed {
            mut jobs,
            held_back_until,
        } = claimed?;
        // In the order a worker should take them: the higher priority first, then the
        // oldest (the claim's own order is not kept by its statement).
        jobs.sort_by_key(|job| (std::cmp::Reverse(job.priority), job.id));
        if !jobs.is_empty() {
            telemetry::jobs_leased(name, jobs.len());
            self.watch_expiry(leased_until);
        }
        let look_again = held_back_until.map(|at| {
            let wait = u64::try_from(at.saturating_sub(now_millis())).unwrap_or(0);
            tokio::time::Instant::now() + Duration::from_millis(wait)
        });
        Ok((
            Leased {
                jobs,
                leased_at: now,
                owner: Some((name.clone(), self.clone())),
            },
            look_again,
        ))
    }

    /// The claim, on a task of its own: if the request is dropped while the claim commits
    /// (its client went away), the jobs it took are handed back rather than left leased
    /// to nobody until they expire.
    async fn claim_for_caller(
        &self,
        name: QueueName,
        now: UnixMillis,
        leased_until: UnixMillis,
        want: usize,
        limits: SharedLimits,
        holder: LeaseHolder,
    ) -> Result<Claimed, PullError> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let leases = self.clone();
        tokio::spawn(async move {
            let claimed = leases
                .inner
                .store
                .lease(name.clone(), now, leased_until, want, limits, holder)
                .await;
            if let Err(Ok(claimed)) = answer.send(claimed) {
                leases.release(name, claimed.jobs);
            }
        });
        match answered.await {
            Ok(claimed) => Ok(claimed?),
            Err(_) => Err(PullError::Store(StoreError::from(anyhow::anyhow!(
                "the lease task ended without an answer"
            )))),
        }
    }

    /// Hand `jobs` back unused, in the background: each ready again at once, its attempt
    /// not counted.
    fn release(&self, queue: QueueName, jobs: Vec<ClaimedJob>) {
        let store = self.inner.store.clone();
        let wakeups = self.inner.wakeups.clone();
        tokio::spawn(async move {
            let leases = jobs.iter().map(|job| (job.id, job.lease())).collect();
            match store.release_leases(leases).await {
                Ok(released) => {
                    tracing::info!(queue = %queue, jobs = released, "leased jobs handed back: their request went away");
                    wakeups.mark_due(&queue, now_millis());
                }
                Err(err) => tracing::warn!(
                    queue = %queue,
                    error = %err,
                    "cannot hand leased jobs back; they return when their lease expires"
                ),
            }
        });
    }

    /// Job `id` of pull queue `name` is done (`ack`).
    pub async fn ack(&self, name: &QueueName, id: JobId, lease: LeaseId) -> Result<(), PullError> {
        let held = self.opened(name, id, &lease).await?;
        // Any queue: one made push since its job was leased still takes the lease's answer
        // (the lease fences it; only leasing needs a pull queue).
        let queue = self.inner.store.queue(name).await?;
        let inner = &self.inner;
        let now = now_millis();
        let latency_ms = u64::try_from(now.saturating_sub(lease.leased_at)).unwrap_or(0);
        let outcome = Outcome::Delivered {
            delivery: Delivery {
                at: now,
                status: ACKED,
                latency_ms,
                answer: WorkerAnswer::default(),
            },
            keep: !queue.policy.keep_delivered(&inner.defaults).is_zero(),
        };
        self.settle(&queue, id, held, outcome).await?;
        telemetry::job_delivered(
            name,
            Duration::from_millis(latency_ms),
            Duration::from_millis(u64::try_from(now.saturating_sub(id.created_at())).unwrap_or(0)),
        );
        self.record_activity(name, true, latency_ms, now);
        // Its key's next job, and a lease under the queue's concurrency, may go now.
        inner.wakeups.mark_due(name, now);
        Ok(())
    }

    /// Job `id` of pull queue `name` failed this attempt (`nack`): retried after `delay`
    /// (or the queue's backoff), dead-lettered with `error` once its attempts are spent.
    pub async fn nack(
        &self,
        name: &QueueName,
        id: JobId,
        lease: LeaseId,
        error: Option<String>,
        delay: Option<Duration>,
    ) -> Result<(), PullError> {
        let held = self.opened(name, id, &lease).await?;
        let queue = self.inner.store.queue(name).await?;
        let inner = &self.inner;
        let now = now_millis();
        let latency_ms = u64::try_from(now.saturating_sub(lease.leased_at)).unwrap_or(0);
        let failure = Failure {
            error: error.unwrap_or_else(|| NACKED.to_owned()),
            status: None,
            latency_ms,
            at: now,
            headers: None,
        };
        let retry = inner.retry.for_queue(&queue, &inner.defaults);
        let outcome = match retry.next_attempt_at(held.attempt, now, None, random_spread()) {
            None => Outcome::Dead { failure },
            Some(backoff) => Outcome::Retry {
                run_at: delay.map_or(backoff, |d| now.saturating_add(millis(d))),
                failure,
            },
        };
        let retry_at = match &outcome {
            Outcome::Retry { run_at, .. } => Some(*run_at),
            _ => None,
        };
        self.settle(&queue, id, held, outcome).await?;
        telemetry::lease_nacked(name, Duration::from_millis(latency_ms));
        self.record_activity(name, false, latency_ms, now);
        match retry_at {
            Some(at) => inner.wakeups.mark_due(name, at),
            None => {
                telemetry::job_dead_lettered(name, "max_attempts_reached");
                inner.events.stored();
                inner.wakeups.mark_due(name, now);
            }
        }
        Ok(())
    }

    /// Move the expiry of the lease on job `id` of pull queue `name` to `visibility` from
    /// now; returns the new expiry.
    pub async fn extend(
        &self,
        name: &QueueName,
        id: JobId,
        lease: LeaseId,
        visibility: Duration,
    ) -> Result<UnixMillis, PullError> {
        let held = self.opened(name, id, &lease).await?;
        let until = now_millis().saturating_add(millis(visibility));
        let answer = self
            .inner
            .store
            .extend_lease(name.clone(), id, held, until)
            .await?;
        check(answer)?;
        self.watch_expiry(until);
        Ok(until)
    }

    async fn settle(
        &self,
        queue: &Queue,
        id: JobId,
        lease: Lease,
        outcome: Outcome,
    ) -> Result<(), PullError> {
        let answer = self
            .inner
            .store
            .settle_lease(queue.name.clone(), id, lease, outcome)
            .await?;
        check(answer)
    }

    /// Count a worker's answer, `latency_ms` after its lease, in the queue's activity.
    fn record_activity(&self, name: &QueueName, delivered: bool, latency_ms: u64, now: UnixMillis) {
        if let Some(pool) = &self.inner.pool {
            pool.activity().record(name, delivered, latency_ms, now);
        }
    }

    fn watch_expiry(&self, until: UnixMillis) {
        let earliest = {
            let mut expiries = lock(&self.inner.expiries);
            expiries.insert(until);
            expiries.first().copied()
        };
        if earliest == Some(until) {
            self.inner.expiry_news.notify_one();
        }
    }

    /// Until `shutdown`: as each lease this node handed out expires, recover the expired
    /// leases (a failed attempt each: retried, or dead-lettered if it was the last).
    pub async fn watch_expiries(self, shutdown: CancellationToken) {
        let inner = &self.inner;
        // The leases workers hold from before this node started (a restart keeps them): watched
        // too, so a worker that died with one is noticed as soon, not at the slow sweep.
        match inner
            .store
            .pull_lease_expiries(INHERITED_EXPIRIES_WATCHED)
            .await
        {
            Ok(inherited) => lock(&inner.expiries).extend(inherited),
            Err(err) => tracing::warn!(error = %err, "cannot read the leases held before start-up"),
        }
        loop {
            let next = lock(&inner.expiries).first().copied();
            let sleep = async {
                match next {
                    // A lease is expired once its expiry has passed.
                    Some(at) => {
                        let wait = u64::try_from(at + 1 - now_millis()).unwrap_or(0);
                        tokio::time::sleep(Duration::from_millis(wait)).await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = inner.expiry_news.notified() => continue,
                () = sleep => {}
            }
            let now = now_millis();
            {
                let mut expiries = lock(&inner.expiries);
                let later = expiries.split_off(&(now + 1));
                *expiries = later;
            }
            maintenance::recover_expired_leases(
                &inner.store,
                &inner.wakeups,
                &inner.events,
                &inner.defaults,
                now,
            )
            .await;
        }
    }
}

/// How many distinct lease expiries from before start-up are watched; later ones are left to
/// the slow sweep of expired leases.
const INHERITED_EXPIRIES_WATCHED: usize = 10_000;

/// The status a pull delivery's ack records (the delivery log shows one for every job).
pub const ACKED: u16 = 200;

/// One lease request among those waiting on a queue; its place is given back when it ends.
pub struct WaitingSeat(Arc<Inner>, QueueName);

impl Drop for WaitingSeat {
    fn drop(&mut self) {
        let Self(inner, queue) = self;
        let left = inner.waiting.fetch_sub(1, Ordering::AcqRel) - 1;
        telemetry::leases_waiting(left);
        let mut by_queue = lock(&inner.waiting_by_queue);
        if let Some(count) = by_queue.get_mut(queue) {
            *count -= 1;
            if *count == 0 {
                by_queue.remove(queue);
            }
        }
    }
}

fn check(answer: LeaseAnswer) -> Result<(), PullError> {
    match answer {
        LeaseAnswer::Done => Ok(()),
        LeaseAnswer::LeaseLost => Err(PullError::LeaseLost),
        LeaseAnswer::NotFound => Err(PullError::JobNotFound),
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> LeaseSigner {
        LeaseSigner::new([7; 32])
    }

    #[test]
    fn a_lease_id_reads_back_as_written_and_checks() {
        let job = JobId::new();
        let lease = Lease {
            attempt: 3,
            until: 1_764_140_000_000,
        };
        let id = signer().issue(job, lease, 1_764_139_970_000);
        let read = LeaseId::parse(&id.to_string()).expect("parses");
        assert_eq!(read, id);
        assert!(signer().check(job, &read));
    }

    #[test]
    fn a_lease_id_not_handed_out_does_not_check() {
        let job = JobId::new();
        let lease = Lease {
            attempt: 1,
            until: 1_764_140_000_000,
        };
        let id = signer().issue(job, lease, 1_764_139_970_000);
        // Another job, another key, or any part changed: refused.
        assert!(!signer().check(JobId::new(), &id));
        assert!(!LeaseSigner::new([8; 32]).check(job, &id));
        let text = id.to_string();
        let (head, signature) = text.rsplit_once('-').unwrap();
        for forged in [
            format!("2-{}", &text[2..]),
            text.replacen("1764139970000", "0", 1),
            format!("{head}-{}", "0".repeat(32)),
        ] {
            let parsed = LeaseId::parse(&forged).expect("well formed");
            assert!(!signer().check(job, &parsed), "{forged} accepted");
        }
        assert_eq!(signature.len(), 2 * SIGNATURE_LEN);
    }

    #[test]
    fn a_lease_id_of_another_shape_is_refused() {
        for raw in [
            "",
            "3",
            "3-4",
            "a-b-c",
            "3-4-5",
            "3-4-5-zz",
            "3-4-5-00",
            "-1-2-3-00000000000000000000000000000000",
        ] {
            assert!(LeaseId::parse(raw).is_err(), "{raw:?} accepted");
        }
    }
}
