//! The background sweeps, driven with an injected clock (no sleeps): dead-letter retention
//! in batches, TTL expiry, stale-lease recovery and the alert signals. (The replay rollback
//! and interrupted-replay recovery are tested inside the SQLite backend, `store::sqlite::moves`.)

use std::sync::atomic::Ordering;

use hookq::maintenance::{REPEAT_FAILURE_REPLAYS, SWEEP_BATCH};
use hookq::model::{JobId, UnixMillis, now_millis};
use hookq::store::testing::Stored;
use hookq::store::{
    DlqState, Failure, FailureReason, Filter, JobState, JobsPage, NewJob, Outcome, PageRequest,
    Selection, Store,
};

use crate::dlq_support::{DAY_MS, HOUR_MS, StoreFixture, count_stored};

/// Every dead letter of the store, any status, newest first.
async fn all_dead_letters(store: &Store) -> Vec<hookq::store::DeadLetter> {
    let page = PageRequest {
        after: None,
        limit: 100_000,
        newest_first: true,
        with_payload: false,
        with_total: false,
    };
    store
        .list_dead_letters(Filter::default(), page)
        .await
        .expect("list dead letters")
        .letters
}

async fn count_in_state(store: &Store, state: DlqState) -> u64 {
    store
        .list_dead_letters(
            Filter {
                queue: None,
                state: Some(state),
                text: None,
            },
            PageRequest {
                after: None,
                limit: 1,
                newest_first: true,
                with_payload: false,
                with_total: true,
            },
        )
        .await
        .expect("list dead letters")
        .total
        .expect("a total was asked for")
}

fn failure(at: UnixMillis) -> Failure {
    Failure {
        error: "boom".into(),
        status: Some(502),
        latency_ms: 1,
        at,
        headers: None,
    }
}

// ---------------------------------------------------------------------------------------
// Retention
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn retention_deletes_closed_dead_letters_past_retention_and_never_pending_ones() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    let t0 = now_millis();
    let ids = fx.dead_letters(&queue, 5, t0).await;
    let (acked, replayed, delivered) = (ids[0], ids[1], ids[2]);
    fx.store
        .acknowledge(Selection::Ids(vec![acked]), t0)
        .await
        .unwrap();
    // One replayed job still waits (due in an hour); one was replayed and delivered.
    let (_, report) = fx
        .store
        .replay(Selection::Ids(vec![replayed]), t0, t0 + HOUR_MS)
        .await
        .unwrap();
    assert_eq!(report.replayed_ids(), [replayed]);
    fx.store
        .replay(Selection::Ids(vec![delivered]), t0, t0)
        .await
        .unwrap();
    let claimed = fx
        .store
        .claim(queue.clone(), t0, t0 + 60_000, 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(
        fx.store
            .record_outcome(delivered, claimed[0].lease(), Outcome::delivered(t0))
            .await
            .unwrap()
    );
    let retention = fx.retention_ms();

    // Not yet past retention: nothing goes.
    assert_eq!(
        fx.maintenance.purge_dead_letters(t0 + retention - 1).await,
        0
    );
    assert_eq!(all_dead_letters(&fx.store).await.len(), 5);

    // Past it: the acknowledged and both replayed records go, the pending two stay.
    assert_eq!(
        fx.maintenance.purge_dead_letters(t0 + retention + 1).await,
        3
    );
    let left = all_dead_letters(&fx.store).await;
    let mut left_ids: Vec<JobId> = left.iter().map(|l| l.id).collect();
    left_ids.sort();
    assert_eq!(left_ids, [ids[3], ids[4]]);
    assert!(left.iter().all(|l| l.status == DlqState::Pending));
    // History: dropped with the purged records, kept for the live replayed job and the
    // pending ones.
    let db = fx.database();
    assert_eq!(count_stored(&db, Stored::AttemptHistory).await, 3);
    let (record, history) = fx.store.get_job(queue.clone(), replayed).await.unwrap();
    assert_eq!(
        record.state,
        JobState::Ready,
        "the replayed job is untouched"
    );
    assert_eq!(history.len(), 1);

    // Pending dead letters are never deleted, however old.
    assert_eq!(
        fx.maintenance
            .purge_dead_letters(t0 + 100 * 365 * DAY_MS)
            .await,
        0
    );
    assert_eq!(all_dead_letters(&fx.store).await.len(), 2);
    fx.close().await;
}

