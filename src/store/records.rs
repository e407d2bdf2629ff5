//! The values the store hands in and out: queues, jobs, attempts, outcomes, dead letters
//! and schedules, as plain domain values. Every backend reads and writes exactly these; none of them knows
//! how a backend stores it, nor how the API shows it (the API builds its own wire types).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::cron::CronSpec;
use crate::json::CanonicalJson;
use crate::latency::LatencyHistogram;
use crate::model::{
    JobId, MessageId, QueueName, ScheduleName, Secret, SignatureScheme, Target, TopicName,
    UnixMillis,
};
use crate::policy::{QueueChange, QueuePolicy, Rate};
use crate::trace_context::TraceContext;

use super::status::JobStatus;

/// A queue as the dispatcher needs it.
#[derive(Debug, Clone)]
pub struct Queue {
    pub name: QueueName,
    /// Where its jobs are pushed; `None`: a pull queue, whose jobs workers lease.
    pub target: Option<Target>,
    pub secret: Option<Secret>,
    pub created_at: UnixMillis,
    /// What the queue sets for itself; the rest follows the server.
    pub policy: QueuePolicy,
    /// Accepts jobs, delivers none.
    pub paused: bool,
    /// How deliveries are signed.
    pub signature_scheme: SignatureScheme,
    /// The secret a rotation replaced, still signing Standard Webhooks deliveries beside the
    /// new one until it expires.
    pub previous_secret: Option<PreviousSecret>,
}

/// A secret being rotated out (`PATCH {"secret": …, "rotate": "24h"}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviousSecret {
    pub secret: Secret,
    /// Unix ms: from then on only the new secret signs.
    pub expires_at: UnixMillis,
}

impl Queue {
    /// A new queue with the server's policy, not paused.
    pub fn new(
        name: QueueName,
        target: Option<Target>,
        secret: Option<Secret>,
        created_at: UnixMillis,
    ) -> Self {
        Self {
            name,
            target,
            secret,
            created_at,
            policy: QueuePolicy::default(),
            paused: false,
            signature_scheme: SignatureScheme::default(),
            previous_secret: None,
        }
    }

    /// Whether workers lease its jobs (no target) rather than hookq pushing them.
    pub fn is_pull(&self) -> bool {
        self.target.is_none()
    }

    /// The previous secret while it still signs at `now`.
    pub fn previous_secret_at(&self, now: UnixMillis) -> Option<&PreviousSecret> {
        self.previous_secret
            .as_ref()
            .filter(|previous| now < previous.expires_at)
    }

    /// Apply `change` to the queue's target, secret, policy and pause flag.
    pub fn apply(&mut self, change: &QueueChange) {
        if let Some(target) = &change.target {
            self.target = target.clone();
        }
        if let Some(secret) = &change.secret {
            let old = std::mem::replace(&mut self.secret, secret.clone());
            // A rotation keeps the secret it replaces for a while; any other change of
            // secret (a plain one, a removal) ends a rotation under way.
            self.previous_secret = match (change.rotate_until, old) {
                (Some(expires_at), Some(old)) if self.secret.as_ref() != Some(&old) => {
                    Some(PreviousSecret {
                        secret: old,
                        expires_at,
                    })
                }
                _ => None,
            };
        }
        if let Some(scheme) = change.signature_scheme {
            self.signature_scheme = scheme;
        }
        let policy = &mut self.policy;
        set(&mut policy.max_attempts, &change.max_attempts);
        set(&mut policy.backoff, &change.backoff);
        set(&mut policy.timeout, &change.timeout);
        set(&mut policy.concurrency, &change.concurrency);
        set(&mut policy.max_queued, &change.max_queued);
        set(&mut policy.keep_delivered, &change.keep_delivered);
        let mut per_second = policy.rate.map(|r| r.per_second);
        let mut burst = policy.rate.and_then(|r| r.burst);
        set(&mut per_second, &change.rate_per_second);
        set(&mut burst, &change.burst);
        // A burst means nothing without a rate: resetting the rate drops it too.
        policy.rate = per_second.map(|per_second| Rate { per_second, burst });
        if let Some(paused) = change.paused {
            self.paused = paused;
        }
    }
}

fn set<T: Clone>(field: &mut Option<T>, change: &Option<Option<T>>) {
    if let Some(value) = change {
        *field = value.clone();
    }
}

/// Where a job stands in storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Waiting: due, scheduled (a delay, a retry's backoff) or behind an earlier job of its
    /// ordering key.
    Ready,
    /// Leased to a delivery.
    InFlight,
    /// Dead-lettered: attempts spent. Shown as `ERROR`.
    Dead,
    /// Delivered and kept in the delivery log. Shown as `DELIVERED`.
    Delivered,
}

/// A job to store: what a producer sent, and when.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub id: JobId,
    /// Canonical JSON: the bytes the worker receives and the signature covers.
    pub payload: CanonicalJson,
    pub created_at: UnixMillis,
    /// Not delivered before this time (`delay` / `runAt`); `None`: as soon as it can be.
    pub not_before: Option<UnixMillis>,
    /// The producer's `Idempotency-Key`, if any.
    pub idempotency: Option<IdempotencyKey>,
    /// Among a queue's due jobs, higher first (−100…100; 0 by default).
    pub priority: i32,
    /// Jobs of a queue with the same key are delivered one at a time, in enqueue order.
    pub ordering_key: Option<String>,
    /// The trace its deliveries continue (W3C Trace Context), if any.
    pub trace: Option<TraceContext>,
    /// The topic message it delivers (a subscriber's job): the payload is the message's,
    /// stored once for all its jobs, and not again in the job's row.
    pub message: Option<MessageRef>,
}

/// The message of a topic a job delivers: every subscriber's job of one publish names the
/// same message (its id is the `X-Hookq-Message-Id` and Standard Webhooks' `webhook-id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRef {
    pub id: MessageId,
    pub topic: TopicName,
}

impl MessageRef {
    /// From the columns that store it: the row's `message_id` and the message's topic.
    pub(crate) fn from_columns(id: Option<MessageId>, topic: Option<String>) -> Option<Self> {
        Some(Self {
            id: id?,
            topic: TopicName::from_stored(topic?),
        })
    }
}

/// Which tick of which schedule of its queue stored a job. Its deliveries say so in the
/// `X-Hookq-Schedule` and `X-Hookq-Schedule-Tick` headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleTick {
    pub schedule: ScheduleName,
    /// Unix ms of the tick (not of the enqueue: a catch-up fires late).
    pub tick: UnixMillis,
}

impl ScheduleTick {
    /// From the two columns that store it (both set or both NULL).
    pub(crate) fn from_columns(schedule: Option<String>, tick: Option<UnixMillis>) -> Option<Self> {
        Some(Self {
            schedule: ScheduleName::from_stored(schedule?),
            tick: tick?,
        })
    }
}

/// A producer's key for one enqueue: the same key on the same queue stores one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    pub key: String,
    /// A key recorded before this time has expired: it counts as absent.
    pub valid_since: UnixMillis,
}

