//! SQLite's side of the contract: [`Tx`] over one connection, each primitive the SQL of
//! its table module. Writes run it on the writer thread inside the writer's transaction;
//! reads on a reader connection inside one snapshot ([`super::reader`]). Nothing here
//! waits, so [`run_now`](crate::store::dialect::run_now) drives a decision at once.

use std::collections::BTreeMap;

use rusqlite::Connection;

use super::{dead_letters, delivered, events, idempotency, jobs, queues, schedules};
use crate::event::Event;
use crate::model::{EventId, JobId, QueueName, ScheduleName, UnixMillis};
use crate::store::dialect::{Buried, KeyClaim, Left, StaleLease, Tx};
use crate::store::error::StoreResult;
use crate::store::records::{
    AttemptRecord, BatchKey, ClaimedJob, DeadLetter, DeadLetterPage, Delivery, DlqStats, Failure,
    FailureReason, Filter, IdempotencyKey, JobRecord, Lease, NewJob, NewSchedule, OutboxEvent,
    PageRequest, Position, QueueCounts, RecordedBatch, Schedule, ScheduleTick, Selection,
};
use crate::store::status::JobStatus;

/// One SQLite connection in a transaction, as the decisions see it.
#[derive(Clone, Copy)]
pub struct SqliteTx<'c>(pub &'c Connection);

