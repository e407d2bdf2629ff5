//! The contract between the shared decisions ([`super::decisions`]) and a backend: [`Tx`],
//! the data-level primitives one transaction of either database offers, each with the same
//! name and meaning on SQLite and on PostgreSQL, written in its own SQL. A primitive decides
//! nothing: which job retries, which is dead-lettered, which key moves on is decided above
//! it, once.
//!
//! Primitives are `async` so one decision serves both backends. On PostgreSQL they await
//! the network; on SQLite they run on the writer (or a reader) thread and never wait, so
//! [`run_now`] drives a decision to its end in one poll there.
//!
//! Primitives take many rows where a caller has many (`insert_jobs`, `drop_unreferenced_history`): the
//! PostgreSQL backend can then send one statement for a batch.

// Crate-private traits: the backends' futures are checked where the decisions use them.
#![allow(async_fn_in_trait)]

use std::collections::BTreeMap;
use std::future::Future;

use super::audit::{AuditEntry, AuditFilter, AuditRecord};
use super::error::{StoreError, StoreResult};
use super::records::{
    ActivityBucket, ActivityWidth, AttemptRecord, BatchKey, ClaimedJob, DeadLetter, DeadLetterPage,
    Delivery, DlqState, DlqStats, ErrorGroupCount, Failure, FailureReason, Filter, HeldLease,
    IdempotencyKey, JobAction, JobPlace, JobRecord, JobsPage, Lease, LeaseHolder, LiveFilter,
    MessageJob, NewJob, NewSchedule, OutboxEvent, PageRequest, Position, QueueCounts,
    RecordedBatch, RetainedMessage, Schedule, ScheduleTick, Selection, StoredMessage, Subscribed,
    Subscription, TopicRow,
};
use super::search::{SearchChunk, SearchQuery, SearchTable};
use super::status::JobStatus;
use crate::event::Event;
use crate::json::CanonicalJson;
use crate::model::{EventId, JobId, MessageId, QueueName, ScheduleName, TopicName, UnixMillis};

/// How a write is committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Acknowledged once it survives a power loss (SQLite `synchronous=FULL` by default;
    /// PostgreSQL `synchronous_commit` at least `on`). Every write a client is told about.
    Durable,
    /// May be lost with the last moments before a power loss or a database crash, never
    /// corrupted: claims, outcomes and bookkeeping whose loss only means a job is delivered
    /// again (at least once). SQLite skips the fsync; PostgreSQL sets
    /// `synchronous_commit = off` for the transaction.
    Relaxed,
}

/// What a live job leaves behind when it goes: the ordering key whose next job may now
/// become the *head*, and whether it had failed before (history to drop).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Left {
    /// `(queue, key)` of a keyed job.
    pub key: Option<(String, String)>,
    pub had_failures: bool,
}

/// A job just copied into the dead letters, as its `job.dead_lettered` event tells it.
#[derive(Debug, Clone)]
pub struct Buried {
    pub queue: QueueName,
    pub attempts: u32,
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
}

/// A lease that outlived its time, with its queue and the last attempt it allows.
#[derive(Debug, Clone)]
pub struct StaleLease {
    pub id: JobId,
    pub queue: QueueName,
    pub lease: Lease,
    pub max_attempts: u32,
}

/// An idempotency key's claim by a new job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyClaim {
    /// The key is this job's now.
    Claimed,
    /// The key stands for an earlier job still: its id, and its
    /// [`fingerprint`](crate::store::records::fingerprint) (`None` for a key recorded
    /// before fingerprints were kept).
    Taken {
        first: JobId,
        fingerprint: Option<Vec<u8>>,
    },
}

/// One transaction's primitives: every area's, which is what a decision takes. Every
/// method runs inside the caller's transaction; a failed one leaves it to the caller to
/// roll back (the whole transaction, or a savepoint). Each backend implements the areas in
/// the table modules that own their SQL.
pub trait Tx:
    Savepoints
    + QueueRows
    + JobRows
    + HistoryRows
    + DeliveryRows
    + DeadLetterRows
    + KeyRows
    + OutboxRows
    + ScheduleRows
    + ActivityRows
    + TopicRows
    + LookupRows
    + AuditRows
{
}