/// What an enqueue did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// The job is stored.
    Stored,
    /// Its idempotency key was used already (and has not expired): nothing was stored; this
    /// is the first job's id.
    Duplicate(JobId),
}

/// How many of what clients create a server holds at most: past a cap, a creation is
/// refused ([`StoreError::LimitReached`]) and nothing is stored. Changing an existing
/// queue or schedule is never refused.
///
/// [`StoreError::LimitReached`]: super::StoreError::LimitReached
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Queues on the server (`HOOKQ_MAX_QUEUES`).
    pub queues: usize,
    /// Schedules on one queue (`HOOKQ_MAX_SCHEDULES_PER_QUEUE`).
    pub schedules_per_queue: usize,
}

impl Caps {
    pub const DEFAULT_QUEUES: usize = 10_000;
    pub const DEFAULT_SCHEDULES_PER_QUEUE: usize = 1_000;

    /// Whether one more queue fits beside the `existing` ones.
    pub fn admit_queue(&self, existing: u64) -> super::StoreResult<()> {
        Self::admit(
            existing,
            self.queues,
            "queues on this server",
            "HOOKQ_MAX_QUEUES",
        )
    }

    /// Whether one more schedule fits beside a queue's `existing` ones.
    pub fn admit_schedule(&self, existing: u64) -> super::StoreResult<()> {
        Self::admit(
            existing,
            self.schedules_per_queue,
            "schedules on this queue",
            "HOOKQ_MAX_SCHEDULES_PER_QUEUE",
        )
    }

    fn admit(
        existing: u64,
        cap: usize,
        what: &'static str,
        setting: &'static str,
    ) -> super::StoreResult<()> {
        if existing < cap as u64 {
            Ok(())
        } else {
            Err(super::StoreError::LimitReached { what, cap, setting })
        }
    }
}

impl Default for Caps {
    fn default() -> Self {
        Self {
            queues: Self::DEFAULT_QUEUES,
            schedules_per_queue: Self::DEFAULT_SCHEDULES_PER_QUEUE,
        }
    }
}

/// A producer's `Idempotency-Key` for a whole batch, in a key space of its own: a batch
/// keyed `K` and a single job keyed `K` (or `K/5`) are unrelated. The same key with the same
/// batch stores nothing and answers with the first batch's ids; with another batch it is
/// refused ([`StoreError::BatchKeyReused`]), so a batch is never stored in part.
///
/// [`StoreError::BatchKeyReused`]: super::StoreError::BatchKeyReused
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchKey {
    pub key: IdempotencyKey,
    /// What makes two batches "the same": see [`fingerprint`].
    pub fingerprint: [u8; 32],
    /// When the key is recorded (the batch's enqueue time).
    pub created_at: UnixMillis,
}

impl BatchKey {
    pub fn new(key: IdempotencyKey, jobs: &[NewJob], created_at: UnixMillis) -> Self {
        Self {
            key,
            fingerprint: fingerprint(jobs),
            created_at,
        }
    }
}

/// What makes two enqueues under one `Idempotency-Key` "the same": SHA-256 over what a
/// producer's retry repeats exactly, each job's canonical payload (the bytes its delivery
/// carries: spacing is gone, key order stays), priority and ordering key, in order (each field length-prefixed, so no two lists of jobs share an encoding).
/// Not the delay: `delay=30s` is a different instant on every retry. A single job's is the
/// fingerprint of a list of one.
pub fn fingerprint(jobs: &[NewJob]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update((jobs.len() as u64).to_be_bytes());
    for job in jobs {
        let payload = job.payload.as_bytes();
        hash.update((payload.len() as u64).to_be_bytes());
        hash.update(payload);
        hash.update(job.priority.to_be_bytes());
        match &job.ordering_key {
            Some(key) => {
                hash.update([1]);
                hash.update((key.len() as u64).to_be_bytes());
                hash.update(key.as_bytes());
            }
            None => hash.update([0]),
        }
    }
    hash.finalize().into()
}

/// A batch key found recorded (and not expired): what the batch it stands for was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedBatch {
    pub fingerprint: Vec<u8>,
    pub ids: Vec<JobId>,
}

impl RecordedBatch {
    /// A batch whose key is recorded already: the same batch again is a duplicate (nothing
    /// stored, the first ids); another batch under the key is refused.
    pub fn answer(self, key: &BatchKey) -> super::StoreResult<BatchEnqueued> {
        if self.fingerprint == key.fingerprint {
            Ok(BatchEnqueued::Duplicate(self.ids))
        } else {
            Err(super::StoreError::BatchKeyReused)
        }
    }
}

/// What a batch enqueue did: all of it, or nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchEnqueued {
    /// Every job is stored.
    Stored,
    /// The batch repeats one stored before under its key: nothing was stored; these are
    /// the first batch's ids, in its order.
    Duplicate(Vec<JobId>),
}

impl NewJob {
    /// A job to deliver as soon as it can be.
    pub fn now(id: JobId, payload: CanonicalJson, created_at: UnixMillis) -> Self {
        Self {
            id,
            payload,
            created_at,
            not_before: None,
            idempotency: None,
            priority: 0,
            ordering_key: None,
            trace: None,
            message: None,
        }
    }

    /// The payload its own row stores: empty for a message's job, whose payload is the
    /// message's row.
    pub fn stored_payload(&self) -> &str {
        match self.message {
            Some(_) => "",
            None => self.payload.as_str(),
        }
    }

    /// When the job is first due.
    pub fn due_at(&self) -> UnixMillis {
        self.not_before
            .map_or(self.created_at, |at| at.max(self.created_at))
    }
}

/// A job as stored, for the API.
#[derive(Debug, Clone)]
pub struct JobRecord {
    pub id: JobId,
    pub queue: QueueName,
    pub state: JobState,
    pub payload: CanonicalJson,
    pub attempts: u32,
    pub created_at: UnixMillis,
    pub run_at: UnixMillis,
    pub last_error: Option<String>,
    pub last_status: Option<u16>,
    /// The start the producer asked for (`delay` / `runAt`), if any.
    pub not_before: Option<UnixMillis>,
    pub priority: i32,
    pub ordering_key: Option<String>,
    pub schedule: Option<ScheduleTick>,
    /// When its lease runs out, for a job in flight.
    pub lease_expires_at: Option<UnixMillis>,
    /// The trace its deliveries continue, for a live job (dead letters and the delivery log
    /// do not keep it).
    pub trace: Option<TraceContext>,
    /// The topic message it delivers, if a publish stored it.
    pub message: Option<MessageRef>,
    /// The answer that acknowledged it, for a job in the delivery log.
    pub delivery: Option<Delivery>,
    /// How it came to be a dead letter, for a dead-lettered job.
    pub dead: Option<DeadLetterFacts>,
}

/// When and why a job became a dead letter, and what became of it since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetterFacts {
    pub failed_at: UnixMillis,
    pub reason: FailureReason,
    /// Times it was replayed before it failed this time.
    pub replay_count: u32,
    pub state: DlqState,
}

