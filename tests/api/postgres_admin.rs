//! The PostgreSQL backend's admin side against a real server (see `postgres` for the
//! harness): dead letters (listing, stats, replay, acknowledge, delete, TTL expiry,
//! retention), job reads wherever the job lives, the event outbox, and schedules. What
//! several nodes on one database must not break is tested with several `PgStore`s: a
//! replay run twice at once replays each record once, and a schedule's tick fired by two
//! nodes at once is fired once.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use hookq::cron::CronSpec;
use hookq::event::Event;
use hookq::json::canonicalize;
use hookq::model::{JobId, QueueName, ScheduleName, now_millis};
use hookq::policy::QueueChange;
use hookq::store::Store;
use hookq::store::{
    Delivery, DlqState, FailureReason, Filter, JobState, JobsPage, NewJob, NewSchedule, Outcome,
    PageRequest, Position, Saved, Selection, StoreError,
};
use serde_json::json;

use crate::postgres::{TestDatabase, close, count, failure, job, node, plan_of, queue_named};

fn q(name: &str) -> QueueName {
    QueueName::parse(name).unwrap()
}

fn schedule_name(name: &str) -> ScheduleName {
    ScheduleName::parse(name).unwrap()
}

/// Store `jobs` on `queue` and dead-letter them, the `i`th failing at `failed_at(i)`.
async fn bury(
    store: &Store,
    queue: &str,
    jobs: Vec<NewJob>,
    failed_at: impl Fn(usize) -> i64,
) -> Vec<JobId> {
    let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
    let due = jobs.iter().map(NewJob::due_at).max().unwrap_or(0);
    for j in jobs {
        store.enqueue(q(queue), j).await.unwrap();
    }
    let claimed = store
        .claim(q(queue), due, due + 60_000, ids.len())
        .await
        .unwrap();
    assert_eq!(claimed.len(), ids.len(), "every job to bury is claimed");
    for claimed in claimed {
        let i = ids.iter().position(|id| *id == claimed.id).unwrap();
        let dead = Outcome::Dead {
            failure: failure(failed_at(i)),
        };
        assert!(
            store
                .record_outcome(claimed.id, claimed.lease(), dead)
                .await
                .unwrap()
        );
    }
    ids
}

fn jobs(n: usize, t0: i64) -> Vec<NewJob> {
    (0..n).map(|i| job(i, t0)).collect()
}

fn newest_first(after: Option<Position>, limit: usize) -> PageRequest {
    PageRequest {
        after,
        limit,
        newest_first: true,
        with_payload: false,
        with_total: true,
    }
}