#[tokio::test]
async fn retention_deletes_more_closed_records_than_one_batch_holds_across_batches() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("bulk").await;
    let t0 = now_millis();
    let total = 2 * SWEEP_BATCH + 150;
    fx.dead_letters(&queue, total, t0).await;
    let acked = fx
        .store
        .acknowledge(Selection::Queue(queue.clone()), t0)
        .await
        .unwrap();
    assert_eq!(acked, total);
    let pending = fx.dead_letters(&queue, 3, t0).await;

    let before = t0 + 1;
    // One statement deletes at most one batch.
    assert_eq!(
        fx.store
            .purge_dead_letters(before, SWEEP_BATCH)
            .await
            .unwrap(),
        SWEEP_BATCH
    );
    // The sweep keeps going batch after batch until none is left.
    let now = t0 + fx.retention_ms() + 1;
    assert_eq!(
        fx.maintenance.purge_dead_letters(now).await,
        total - SWEEP_BATCH
    );
    let left = all_dead_letters(&fx.store).await;
    let mut left_ids: Vec<JobId> = left.iter().map(|l| l.id).collect();
    left_ids.sort();
    assert_eq!(left_ids, pending, "only the pending ones are left");
    assert_eq!(
        count_stored(&fx.database(), Stored::AttemptHistory).await,
        3
    );
    fx.close().await;
}

// ---------------------------------------------------------------------------------------
// TTL expiry
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn ttl_expiry_dead_letters_ready_jobs_as_expired_and_leaves_jobs_in_flight_alone() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    let t0 = now_millis();
    let ids = fx.enqueue(&queue, 3, t0).await;
    // The oldest is in flight, with a lease that outlives the sweep.
    let ttl = fx.ttl_ms();
    let claimed = fx
        .store
        .claim(queue.clone(), t0, t0 + 2 * ttl, 1)
        .await
        .unwrap();
    assert_eq!(claimed[0].id, ids[0]);

    // Before the TTL is up, nothing expires.
    assert_eq!(fx.maintenance.expire_jobs(t0 + ttl - 1000).await, 0);

    let now = t0 + ttl + 1000;
    assert_eq!(fx.maintenance.expire_jobs(now).await, 2);
    let letters = all_dead_letters(&fx.store).await;
    assert_eq!(letters.len(), 2);
    for letter in &letters {
        assert!(ids[1..].contains(&letter.id));
        assert_eq!(letter.failure_reason, FailureReason::Expired);
        assert_eq!(letter.status, DlqState::Pending);
        assert_eq!(letter.failed_at, now);
        assert_eq!(letter.attempts, 0);
        assert!(
            letter
                .last_error
                .as_deref()
                .unwrap_or_default()
                .contains("expired"),
            "{letter:?}"
        );
    }
    let (record, _) = fx.store.get_job(queue.clone(), ids[0]).await.unwrap();
    assert_eq!(
        record.state,
        JobState::InFlight,
        "in-flight jobs are untouched"
    );
    let (record, _) = fx.store.get_job(queue.clone(), ids[1]).await.unwrap();
    assert_eq!(record.state, JobState::Dead);
    // Nothing left to expire.
    assert_eq!(fx.maintenance.expire_jobs(now + 1).await, 0);
    fx.close().await;
}

#[tokio::test]
async fn a_delayed_jobs_time_to_live_counts_from_when_it_is_due() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    let t0 = now_millis();
    let ttl = fx.ttl_ms();
    // Due in 10 days, with a 7-day TTL: still alive at day 8 and day 16, expired after 17.
    let due = t0 + 10 * DAY_MS;
    let job = NewJob {
        not_before: Some(due),
        ..NewJob::now(JobId::new(), hookq::json::canonicalize(b"{}").unwrap(), t0)
    };
    let id = job.id;
    fx.store.enqueue(queue.clone(), job).await.unwrap();
    let (record, _) = fx.store.get_job(queue.clone(), id).await.unwrap();
    assert_eq!((record.run_at, record.not_before), (due, Some(due)));
    assert_eq!(fx.maintenance.expire_jobs(t0 + 8 * DAY_MS).await, 0);
    assert_eq!(fx.maintenance.expire_jobs(due + ttl - 1000).await, 0);
    assert_eq!(fx.maintenance.expire_jobs(due + ttl + 1000).await, 1);
    let (record, _) = fx.store.get_job(queue, id).await.unwrap();
    assert_eq!(record.state, JobState::Dead);
    fx.close().await;
}