/// Minutes in [`ActivityFigures::hour_delivered`]: the last hour.
pub const ACTIVITY_MINUTES: usize = 60;

/// What a queue's attempts ended in recently, as one node counted them (or several, added
/// up): over the last 60 seconds, and per minute over the last hour, oldest minute first,
/// the last entry the current minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivityFigures {
    pub last_minute_delivered: u64,
    pub last_minute_failed: u64,
    pub hour_delivered: [u64; ACTIVITY_MINUTES],
    pub hour_failed: [u64; ACTIVITY_MINUTES],
    /// How long the attempts took: `[the minute before, the current minute]`, for the
    /// activity history (which stores each complete minute's).
    pub latency: [LatencyHistogram; 2],
}

impl Default for ActivityFigures {
    fn default() -> Self {
        Self {
            last_minute_delivered: 0,
            last_minute_failed: 0,
            hour_delivered: [0; ACTIVITY_MINUTES],
            hour_failed: [0; ACTIVITY_MINUTES],
            latency: [LatencyHistogram::default(); 2],
        }
    }
}

impl ActivityFigures {
    /// Add `other`'s attempts to these.
    pub fn add(&mut self, other: &ActivityFigures) {
        self.last_minute_delivered += other.last_minute_delivered;
        self.last_minute_failed += other.last_minute_failed;
        for i in 0..ACTIVITY_MINUTES {
            self.hour_delivered[i] += other.hour_delivered[i];
            self.hour_failed[i] += other.hour_failed[i];
        }
        for (mine, theirs) in self.latency.iter_mut().zip(&other.latency) {
            mine.add(theirs);
        }
    }

    /// These figures `minutes` later, with no attempt since: the hour moves on (its oldest
    /// minutes drop out, the new ones are empty).
    pub fn aged(&self, minutes: usize) -> ActivityFigures {
        let minutes = minutes.min(ACTIVITY_MINUTES);
        let shift = |hour: &[u64; ACTIVITY_MINUTES]| {
            let mut moved = [0; ACTIVITY_MINUTES];
            moved[..ACTIVITY_MINUTES - minutes].copy_from_slice(&hour[minutes..]);
            moved
        };
        let latency = match minutes {
            0 => self.latency,
            1 => [self.latency[1], LatencyHistogram::default()],
            _ => [LatencyHistogram::default(); 2],
        };
        ActivityFigures {
            hour_delivered: shift(&self.hour_delivered),
            hour_failed: shift(&self.hour_failed),
            latency,
            ..*self
        }
    }
}

/// Limits a claim must hold across every node sharing the database (PostgreSQL). A single
/// SQLite process holds them itself, exactly, before it claims, so there they change nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SharedLimits {
    /// The queue's deliveries in flight on all nodes together, at most.
    pub concurrency: Option<usize>,
    /// The queue's starts on all nodes together.
    pub rate: Option<crate::policy::Rate>,
}

impl SharedLimits {
    pub fn is_none(&self) -> bool {
        self.concurrency.is_none() && self.rate.is_none()
    }
}

/// Who holds a pull lease, as the audit log names an actor: `id` stable (`key:<id>`,
/// `master`, `open`), `name` for people (the key's name, "admin key", "API key").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHolder {
    pub id: String,
    pub name: String,
}

/// A pull lease held now: a job in flight whose claim named a holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldLease {
    pub id: JobId,
    pub queue: QueueName,
    pub attempt: u32,
    /// When the claim leased it (`None` for a lease taken before the column existed).
    pub leased_at: Option<UnixMillis>,
    /// Its expiry now (an extension moves it).
    pub leased_until: UnixMillis,
    pub holder: LeaseHolder,
    /// Whether the worker extended it.
    pub extended: bool,
    /// A dead letter leased through Forq's `{queue}-dlq`, not a live job.
    pub dead_letter: bool,
}

/// What a claim leased, and, when a shared limit held jobs back, when to ask again.
#[derive(Debug, Clone, Default)]
pub struct Claimed {
    pub jobs: Vec<ClaimedJob>,
    /// Set when [`SharedLimits`] let the claim take fewer jobs than asked: the queue's next
    /// start is due then (rate), or other nodes hold its concurrency (a short look-again).
    pub held_back_until: Option<UnixMillis>,
}

/// A job leased to one delivery attempt.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub id: JobId,
    pub payload: CanonicalJson,
    /// The number of this attempt (1 for the first).
    pub attempt: u32,
    pub created_at: UnixMillis,
    pub leased_until: UnixMillis,
    /// Higher first.
    pub priority: i32,
    /// Its ordering key: the key's next job waits for this one's outcome.
    pub ordering_key: Option<String>,
    pub schedule: Option<ScheduleTick>,
    /// The trace its enqueue belonged to: each attempt is a child of it.
    pub trace: Option<TraceContext>,
    /// The topic message it delivers, if a publish stored it.
    pub message: Option<MessageRef>,
}

impl ClaimedJob {
    pub fn lease(&self) -> Lease {
        Lease {
            attempt: self.attempt,
            until: self.leased_until,
        }
    }
}

/// The fencing token of one claim: an outcome is recorded only while the job is still in
/// flight under exactly this lease. The attempt number alone is not enough: a replay resets
/// attempts, so a lease lost before a replay could otherwise match a later claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lease {
    pub attempt: u32,
    pub until: UnixMillis,
}

/// How expired leases end: the last attempt queues allow when they say nothing, and each
/// pull queue's backoff (its expired leases retry after it; push ones retry at once).
#[derive(Debug, Clone, Default)]
pub struct LeaseExpiry {
    pub default_max_attempts: u32,
    pub pull_backoff: HashMap<QueueName, Vec<Duration>>,
}

impl LeaseExpiry {
    /// For push queues only (every queue retries an expired lease at once).
    pub fn push_only(default_max_attempts: u32) -> Self {
        Self {
            default_max_attempts,
            pull_backoff: Default::default(),
        }
    }

    /// For the queues `queues` with the server's `defaults`.
    pub fn of<'a>(
        queues: impl IntoIterator<Item = &'a Queue>,
        defaults: &crate::policy::Defaults,
    ) -> Self {
        Self {
            default_max_attempts: defaults.max_attempts,
            pull_backoff: queues
                .into_iter()
                .filter(|queue| queue.is_pull())
                .map(|queue| (queue.name.clone(), queue.policy.effective(defaults).backoff))
                .collect(),
        }
    }

    /// The delay before the retry after failed attempt `attempt` of a pull queue's job;
    /// `None` for a push queue.
    pub fn pull_backoff(&self, queue: &QueueName, attempt: u32) -> Option<Duration> {
        crate::policy::backoff_step(self.pull_backoff.get(queue)?, attempt)
    }
}

/// What a pull worker's answer to its lease (ack, nack, extend) came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseAnswer {
    /// Recorded.
    Done,
    /// The job is live but no longer under that lease (it expired and was leased again,
    /// or was replayed): nothing changed.
    LeaseLost,
    /// No live job of that queue has this id.
    NotFound,
}