#[tokio::test]
async fn postgres_admin_dead_letters_list_newest_first_with_a_stable_cursor_filters_and_stats() {
    let Some(db) = TestDatabase::create("postgres_admin_dlq_listing").await else {
        return;
    };
    let store = node(&db).await;
    store.create_queue(queue_named("alpha")).await.unwrap();
    store.create_queue(queue_named("beta")).await.unwrap();
    let t0 = now_millis();
    // Seven in alpha, two of them failing at the same moment (ties go by id), three in beta.
    let alpha = bury(&store, "alpha", jobs(7, t0), |i| {
        t0 + [10, 20, 30, 30, 50, 60, 70][i]
    })
    .await;
    let beta = bury(&store, "beta", jobs(3, t0), |i| t0 + 15 + 20 * i as i64).await;
    assert_eq!(
        store
            .acknowledge(Selection::Ids(vec![alpha[0]]), t0 + 100)
            .await
            .unwrap(),
        1
    );

    // Every record, newest failure first, by pages of 3 following the cursor; a record
    // dead-lettered between two pages (newer than the cursor) does not shift the pages.
    let mut expected: Vec<(i64, JobId)> = Vec::new();
    let everything = store
        .list_dead_letters(Filter::default(), newest_first(None, 100))
        .await
        .unwrap();
    assert_eq!(everything.total, Some(10));
    for letter in &everything.letters {
        expected.push((letter.failed_at, letter.id));
    }
    let mut sorted = expected.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(expected, sorted, "failed_at descending, then id descending");
    assert!(
        expected
            .windows(2)
            .any(|w| w[0].0 == w[1].0 && w[0].1 > w[1].1),
        "the tie is broken by id, descending: {expected:?}"
    );
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_dead_letters(Filter::default(), newest_first(after, 3))
            .await
            .unwrap();
        if paged.is_empty() {
            bury(&store, "beta", jobs(1, t0), |_| t0 + 1_000).await;
        }
        let Some(last) = page.letters.last() else {
            break;
        };
        after = Some(last.position());
        paged.extend(page.letters.iter().map(|l| (l.failed_at, l.id)));
    }
    assert_eq!(
        paged, expected,
        "the pages, one after the other, are the listing"
    );

    // Oldest first, with payloads, without the total.
    let oldest = store
        .list_dead_letters(
            Filter {
                queue: Some(q("alpha")),
                state: Some(DlqState::Pending),
                text: None,
            },
            PageRequest {
                after: None,
                limit: 2,
                newest_first: false,
                with_payload: true,
                with_total: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(oldest.total, None);
    assert_eq!(
        oldest.letters.iter().map(|l| l.id).collect::<Vec<_>>(),
        [alpha[1], alpha[2].min(alpha[3])],
        "the acknowledged one is filtered out; the tie goes by id, ascending"
    );
    assert_eq!(
        oldest.letters[0].payload.as_ref().unwrap().as_str(),
        r#"{"n":1}"#
    );
    let letter = &oldest.letters[0];
    assert_eq!(letter.target, "http://127.0.0.1:9/hook");
    assert_eq!(
        (letter.attempts, letter.last_status, letter.failure_reason),
        (1, Some(500), FailureReason::MaxAttemptsReached)
    );
    assert_eq!(letter.last_error.as_deref(), Some("boom"));

    // Each filter, with its total.
    let filtered = |queue: Option<&str>, state: Option<DlqState>| {
        let store = store.clone();
        let filter = Filter {
            queue: queue.map(q),
            state,
            text: None,
        };
        async move {
            let page = store
                .list_dead_letters(filter, newest_first(None, 100))
                .await
                .unwrap();
            assert_eq!(page.total, Some(page.letters.len() as u64));
            page.letters.iter().map(|l| l.id).collect::<BTreeSet<_>>()
        }
    };
    assert_eq!(
        filtered(Some("alpha"), None).await,
        alpha.iter().copied().collect()
    );
    assert_eq!(
        filtered(Some("alpha"), Some(DlqState::Pending)).await,
        alpha[1..].iter().copied().collect()
    );
    assert_eq!(
        filtered(None, Some(DlqState::Acknowledged)).await,
        BTreeSet::from([alpha[0]])
    );
    assert_eq!(filtered(Some("beta"), None).await.len(), 4);
    assert!(beta.iter().all(|id| !alpha.contains(id)));
    assert!(matches!(
        store
            .list_dead_letters(
                Filter {
                    queue: Some(q("nope")),
                    state: None,
                    text: None,
                },
                newest_first(None, 10)
            )
            .await,
        Err(StoreError::QueueNotFound)
    ));

    // Stats: alpha has 6 pending, beta 4; one alpha record replayed and failed again twice
    // counts as a repeat failure past 1 replay.
    let (_, report) = store
        .replay(Selection::Ids(vec![alpha[6]]), t0 + 200, t0 + 200)
        .await
        .unwrap();
    assert_eq!(report.replayed_ids(), [alpha[6]]);
    let again = store
        .claim(q("alpha"), t0 + 200, t0 + 60_000, 10)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    let mut transport = failure(t0 + 300);
    transport.status = None;
    assert!(
        store
            .record_outcome(
                again[0].id,
                again[0].lease(),
                Outcome::Dead { failure: transport }
            )
            .await
            .unwrap()
    );
    let stats = store.dlq_stats(None, t0 + 1_300, 0).await.unwrap();
    assert_eq!(stats.by_status["pending"], 10);
    assert_eq!(stats.by_status["acknowledged"], 1);
    assert_eq!(stats.by_status["replaying"], 0);
    assert_eq!(
        stats.by_status["replayed"], 0,
        "replayed, then failed again: reopened"
    );
    assert_eq!(stats.by_queue["alpha"], 6);
    assert_eq!(stats.by_queue["beta"], 4);
    assert_eq!(
        stats
            .top_failing_queues
            .iter()
            .map(|c| (c.key.as_str(), c.count))
            .collect::<Vec<_>>(),
        [("alpha", 6), ("beta", 4)]
    );
    assert_eq!(stats.oldest_pending_failed_at, Some(t0 + 15));
    assert_eq!(stats.oldest_pending_age_ms, Some(1_300 - 15));
    assert_eq!(
        stats
            .top_status_codes
            .iter()
            .map(|c| (c.key, c.count))
            .collect::<Vec<_>>(),
        [(Some(500), 9), (None, 1)]
    );
    assert_eq!(stats.repeat_failures, 1, "replayed more than 0 times");
    assert_eq!(
        store
            .dlq_stats(None, t0 + 1_300, 1)
            .await
            .unwrap()
            .repeat_failures,
        0
    );
    assert_eq!(stats.last_24h.new_failures, 11);
    assert_eq!(stats.last_24h.acknowledged, 1);
    assert_eq!(stats.last_24h.replayed, 1);
    let later = store
        .dlq_stats(None, t0 + 25 * 3600 * 1000, 0)
        .await
        .unwrap();
    assert_eq!(later.last_24h.new_failures, 0);
    close([store], db).await;
}

#[tokio::test]
async fn postgres_admin_replay_puts_jobs_back_behind_their_key_and_rolls_back_what_cannot_go_back()
{
    let Some(db) = TestDatabase::create("postgres_admin_replay").await else {
        return;
    };
    let store = node(&db).await;
    store.create_queue(queue_named("q")).await.unwrap();
    let t0 = now_millis();
    let mut keyed = job(0, t0);
    keyed.ordering_key = Some("customer-1".into());
    keyed.priority = 7;
    let plain = job(1, t0);
    let taken = job(2, t0);
    let ids = bury(
        &store,
        "q",
        vec![keyed.clone(), plain.clone(), taken.clone()],
        |_| t0 + 10,
    )
    .await;
    // The key has a live job now, and `taken`'s id is live again (it cannot go back).
    let mut head = job(3, t0);
    head.ordering_key = Some("customer-1".into());
    store.enqueue(q("q"), head.clone()).await.unwrap();
    let payload = canonicalize(json!({ "n": 2 }).to_string().as_bytes()).unwrap();
    store
        .enqueue(q("q"), NewJob::now(taken.id, payload, t0))
        .await
        .unwrap();
    let pool = store.pg.pool();

    let (claimed, report) = store
        .replay(Selection::Ids(ids.clone()), t0 + 20, t0 + 20)
        .await
        .unwrap();
    assert_eq!(claimed, 3);
    assert_eq!(report.replayed_ids(), [keyed.id, plain.id]);
    assert!(report.replayed.iter().all(|(_, queue)| *queue == q("q")));
    assert_eq!(report.failed, [taken.id]);
    let status = |id: JobId| format!("SELECT status::bigint FROM jobs WHERE id = '{id}'");
    assert_eq!(
        count(pool, &status(keyed.id)).await,
        4,
        "blocked behind the key's live job"
    );
    assert_eq!(count(pool, &status(plain.id)).await, 0, "ready");
    let (record, _) = store.get_job(q("q"), keyed.id).await.unwrap();
    assert_eq!(record.state, JobState::Ready);
    assert_eq!(
        (record.attempts, record.run_at),
        (0, t0 + 20),
        "fresh attempts"
    );
    assert_eq!(record.priority, 7);
    assert_eq!(record.ordering_key.as_deref(), Some("customer-1"));
    let dlq = |state: DlqState| {
        let store = store.clone();
        async move {
            store
                .list_dead_letters(
                    Filter {
                        queue: None,
                        state: Some(state),
                        text: None,
                    },
                    newest_first(None, 10),
                )
                .await
                .unwrap()
                .letters
        }
    };
    let replayed = dlq(DlqState::Replayed).await;
    assert_eq!(replayed.len(), 2);
    assert!(
        replayed
            .iter()
            .all(|l| l.replay_count == 1 && l.replayed_at == Some(t0 + 20))
    );
    let pending = dlq(DlqState::Pending).await;
    assert_eq!(
        pending
            .iter()
            .map(|l| (l.id, l.replay_count, l.replayed_at))
            .collect::<Vec<_>>(),
        [(taken.id, 0, None)],
        "rolled back to pending, untouched"
    );
    assert_eq!(
        count(
            pool,
            "SELECT count(*) FROM dead_letters WHERE state = 'replaying'"
        )
        .await,
        0
    );
    // A record no longer pending is not claimed again.
    let (claimed, report) = store
        .replay(Selection::Ids(vec![plain.id]), t0 + 30, t0 + 30)
        .await
        .unwrap();
    assert_eq!((claimed, report.replayed.len()), (0, 0));

    // The key walks on: the live head first, then the replayed job.
    let first = store.claim(q("q"), t0 + 20, t0 + 60_000, 10).await.unwrap();
    let first_ids: HashSet<JobId> = first.iter().map(|j| j.id).collect();
    assert!(first_ids.contains(&head.id) && first_ids.contains(&plain.id));
    assert!(!first_ids.contains(&keyed.id));
    for j in &first {
        // `taken`'s live job stays live (waiting far ahead), so its record still cannot go
        // back.
        let outcome = if j.id == taken.id {
            Outcome::Retry {
                run_at: t0 + 3_600_000,
                failure: failure(t0 + 21),
            }
        } else {
            Outcome::delivered(t0 + 21)
        };
        assert!(
            store
                .record_outcome(j.id, j.lease(), outcome)
                .await
                .unwrap()
        );
    }
    let next = store.claim(q("q"), t0 + 21, t0 + 60_000, 10).await.unwrap();
    let next_ids: HashSet<JobId> = next.iter().map(|j| j.id).collect();
    assert!(next_ids.contains(&keyed.id), "{next_ids:?}");

    // Failing again reopens its record, which keeps its replay count.
    let keyed_claim = next.iter().find(|j| j.id == keyed.id).unwrap();
    assert_eq!(keyed_claim.attempt, 1);
    store
        .record_outcome(
            keyed.id,
            keyed_claim.lease(),
            Outcome::Dead {
                failure: failure(t0 + 40),
            },
        )
        .await
        .unwrap();
    let reopened = store
        .list_dead_letters(Filter::default(), newest_first(None, 10))
        .await
        .unwrap()
        .letters
        .into_iter()
        .find(|l| l.id == keyed.id)
        .unwrap();
    assert_eq!(
        (reopened.status, reopened.replay_count, reopened.failed_at),
        (DlqState::Pending, 1, t0 + 40)
    );

    // By queue, due later: scheduled until `run_at`, oldest failure first; the one that
    // cannot go back stays pending (and stops the replay by queue, as on SQLite).
    let (claimed, report) = store
        .replay(Selection::Queue(q("q")), t0 + 50, t0 + 5_000)
        .await
        .unwrap();
    assert_eq!(claimed, 2);
    assert_eq!(report.replayed_ids(), [keyed.id]);
    assert_eq!(report.failed, [taken.id]);
    store.cancel(q("q"), taken.id, t0 + 60).await.unwrap();
    let (claimed, report) = store
        .replay(Selection::Queue(q("q")), t0 + 60, t0 + 5_000)
        .await
        .unwrap();
    assert_eq!(claimed, 1);
    assert_eq!(report.replayed_ids(), [taken.id]);
    assert_eq!(
        count(pool, &status(taken.id)).await,
        3,
        "scheduled until run_at"
    );
    assert_eq!(
        count(
            pool,
            &format!("SELECT ttl_from FROM jobs WHERE id = '{}'", taken.id)
        )
        .await,
        t0 + 5_000,
        "its time to live starts at the replay's run_at"
    );
    assert!(
        store
            .claim(q("q"), t0 + 4_999, t0 + 60_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .claim(q("q"), t0 + 5_000, t0 + 60_000, 10)
            .await
            .unwrap()
            .len(),
        2
    );
    close([store], db).await;
}

#[tokio::test]
async fn postgres_admin_a_keyed_replay_racing_another_nodes_enqueue_for_its_key_waits_behind_it() {
    let Some(db) = TestDatabase::create("postgres_admin_replay_head_race").await else {
        return;
    };
    let store = node(&db).await;
    store.create_queue(queue_named("q")).await.unwrap();
    let t0 = now_millis();
    let mut keyed = job(0, t0);
    keyed.ordering_key = Some("k".into());
    bury(&store, "q", vec![keyed.clone()], |_| t0).await;
    // Another node is storing the key's first job: not committed yet, so the replay sees
    // no live job of the key, and its insert waits on the head index for that one.
    let pool = store.pg.pool();
    let mut other_node = pool.get().await.unwrap();
    let enqueue = other_node.transaction().await.unwrap();
    enqueue
        .execute(
            "INSERT INTO jobs (id, queue, status, payload, run_at, created_at, ordering_key)
             VALUES (gen_random_uuid(), 'q', 0, '{}', 0, 0, 'k')",
            &[],
        )
        .await
        .unwrap();
    let replaying = store.clone();
    let replay = tokio::spawn(async move {
        replaying
            .replay(Selection::Ids(vec![keyed.id]), t0 + 10, t0 + 10)
            .await
    });
    let waiting = "SELECT count(*) FROM pg_stat_activity
                   WHERE datname = current_database() AND wait_event_type = 'Lock'";
    for _ in 0..500 {
        if count(pool, waiting).await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        count(pool, waiting).await,
        1,
        "the replay waits on the key's head"
    );
    enqueue.commit().await.unwrap();
    drop(other_node);
    let (claimed, report) = replay.await.unwrap().unwrap();
    assert_eq!(claimed, 1);
    assert_eq!(
        report.replayed_ids(),
        [keyed.id],
        "not rolled back: {report:?}"
    );
    assert_eq!(
        count(
            pool,
            &format!("SELECT status::bigint FROM jobs WHERE id = '{}'", keyed.id)
        )
        .await,
        4,
        "blocked behind the other node's job"
    );
    assert_eq!(
        count(
            pool,
            "SELECT count(*) FROM jobs WHERE ordering_key = 'k' AND status = 0"
        )
        .await,
        1
    );
    close([store], db).await;
}

#[tokio::test]
async fn postgres_admin_two_nodes_replaying_the_same_dead_letters_at_once_replay_each_once() {
    let Some(db) = TestDatabase::create("postgres_admin_replay_race").await else {
        return;
    };
    let nodes = [node(&db).await, node(&db).await];
    nodes[0].create_queue(queue_named("q")).await.unwrap();
    let pool = nodes[0].pg.pool();
    let client = pool.get().await.unwrap();
    let records = 300;
    let t0 = now_millis();
    for round in 0..4 {
        let ids: Vec<JobId> = client
            .query(
                "INSERT INTO dead_letters (id, queue, target, payload, created_at, attempts,
                        failure_reason, failed_at, state, updated_at)
                 SELECT gen_random_uuid(), 'q', 'http://127.0.0.1:9/hook', '{}', n, 3,
                        'max_attempts_reached', n, 'pending', n
                 FROM generate_series(1, $1::integer) AS n
                 RETURNING id",
                &[&records],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| JobId::from_bytes(*row.get::<_, uuid::Uuid>(0).as_bytes()))
            .collect();
        // By ids (the second node in the other order), then by queue.
        let selections = if round % 2 == 0 {
            let mut reversed = ids.clone();
            reversed.reverse();
            [Selection::Ids(ids.clone()), Selection::Ids(reversed)]
        } else {
            [Selection::Queue(q("q")), Selection::Queue(q("q"))]
        };
        let [a, b] = selections;
        let (ra, rb) = tokio::join!(nodes[0].replay(a, t0, t0), nodes[1].replay(b, t0, t0));
        let ((claimed_a, report_a), (claimed_b, report_b)) = (ra.unwrap(), rb.unwrap());
        assert!(
            report_a.failed.is_empty() && report_b.failed.is_empty(),
            "round {round}: nothing failed: {:?} {:?}",
            report_a.failed.len(),
            report_b.failed.len()
        );
        assert_eq!(
            claimed_a + claimed_b,
            records as usize,
            "round {round}: each record claimed once ({claimed_a} + {claimed_b})"
        );
        let replayed: Vec<JobId> = report_a
            .replayed_ids()
            .into_iter()
            .chain(report_b.replayed_ids())
            .collect();
        let unique: HashSet<JobId> = replayed.iter().copied().collect();
        assert_eq!(replayed.len(), records as usize, "round {round}");
        assert_eq!(unique, ids.iter().copied().collect(), "round {round}");
        assert_eq!(
            count(
                pool,
                "SELECT count(*) FROM dead_letters WHERE state <> 'replayed'"
            )
            .await,
            0,
            "round {round}"
        );
        assert_eq!(
            count(
                pool,
                "SELECT count(*) FROM dead_letters WHERE replay_count <> 1"
            )
            .await,
            0,
            "round {round}: each replayed once"
        );
        assert_eq!(
            count(pool, "SELECT count(*) FROM jobs").await,
            i64::from(records) * (round + 1),
            "round {round}"
        );
    }
    drop(client);
    close(nodes, db).await;
}

#[tokio::test]
async fn postgres_admin_acknowledge_delete_expire_and_purge() {
    let Some(db) = TestDatabase::create("postgres_admin_ack_delete_expire").await else {
        return;
    };
    let store = node(&db).await.with_dead_letter_events(true);
    store.create_queue(queue_named("q")).await.unwrap();
    store.create_queue(queue_named("other")).await.unwrap();
    let pool = store.pg.pool();
    let t0 = now_millis();
    let ids = bury(&store, "q", jobs(4, t0), |i| t0 + i as i64).await;
    let others = bury(&store, "other", jobs(2, t0), |_| t0).await;

    // Acknowledge: pending only, each once.
    assert_eq!(
        store
            .acknowledge(Selection::Ids(vec![ids[0], ids[0], ids[1]]), t0 + 10)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        store
            .acknowledge(Selection::Ids(vec![ids[0]]), t0 + 11)
            .await
            .unwrap(),
        0,
        "already acknowledged"
    );
    assert_eq!(
        store
            .acknowledge(Selection::Queue(q("other")), t0 + 12)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        count(
            pool,
            &format!(
                "SELECT acknowledged_at FROM dead_letters WHERE id = '{}'",
                ids[1]
            )
        )
        .await,
        t0 + 10
    );

    // Delete: whatever the state; the one asked for must be there; the history goes with
    // the record unless the job still shows it (live again after a replay).
    assert_eq!(
        count(pool, "SELECT count(*) FROM job_attempts").await,
        6,
        "each burial recorded its attempt"
    );
    store
        .replay(Selection::Ids(vec![ids[2]]), t0 + 20, t0 + 20)
        .await
        .unwrap();
    assert_eq!(
        store
            .delete_dead_letters(Selection::Ids(vec![ids[0], ids[2]]))
            .await
            .unwrap(),
        2
    );
    assert!(matches!(
        store
            .delete_dead_letters(Selection::Ids(vec![ids[0]]))
            .await,
        Err(StoreError::JobNotFound)
    ));
    let history_of = |id: JobId| format!("SELECT count(*) FROM job_attempts WHERE job_id = '{id}'");
    assert_eq!(count(pool, &history_of(ids[0])).await, 0);
    assert_eq!(
        count(pool, &history_of(ids[2])).await,
        1,
        "its job is live again"
    );
    assert_eq!(
        store
            .delete_dead_letters(Selection::Queue(q("other")))
            .await
            .unwrap(),
        2
    );
    assert!(
        store
            .get_job(q("other"), others[0])
            .await
            .is_err_and(|e| matches!(e, StoreError::JobNotFound))
    );

    // Retention: replayed and acknowledged records last changed before the cutoff, a
    // limited number at a time; pending ones never.
    let (_, report) = store
        .replay(Selection::Ids(vec![ids[3]]), t0 + 30, t0 + 30)
        .await
        .unwrap();
    assert_eq!(report.replayed_ids(), [ids[3]]);
    assert_eq!(
        store.purge_dead_letters(t0 + 30, 10).await.unwrap(),
        1,
        "ids[1]"
    );
    assert_eq!(
        store.purge_dead_letters(t0 + 31, 10).await.unwrap(),
        1,
        "ids[3]"
    );
    assert_eq!(count(pool, &history_of(ids[1])).await, 0);
    assert_eq!(count(pool, &history_of(ids[3])).await, 1, "its job is live");
    assert_eq!(count(pool, "SELECT count(*) FROM dead_letters").await, 0);

    // TTL: jobs not in flight created before the cutoff, or with a time to live of their
    // own (replayed, delayed) starting before it. Ids are UUIDv7: one made at a later
    // millisecond stands for a job created after the cutoff.
    let events_before = count(pool, "SELECT count(*) FROM event_outbox").await;
    // The old jobs' ids are made first, then the cutoff after them (however slow the
    // machine): every one of those ids is before it.
    let mut old_keyed = job(10, t0);
    old_keyed.ordering_key = Some("k".into());
    let old_plain = job(12, t0);
    let in_flight = job(14, t0);
    let cutoff = now_millis() + 1;
    let mut young_keyed = NewJob::now(
        JobId::first_of_millis(cutoff + 60_000),
        canonicalize(b"{\"n\":11}").unwrap(),
        t0,
    );
    young_keyed.ordering_key = Some("k".into());
    let mut delayed = job(13, t0);
    delayed.not_before = Some(cutoff + 500);
    for j in [&old_keyed, &young_keyed, &old_plain, &delayed] {
        store.enqueue(q("q"), j.clone()).await.unwrap();
    }
    store.enqueue(q("other"), in_flight.clone()).await.unwrap();
    let leased = store.claim(q("other"), t0, t0 + 60_000, 10).await.unwrap();
    assert_eq!(leased.len(), 1);
    let mut expired = store.expire_jobs(cutoff, cutoff + 5, 100).await.unwrap();
    expired.sort();
    assert_eq!(
        expired,
        [q("q"), q("q"), q("q"), q("q")],
        "the two old ones and the two replayed ones (their ttl_from is before the cutoff)"
    );
    let dead = store
        .list_dead_letters(
            Filter {
                queue: Some(q("q")),
                state: Some(DlqState::Pending),
                text: None,
            },
            newest_first(None, 10),
        )
        .await
        .unwrap()
        .letters;
    assert_eq!(
        dead.iter().map(|l| l.id).collect::<HashSet<_>>(),
        HashSet::from([old_keyed.id, old_plain.id, ids[2], ids[3]])
    );
    for letter in &dead {
        assert_eq!(letter.failure_reason, FailureReason::Expired);
        assert_eq!(letter.failed_at, cutoff + 5);
    }
    let plain_letter = dead.iter().find(|l| l.id == old_plain.id).unwrap();
    assert_eq!(
        plain_letter.last_error.as_deref(),
        Some("expired: not delivered within the job TTL")
    );
    let replayed_letter = dead.iter().find(|l| l.id == ids[3]).unwrap();
    assert_eq!(
        replayed_letter.last_error.as_deref(),
        Some("boom"),
        "an earlier error is kept"
    );
    assert_eq!(
        count(pool, "SELECT count(*) FROM event_outbox").await - events_before,
        4,
        "each expiry announced"
    );
    assert_eq!(
        count(
            pool,
            &format!(
                "SELECT status::bigint FROM jobs WHERE id = '{}'",
                young_keyed.id
            )
        )
        .await,
        0,
        "the key's next job took its place, and is not expired"
    );
    assert!(
        store
            .expire_jobs(cutoff, cutoff + 5, 100)
            .await
            .unwrap()
            .is_empty(),
        "the in-flight job and the delayed one stay"
    );
    assert_eq!(
        store
            .expire_jobs(cutoff + 501, cutoff + 600, 100)
            .await
            .unwrap(),
        [q("q")],
        "the delayed job once its time to live, from its start, has passed"
    );
    assert!(
        store
            .record_outcome(leased[0].id, leased[0].lease(), Outcome::delivered(t0))
            .await
            .unwrap(),
        "the lease held through every sweep"
    );
    close([store], db).await;
}

#[tokio::test]
async fn postgres_admin_get_job_finds_a_job_live_delivered_or_dead_with_its_history() {
    let Some(db) = TestDatabase::create("postgres_admin_get_job").await else {
        return;
    };
    let store = node(&db).await;
    store.create_queue(queue_named("q")).await.unwrap();
    store.create_queue(queue_named("other")).await.unwrap();
    let pool = store.pg.pool();
    let t0 = now_millis();

    // Live, with one failed attempt, then in flight again.
    let kept = job(1, t0);
    store.enqueue(q("q"), kept.clone()).await.unwrap();
    let first = store
        .claim(q("q"), t0, t0 + 60_000, 1)
        .await
        .unwrap()
        .remove(0);
    let retry = Outcome::Retry {
        run_at: t0 + 100,
        failure: failure(t0 + 10),
    };
    assert!(
        store
            .record_outcome(kept.id, first.lease(), retry)
            .await
            .unwrap()
    );
    let (record, history) = store.get_job(q("q"), kept.id).await.unwrap();
    assert_eq!(record.state, JobState::Ready);
    assert_eq!((record.attempts, record.run_at), (1, t0 + 100));
    assert_eq!(record.last_error.as_deref(), Some("boom"));
    assert_eq!(record.last_status, Some(500));
    assert_eq!(record.payload.as_str(), r#"{"n":1}"#);
    assert_eq!(
        history
            .iter()
            .map(|a| (a.attempt, a.at, a.status, a.latency_ms, a.error.as_str()))
            .collect::<Vec<_>>(),
        [(1, t0 + 10, Some(500), 3, "boom")]
    );
    let second = store
        .claim(q("q"), t0 + 100, t0 + 60_000, 1)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        store.get_job(q("q"), kept.id).await.unwrap().0.state,
        JobState::InFlight
    );
    // Delivered and kept: in the log, with its history.
    let delivered = Outcome::Delivered {
        delivery: Delivery {
            at: t0 + 200,
            status: 204,
            latency_ms: 12,
            answer: Default::default(),
        },
        keep: true,
    };
    assert!(
        store
            .record_outcome(kept.id, second.lease(), delivered)
            .await
            .unwrap()
    );
    let (record, history) = store.get_job(q("q"), kept.id).await.unwrap();
    assert_eq!(record.state, JobState::Delivered);
    assert_eq!(record.run_at, t0 + 200);
    assert_eq!(
        record.delivery,
        Some(Delivery {
            at: t0 + 200,
            status: 204,
            latency_ms: 12,
            answer: Default::default(),
        })
    );
    assert_eq!((record.attempts, record.last_status), (2, Some(204)));
    assert_eq!(history.len(), 1);

    // Dead, with two failed attempts, in order.
    let dead = job(2, t0);
    store.enqueue(q("q"), dead.clone()).await.unwrap();
    let c = store
        .claim(q("q"), t0, t0 + 60_000, 1)
        .await
        .unwrap()
        .remove(0);
    let retry = Outcome::Retry {
        run_at: t0,
        failure: failure(t0 + 20),
    };
    store
        .record_outcome(dead.id, c.lease(), retry)
        .await
        .unwrap();
    let c = store
        .claim(q("q"), t0, t0 + 60_000, 1)
        .await
        .unwrap()
        .remove(0);
    let mut last = failure(t0 + 30);
    last.error = "gone".into();
    last.status = Some(410);
    store
        .record_outcome(dead.id, c.lease(), Outcome::Dead { failure: last })
        .await
        .unwrap();
    let (record, history) = store.get_job(q("q"), dead.id).await.unwrap();
    assert_eq!(record.state, JobState::Dead);
    assert_eq!((record.attempts, record.run_at), (2, t0 + 30));
    assert_eq!(record.payload.as_str(), r#"{"n":2}"#);
    assert_eq!(record.last_status, Some(410));
    assert_eq!(
        history
            .iter()
            .map(|a| (a.attempt, a.error.as_str()))
            .collect::<Vec<_>>(),
        [(1, "boom"), (2, "gone")]
    );
    // Replayed: its record is only audit now; the job is live again, history and all.
    store
        .replay(Selection::Ids(vec![dead.id]), t0 + 40, t0 + 40)
        .await
        .unwrap();
    let (record, history) = store.get_job(q("q"), dead.id).await.unwrap();
    assert_eq!((record.state, record.attempts), (JobState::Ready, 0));
    assert_eq!(history.len(), 2);
    // Acknowledged: still shown (ERROR); of another queue, or unknown: not found.
    let acked = bury(&store, "other", jobs(1, t0), |_| t0 + 50).await[0];
    store
        .acknowledge(Selection::Ids(vec![acked]), t0 + 60)
        .await
        .unwrap();
    assert_eq!(
        store.get_job(q("other"), acked).await.unwrap().0.state,
        JobState::Dead
    );
    for (queue, id) in [("other", kept.id), ("other", dead.id), ("q", JobId::new())] {
        assert!(matches!(
            store.get_job(q(queue), id).await,
            Err(StoreError::JobNotFound)
        ));
    }

    // The live listing: the queue's jobs in id order, by pages after a cursor.
    let more = jobs(5, t0);
    for j in &more {
        store.enqueue(q("other"), j.clone()).await.unwrap();
    }
    let mut listed = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_ready(q("other"), JobsPage::oldest(after, 2))
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        listed.extend(page.iter().map(|r| r.id));
    }
    assert_eq!(listed, more.iter().map(|j| j.id).collect::<Vec<_>>());
    assert!(matches!(
        store
            .list_ready(q("nope"), JobsPage::oldest(None, 10))
            .await,
        Err(StoreError::QueueNotFound)
    ));

    // The delivery log: newest first (ties by id), by pages after a position; retention
    // by queue cutoffs, with the history no one shows any more.
    let logged = jobs(5, t0);
    for j in &logged {
        store.enqueue(q("other"), j.clone()).await.unwrap();
    }
    let claimed = store.claim(q("other"), t0, t0 + 60_000, 100).await.unwrap();
    for (i, c) in claimed.iter().enumerate() {
        let outcome = Outcome::Delivered {
            delivery: Delivery {
                at: t0 + [1, 2, 2, 3, 4, 5, 6, 7, 8, 9][i],
                status: 200,
                latency_ms: 1,
                answer: Default::default(),
            },
            keep: true,
        };
        assert!(
            store
                .record_outcome(c.id, c.lease(), outcome)
                .await
                .unwrap()
        );
    }
    let mut expected: Vec<(i64, JobId)> = claimed
        .iter()
        .enumerate()
        .map(|(i, c)| (t0 + [1, 2, 2, 3, 4, 5, 6, 7, 8, 9][i], c.id))
        .collect();
    expected.sort_by(|a, b| b.cmp(a));
    let mut pages = Vec::new();
    let mut before = None;
    loop {
        let page = store
            .list_delivered(q("other"), JobsPage::newest(before, 3))
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        before = Some(Position {
            at: last.run_at,
            id: last.id,
        });
        pages.extend(page.iter().map(|r| (r.run_at, r.id)));
    }
    assert_eq!(pages, expected);
    assert!(matches!(
        store
            .list_delivered(q("nope"), JobsPage::newest(None, 10))
            .await,
        Err(StoreError::QueueNotFound)
    ));
    // `q`'s kept job (delivered at t0 + 200) is older than its cutoff; `other` purges up to
    // the limit.
    let purged = store
        .purge_delivered(vec![(q("q"), t0 + 201), (q("other"), t0 + 3)], 3)
        .await
        .unwrap();
    assert_eq!(purged, 3);
    assert_eq!(
        count(
            pool,
            &format!(
                "SELECT count(*) FROM job_attempts WHERE job_id = '{}'",
                kept.id
            )
        )
        .await,
        0,
        "its history went with it"
    );
    assert_eq!(
        count(pool, "SELECT count(*) FROM delivered WHERE queue = 'other'").await,
        8
    );
    assert_eq!(
        store
            .purge_delivered(vec![(q("other"), t0 + 3)], 10)
            .await
            .unwrap(),
        1,
        "the other one delivered before t0 + 3"
    );
    close([store], db).await;
}

#[tokio::test]
async fn postgres_admin_event_outbox_lifecycle() {
    let Some(db) = TestDatabase::create("postgres_admin_event_outbox").await else {
        return;
    };
    let store = node(&db).await;
    store.create_queue(queue_named("q")).await.unwrap();
    let t0 = now_millis();
    assert_eq!(store.events_pending().await.unwrap(), 0);
    assert_eq!(store.next_event_due().await.unwrap(), None);
    for (i, at) in [t0 + 20, t0 + 10, t0 + 10].into_iter().enumerate() {
        let event = Event::DlqAlert {
            alert: "too_many_pending".into(),
            raised: true,
            message: format!("event {i}"),
        };
        store.record_event(event, at).await.unwrap();
    }
    assert_eq!(store.events_pending().await.unwrap(), 3);
    assert_eq!(store.next_event_due().await.unwrap(), Some(t0 + 10));
    assert!(store.due_events(t0 + 9, 10).await.unwrap().is_empty());
    let due = store.due_events(t0 + 20, 10).await.unwrap();
    assert_eq!(due.len(), 3);
    assert!(due.iter().all(|e| e.kind == "dlq.alert" && e.attempts == 0));
    assert_eq!(
        due.iter().map(|e| e.created_at).collect::<Vec<_>>(),
        [t0 + 10, t0 + 10, t0 + 20],
        "oldest due first"
    );
    assert!(due[0].id < due[1].id, "ties by id");
    assert!(due[2].body.contains("event 0"), "{}", due[2].body);
    assert!(
        due[2].body.contains(&due[2].id.to_string()),
        "the body names its id"
    );
    assert_eq!(store.due_events(t0 + 20, 2).await.unwrap().len(), 2);

    // A failed attempt: due again later, counted; a sent one: gone.
    store
        .reschedule_event(due[0].id, t0 + 1_000, "503".into())
        .await
        .unwrap();
    store.remove_event(due[1].id).await.unwrap();
    assert_eq!(store.events_pending().await.unwrap(), 2);
    assert_eq!(
        store
            .due_events(t0 + 999, 10)
            .await
            .unwrap()
            .iter()
            .map(|e| e.id)
            .collect::<Vec<_>>(),
        [due[2].id]
    );
    let retried = store.due_events(t0 + 1_000, 10).await.unwrap();
    assert_eq!(
        retried
            .iter()
            .map(|e| (e.id, e.attempts))
            .collect::<Vec<_>>(),
        [(due[2].id, 0), (due[0].id, 1)]
    );
    assert_eq!(
        count(
            store.pg.pool(),
            &format!(
                "SELECT count(*) FROM event_outbox WHERE last_error = '503' AND id = '{}'",
                due[0].id
            )
        )
        .await,
        1
    );
    // A dead letter announced by a store that records them joins the queue.
    let announcing = store.clone().with_dead_letter_events(true);
    bury(&announcing, "q", jobs(1, t0), |_| t0 + 5).await;
    let kinds: Vec<String> = store
        .due_events(t0 + 1_000, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["job.dead_lettered", "dlq.alert", "dlq.alert"]);
    for event in store.due_events(t0 + 1_000, 10).await.unwrap() {
        store.remove_event(event.id).await.unwrap();
    }
    assert_eq!(store.events_pending().await.unwrap(), 0);
    assert_eq!(store.next_event_due().await.unwrap(), None);
    close([store], db).await;
}

fn minutely(name: &str, n: u64) -> NewSchedule {
    NewSchedule {
        name: schedule_name(name),
        spec: CronSpec::parse("* * * * *", "UTC").unwrap(),
        payload: canonicalize(json!({ "tick": n }).to_string().as_bytes()).unwrap(),
        priority: 0,
        ordering_key: None,
        paused: false,
    }
}

/// The first minute boundary after `t`.
fn next_minute(t: i64) -> i64 {
    (t / 60_000 + 1) * 60_000
}

#[tokio::test]
async fn postgres_admin_schedules_are_stored_changed_and_fired() {
    let Some(db) = TestDatabase::create("postgres_admin_schedules").await else {
        return;
    };
    let store = node(&db).await;
    store.create_queue(queue_named("q")).await.unwrap();
    let pool = store.pg.pool();
    let t0 = now_millis();
    let t1 = next_minute(t0);

    // Create, replace (same expression: the next tick stays), change the expression.
    assert_eq!(
        store
            .put_schedule(q("q"), minutely("m", 1), t0)
            .await
            .unwrap(),
        Saved::Created
    );
    let m = store
        .get_schedule(q("q"), schedule_name("m"))
        .await
        .unwrap();
    assert_eq!(
        (m.next_run_at, m.created_at, m.updated_at),
        (Some(t1), t0, t0)
    );
    assert_eq!(m.cron, "* * * * *");
    assert_eq!(m.timezone, "UTC");
    assert!(!m.paused);
    assert_eq!(
        store
            .put_schedule(q("q"), minutely("m", 2), t1 + 30_000)
            .await
            .unwrap(),
        Saved::Replaced
    );
    let m = store
        .get_schedule(q("q"), schedule_name("m"))
        .await
        .unwrap();
    assert_eq!(
        m.next_run_at,
        Some(t1),
        "a tick due this very moment is not lost"
    );
    assert_eq!((m.created_at, m.updated_at), (t0, t1 + 30_000));
    assert_eq!(m.payload.as_str(), r#"{"tick":2}"#);
    let mut hourly = minutely("h", 3); // yearly, in fact: never due during the test
    hourly.spec = CronSpec::parse("0 0 1 1 *", "Europe/Paris").unwrap();
    hourly.priority = 5;
    hourly.ordering_key = Some("hourly".into());
    store.put_schedule(q("q"), hourly, t0).await.unwrap();
    let mut paused = minutely("p", 4);
    paused.paused = true;
    store.put_schedule(q("q"), paused, t0).await.unwrap();
    assert_eq!(
        store
            .get_schedule(q("q"), schedule_name("p"))
            .await
            .unwrap()
            .next_run_at,
        None
    );
    assert!(matches!(
        store.put_schedule(q("nope"), minutely("m", 1), t0).await,
        Err(StoreError::QueueNotFound)
    ));
    assert!(matches!(
        store.list_schedules(q("nope")).await,
        Err(StoreError::QueueNotFound)
    ));
    assert!(matches!(
        store.get_schedule(q("q"), schedule_name("x")).await,
        Err(StoreError::ScheduleNotFound)
    ));
    // Listed by name, in byte order.
    for name in ["z-a", "z_a", "za"] {
        store
            .put_schedule(q("q"), minutely(name, 0), t0)
            .await
            .unwrap();
    }
    let names: Vec<String> = store
        .list_schedules(q("q"))
        .await
        .unwrap()
        .iter()
        .map(|s| s.name.as_str().to_owned())
        .collect();
    assert_eq!(names, ["h", "m", "p", "z-a", "z_a", "za"]);
    for name in ["z-a", "z_a", "za"] {
        store
            .delete_schedule(q("q"), schedule_name(name))
            .await
            .unwrap();
    }
    assert!(matches!(
        store.delete_schedule(q("q"), schedule_name("za")).await,
        Err(StoreError::ScheduleNotFound)
    ));

    // A round at the first tick: `m` fires (its job carries the tick), `p` is paused.
    let round = store.fire_due_schedules(t1 + 5, 100).await.unwrap();
    assert_eq!(round.fired.len(), 1);
    let fired = &round.fired[0];
    assert_eq!(
        (
            fired.queue.as_str(),
            fired.schedule.as_str(),
            fired.tick,
            fired.caught_up
        ),
        ("q", "m", t1, false)
    );
    assert!(!round.more);
    assert_eq!(round.next_due, Some(t1 + 60_000));
    let job_id = fired.job.unwrap();
    let claimed = store.claim(q("q"), t1 + 5, t1 + 60_000, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, job_id);
    assert_eq!(claimed[0].payload.as_str(), r#"{"tick":2}"#);
    let tick = claimed[0].schedule.as_ref().unwrap();
    assert_eq!((tick.schedule.as_str(), tick.tick), ("m", t1));
    let m = store
        .get_schedule(q("q"), schedule_name("m"))
        .await
        .unwrap();
    assert_eq!(
        (m.next_run_at, m.last_run_at, m.last_job_id),
        (Some(t1 + 60_000), Some(t1), Some(job_id))
    );
    assert!(
        store
            .fire_due_schedules(t1 + 6, 100)
            .await
            .unwrap()
            .fired
            .is_empty(),
        "a tick fires once"
    );

    // Down for three minutes: the missed ticks fire once, for the latest.
    let round = store.fire_due_schedules(t1 + 180_001, 100).await.unwrap();
    assert_eq!(round.fired.len(), 1);
    assert_eq!(
        (round.fired[0].tick, round.fired[0].caught_up),
        (t1 + 180_000, true)
    );
    assert_eq!(
        store
            .get_schedule(q("q"), schedule_name("m"))
            .await
            .unwrap()
            .next_run_at,
        Some(t1 + 240_000)
    );

    // Pause (nothing due), pause again (no change), resume from now: missed ticks are not
    // made up.
    let m = store
        .pause_schedule(q("q"), schedule_name("m"), true, t1 + 200_000)
        .await
        .unwrap();
    assert!(m.paused);
    assert_eq!((m.next_run_at, m.updated_at), (None, t1 + 200_000));
    let again = store
        .pause_schedule(q("q"), schedule_name("m"), true, t1 + 210_000)
        .await
        .unwrap();
    assert_eq!(again.updated_at, t1 + 200_000, "no change");
    assert!(
        store
            .fire_due_schedules(t1 + 400_000, 100)
            .await
            .unwrap()
            .fired
            .iter()
            .all(|f| f.schedule.as_str() != "m")
    );
    let m = store
        .pause_schedule(q("q"), schedule_name("m"), false, t1 + 400_000)
        .await
        .unwrap();
    assert_eq!(m.next_run_at, Some(t1 + 420_000));
    assert!(matches!(
        store
            .pause_schedule(q("q"), schedule_name("x"), true, t1)
            .await,
        Err(StoreError::ScheduleNotFound)
    ));

    // `more` when more are due than the round fires; a full queue skips its tick (no job,
    // the schedule moves on) and the round goes on with the others.
    store.create_queue(queue_named("capped")).await.unwrap();
    let cap = QueueChange {
        max_queued: Some(Some(1)),
        ..QueueChange::default()
    };
    store.update_queue(q("capped"), cap).await.unwrap();
    store.enqueue(q("capped"), job(0, t0)).await.unwrap();
    // `full` is due first (a minute earlier), so the round goes on after its skip.
    store
        .put_schedule(q("capped"), minutely("full", 0), t1 + 350_000)
        .await
        .unwrap();
    store
        .put_schedule(q("q"), minutely("n", 0), t1 + 400_000)
        .await
        .unwrap();
    let jobs_before = count(pool, "SELECT count(*) FROM jobs").await;
    let round = store.fire_due_schedules(t1 + 420_001, 2).await.unwrap();
    assert_eq!(round.fired.len(), 2);
    assert!(round.more);
    assert_eq!(
        (round.fired[0].schedule.as_str(), round.fired[0].job),
        ("full", None),
        "the capped queue skipped its tick"
    );
    assert!(round.fired[1].job.is_some(), "and the round went on");
    let round2 = store.fire_due_schedules(t1 + 420_001, 100).await.unwrap();
    assert!(!round2.more);
    let all: Vec<_> = round.fired.iter().chain(&round2.fired).collect();
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(all[1..].iter().all(|f| f.job.is_some()));
    assert_eq!(
        count(pool, "SELECT count(*) FROM jobs").await,
        jobs_before + 2
    );
    assert_eq!(
        store
            .get_schedule(q("capped"), schedule_name("full"))
            .await
            .unwrap()
            .next_run_at,
        Some(t1 + 480_000),
        "moved on"
    );
    // Deleting the queue takes its schedules along.
    store.delete_queue(q("capped")).await.unwrap();
    assert_eq!(
        count(
            pool,
            "SELECT count(*) FROM schedules WHERE queue = 'capped'"
        )
        .await,
        0
    );
    close([store], db).await;
}

#[tokio::test]
async fn postgres_admin_two_nodes_firing_the_same_due_schedules_at_once_fire_each_tick_once() {
    let Some(db) = TestDatabase::create("postgres_admin_schedule_race").await else {
        return;
    };
    let nodes = [node(&db).await, node(&db).await];
    nodes[0].create_queue(queue_named("q")).await.unwrap();
    let pool = nodes[0].pg.pool();
    let t0 = now_millis();
    let t1 = next_minute(t0);
    let schedules = 30;
    for n in 0..schedules {
        nodes[n % 2]
            .put_schedule(q("q"), minutely(&format!("s{n}"), n as u64), t0)
            .await
            .unwrap();
    }
    let rounds = 5;
    for round in 0..rounds {
        let now = t1 + round * 60_000 + 1;
        let (a, b) = tokio::join!(
            nodes[0].fire_due_schedules(now, 100),
            nodes[1].fire_due_schedules(now, 100)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        let fired: Vec<_> = a.fired.iter().chain(&b.fired).collect();
        assert_eq!(
            fired.len(),
            schedules,
            "round {round}: each schedule fired once ({} + {})",
            a.fired.len(),
            b.fired.len()
        );
        let names: HashSet<&str> = fired.iter().map(|f| f.schedule.as_str()).collect();
        assert_eq!(names.len(), schedules, "round {round}");
        assert!(fired.iter().all(|f| f.tick == now - 1 && f.job.is_some()));
    }
    assert_eq!(
        count(pool, "SELECT count(*) FROM jobs").await,
        schedules as i64 * rounds
    );
    assert_eq!(
        count(
            pool,
            "SELECT count(DISTINCT (schedule, schedule_tick)) FROM jobs"
        )
        .await,
        schedules as i64 * rounds,
        "one job per tick"
    );
    assert_eq!(
        count(
            pool,
            &format!(
                "SELECT count(*) FROM schedules WHERE next_run_at = {} AND last_job_id IS NOT NULL",
                t1 + rounds * 60_000
            )
        )
        .await,
        schedules as i64
    );

    // A schedule another transaction holds (a node in the middle of firing it) is left to
    // it: the others' rounds neither wait nor fire it. Once released, it fires once.
    let now = t1 + rounds * 60_000 + 1;
    let mut holder = pool.get().await.unwrap();
    let held = holder.transaction().await.unwrap();
    held.execute("SELECT 1 FROM schedules WHERE name = 's0' FOR UPDATE", &[])
        .await
        .unwrap();
    let (a, b) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(
            nodes[0].fire_due_schedules(now, 100),
            nodes[1].fire_due_schedules(now, 100)
        )
    })
    .await
    .expect("a round does not wait for a schedule another node holds");
    let (a, b) = (a.unwrap(), b.unwrap());
    let fired: Vec<_> = a.fired.iter().chain(&b.fired).collect();
    assert_eq!(fired.len(), schedules - 1);
    assert!(fired.iter().all(|f| f.schedule.as_str() != "s0"));
    assert!(
        a.next_due.is_some_and(|next| next < now),
        "the held one is still due"
    );
    held.rollback().await.unwrap();
    drop(holder);
    let (a, b) = tokio::join!(
        nodes[0].fire_due_schedules(now, 100),
        nodes[1].fire_due_schedules(now, 100)
    );
    let fired: Vec<_> = a
        .unwrap()
        .fired
        .into_iter()
        .chain(b.unwrap().fired)
        .collect();
    assert_eq!(
        fired
            .iter()
            .map(|f| f.schedule.as_str())
            .collect::<Vec<_>>(),
        ["s0"]
    );
    close(nodes, db).await;
}

#[tokio::test]
async fn postgres_admin_listings_and_sweeps_read_their_indexes() {
    let Some(db) = TestDatabase::create("postgres_admin_plans").await else {
        return;
    };
    let store = node(&db).await;
    for name in ["q", "other"] {
        store.create_queue(queue_named(name)).await.unwrap();
    }
    // 100 000 rows a table, `q` holding 1% of each; dead letters mostly kept for audit
    // (replayed, acknowledged), 5% pending.
    let client = store.pg.pool().get().await.unwrap();
    client
        .batch_execute(
            "INSERT INTO dead_letters (id, queue, target, payload, created_at, attempts,
                    failure_reason, failed_at, state, updated_at)
             SELECT gen_random_uuid(), CASE WHEN n % 100 = 0 THEN 'q' ELSE 'other' END, 't',
                    '{}', n, 3, 'max_attempts_reached', n,
                    CASE WHEN n % 20 = 0 THEN 'pending'
                         WHEN n % 2 = 0 THEN 'replayed'
                         ELSE 'acknowledged' END, n
             FROM generate_series(1, 100000) AS n;
             INSERT INTO delivered (id, queue, payload, attempts, created_at, delivered_at,
                    response_status, latency_ms)
             SELECT gen_random_uuid(), CASE WHEN n % 100 = 0 THEN 'q' ELSE 'other' END, '{}',
                    1, n, n, 200, 1
             FROM generate_series(1, 100000) AS n;
             INSERT INTO jobs (id, queue, status, payload, run_at, created_at, ttl_from)
             SELECT gen_random_uuid(), CASE WHEN n % 100 = 0 THEN 'q' ELSE 'other' END,
                    n % 2, '{}', n, n, CASE WHEN n % 100 = 0 THEN n END
             FROM generate_series(1, 100000) AS n;
             INSERT INTO schedules (queue, name, cron, timezone, payload, paused,
                    next_run_at, created_at, updated_at)
             SELECT 'q', 's' || n, '* * * * *', 'UTC', '{}', n % 2 = 0, n, 0, 0
             FROM generate_series(1, 20000) AS n;
             ANALYZE;",
        )
        .await
        .unwrap();
    let columns = "id, queue, failed_at, state";
    let cursor = "(50000, '80000000-0000-0000-0000-000000000000'::uuid)";
    for (name, sql, index) in [
        (
            "dead letters, all",
            format!(
                "SELECT {columns} FROM dead_letters WHERE TRUE AND (failed_at, id) < {cursor}
                 ORDER BY failed_at DESC, id DESC LIMIT 51"
            ),
            "dead_letters_by_time",
        ),
        (
            "dead letters by state",
            format!(
                "SELECT {columns} FROM dead_letters WHERE state = 'pending'
                 AND (failed_at, id) < {cursor} ORDER BY failed_at DESC, id DESC LIMIT 51"
            ),
            "dead_letters_by_state",
        ),
        (
            "dead letters by queue and state",
            format!(
                "SELECT {columns} FROM dead_letters WHERE queue = 'q' AND state = 'pending'
                 AND (failed_at, id) < {cursor} ORDER BY failed_at DESC, id DESC LIMIT 51"
            ),
            "dead_letters_by_queue",
        ),
        (
            "dead letters by queue and state, oldest first",
            format!(
                "SELECT {columns} FROM dead_letters WHERE queue = 'q' AND state = 'pending'
                 AND (failed_at, id) > {cursor} ORDER BY failed_at ASC, id ASC LIMIT 51"
            ),
            "dead_letters_by_queue",
        ),
        (
            "dead letters by queue",
            format!(
                "SELECT {columns} FROM dead_letters WHERE queue = 'q'
                 AND (failed_at, id) < {cursor} ORDER BY failed_at DESC, id DESC LIMIT 51"
            ),
            "dead_letters_by_queue_time",
        ),
        (
            "dead-letter retention",
            "SELECT id FROM dead_letters WHERE state IN ('replayed', 'acknowledged')
             AND updated_at < 500 LIMIT 100 FOR UPDATE SKIP LOCKED"
                .to_owned(),
            "dead_letters_by_age",
        ),
        (
            "delivery log",
            format!(
                "SELECT id FROM delivered WHERE queue = 'q' AND (delivered_at, id) < {cursor}
                 ORDER BY delivered_at DESC, id DESC LIMIT 51"
            ),
            "delivered_by_queue",
        ),
        (
            "delivery-log retention",
            "SELECT id FROM delivered WHERE queue = 'q' AND delivered_at < 500
             LIMIT 100 FOR UPDATE SKIP LOCKED"
                .to_owned(),
            "delivered_by_queue",
        ),
        (
            "live jobs",
            "SELECT id FROM jobs WHERE queue = 'q'
             AND id > '80000000-0000-0000-0000-000000000000' ORDER BY id LIMIT 51"
                .to_owned(),
            "jobs_by_queue",
        ),
        (
            "expiry by creation",
            "SELECT id, queue FROM jobs
             WHERE id < '01000000-0000-0000-0000-000000000000' AND status <> 1
               AND ttl_from IS NULL ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED"
                .to_owned(),
            "jobs_pkey",
        ),
        (
            "expiry by time to live",
            "SELECT id, queue FROM jobs WHERE ttl_from < 500 AND status <> 1
             ORDER BY ttl_from LIMIT 100 FOR UPDATE SKIP LOCKED"
                .to_owned(),
            "jobs_ttl_from",
        ),
        (
            "a message's live jobs",
            "SELECT id FROM jobs WHERE message_id = '80000000-0000-0000-0000-000000000000'"
                .to_owned(),
            "jobs_by_message",
        ),
        (
            "a message's delivered jobs",
            "SELECT id FROM delivered
             WHERE message_id = '80000000-0000-0000-0000-000000000000'"
                .to_owned(),
            "delivered_by_message",
        ),
        (
            "a message's dead letters",
            "SELECT id FROM dead_letters
             WHERE message_id = '80000000-0000-0000-0000-000000000000'"
                .to_owned(),
            "dead_letters_by_message",
        ),
        (
            "due schedules",
            "SELECT queue, name FROM schedules WHERE NOT paused AND next_run_at <= 500
             ORDER BY next_run_at LIMIT 101 FOR UPDATE SKIP LOCKED"
                .to_owned(),
            "schedules_due",
        ),
    ] {
        let plan = plan_of(&client, &format!("EXPLAIN {sql}")).await;
        assert!(
            plan.contains(&format!("using {index} on")) || plan.contains(&format!("on {index}")),
            "{name} reads {index}:\n{plan}"
        );
        assert!(
            !plan.contains("Seq Scan") && !plan.contains("Sort"),
            "{name}: no scan, no sort:\n{plan}"
        );
    }
    drop(client);
    close([store], db).await;
}