#[tokio::test]
async fn ttl_expiry_dead_letters_more_jobs_than_one_batch_holds_across_batches() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("bulk").await;
    let t0 = now_millis();
    let total = SWEEP_BATCH + 250;
    fx.enqueue(&queue, total, t0).await;
    // Every job's id (UUIDv7) is older than this.
    let cutoff = now_millis() + 1;
    // One statement expires at most one batch.
    assert_eq!(
        fx.store
            .expire_jobs(cutoff, t0 + 5, SWEEP_BATCH)
            .await
            .unwrap()
            .len(),
        SWEEP_BATCH
    );
    assert_eq!(
        fx.maintenance.expire_jobs(t0 + fx.ttl_ms() + 1000).await,
        total - SWEEP_BATCH
    );
    assert_eq!(
        count_in_state(&fx.store, DlqState::Pending).await,
        total as u64
    );
    assert!(
        fx.store
            .list_ready(queue, JobsPage::oldest(None, 10))
            .await
            .unwrap()
            .is_empty()
    );
    fx.close().await;
}

#[tokio::test]
async fn ttl_expiry_of_a_job_that_was_retrying_keeps_its_last_error() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    let t0 = now_millis();
    let id = fx.enqueue(&queue, 1, t0).await[0];
    let job = fx
        .store
        .claim(queue.clone(), t0, t0 + 60_000, 1)
        .await
        .unwrap()
        .remove(0);
    let retry = Outcome::Retry {
        run_at: t0 + HOUR_MS,
        failure: failure(t0),
    };
    assert!(
        fx.store
            .record_outcome(id, job.lease(), retry)
            .await
            .unwrap()
    );

    assert_eq!(fx.maintenance.expire_jobs(t0 + fx.ttl_ms() + 1000).await, 1);
    let letter = &all_dead_letters(&fx.store).await[0];
    assert_eq!(letter.failure_reason, FailureReason::Expired);
    assert_eq!(letter.last_error.as_deref(), Some("boom"));
    assert_eq!(letter.last_status, Some(502));
    assert_eq!(letter.attempts, 1);
    let (_, history) = fx.store.get_job(queue, id).await.unwrap();
    assert_eq!(history.len(), 1, "its history stays with the dead letter");
    fx.close().await;
}

#[tokio::test]
async fn a_replayed_job_is_not_expired_again_by_the_next_ttl_sweep() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    let t0 = now_millis();
    let id = fx.enqueue(&queue, 1, t0).await[0];
    let ttl = fx.ttl_ms();
    // The worker was down for longer than the TTL: the job expired.
    let expired_at = t0 + ttl + 1000;
    assert_eq!(fx.maintenance.expire_jobs(expired_at).await, 1);

    // The operator fixes the worker and replays it, five minutes from now.
    let now = expired_at + HOUR_MS;
    let (_, report) = fx
        .store
        .replay(Selection::Ids(vec![id]), now, now + 300_000)
        .await
        .unwrap();
    assert_eq!(report.replayed_ids(), [id]);

    // The next TTL sweep (a minute later) must leave the replayed job alone.
    assert_eq!(fx.maintenance.expire_jobs(now + 60_000).await, 0);
    let (record, _) = fx.store.get_job(queue, id).await.unwrap();
    assert_eq!(record.state, JobState::Ready);
    fx.close().await;
}

// ---------------------------------------------------------------------------------------
// Stale leases
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_stale_lease_returns_the_job_to_ready_with_the_attempt_counted() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    let t0 = now_millis();
    let id = fx.enqueue(&queue, 1, t0).await[0];
    // Claimed with a lease that already ran out.
    let job = fx
        .store
        .claim(queue.clone(), t0, t0 - 1, 1)
        .await
        .unwrap()
        .remove(0);

    // A lease still valid at `now` is not touched.
    let other = fx.enqueue(&queue, 1, t0).await[0];
    fx.store
        .claim(queue.clone(), t0, t0 + HOUR_MS, 1)
        .await
        .unwrap();

    assert_eq!(fx.maintenance.recover_stale_leases(t0).await, 1);
    let (record, history) = fx.store.get_job(queue.clone(), id).await.unwrap();
    assert_eq!(record.state, JobState::Ready);
    assert_eq!(record.attempts, 1, "the interrupted attempt counts");
    assert_eq!(record.run_at, t0, "due at once");
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].attempt, 1);
    assert!(history[0].error.contains("lease"), "{:?}", history[0]);
    let (record, _) = fx.store.get_job(queue.clone(), other).await.unwrap();
    assert_eq!(record.state, JobState::InFlight);

    // The outcome of the lost lease is refused (fencing), and the job can be claimed again.
    assert!(
        !fx.store
            .record_outcome(id, job.lease(), Outcome::delivered(t0))
            .await
            .unwrap()
    );
    let again = fx.store.claim(queue, t0, t0 + HOUR_MS, 1).await.unwrap();
    assert_eq!(again[0].id, id);
    assert_eq!(again[0].attempt, 2);
    fx.close().await;
}