/// Why an attempt failed, as recorded in the job's history.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The worker's response body (capped) or the transport error.
    pub error: String,
    pub status: Option<u16>,
    pub latency_ms: u64,
    pub at: UnixMillis,
    /// The headers of the worker's answer, as `dispatch::answer` keeps them (JSON); `None`
    /// without an answer (a transport failure, a pull worker's nack).
    pub headers: Option<String>,
}

/// An operational event waiting in the outbox.
#[derive(Debug, Clone)]
pub struct OutboxEvent {
    pub id: crate::model::EventId,
    /// Its type (`job.dead_lettered`, …).
    pub kind: String,
    /// The JSON body to send.
    pub body: String,
    pub created_at: UnixMillis,
    /// Failed attempts so far.
    pub attempts: u32,
}

/// Which events the store writes itself, in the transaction of what they report.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outbox {
    /// `job.dead_lettered`, with every move to the dead letters.
    pub dead_letters: bool,
    /// `topic.subscriber_skipped`, with every full subscriber a publish skips.
    pub skipped_subscribers: bool,
}

/// The worker's 2xx answer that acknowledged a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub at: UnixMillis,
    pub status: u16,
    pub latency_ms: u64,
    /// What the delivering answer said, kept with a job its queue keeps (empty otherwise).
    pub answer: WorkerAnswer,
}

/// A delivering answer's headers and body, as `dispatch::answer` keeps them. Both `None`
/// for a pull worker's ack, for a delivery not kept, and for one kept before schema 25.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerAnswer {
    /// JSON `[[name, value], …]`.
    pub headers: Option<String>,
    pub body: Option<String>,
}

/// What a delivery attempt ended in, and when (a failure carries its time).
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A 2xx answer: the job is done. It is removed, or with `keep` moved to the delivery
    /// log with its answer.
    Delivered { delivery: Delivery, keep: bool },
    /// Failed, attempts remain: back to ready at `run_at`.
    Retry {
        run_at: UnixMillis,
        failure: Failure,
    },
    /// Failed for the last time: moved to the dead letters.
    Dead { failure: Failure },
}

impl Outcome {
    /// What an attempt whose lease expired before its outcome was recorded ends in at
    /// `now`: the attempt counts, and the job is dead-lettered if that was its last attempt.
    /// Otherwise a push delivery (one that hung past every timeout, or a crashed node)
    /// retries at once; a pull worker's job (a worker that crashed or stalled, perhaps on
    /// this very job) after `pull_backoff`, its queue's delay before this retry.
    pub fn of_expired_lease(
        lease: Lease,
        max_attempts: u32,
        now: UnixMillis,
        pull_backoff: Option<Duration>,
    ) -> Self {
        let (error, run_at) = match pull_backoff {
            None => (
                "delivery interrupted: the lease expired before an outcome was recorded",
                now,
            ),
            Some(delay) => (
                "lease expired",
                now.saturating_add(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX)),
            ),
        };
        let failure = Failure {
            error: error.to_owned(),
            status: None,
            latency_ms: 0,
            at: now,
            headers: None,
        };
        if lease.attempt >= max_attempts {
            Self::Dead { failure }
        } else {
            Self::Retry { run_at, failure }
        }
    }

    /// A delivery of a job not kept: all it asks is the job's row gone (with its history,
    /// and its key's next job let go, if it has either). The backends complete these on
    /// a short path (SQLite in one statement, PostgreSQL in a group) and fall back to the
    /// whole decision for the jobs that path leaves.
    pub fn is_plain_delivery(&self) -> bool {
        matches!(self, Self::Delivered { keep: false, .. })
    }

    /// Delivered at `at` with a `200`, not kept: what tests that drive the store need.
    pub fn delivered(at: UnixMillis) -> Self {
        Self::Delivered {
            delivery: Delivery {
                at,
                status: 200,
                latency_ms: 0,
                answer: WorkerAnswer::default(),
            },
            keep: false,
        }
    }
}

/// Everything kept of one job's life (see `decisions::reads::job_life`).
#[derive(Debug, Clone)]
pub struct JobLife {
    /// Where it is now (live, kept after delivery, or a dead letter).
    pub record: JobRecord,
    /// Its failed attempts, in the order made (a replay restarts their numbers).
    pub history: Vec<AttemptRecord>,
    /// Its dead-letter record, in any state (a replayed one included).
    pub letter: Option<DeadLetter>,
    /// The dead letter an edit-and-resend stored it from.
    pub resent_from: Option<JobId>,
}

/// One failed attempt, as the job's history keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    pub attempt: u32,
    pub at: UnixMillis,
    pub status: Option<u16>,
    pub latency_ms: u64,
    pub error: String,
    /// The answer's headers (JSON, see [`Failure::headers`]).
    pub headers: Option<String>,
}

/// Why a job was dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReason {
    MaxAttemptsReached,
    Expired,
}

impl FailureReason {
    pub const ALL: [Self; 2] = [Self::MaxAttemptsReached, Self::Expired];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::MaxAttemptsReached => "max_attempts_reached",
            Self::Expired => "expired",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == raw)
    }
}

/// Where a dead letter stands in its admin lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DlqState {
    /// Awaiting action.
    Pending,
    /// Claimed by a replay in progress.
    Replaying,
    /// Put back on its queue (kept for audit).
    Replayed,
    /// Dismissed by an operator (kept for audit).
    Acknowledged,
}

impl DlqState {
    pub const ALL: [Self; 4] = [
        Self::Pending,
        Self::Replaying,
        Self::Replayed,
        Self::Acknowledged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Replaying => "replaying",
            Self::Replayed => "replayed",
            Self::Acknowledged => "acknowledged",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == raw)
    }
}

/// Where a job found by its id is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobPlace {
    /// Waiting, scheduled, blocked or in flight (`jobs`).
    Live,
    /// Delivered, in a queue that keeps its deliveries (the delivery log).
    Delivered,
    /// A dead-letter record, in any state (`replayed` ones too: their job may be live again,
    /// delivered, or gone since).
    DeadLetter,
}

impl JobPlace {
    /// The place a lookup's `place` column names, on both dialects (`lookup.rs`): 0 for
    /// `jobs`, 1 for `delivered`, 2 for `dead_letters`.
    pub(crate) fn from_column(code: i64) -> Self {
        match code {
            0 => Self::Live,
            1 => Self::Delivered,
            _ => Self::DeadLetter,
        }
    }
}

/// A job found by its id, or a start of it, whichever queue holds it: where, and, for a
/// dead-letter record, the record.
#[derive(Debug, Clone)]
pub struct FoundJob {
    pub id: JobId,
    pub queue: QueueName,
    pub place: JobPlace,
    pub letter: Option<DeadLetter>,
}