impl<
    T: Savepoints
        + QueueRows
        + JobRows
        + HistoryRows
        + DeliveryRows
        + DeadLetterRows
        + KeyRows
        + OutboxRows
        + ScheduleRows
        + ActivityRows
        + TopicRows
        + LookupRows
        + AuditRows,
> Tx for T
{
}

/// `activity_minutes` and `activity_hours`: each queue's attempts per minute over the last
/// day, and per hour over the last 7 days, one table per [`ActivityWidth`].
pub trait ActivityRows {
    /// Write each bucket of `width`, replacing what its queue's bucket held (a queue deleted
    /// meanwhile is skipped).
    async fn put_activity(&self, width: ActivityWidth, rows: &[ActivityBucket]) -> StoreResult<()>;
    /// Delete the buckets of `width` starting before `before`; how many went.
    async fn purge_activity(&self, width: ActivityWidth, before: UnixMillis) -> StoreResult<usize>;
    /// The buckets of `width` of `queue` (or of every queue) starting at or after `since`,
    /// by queue then start.
    async fn activity_since(
        &self,
        width: ActivityWidth,
        since: UnixMillis,
        queue: Option<&QueueName>,
    ) -> StoreResult<Vec<ActivityBucket>>;
}

/// Finding jobs by id across every queue: live jobs, the delivery log and dead letters.
pub trait LookupRows {
    /// Up to `limit` rows of those tables whose id lies from `first` to `last` (both
    /// included), by id: each id, its queue, and the table it is in.
    async fn jobs_with_ids_between(
        &self,
        first: JobId,
        last: JobId,
        limit: usize,
    ) -> StoreResult<Vec<(JobId, QueueName, JobPlace)>>;
    /// Where each of `ids` is kept, one row per place (none for an id kept nowhere): the id,
    /// the table, and for a dead-letter record its state.
    async fn places_of(
        &self,
        ids: &[JobId],
    ) -> StoreResult<Vec<(JobId, JobPlace, Option<DlqState>)>>;
    /// Up to `limit` jobs of message `id` in the three tables, each read on its partial
    /// index on `message_id`, by queue then id (then table: live, delivered, dead letter).
    async fn jobs_of_message(&self, id: MessageId, limit: usize) -> StoreResult<Vec<MessageJob>>;
    /// Up to `rows` rows of `table` whose id lies from `from` to `upper`, newest first, as
    /// [`search_sql`](super::search::search_sql) reads them: the hits among them, how many
    /// were read and the lowest id read.
    async fn search_rows(
        &self,
        table: SearchTable,
        query: &SearchQuery,
        upper: JobId,
        from: JobId,
        rows: usize,
    ) -> StoreResult<SearchChunk>;
}