#[tokio::test]
async fn a_stale_lease_on_the_last_attempt_dead_letters_the_job() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    let t0 = now_millis();
    let id = fx.enqueue(&queue, 1, t0).await[0];
    // Attempts 1 and 2 fail; attempt 3 (the last) is claimed and its lease runs out.
    for _ in 0..2 {
        let job = fx
            .store
            .claim(queue.clone(), t0, t0 + HOUR_MS, 1)
            .await
            .unwrap()
            .remove(0);
        let retry = Outcome::Retry {
            run_at: t0,
            failure: failure(t0),
        };
        assert!(
            fx.store
                .record_outcome(id, job.lease(), retry)
                .await
                .unwrap()
        );
    }
    let job = fx
        .store
        .claim(queue.clone(), t0, t0 - 1, 1)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(job.attempt, 3);

    assert_eq!(fx.maintenance.recover_stale_leases(t0).await, 1);
    let letters = all_dead_letters(&fx.store).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].id, id);
    assert_eq!(letters[0].failure_reason, FailureReason::MaxAttemptsReached);
    assert_eq!(letters[0].attempts, 3);
    assert_eq!(letters[0].last_status, None);
    let (record, history) = fx.store.get_job(queue, id).await.unwrap();
    assert_eq!(record.state, JobState::Dead);
    assert_eq!(
        history.iter().map(|h| h.attempt).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    fx.close().await;
}

// ---------------------------------------------------------------------------------------
// Alerts
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn the_pending_alert_is_raised_above_the_threshold_and_cleared_after_acknowledging() {
    let mut fx = StoreFixture::open().await;
    fx.maintenance.config.dlq_alert_pending = 1;
    let queue = fx.create_queue("q").await;
    let t0 = now_millis();
    let alerts = fx.maintenance.alerts.clone();

    fx.maintenance.check_alerts(t0).await;
    assert!(!alerts.too_many_pending.load(Ordering::Relaxed));

    let ids = fx.dead_letters(&queue, 2, t0).await;
    fx.maintenance.check_alerts(t0).await;
    assert!(
        alerts.too_many_pending.load(Ordering::Relaxed),
        "2 pending > 1"
    );
    assert!(!alerts.oldest_pending_stale.load(Ordering::Relaxed));
    assert!(!alerts.repeat_failures.load(Ordering::Relaxed));

    // A day later the oldest pending one is stale too.
    fx.maintenance.check_alerts(t0 + DAY_MS + 1).await;
    assert!(alerts.oldest_pending_stale.load(Ordering::Relaxed));

    fx.store
        .acknowledge(Selection::Ids(vec![ids[0]]), t0)
        .await
        .unwrap();
    fx.maintenance.check_alerts(t0).await;
    assert!(
        !alerts.too_many_pending.load(Ordering::Relaxed),
        "1 pending is not above 1"
    );
    assert!(!alerts.oldest_pending_stale.load(Ordering::Relaxed));
    fx.close().await;
}

#[tokio::test]
async fn the_repeat_failure_alert_is_raised_by_a_dead_letter_replayed_three_times() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    let t0 = now_millis();
    let id = fx.dead_letters(&queue, 1, t0).await[0];
    let alerts = fx.maintenance.alerts.clone();
    for round in 1..=3u32 {
        fx.maintenance.check_alerts(t0).await;
        assert!(
            !alerts.repeat_failures.load(Ordering::Relaxed),
            "round {round}"
        );
        let (_, report) = fx
            .store
            .replay(Selection::Ids(vec![id]), t0, t0)
            .await
            .unwrap();
        assert_eq!(report.replayed_ids(), [id]);
        // Fails straight away on its last attempt (max attempts 1 for this sketch).
        let job = fx
            .store
            .claim(queue.clone(), t0, t0 + HOUR_MS, 1)
            .await
            .unwrap()
            .remove(0);
        let dead = Outcome::Dead {
            failure: failure(t0),
        };
        assert!(
            fx.store
                .record_outcome(id, job.lease(), dead)
                .await
                .unwrap()
        );
        let letter = &all_dead_letters(&fx.store).await[0];
        assert_eq!(letter.replay_count, round);
        assert_eq!(letter.status, DlqState::Pending);
    }
    fx.maintenance.check_alerts(t0).await;
    assert!(alerts.repeat_failures.load(Ordering::Relaxed));
    assert_eq!(
        fx.store
            .dlq_stats(None, t0, REPEAT_FAILURE_REPLAYS)
            .await
            .unwrap()
            .repeat_failures,
        1
    );
    fx.close().await;
}