/// A dead letter: a job whose attempts were spent (or that expired), with its admin state.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub id: JobId,
    pub queue: QueueName,
    /// The queue's target when the job failed.
    pub target: String,
    pub created_at: UnixMillis,
    pub failed_at: UnixMillis,
    pub attempts: u32,
    pub failure_reason: FailureReason,
    pub last_error: Option<String>,
    pub last_status: Option<u16>,
    pub status: DlqState,
    pub replay_count: u32,
    pub replayed_at: Option<UnixMillis>,
    pub acknowledged_at: Option<UnixMillis>,
    /// The job, only when asked for.
    pub payload: Option<CanonicalJson>,
    /// Kept for a replay, which puts them back.
    pub priority: i32,
    pub ordering_key: Option<String>,
    pub schedule: Option<ScheduleTick>,
    /// The topic message it delivered, if a publish stored it.
    pub message: Option<MessageRef>,
    /// The job an edit-and-resend stored from it (the record then `acknowledged`).
    pub resent_as: Option<JobId>,
}

impl DeadLetter {
    /// The hyper API's view: an `ERROR` job.
    pub fn into_job_record(self) -> JobRecord {
        JobRecord {
            id: self.id,
            queue: self.queue,
            state: JobState::Dead,
            payload: self
                .payload
                .unwrap_or_else(|| CanonicalJson::from_stored("{}".into())),
            attempts: self.attempts,
            created_at: self.created_at,
            run_at: self.failed_at,
            last_error: self.last_error,
            last_status: self.last_status,
            not_before: None,
            priority: self.priority,
            ordering_key: self.ordering_key,
            schedule: self.schedule,
            lease_expires_at: None,
            trace: None,
            message: self.message,
            delivery: None,
            dead: Some(DeadLetterFacts {
                failed_at: self.failed_at,
                reason: self.failure_reason,
                replay_count: self.replay_count,
                state: self.status,
            }),
        }
    }

    /// Where this record stands in a listing by failure time.
    pub fn position(&self) -> Position {
        Position {
            at: self.failed_at,
            id: self.id,
        }
    }
}

/// A position in a listing ordered by a time (failure, delivery) and then id: the last
/// record of the previous page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub at: UnixMillis,
    pub id: JobId,
}

/// Which dead letters a listing shows.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub queue: Option<QueueName>,
    /// `None` means every state.
    pub state: Option<DlqState>,
    /// Only letters whose payload or last error contains this text, letters compared without
    /// case (on SQLite, ASCII letters only).
    pub text: Option<String>,
}

/// `text` as a `LIKE` pattern matching it anywhere, its `%`, `_` and `\` taken literally
/// (with `ESCAPE '\'`).
pub fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// The SQL test that a row's payload or last error contains the pattern bound at `param`
/// ([`contains_pattern`]); `like` is the dialect's case-blind `LIKE` (SQLite's `LIKE` folds
/// ASCII letters, PostgreSQL's `ILIKE` every letter).
pub fn payload_or_error_like(like: &str, param: &str) -> String {
    format!(
        r"({MESSAGE_PAYLOAD} {like} {param} ESCAPE '\' OR last_error {like} {param} ESCAPE '\')"
    )
}

/// A job row's payload, the same SQL in both dialects, for a row of `jobs`, `dead_letters`
/// or `delivered` read unaliased: its own, or for a topic message's job (whose own is
/// empty) the message's.
pub const MESSAGE_PAYLOAD: &str = "CASE WHEN message_id IS NULL THEN payload \
     ELSE (SELECT m.payload FROM topic_messages m WHERE m.id = message_id) END";

/// That no live job, dead letter or delivery-log record refers to the message whose id is
/// the column `id` (qualified: the tables looked in have an `id` of their own), each through
/// its partial index on `message_id`; the same SQL in both dialects.
pub fn unreferenced(id: &str) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM jobs j WHERE j.message_id = {id}) \
         AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.message_id = {id}) \
         AND NOT EXISTS (SELECT 1 FROM delivered k WHERE k.message_id = {id})"
    )
}

/// The longest the message sweep waits before looking again at a message rows still
/// refer to, in ms (it waits as long as the message has lived, at least a second).
pub const MAX_RECHECK_MS: i64 = 3_600_000;

/// A job row's topic (NULL unless a publish stored it), read as [`MESSAGE_PAYLOAD`].
pub const MESSAGE_TOPIC: &str = "(SELECT m.topic FROM topic_messages m WHERE m.id = message_id)";

/// One page of dead letters: the records and, when asked for, how many match in all.
#[derive(Debug, Clone)]
pub struct DeadLetterPage {
    pub letters: Vec<DeadLetter>,
    /// `None` unless the listing asked for the total.
    pub total: Option<u64>,
}

/// How a dead-letter listing is ordered, paged and filled.
#[derive(Debug, Clone, Copy)]
pub struct PageRequest {
    pub after: Option<Position>,
    pub limit: usize,
    pub newest_first: bool,
    pub with_payload: bool,
    /// Count every record matching the filter (one more query).
    pub with_total: bool,
}

impl PageRequest {
    /// The keyset page as SQL: the order of `(failed_at, id)` and the comparison that starts
    /// the page after `after` in it.
    pub fn keyset(&self) -> (&'static str, &'static str) {
        keyset(self.newest_first)
    }
}

/// A keyset page's order as SQL: the direction of its key and the comparison that starts
/// the page after the previous page's last key.
fn keyset(newest_first: bool) -> (&'static str, &'static str) {
    if newest_first {
        ("DESC", "<")
    } else {
        ("ASC", ">")
    }
}

/// One page of a queue's READY jobs (`K`: a job id, their order) or of its delivery log
/// (`K`: a [`Position`] by delivery time): after the previous page's last key, in which
/// order, and the text its jobs must contain.
#[derive(Debug, Clone)]
pub struct JobsPage<K> {
    /// The last key of the previous page; `None` for the first page.
    pub after: Option<K>,
    pub limit: usize,
    pub newest_first: bool,
    /// Only the jobs whose payload (or, for a live job, last error) contains this text,
    /// letters compared without case (on SQLite, ASCII letters only).
    pub text: Option<String>,
}

impl<K> JobsPage<K> {
    /// `limit` jobs after `after`, oldest first, whatever their text.
    pub fn oldest(after: Option<K>, limit: usize) -> Self {
        Self {
            after,
            limit,
            newest_first: false,
            text: None,
        }
    }

    /// `limit` jobs after `after`, newest first, whatever their text.
    pub fn newest(after: Option<K>, limit: usize) -> Self {
        Self {
            newest_first: true,
            ..Self::oldest(after, limit)
        }
    }

    /// See [`PageRequest::keyset`].
    pub fn keyset(&self) -> (&'static str, &'static str) {
        keyset(self.newest_first)
    }

    /// The text as a `LIKE` pattern ([`contains_pattern`]), if the page looks for one.
    pub fn pattern(&self) -> Option<String> {
        self.text.as_deref().map(contains_pattern)
    }
}

/// The id before every job (the nil UUID) or, newest first, after every job (the max UUID):
/// no job has either, so a first page can start past one as a next page starts past the
/// previous page's last id, and both take the same statement.
fn end_id(newest_first: bool) -> JobId {
    JobId::from_bytes(if newest_first { [0xff; 16] } else { [0; 16] })
}