/// `audit_log`: who did what to what, when.
pub trait AuditRows {
    /// Write one entry.
    async fn insert_audit(&self, entry: &AuditEntry) -> StoreResult<()>;
    /// Up to `limit` entries matching `filter`, newest (highest id) first, with an id below
    /// `before` when given.
    async fn audit_entries(
        &self,
        filter: &AuditFilter,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<AuditRecord>>;
    /// Delete up to `limit` entries written before `before`; how many went.
    async fn purge_audit_before(&self, before: UnixMillis, limit: usize) -> StoreResult<usize>;
}

/// Savepoints: a part of a transaction that can fail alone.
pub trait Savepoints {
    /// Open savepoint `name` (a letter-and-underscore identifier).
    async fn savepoint(&self, name: &'static str) -> StoreResult<()>;
    /// Keep what was done since savepoint `name`.
    async fn release(&self, name: &'static str) -> StoreResult<()>;
    /// Undo what was done since savepoint `name`, and close it.
    async fn roll_back_to(&self, name: &'static str) -> StoreResult<()>;
}

/// The queue a write needs.
pub trait QueueRows {
    /// `QueueNotFound` unless `queue` exists.
    async fn require_queue(&self, queue: &QueueName) -> StoreResult<()>;
    /// Hold `queue` against other schedule creations until the transaction ends, so a count
    /// of its schedules holds (PostgreSQL; SQLite has one writer). `QueueNotFound` if it
    /// does not exist.
    async fn lock_queue_for_schedules(&self, queue: &QueueName) -> StoreResult<()>;
    /// Of `queues`, the subscribers a publish's routes name (compiled at the topic version
    /// this transaction read), those that exist, each held against deletion until the
    /// transaction ends. PostgreSQL waits for a deletion in progress, then leaves that queue
    /// out. SQLite has one writer, and a queue's deletion changes the version of every topic
    /// it subscribed to, so all of them exist: it answers `queues` as they are.
    async fn lock_subscribers(&self, queues: &[QueueName]) -> StoreResult<Vec<QueueName>>;
}

/// Live jobs (`jobs`): insert, claim, the moves of an attempt, sweeps and reads.
pub trait JobRows {
    /// Insert new jobs into `queue`: each ready, scheduled until due, or blocked behind
    /// its ordering key's head. `QueueNotFound` if the queue is gone, `QueueFull` at its
    /// `maxQueued` cap (nothing of the call kept).
    async fn insert_jobs(&self, queue: &QueueName, jobs: &[NewJob]) -> StoreResult<()>;
    /// Insert one job of `message` (a publish's job template, without an ordering key) into
    /// each queue of `targets`, with the id given beside it: each ready, or scheduled until
    /// due. One statement where the backend can. None of the queues may have a `maxQueued`
    /// cap (those go through [`Self::insert_jobs`], one by one); `QueueNotFound` if one is
    /// gone.
    async fn insert_message_jobs(
        &self,
        message: &NewJob,
        targets: &[(QueueName, JobId)],
    ) -> StoreResult<()>;
    /// Mark job `id`, just inserted, as the job of a schedule's tick.
    async fn mark_schedule_tick(&self, id: JobId, tick: &ScheduleTick) -> StoreResult<()>;
    /// Lease up to `limit` due jobs of `queue` (higher priority first, then the longest
    /// due), promoting scheduled jobs that fell due first. Nothing while it is paused.
    async fn claim(
        &self,
        queue: &QueueName,
        now: UnixMillis,
        leased_until: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<ClaimedJob>>;
    /// Delete job `id` if it is still in flight under `lease`. `None`: the lease was lost.
    async fn delete_leased(&self, id: JobId, lease: Lease) -> StoreResult<Option<Left>>;
    /// Delete live job `id` whatever its status. `None`: it was not there.
    async fn delete_job(&self, id: JobId) -> StoreResult<Option<Left>>;
    /// If `key` of `queue` has no head any more, its earliest blocked job becomes the head
    /// (ready, or scheduled if it asked to start later). Whether one did.
    async fn promote_next_of_key(
        &self,
        queue: &str,
        key: &str,
        now: UnixMillis,
    ) -> StoreResult<bool>;
    /// Put job `id`, in flight under `lease`, back to wait for its retry at `run_at`
    /// (scheduled, or ready if that is `failure.at` already), with the failure as its last
    /// error. False if the lease was lost.
    async fn reschedule_leased(
        &self,
        id: JobId,
        lease: Lease,
        run_at: UnixMillis,
        failure: &Failure,
    ) -> StoreResult<bool>;
    /// Note `failure` as job `id`'s last error if it is still in flight under `lease`.
    /// False if the lease was lost.
    async fn note_last_failure(
        &self,
        id: JobId,
        lease: Lease,
        failure: &Failure,
    ) -> StoreResult<bool>;
    /// Move the expiry of job `id`'s lease to `until`, if it is still in flight under
    /// `lease`; the lease keeps its identity, so `lease` still fences its outcome. False if
    /// the lease was lost.
    async fn extend_lease(&self, id: JobId, lease: Lease, until: UnixMillis) -> StoreResult<bool>;
    /// The lease job `id` of `queue` is in flight under, if it is (for a worker's answer
    /// that names no lease: Forq's older clients).
    async fn lease_of(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<Lease>>;
    /// When the leases workers hold on pull queues run out, earliest first, at most `limit`
    /// of them (a starting node watches the leases it did not hand out itself).
    async fn pull_lease_expiries(&self, limit: usize) -> StoreResult<Vec<UnixMillis>>;
    /// Give job `id`, in flight under `lease`, back as though it had not been claimed:
    /// ready again, its attempt not counted (a lease handed to nobody). False if the lease
    /// was lost.
    async fn release_lease(&self, id: JobId, lease: Lease) -> StoreResult<bool>;
    /// Note that job `id` outlived its time to live, unless it has an error already.
    async fn note_expired(&self, id: JobId) -> StoreResult<()>;
    /// Up to `limit` pull leases held now (jobs in flight whose claim named a holder), of
    /// `queue` or of every queue, soonest expiry first, after `after` (expiry, id), read on
    /// the in-flight jobs' expiry index.
    async fn held_leases(
        &self,
        queue: Option<&QueueName>,
        after: Position,
        limit: usize,
    ) -> StoreResult<Vec<HeldLease>>;
    /// The status of live job `id` of `queue`, locked against a concurrent claim until the
    /// transaction ends (PostgreSQL; SQLite has one writer).
    async fn live_status(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<JobStatus>>;
    /// Up to `limit` leases expired before `now`, oldest first, each with its queue's
    /// `maxAttempts` (else `default_max_attempts`); locked, skipping rows another
    /// transaction holds.
    async fn stale_leases(
        &self,
        now: UnixMillis,
        default_max_attempts: u32,
        limit: usize,
    ) -> StoreResult<Vec<StaleLease>>;
    /// Up to `limit` jobs not in flight whose time to live started before `cutoff`: created
    /// before it, or (replayed, delayed) with a `ttl_from` before it.
    async fn expired_jobs(
        &self,
        cutoff: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<(JobId, QueueName)>>;
    /// Live job `id` of `queue`.
    async fn live_job(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<JobRecord>>;
    /// One page of `queue`'s live jobs in id (creation) order, oldest or newest first, after
    /// the id that ended the previous page, with the text asked for in payload or last error.
    async fn list_live(
        &self,
        queue: &QueueName,
        page: &JobsPage<JobId>,
    ) -> StoreResult<Vec<JobRecord>>;
    /// Up to `limit` ids of `queue`'s live jobs after `after` (or from the first) and
    /// before `before`, in id order, that `filter` finds at `now` (in flight or not: the
    /// caller tells them apart).
    async fn live_ids_matching(
        &self,
        queue: &QueueName,
        after: Option<JobId>,
        before: JobId,
        filter: &LiveFilter,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>>;
    /// The status of each of `ids` that is a live job of `queue` (an id that is not has no
    /// row in the answer).
    async fn live_statuses(
        &self,
        queue: &QueueName,
        ids: &[JobId],
    ) -> StoreResult<Vec<(JobId, JobStatus)>>;
    /// Apply `action` to those of `ids`, jobs of `queue`, that are waiting (not in flight:
    /// tested in the statement that writes, so a concurrent claim either took a job
    /// first, and it is left alone, or waits for this transaction), at `now`; only the
    /// jobs it changes: `RunNow` those not due yet, `SetPriority` those of another
    /// priority, `Cancel` every waiting one. Each changed job's id with what a cancelled
    /// one left behind (for the others: nothing). No job leaves or joins its ordering
    /// key's order: a blocked job stays blocked.
    async fn act_on_waiting(
        &self,
        queue: &QueueName,
        ids: &[JobId],
        action: JobAction,
        now: UnixMillis,
    ) -> StoreResult<Vec<(JobId, Left)>>;
    /// Live jobs by status of `queue` (or of every queue with live jobs) at `now`.
    async fn live_counts(
        &self,
        queue: Option<&QueueName>,
        now: UnixMillis,
    ) -> StoreResult<BTreeMap<QueueName, QueueCounts>>;
}

/// A job's failed attempts (`job_attempts`).
pub trait HistoryRows {
    /// Record failed attempt `attempt` of live job `id`.
    async fn record_attempt(&self, id: JobId, attempt: u32, failure: &Failure) -> StoreResult<()>;
    /// The failed attempts of job `id`, oldest first.
    async fn history(&self, id: JobId) -> StoreResult<Vec<AttemptRecord>>;
    /// Drop the history of the jobs of `ids` that no live job, dead letter or delivery log
    /// record shows any more.
    async fn drop_unreferenced_history(&self, ids: &[JobId]) -> StoreResult<()>;
}

/// The delivery log (`delivered_jobs`).
pub trait DeliveryRows {
    /// Copy job `id`, still in flight under `lease`, into the delivery log with its
    /// answer. False if the lease was lost.
    async fn keep_delivered(
        &self,
        id: JobId,
        lease: Lease,
        delivery: &Delivery,
    ) -> StoreResult<bool>;
    /// Job `id` of `queue` in the delivery log.
    async fn delivered_job(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<JobRecord>>;
    /// Delete up to `limit` delivery-log records of `queue` delivered before `before`;
    /// returns their ids.
    async fn purge_delivered(
        &self,
        queue: &QueueName,
        before: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>>;
    /// One page of `queue`'s delivery log by delivery time, newest or oldest first, after the
    /// position that ended the previous page, with the text asked for in the payload.
    async fn list_delivered(
        &self,
        queue: &QueueName,
        page: &JobsPage<Position>,
    ) -> StoreResult<Vec<JobRecord>>;
}

/// Dead letters (`dead_letters`): bury, replay, dismiss, delete, read.
pub trait DeadLetterRows {
    /// Copy live job `id` into the dead letters as `pending` (reopening the record of a
    /// replayed job, its replay count kept). `None` if the job is not live.
    async fn copy_to_dead_letters(
        &self,
        id: JobId,
        reason: FailureReason,
        now: UnixMillis,
    ) -> StoreResult<Option<Buried>>;
    /// Whether `queue` holds an open (pending or acknowledged) dead letter `id`.
    async fn dead_letter_is_open(&self, queue: &QueueName, id: JobId) -> StoreResult<bool>;
    /// Dead letter `id` of `queue` (any state).
    async fn dead_letter(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<DeadLetter>>;
    /// Claim up to `limit` pending records of `selection` for a replay
    /// (`pending → replaying`), skipping those another transaction holds.
    async fn claim_for_replay(
        &self,
        selection: &Selection,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>>;
    /// Insert the job of claimed record `id` back into `jobs`: fresh attempts, due (and its
    /// time to live starting) at `run_at`, behind its ordering key if the key has a head.
    /// Its queue, or `None` if the record is not claimed. Fails if the job is live.
    async fn put_back(
        &self,
        id: JobId,
        now: UnixMillis,
        run_at: UnixMillis,
    ) -> StoreResult<Option<QueueName>>;
    /// Record `id` was replayed (`replaying → replayed`, its replay count up).
    async fn mark_replayed(&self, id: JobId, now: UnixMillis) -> StoreResult<()>;
    /// Record `id` could not be replayed (`replaying → pending`).
    async fn unclaim_replay(&self, id: JobId, now: UnixMillis) -> StoreResult<()>;
    /// Delete the dead letters of `selection`, whatever their state; returns their ids.
    async fn delete_dead_letters(&self, selection: &Selection) -> StoreResult<Vec<JobId>>;
    /// Delete up to `limit` replayed or acknowledged records last changed before
    /// `before`; returns their ids.
    async fn purge_closed_dead_letters(
        &self,
        before: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>>;
    /// One page of the dead letters matching `filter`.
    async fn list_dead_letters(
        &self,
        filter: &Filter,
        page: PageRequest,
    ) -> StoreResult<DeadLetterPage>;
    /// Dead-letter figures at `now` (see [`DlqStats`]), of `queue`'s letters only when one
    /// is given.
    async fn dlq_stats(
        &self,
        queue: Option<&QueueName>,
        now: UnixMillis,
        repeat_after_replays: u32,
    ) -> StoreResult<DlqStats>;
    /// Dismiss the pending dead letters of `selection` (`pending → acknowledged`); how many.
    async fn acknowledge(&self, selection: &Selection, now: UnixMillis) -> StoreResult<usize>;
    /// Dismiss pending dead letter `id` as resent as job `resent_as` (`pending →
    /// acknowledged`, the new job named). Whether it was pending.
    async fn acknowledge_as_resent(
        &self,
        id: JobId,
        resent_as: JobId,
        now: UnixMillis,
    ) -> StoreResult<bool>;
    /// The dead letter job `id` was resent from, if an edit-and-resend stored it.
    async fn resent_from(&self, id: JobId) -> StoreResult<Option<JobId>>;
    /// Lease the oldest free pending dead letter of `queue` until `until` to `holder` (a
    /// consumer of `{queue}-dlq`): its id and payload.
    async fn lease_dead_letter(
        &self,
        queue: &QueueName,
        now: UnixMillis,
        until: UnixMillis,
        holder: &LeaseHolder,
    ) -> StoreResult<Option<(JobId, CanonicalJson)>>;
    /// Up to `limit` dead letters leased at `now` (through `{queue}-dlq`), of `queue` or of
    /// every queue, soonest expiry first, after `after` (expiry, id).
    async fn held_dead_letter_leases(
        &self,
        queue: Option<&QueueName>,
        after: Position,
        limit: usize,
        now: UnixMillis,
    ) -> StoreResult<Vec<HeldLease>>;
    /// Answer a leased dead letter of `queue`: `hide_until: None` acknowledges it, a time
    /// hides it until then (a nack). Fenced by `lease` (its `leased_until`); without one,
    /// any pending record. Whether it changed.
    async fn answer_dead_letter(
        &self,
        queue: &QueueName,
        id: JobId,
        lease: Option<UnixMillis>,
        hide_until: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<bool>;
    /// The pending dead letters of `queue` (`None`: of every queue) grouped by how they
    /// failed ([`ErrorGroup`]), the largest `limit` groups, largest first (then the oldest
    /// failure first), each with its count per queue and how many failed in the hour and
    /// the day before `now`.
    async fn error_groups(
        &self,
        queue: Option<&QueueName>,
        limit: usize,
        now: UnixMillis,
    ) -> StoreResult<Vec<ErrorGroupCount>>;
    /// Pending dead letters of `queue` (or of every queue, 0 for one without), by name.
    async fn pending_dead_letters(
        &self,
        queue: Option<&QueueName>,
    ) -> StoreResult<Vec<(QueueName, u64)>>;
}

/// Idempotency and batch keys.
pub trait KeyRows {
    /// Claim `key` of `queue` for job `id` (whose fingerprint is `fingerprint`), unless it
    /// stands for an earlier job still. `QueueNotFound` if the queue is gone (where the
    /// backend can tell here).
    async fn claim_idempotency_key(
        &self,
        queue: &QueueName,
        key: &IdempotencyKey,
        id: JobId,
        fingerprint: &[u8; 32],
        created_at: UnixMillis,
    ) -> StoreResult<KeyClaim>;
    /// Claim batch key `key` of `queue` for the batch of `ids`; `Some` (the batch it stands
    /// for) if it is taken.
    async fn claim_batch_key(
        &self,
        queue: &QueueName,
        key: &BatchKey,
        ids: &[JobId],
    ) -> StoreResult<Option<RecordedBatch>>;
    /// Delete up to `limit` idempotency and batch keys (each) recorded before `before`.
    async fn purge_idempotency_keys(&self, before: UnixMillis, limit: usize) -> StoreResult<usize>;
}

/// The event outbox (`events`).
pub trait OutboxRows {
    /// Store `event` in the outbox, due at `now`.
    async fn insert_event(&self, id: EventId, event: &Event, now: UnixMillis) -> StoreResult<()>;
    /// Up to `limit` outbox events due at `now`, oldest first.
    async fn due_events(&self, now: UnixMillis, limit: usize) -> StoreResult<Vec<OutboxEvent>>;
    /// When the next outbox event falls due.
    async fn next_event_due(&self) -> StoreResult<Option<UnixMillis>>;
    /// Outbox events waiting.
    async fn events_pending(&self) -> StoreResult<u64>;
    /// Delete outbox event `id` (sent, or given up on).
    async fn remove_event(&self, id: EventId) -> StoreResult<()>;
    /// Outbox event `id` failed: try again at `next_at`.
    async fn reschedule_event(
        &self,
        id: EventId,
        next_at: UnixMillis,
        error: &str,
    ) -> StoreResult<()>;
}

/// Schedules and their ticks.
pub trait ScheduleRows {
    /// Up to `limit` active schedules due at `now`, earliest first (locked, skipping those
    /// another transaction holds).
    async fn due_schedules(&self, now: UnixMillis, limit: usize) -> StoreResult<Vec<Schedule>>;
    /// Move a schedule's next tick from `planned` to `next` (`None`: parked); false if
    /// another round moved it first.
    async fn claim_tick(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        planned: UnixMillis,
        next: Option<UnixMillis>,
    ) -> StoreResult<bool>;
    /// Record the job a schedule's `tick` stored.
    async fn record_run(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        tick: UnixMillis,
        job: JobId,
    ) -> StoreResult<()>;
    /// When the next active schedule falls due.
    async fn next_schedule_due(&self) -> StoreResult<Option<UnixMillis>>;
    /// Schedule `name` of `queue`.
    async fn schedule(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
    ) -> StoreResult<Option<Schedule>>;
    /// Schedule `name` of `queue`, locked until the transaction ends (it takes turns with a
    /// round firing it).
    async fn schedule_for_update(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
    ) -> StoreResult<Option<Schedule>>;
    /// `queue`'s schedules, by name (byte order).
    async fn schedules(&self, queue: &QueueName) -> StoreResult<Vec<Schedule>>;
    /// How many schedules `queue` has.
    async fn count_schedules(&self, queue: &QueueName) -> StoreResult<u64>;
    /// Every queue with a schedule, by name: how many it has, and the earliest next tick
    /// of its active ones (`None` when all are paused).
    async fn schedule_summaries(&self) -> StoreResult<Vec<(QueueName, u64, Option<UnixMillis>)>>;
    /// Insert a new schedule, next ticking at `next_run_at`; false if it exists already.
    async fn insert_schedule(
        &self,
        queue: &QueueName,
        schedule: &NewSchedule,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<bool>;
    /// Replace a schedule (its history kept), next ticking at `next_run_at`.
    async fn replace_schedule(
        &self,
        queue: &QueueName,
        schedule: &NewSchedule,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<()>;
    /// Set a schedule's pause flag and next tick.
    async fn set_schedule_paused(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        paused: bool,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<()>;
    /// Delete a schedule; `ScheduleNotFound` if there is none.
    async fn delete_schedule(&self, queue: &QueueName, name: &ScheduleName) -> StoreResult<()>;
}

/// Topics, their subscriptions, their messages and their publishes' keys.
pub trait TopicRows {
    /// Insert a new topic; false if it exists already.
    async fn insert_topic(
        &self,
        name: &TopicName,
        retain_ms: i64,
        now: UnixMillis,
    ) -> StoreResult<bool>;
    /// Set a topic's retention, for its messages kept now too (each kept for `retain_ms`
    /// from its publish); false if there is no such topic.
    async fn set_topic_retain(&self, name: &TopicName, retain_ms: i64) -> StoreResult<bool>;
    /// Delete a topic with its subscriptions and keys; its messages stay as long as jobs
    /// refer to them, no longer for replays. False if there was no such topic.
    async fn delete_topic(&self, name: &TopicName) -> StoreResult<bool>;
    /// Topic `name`'s row.
    async fn topic(&self, name: &TopicName) -> StoreResult<Option<TopicRow>>;
    /// Up to `limit` topics by name, after `after`.
    async fn topics(&self, after: Option<&TopicName>, limit: usize) -> StoreResult<Vec<TopicRow>>;
    /// Topic `name`'s subscriptions by queue name, and the version they are of (read in one
    /// statement, so the two agree). `None`: no such topic.
    async fn subscriptions(
        &self,
        name: &TopicName,
    ) -> StoreResult<Option<(i64, Vec<Subscription>)>>;
    /// The subscriptions of `queue`, by topic.
    async fn subscriptions_of_queue(&self, queue: &QueueName) -> StoreResult<Vec<Subscription>>;
    /// Subscribe `queue` to `topic` with `filter` (JSON text), replacing its subscription if
    /// it has one. `TopicNotFound` / `QueueNotFound` when either is missing.
    async fn put_subscription(
        &self,
        topic: &TopicName,
        queue: &QueueName,
        filter: Option<&str>,
        now: UnixMillis,
    ) -> StoreResult<Subscribed>;
    /// Remove `queue`'s subscription to `topic`; false if it had none.
    async fn delete_subscription(&self, topic: &TopicName, queue: &QueueName) -> StoreResult<bool>;
    /// Store the message of a publish to `topic` (`message.id`, its payload and options),
    /// kept for replays until `retain_until`.
    async fn insert_message(
        &self,
        topic: &TopicName,
        message: &NewJob,
        retain_until: UnixMillis,
    ) -> StoreResult<()>;
    /// Claim `key` of `topic` (in the single-message or the batch key space) for the
    /// messages `ids` of fingerprint `fingerprint`; `Some` (what it stands for) if it is
    /// taken and still valid.
    async fn claim_topic_key(
        &self,
        topic: &TopicName,
        batch: bool,
        key: &IdempotencyKey,
        fingerprint: &[u8; 32],
        ids: &[MessageId],
        now: UnixMillis,
    ) -> StoreResult<Option<RecordedBatch>>;
    /// Up to `limit` messages of `topic` kept at `now` and published in `since..until`,
    /// in publish order, after `after` (the last of the previous chunk).
    async fn retained_messages(
        &self,
        topic: &TopicName,
        since: UnixMillis,
        until: UnixMillis,
        now: UnixMillis,
        after: Option<(UnixMillis, MessageId)>,
        limit: usize,
    ) -> StoreResult<Vec<RetainedMessage>>;
    /// How many messages of `topic` are kept for replays at `now`.
    async fn retained_count(&self, topic: &TopicName, now: UnixMillis) -> StoreResult<u64>;
    /// Message `id`'s row, while it is kept.
    async fn message(&self, id: MessageId) -> StoreResult<Option<StoredMessage>>;
    /// Add each count to its topic's `published` (a topic deleted meanwhile is skipped).
    async fn add_published(&self, counts: &[(TopicName, u64)]) -> StoreResult<()>;
    /// Delete up to `limit` messages no row refers to any more and no longer kept for
    /// replays at `now`; how many went.
    async fn purge_messages(&self, now: UnixMillis, limit: usize) -> StoreResult<usize>;
}

/// Drive `decision` to its end at once: for SQLite, whose primitives never wait. A future
/// that does wait is a bug in a primitive, reported as an error rather than a hang.
pub fn run_now<T>(decision: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
    use futures_util::FutureExt;
    decision.now_or_never().unwrap_or_else(|| {
        Err(StoreError::from(anyhow::anyhow!(
            "a SQLite primitive waited: decisions run on SQLite must never await"
        )))
    })
}