impl Tx for SqliteTx<'_> {
    async fn savepoint(&self, name: &'static str) -> StoreResult<()> {
        Ok(self.0.execute_batch(&format!("SAVEPOINT {name}"))?)
    }

    async fn release(&self, name: &'static str) -> StoreResult<()> {
        Ok(self.0.execute_batch(&format!("RELEASE {name}"))?)
    }

    async fn roll_back_to(&self, name: &'static str) -> StoreResult<()> {
        Ok(self
            .0
            .execute_batch(&format!("ROLLBACK TO {name}; RELEASE {name}"))?)
    }

    async fn insert_jobs(&self, queue: &QueueName, batch: &[NewJob]) -> StoreResult<()> {
        for job in batch {
            jobs::insert(self.0, queue, job)?;
        }
        Ok(())
    }

    async fn mark_schedule_tick(&self, id: JobId, tick: &ScheduleTick) -> StoreResult<()> {
        jobs::set_schedule_tick(self.0, id, tick)
    }

    async fn claim(
        &self,
        queue: &QueueName,
        now: UnixMillis,
        leased_until: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<ClaimedJob>> {
        jobs::claim(self.0, queue, now, leased_until, limit)
    }

    async fn delete_leased(&self, id: JobId, lease: Lease) -> StoreResult<Option<Left>> {
        jobs::delete_leased(self.0, id, lease)
    }

    async fn delete_job(&self, id: JobId) -> StoreResult<Option<Left>> {
        jobs::delete(self.0, id)
    }

    async fn promote_next_of_key(
        &self,
        queue: &str,
        key: &str,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        jobs::promote_next_of_key(self.0, queue, key, now)
    }

    async fn reschedule_leased(
        &self,
        id: JobId,
        lease: Lease,
        run_at: UnixMillis,
        failure: &Failure,
    ) -> StoreResult<bool> {
        jobs::reschedule_leased(self.0, id, lease, run_at, failure)
    }

    async fn note_last_failure(
        &self,
        id: JobId,
        lease: Lease,
        failure: &Failure,
    ) -> StoreResult<bool> {
        jobs::note_last_failure(self.0, id, lease, failure)
    }

    async fn note_expired(&self, id: JobId) -> StoreResult<()> {
        jobs::note_expired(self.0, id)
    }

    async fn live_status(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<JobStatus>> {
        // One writer: nothing can claim the job between this read and the caller's write.
        jobs::status_of(self.0, queue, id)
    }

    async fn stale_leases(
        &self,
        now: UnixMillis,
        default_max_attempts: u32,
        limit: usize,
    ) -> StoreResult<Vec<StaleLease>> {
        jobs::stale_leases(self.0, now, default_max_attempts, limit)
    }

    async fn expired_jobs(
        &self,
        cutoff: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<(JobId, QueueName)>> {
        jobs::expired(self.0, cutoff, limit)
    }

    async fn live_job(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<JobRecord>> {
        jobs::get(self.0, queue, id)
    }

    async fn record_attempt(&self, id: JobId, attempt: u32, failure: &Failure) -> StoreResult<()> {
        jobs::record_attempt(self.0, id, attempt, failure)
    }

    async fn history(&self, id: JobId) -> StoreResult<Vec<AttemptRecord>> {
        jobs::history(self.0, id)
    }

    async fn drop_history(&self, ids: &[JobId]) -> StoreResult<()> {
        jobs::drop_history(self.0, ids)
    }

    async fn drop_unreferenced_history(&self, ids: &[JobId]) -> StoreResult<()> {
        jobs::drop_unreferenced_history(self.0, ids)
    }

    async fn keep_delivered(
        &self,
        id: JobId,
        lease: Lease,
        delivery: &Delivery,
    ) -> StoreResult<bool> {
        delivered::keep(self.0, id, (lease.attempt, lease.until), delivery)
    }

    async fn delivered_job(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<JobRecord>> {
        delivered::get(self.0, queue, id)
    }

    async fn purge_delivered(
        &self,
        queue: &QueueName,
        before: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        delivered::purge(self.0, queue, before, limit)
    }

    async fn copy_to_dead_letters(
        &self,
        id: JobId,
        reason: FailureReason,
        now: UnixMillis,
    ) -> StoreResult<Option<Buried>> {
        dead_letters::copy_from_jobs(self.0, id, reason, now)
    }

    async fn dead_letter_is_open(&self, queue: &QueueName, id: JobId) -> StoreResult<bool> {
        dead_letters::is_open(self.0, queue, id)
    }

    async fn dead_letter(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<DeadLetter>> {
        dead_letters::get(self.0, Some(queue), id)
    }

    async fn claim_for_replay(
        &self,
        selection: &Selection,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        dead_letters::claim_for_replay(self.0, selection, now, limit)
    }

    async fn put_back(
        &self,
        id: JobId,
        now: UnixMillis,
        run_at: UnixMillis,
    ) -> StoreResult<Option<QueueName>> {
        dead_letters::put_back(self.0, id, now, run_at)
    }

    async fn mark_replayed(&self, id: JobId, now: UnixMillis) -> StoreResult<()> {
        dead_letters::mark_replayed(self.0, id, now)
    }

    async fn unclaim_replay(&self, id: JobId, now: UnixMillis) -> StoreResult<()> {
        dead_letters::unclaim(self.0, id, now)
    }

    async fn delete_dead_letters(&self, selection: &Selection) -> StoreResult<Vec<JobId>> {
        dead_letters::delete(self.0, selection)
    }

    async fn purge_closed_dead_letters(
        &self,
        before: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        dead_letters::purge_closed(self.0, before, limit)
    }

    async fn claim_idempotency_key(
        &self,
        queue: &QueueName,
        key: &IdempotencyKey,
        id: JobId,
        created_at: UnixMillis,
    ) -> StoreResult<KeyClaim> {
        // One writer: the look and the record cannot be split by another enqueue.
        if let Some(first) = idempotency::find(self.0, queue, key)? {
            return Ok(KeyClaim::Taken(first));
        }
        idempotency::record(self.0, queue, key, id, created_at)?;
        Ok(KeyClaim::Claimed)
    }

    async fn claim_batch_key(
        &self,
        queue: &QueueName,
        key: &BatchKey,
        ids: &[JobId],
    ) -> StoreResult<Option<RecordedBatch>> {
        if let Some(recorded) = idempotency::find_batch(self.0, queue, key)? {
            return Ok(Some(recorded));
        }
        idempotency::record_batch(self.0, queue, key, ids)?;
        Ok(None)
    }

    async fn insert_event(&self, id: EventId, event: &Event, now: UnixMillis) -> StoreResult<()> {
        events::insert(self.0, id, event, now)
    }

    async fn due_schedules(&self, now: UnixMillis, limit: usize) -> StoreResult<Vec<Schedule>> {
        schedules::due(self.0, now, limit)
    }

    async fn claim_tick(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        planned: UnixMillis,
        next: Option<UnixMillis>,
    ) -> StoreResult<bool> {
        schedules::claim_tick(self.0, queue, name, planned, next)
    }

    async fn record_run(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        tick: UnixMillis,
        job: JobId,
    ) -> StoreResult<()> {
        schedules::record_run(self.0, queue, name, tick, job)
    }

    async fn next_schedule_due(&self) -> StoreResult<Option<UnixMillis>> {
        schedules::next_due(self.0)
    }

    async fn lock_queue_for_schedules(&self, queue: &QueueName) -> StoreResult<()> {
        queues::require(self.0, queue)
    }

    async fn schedule(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
    ) -> StoreResult<Option<Schedule>> {
        schedules::get(self.0, queue, name)
    }

    async fn schedule_for_update(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
    ) -> StoreResult<Option<Schedule>> {
        schedules::get(self.0, queue, name)
    }

    async fn schedules(&self, queue: &QueueName) -> StoreResult<Vec<Schedule>> {
        schedules::list(self.0, queue)
    }

    async fn count_schedules(&self, queue: &QueueName) -> StoreResult<u64> {
        schedules::count(self.0, queue)
    }

    async fn insert_schedule(
        &self,
        queue: &QueueName,
        schedule: &NewSchedule,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        schedules::insert(self.0, queue, schedule, next_run_at, now)
    }

    async fn replace_schedule(
        &self,
        queue: &QueueName,
        schedule: &NewSchedule,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<()> {
        schedules::replace(self.0, queue, schedule, next_run_at, now)
    }

    async fn set_schedule_paused(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        paused: bool,
        next_run_at: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<()> {
        schedules::set_paused(self.0, queue, name, paused, next_run_at, now)
    }

    async fn delete_schedule(&self, queue: &QueueName, name: &ScheduleName) -> StoreResult<()> {
        schedules::delete(self.0, queue, name)
    }

    async fn require_queue(&self, queue: &QueueName) -> StoreResult<()> {
        queues::require(self.0, queue)
    }

    async fn list_live(
        &self,
        queue: &QueueName,
        after: Option<JobId>,
        limit: usize,
    ) -> StoreResult<Vec<JobRecord>> {
        jobs::list(self.0, queue, after, limit)
    }

    async fn list_delivered(
        &self,
        queue: &QueueName,
        before: Option<Position>,
        limit: usize,
    ) -> StoreResult<Vec<JobRecord>> {
        delivered::list(self.0, queue, before, limit)
    }

    async fn list_dead_letters(
        &self,
        filter: &Filter,
        page: PageRequest,
    ) -> StoreResult<DeadLetterPage> {
        dead_letters::list(self.0, filter, page)
    }

    async fn dlq_stats(&self, now: UnixMillis, repeat_after_replays: u32) -> StoreResult<DlqStats> {
        dead_letters::stats(self.0, now, repeat_after_replays)
    }

    async fn acknowledge(&self, selection: &Selection, now: UnixMillis) -> StoreResult<usize> {
        dead_letters::acknowledge(self.0, selection, now)
    }

    async fn live_counts(
        &self,
        queue: Option<&QueueName>,
        now: UnixMillis,
    ) -> StoreResult<BTreeMap<QueueName, QueueCounts>> {
        jobs::counts(self.0, queue, now)
    }

    async fn pending_dead_letters(
        &self,
        queue: Option<&QueueName>,
    ) -> StoreResult<Vec<(QueueName, u64)>> {
        match queue {
            None => dead_letters::pending_counts(self.0),
            Some(queue) => Ok(vec![(
                queue.clone(),
                dead_letters::pending_count(self.0, queue)?,
            )]),
        }
    }

    async fn purge_idempotency_keys(&self, before: UnixMillis, limit: usize) -> StoreResult<usize> {
        idempotency::purge(self.0, before, limit)
    }

    async fn due_events(&self, now: UnixMillis, limit: usize) -> StoreResult<Vec<OutboxEvent>> {
        events::due(self.0, now, limit)
    }

    async fn next_event_due(&self) -> StoreResult<Option<UnixMillis>> {
        events::next_due(self.0)
    }

    async fn events_pending(&self) -> StoreResult<u64> {
        events::pending(self.0)
    }

    async fn remove_event(&self, id: EventId) -> StoreResult<()> {
        events::remove(self.0, id)
    }

    async fn reschedule_event(
        &self,
        id: EventId,
        next_at: UnixMillis,
        error: &str,
    ) -> StoreResult<()> {
        events::reschedule(self.0, id, next_at, error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::now_millis;
    use crate::store::decisions;
    use crate::store::dialect::run_now;
    use crate::store::records::{DlqState, Failure, Filter, PageRequest};
    use crate::store::records::{JobState, Outbox, Outcome};
    use crate::store::sealing::Sealing;
    use crate::store::sqlite::Synchronous;

    // ---------------------------------------------------------------------------------------
    // Replay rollback and interrupted replays
    // ---------------------------------------------------------------------------------------

    /// A raw writer connection on a fresh, migrated database with queue `q`.
    fn raw_database(dir: &tempfile::TempDir) -> (rusqlite::Connection, QueueName) {
        let (conn, queue) = super::super::ceiling::open_with_queue(
            &dir.path().join("raw.db"),
            "http://127.0.0.1:9/hook",
        )
        .unwrap();
        (conn, queue)
    }

    fn empty_job(id: JobId, now: UnixMillis) -> crate::store::records::NewJob {
        let payload = crate::json::canonicalize(b"{}").expect("JSON");
        crate::store::records::NewJob::now(id, payload, now)
    }

    fn failure(at: UnixMillis) -> Failure {
        Failure {
            error: "boom".into(),
            status: Some(500),
            latency_ms: 1,
            at,
        }
    }

    /// Dead-letter `n` fresh jobs through the job functions, at `now`.
    fn bury_jobs(
        conn: &rusqlite::Connection,
        queue: &QueueName,
        n: usize,
        now: UnixMillis,
    ) -> Vec<JobId> {
        let mut ids: Vec<JobId> = (0..n).map(|_| JobId::new()).collect();
        ids.sort();
        for id in &ids {
            jobs::insert(conn, queue, &empty_job(*id, now)).unwrap();
        }
        for job in jobs::claim(conn, queue, now, now + 60_000, n).unwrap() {
            let dead = Outcome::Dead {
                failure: failure(now),
            };
            let recorded = run_now(decisions::outcomes::record_outcome(
                &SqliteTx(conn),
                job.id,
                job.lease(),
                &dead,
                Outbox::default(),
            ));
            assert!(recorded.unwrap());
        }
        ids
    }

    #[test]
    fn a_replay_whose_job_cannot_be_put_back_is_rolled_back_to_pending() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, queue) = raw_database(&dir);
        let t0 = now_millis();
        let ids = bury_jobs(&conn, &queue, 3, t0);
        let claimed =
            dead_letters::claim_for_replay(&conn, &Selection::Ids(ids.clone()), t0, 10).unwrap();
        assert_eq!(claimed, ids);
        // The middle job is live again, so re-inserting it violates the unique id.
        jobs::insert(&conn, &queue, &empty_job(ids[1], t0)).unwrap();

        let report = run_now(decisions::dead_letters::replay_claimed(
            &SqliteTx(&conn),
            &claimed,
            t0 + 5,
            t0 + 5,
        ))
        .unwrap();
        assert_eq!(report.replayed_ids(), [ids[0], ids[2]]);
        assert_eq!(report.failed, [ids[1]]);

        let rolled_back = dead_letters::get(&conn, Some(&queue), ids[1])
            .unwrap()
            .unwrap();
        assert_eq!(rolled_back.status, DlqState::Pending);
        assert_eq!(rolled_back.replay_count, 0);
        assert_eq!(rolled_back.replayed_at, None);
        for id in [ids[0], ids[2]] {
            let letter = dead_letters::get(&conn, Some(&queue), id).unwrap().unwrap();
            assert_eq!(letter.status, DlqState::Replayed);
            assert_eq!(letter.replay_count, 1);
            assert_eq!(letter.replayed_at, Some(t0 + 5));
            let job = jobs::get(&conn, &queue, id)
                .unwrap()
                .expect("the job is live again");
            assert_eq!(job.state, JobState::Ready);
            assert_eq!(job.attempts, 0, "fresh attempts");
            assert_eq!(job.run_at, t0 + 5);
        }
        // The live job that blocked the replay is the one inserted above, untouched.
        let blocker = jobs::get(&conn, &queue, ids[1]).unwrap().unwrap();
        assert_eq!(blocker.run_at, t0);
        // No transaction is left open.
        assert!(conn.is_autocommit());
    }

    #[tokio::test]
    async fn records_left_replaying_by_an_interrupted_replay_are_pending_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = now_millis();
        let ids = {
            let (conn, queue) = raw_database(&dir);
            let ids = bury_jobs(&conn, &queue, 2, t0);
            // The process stops between claiming and putting back.
            let claimed =
                dead_letters::claim_for_replay(&conn, &Selection::Queue(queue), t0, 10).unwrap();
            assert_eq!(claimed.len(), 2);
            ids
        };
        let options = crate::store::StoreOptions::Sqlite {
            path: dir.path().join("raw.db"),
            synchronous: Synchronous::Normal,
        };
        let (store, done) =
            crate::store::Store::open(options, Sealing::none(), t0, |_| {}).unwrap();
        let page = PageRequest {
            after: None,
            limit: 100,
            newest_first: true,
            with_payload: false,
            with_total: false,
        };
        let letters = store
            .list_dead_letters(Filter::default(), page)
            .await
            .unwrap()
            .letters;
        assert_eq!(letters.len(), 2);
        assert!(
            letters.iter().all(|l| l.status == DlqState::Pending),
            "{letters:?}"
        );
        // And they can be replayed now.
        let (claimed, report) = store
            .replay(Selection::Ids(ids.clone()), t0, t0)
            .await
            .unwrap();
        assert_eq!(claimed, 2);
        assert_eq!(report.replayed_ids(), ids);
        drop(store);
        tokio::task::spawn_blocking(move || done.wait())
            .await
            .unwrap();
    }
}