impl JobsPage<JobId> {
    /// The id the page starts after: the previous page's last, or the end its order starts
    /// from ([`end_id`]).
    pub fn start(&self) -> JobId {
        self.after.unwrap_or_else(|| end_id(self.newest_first))
    }
}

impl JobsPage<Position> {
    /// The position the page starts after: the previous page's last, or the end its order
    /// starts from (see [`end_id`]).
    pub fn start(&self) -> Position {
        self.after.unwrap_or_else(|| Position {
            at: if self.newest_first {
                UnixMillis::MAX
            } else {
                UnixMillis::MIN
            },
            id: end_id(self.newest_first),
        })
    }
}

/// Which dead letters an admin action applies to.
#[derive(Debug, Clone)]
pub enum Selection {
    Ids(Vec<JobId>),
    /// Every pending dead letter of a queue.
    Queue(QueueName),
    /// The pending dead letters of a queue that failed the same way.
    Group(ErrorGroup),
    /// The pending dead letters (of one queue, or of every queue) whose payload or last error
    /// contains a text: what a search lists.
    Matching(TextMatch),
}

/// Pending dead letters whose payload or last error contains `text`, compared as a listing's
/// [`Filter::text`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextMatch {
    /// `None`: of every queue.
    pub queue: Option<QueueName>,
    pub text: String,
}

impl TextMatch {
    /// The listing filter that shows exactly these letters.
    pub fn filter(&self) -> Filter {
        Filter {
            queue: self.queue.clone(),
            state: Some(DlqState::Pending),
            text: Some(self.text.clone()),
        }
    }

    /// The queue, for SQL (`NULL`: every queue), and the text as a `LIKE` pattern.
    pub fn params(&self) -> (Option<&str>, String) {
        (
            self.queue.as_ref().map(QueueName::as_str),
            contains_pattern(&self.text),
        )
    }
}

/// The most characters of an error's first line that tell its group.
pub const ERROR_LINE_CHARS: usize = 200;

/// Dead letters that failed the same way: the same last HTTP status (none for a transport
/// failure) and the same first line of the last error, cut to [`ERROR_LINE_CHARS`]
/// characters (a trailing carriage return dropped). Both dialects compute the line in SQL,
/// so grouping, counting and acting on a group read the same rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorGroup {
    /// `None`: the letters of every queue that failed this way.
    pub queue: Option<QueueName>,
    pub status: Option<u16>,
    pub line: String,
}

/// One row of a per-queue grouping: a group's status, line, count, oldest and newest
/// failure, how many failed in the last hour and day ([`Recent`]), then one of its queues
/// and that queue's count.
pub type GroupRow = (
    Option<u16>,
    String,
    u64,
    UnixMillis,
    UnixMillis,
    Recent,
    QueueName,
    u64,
);

/// How many of a group failed in the hour, and in the day, before a grouping's `now`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recent {
    pub last_hour: u64,
    pub last_day: u64,
}

impl Recent {
    /// The cutoffs a grouping at `now` counts from: an hour and a day before it.
    pub fn cutoffs(now: UnixMillis) -> (UnixMillis, UnixMillis) {
        (now - 3_600_000, now - 86_400_000)
    }
}

/// A group of pending dead letters with its count and the span of its failures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorGroupCount {
    pub status: Option<u16>,
    pub line: String,
    pub count: u64,
    pub oldest_failed_at: UnixMillis,
    pub newest_failed_at: UnixMillis,
    /// How many failed in the last hour and day: the group's rate.
    pub recent: Recent,
    /// The queues whose letters the group holds, with how many each, most first (then by
    /// name).
    pub queues: Vec<CountOf<QueueName>>,
}

impl ErrorGroupCount {
    /// Folds the rows of a per-queue grouping (each a group's figures with one queue's
    /// count, in the group's order, its queues most first) into one group per answer and
    /// line, the order kept: both dialects read their grouping through this.
    pub fn fold(rows: Vec<GroupRow>) -> Vec<Self> {
        let mut groups: Vec<Self> = Vec::new();
        for (status, line, count, oldest, newest, recent, queue, in_queue) in rows {
            match groups.last_mut() {
                Some(last) if last.status == status && last.line == line => {}
                _ => groups.push(Self {
                    status,
                    line,
                    count,
                    oldest_failed_at: oldest,
                    newest_failed_at: newest,
                    recent,
                    queues: Vec::new(),
                }),
            }
            if let Some(last) = groups.last_mut() {
                last.queues.push(CountOf {
                    key: queue,
                    count: in_queue,
                });
            }
        }
        groups
    }
}

/// What became of replayed jobs since their replay (`decisions::reads::replay_fates`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayFates {
    /// Gone from their queue after the replay: delivered (or cancelled).
    pub delivered: u64,
    /// Dead again: their record pending (or acknowledged) once more.
    pub failed_again: u64,
    /// Live again: waiting, scheduled or in flight.
    pub waiting: u64,
    /// Kept nowhere any more (their record deleted, or past its retention).
    pub unknown: u64,
}

/// What a replay did with the records it claimed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// The jobs put back, with their queue.
    pub replayed: Vec<(JobId, QueueName)>,
    /// Records that could not be put back (e.g. the job is live again); rolled back to pending.
    pub failed: Vec<JobId>,
}

impl ReplayReport {
    pub fn replayed_ids(&self) -> Vec<JobId> {
        self.replayed.iter().map(|(id, _)| *id).collect()
    }
}

/// A replay's walk through its selection, a chunk at a time, whatever the backend: named
/// ids in chunks of `size`; a queue's (a group's, a search's) pending records, the same selection
/// again until a chunk claims nothing, or one of its jobs could not be put back (its record
/// is pending again and would only be claimed anew).
pub struct ReplayWalk {
    selection: Selection,
    /// The named ids not walked yet; `None` for a whole queue, a group or a search.
    remaining: Option<Vec<JobId>>,
    size: usize,
    done: bool,
    claimed: usize,
    report: ReplayReport,
}

impl ReplayWalk {
    pub fn new(selection: Selection, size: usize) -> Self {
        let remaining = match &selection {
            Selection::Ids(ids) => Some(ids.clone()),
            Selection::Queue(_) | Selection::Group(_) | Selection::Matching(_) => None,
        };
        Self {
            selection,
            remaining,
            size: size.max(1),
            done: false,
            claimed: 0,
            report: ReplayReport::default(),
        }
    }

    /// The chunk to claim next (at most `size` records), or `None` when the walk is over.
    pub fn next_chunk(&mut self) -> Option<Selection> {
        if self.done {
            return None;
        }
        match self.remaining.as_mut() {
            Some(ids) if ids.is_empty() => None,
            Some(ids) => {
                let rest = ids.split_off(ids.len().min(self.size));
                Some(Selection::Ids(std::mem::replace(ids, rest)))
            }
            None => Some(self.selection.clone()),
        }
    }

    /// How many records the chunk claimed; false when there is nothing to put back and the
    /// walk is over.
    pub fn claimed(&mut self, count: usize) -> bool {
        self.claimed += count;
        if count == 0 && self.remaining.is_none() {
            self.done = true;
        }
        !self.done
    }

    /// What putting the chunk back did.
    pub fn put_back(&mut self, chunk: ReplayReport) {
        if self.remaining.is_none() && !chunk.failed.is_empty() {
            self.done = true;
        }
        self.report.replayed.extend(chunk.replayed);
        self.report.failed.extend(chunk.failed);
    }

    /// Records claimed in all, and what became of them.
    pub fn finish(self) -> (usize, ReplayReport) {
        (self.claimed, self.report)
    }
}

/// Where a queue's jobs stand, for its stats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// READY and due now.
    pub ready: u64,
    /// READY but not due yet (a retry's backoff, a delay).
    pub scheduled: u64,
    /// READY, waiting behind an earlier job of its ordering key.
    pub blocked: u64,
    /// Leased to a delivery.
    pub in_flight: u64,
    /// Pending dead letters.
    pub dead: u64,
    /// When the longest-waiting due job became due.
    pub oldest_due_at: Option<UnixMillis>,
}

/// Dead-letter figures for the admin stats and the alert signals.
#[derive(Debug, Clone, Default)]
pub struct DlqStats {
    /// Every state, with its count (0 included).
    pub by_status: BTreeMap<&'static str, u64>,
    /// Pending dead letters per queue.
    pub by_queue: BTreeMap<String, u64>,
    pub oldest_pending_failed_at: Option<UnixMillis>,
    pub oldest_pending_age_ms: Option<i64>,
    /// Queues with the most pending dead letters, most first (at most 10).
    pub top_failing_queues: Vec<CountOf<String>>,
    /// Last HTTP statuses among pending dead letters (`None` = transport error), most first.
    pub top_status_codes: Vec<CountOf<Option<u16>>>,
    /// Pending dead letters replayed more than the repeat-failure threshold.
    pub repeat_failures: u64,
    pub last_24h: Last24h,
}

/// A key with its count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountOf<T> {
    pub key: T,
    pub count: u64,
}

/// Dead-letter activity over the last 24 hours.
#[derive(Debug, Clone, Default)]
pub struct Last24h {
    pub new_failures: u64,
    pub replayed: u64,
    pub acknowledged: u64,
}

/// A schedule to store: its name within the queue, when it fires, and the job it enqueues.
#[derive(Debug, Clone)]
pub struct NewSchedule {
    pub name: ScheduleName,
    pub spec: CronSpec,
    /// The job each tick enqueues (canonical JSON, an object).
    pub payload: CanonicalJson,
    pub priority: i32,
    pub ordering_key: Option<String>,
    pub paused: bool,
}

/// A schedule as stored.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub queue: QueueName,
    pub name: ScheduleName,
    pub cron: String,
    pub timezone: String,
    pub payload: CanonicalJson,
    pub priority: i32,
    pub ordering_key: Option<String>,
    pub paused: bool,
    /// The tick to fire next; `None` when paused, or when the expression never fires again.
    pub next_run_at: Option<UnixMillis>,
    /// The last tick fired, and the job it stored.
    pub last_run_at: Option<UnixMillis>,
    pub last_job_id: Option<JobId>,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
}

impl Schedule {
    /// Its cron expression read in its time zone. It was valid when stored: only a change
    /// in the cron crate could make it fail here.
    pub fn spec(&self) -> Result<CronSpec, crate::store::StoreError> {
        CronSpec::parse_stored(&self.cron, &self.timezone).map_err(|e| {
            crate::store::StoreError::from(anyhow::anyhow!(
                "schedule {}/{} no longer parses: {e}",
                self.queue,
                self.name
            ))
        })
    }

    /// What firing this due schedule at `now` means, whatever the backend: `None` without
    /// a next tick; [`TickPlan::Park`] when its expression no longer parses (no next tick,
    /// rather than failing forever); else fire the latest tick due (missed ticks fire once)
    /// and move on to the first tick after it and `now`.
    pub fn tick_plan(&self, now: UnixMillis) -> Option<TickPlan> {
        let planned = self.next_run_at?;
        let spec = match self.spec() {
            Ok(spec) => spec,
            Err(error) => return Some(TickPlan::Park { planned, error }),
        };
        let tick = spec
            .latest_at_or_before(now)
            .filter(|latest| *latest >= planned)
            .unwrap_or(planned);
        Some(TickPlan::Fire {
            planned,
            tick,
            next: spec.next_after(now.max(tick)),
        })
    }
}

/// See [`Schedule::tick_plan`]. `planned` is the tick the schedule holds now: moving it on
/// is a compare-and-set on it, so a tick fires once however many rounds race for it.
#[derive(Debug)]
pub enum TickPlan {
    Park {
        planned: UnixMillis,
        error: crate::store::StoreError,
    },
    Fire {
        planned: UnixMillis,
        tick: UnixMillis,
        next: Option<UnixMillis>,
    },
}

/// Whether a schedule was new or replaced one of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    Created,
    Replaced,
}

/// One tick a scheduler round fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FiredTick {
    pub queue: QueueName,
    pub schedule: ScheduleName,
    pub tick: UnixMillis,
    /// The job stored, or `None` when the queue was full (`maxQueued`) and the tick skipped.
    pub job: Option<JobId>,
    /// Ticks were missed (the server was down, or the scheduler late by more than one tick):
    /// this one, the latest, fired for all of them.
    pub caught_up: bool,
}

/// What one scheduler round did, and when the next tick is due.
#[derive(Debug, Clone, Default)]
pub struct SchedulerRound {
    pub fired: Vec<FiredTick>,
    /// More schedules were due than one round fires: run another at once.
    pub more: bool,
    /// The earliest tick of an active schedule, after this round.
    pub next_due: Option<UnixMillis>,
}

/// How wide an [`ActivityBucket`] is, and so which table keeps it: a minute
/// (`activity_minutes`, kept a day) or an hour (`activity_hours`, kept 7 days: the sum of
/// its minutes, `decisions::activity::roll_up`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivityWidth {
    Minute,
    Hour,
}

impl ActivityWidth {
    /// The table that keeps buckets of this width.
    pub fn table(self) -> &'static str {
        match self {
            Self::Minute => "activity_minutes",
            Self::Hour => "activity_hours",
        }
    }

    /// The table's column holding a bucket's start.
    pub fn start_column(self) -> &'static str {
        match self {
            Self::Minute => "minute",
            Self::Hour => "hour",
        }
    }
}

/// One queue's attempts in one minute or one hour (see [`ActivityWidth`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityBucket {
    pub queue: QueueName,
    /// The bucket's start (unix ms, a multiple of its width).
    pub start: UnixMillis,
    pub delivered: u64,
    pub failed: u64,
    /// How long its attempts took.
    pub latency: LatencyHistogram,
}

/// What the nodes sharing a database said about circuit breakers since a node last looked.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BreakerNews {
    /// Breakers open, each until when.
    pub open: Vec<(QueueName, UnixMillis)>,
    /// Breakers an operator closed, each when.
    pub closed: Vec<(QueueName, UnixMillis)>,
}

// ---------------------------------------------------------------------------------------
// Topics
// ---------------------------------------------------------------------------------------

/// A topic as its row holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRow {
    pub name: TopicName,
    /// How long a published message is kept for replays (0: not past its jobs).
    pub retain_ms: i64,
    /// Bumped by every change of its subscriptions.
    pub version: i64,
    /// Messages published, as far as the nodes have added them up.
    pub published: u64,
    pub created_at: UnixMillis,
}

/// A topic with its subscriptions and figures, for the API.
#[derive(Debug, Clone)]
pub struct Topic {
    pub row: TopicRow,
    pub subscriptions: Vec<Subscription>,
    /// Messages kept for replays now.
    pub retained: u64,
}

/// A queue's subscription to a topic.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    pub topic: TopicName,
    pub queue: QueueName,
    /// `None`: every message.
    pub filter: Option<crate::pattern::Pattern>,
    pub created_at: UnixMillis,
}

/// Whether a subscription was new or replaced one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subscribed {
    Created,
    Replaced,
}

/// Where one published message went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub id: MessageId,
    /// The queues that got a job of it.
    pub queues: Vec<QueueName>,
    /// Matching queues that got none: full (`maxQueued`).
    pub skipped: Vec<QueueName>,
}

/// What a publish did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// Each message stored and routed, in order.
    Stored(Vec<Routed>),
    /// The publish repeats one stored before under its `Idempotency-Key`: nothing was
    /// stored; the first publish's message ids.
    Duplicate(Vec<MessageId>),
}

/// A message kept for replays.
#[derive(Debug, Clone)]
pub struct RetainedMessage {
    pub id: MessageId,
    pub payload: CanonicalJson,
    pub published_at: UnixMillis,
    pub priority: i32,
    pub ordering_key: Option<String>,
    pub trace: Option<TraceContext>,
}

/// A published message as `topic_messages` keeps it (while a job refers to it, and until
/// its retention ends).
#[derive(Debug, Clone)]
pub struct StoredMessage {
    pub id: MessageId,
    pub topic: TopicName,
    pub payload: CanonicalJson,
    pub published_at: UnixMillis,
    /// Kept for replays until then (`published_at` itself for a topic that retains nothing).
    pub retain_until: UnixMillis,
    pub priority: i32,
    pub ordering_key: Option<String>,
}

/// Where one subscriber's job of a message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageJobState {
    /// Live and not in flight: waiting, scheduled (a delay or a retry's backoff) or blocked
    /// behind its ordering key.
    Waiting,
    /// Live, an attempt running.
    InFlight,
    /// In the delivery log (a queue that keeps its deliveries), delivered at this time.
    Delivered { at: UnixMillis },
    /// A dead-letter record, in this state (a `replayed` one's job may be live again).
    DeadLetter(DlqState),
}

impl MessageJobState {
    /// From the columns a message's job listing reads (`lookup.rs`, both dialects): the
    /// table as [`JobPlace::from_column`] numbers it, a live job's `status`, a dead letter's
    /// `state`, a delivered job's `delivered_at`. `None` for a row those do not describe.
    pub(crate) fn from_columns(
        place: i64,
        status: Option<i64>,
        letter_state: Option<&str>,
        delivered_at: Option<UnixMillis>,
    ) -> Option<Self> {
        Some(match JobPlace::from_column(place) {
            JobPlace::Live => match JobStatus::from_code(status?)?.state() {
                JobState::InFlight => Self::InFlight,
                JobState::Ready | JobState::Dead | JobState::Delivered => Self::Waiting,
            },
            JobPlace::Delivered => Self::Delivered { at: delivered_at? },
            JobPlace::DeadLetter => Self::DeadLetter(DlqState::parse(letter_state?)?),
        })
    }
}

/// One job of a published message, wherever its queue keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageJob {
    pub id: JobId,
    pub queue: QueueName,
    pub state: MessageJobState,
    pub attempts: u32,
    /// The worker's last answer (the 2xx one for a delivered job).
    pub last_status: Option<u16>,
    /// The start of its last error, at most [`MESSAGE_JOB_ERROR_CHARS`] characters.
    pub last_error: Option<String>,
    pub created_at: UnixMillis,
}

/// The most of a job's last error a message's listing carries.
pub const MESSAGE_JOB_ERROR_CHARS: usize = 200;

/// What became of one published message: its row, while it is kept, and its subscribers'
/// jobs by queue then id (a job replayed from a dead letter is listed twice: its record and
/// the job live again).
#[derive(Debug, Clone)]
pub struct MessageFate {
    /// `None` once nothing keeps the message row.
    pub message: Option<StoredMessage>,
    pub jobs: Vec<MessageJob>,
}

/// What a bulk action on a queue's waiting jobs does to each job it selects. A job in
/// flight is never touched: each backend checks the status in the statement that writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobAction {
    /// A job waiting for its delay or a retry's backoff becomes due now (one behind its
    /// ordering key's head stays behind it, its wait dropped).
    RunNow,
    /// The job is deleted (its key's next job goes next).
    Cancel,
    /// The job takes this priority (among a queue's due jobs, higher first).
    SetPriority(i32),
}

impl JobAction {
    /// The action's name, as the API and the audit log say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RunNow => "run_now",
            Self::Cancel => "cancel",
            Self::SetPriority(_) => "set_priority",
        }
    }
}

/// Which of a queue's live jobs a bulk action selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveSelection {
    /// These jobs (at most the API's bound of them).
    Ids(Vec<JobId>),
    /// Every live job the filter finds, however many: walked in id order, a chunk per
    /// transaction.
    Matching(LiveFilter),
}

/// Live jobs as the READY listing finds them: by text in their payload or last error (as
/// [`JobsPage::text`] compares it), and, when `delayed_only`, only those not due yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveFilter {
    pub text: Option<String>,
    pub delayed_only: bool,
}

impl LiveFilter {
    /// The text as a `LIKE` pattern ([`contains_pattern`]), if the filter looks for one.
    pub fn pattern(&self) -> Option<String> {
        self.text.as_deref().map(contains_pattern)
    }
}

/// What a bulk action did: every job it selected is counted once, as changed, unchanged
/// (already as asked: due already, of that priority already), in flight (left alone) or
/// gone (not a live job of the queue: delivered, cancelled, dead-lettered, or never one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkReport {
    pub matched: usize,
    pub changed: usize,
    pub unchanged: usize,
    /// The jobs left alone because they were being delivered, by id.
    pub in_flight: Vec<JobId>,
    /// The ids named that are not live jobs of the queue, by id.
    pub gone: Vec<JobId>,
}

impl BulkReport {
    /// This report with `other`'s counts added (a later chunk of the same action).
    pub fn add(&mut self, other: BulkReport) {
        self.matched += other.matched;
        self.changed += other.changed;
        self.unchanged += other.unchanged;
        self.in_flight.extend(other.in_flight);
        self.gone.extend(other.gone);
    }
}
