//! Priorities and ordering keys: among a queue's due jobs the higher priority goes first;
//! jobs of one ordering key go one at a time in enqueue order, and a key that waits (for a
//! delivery, a retry, a delay) holds back only itself. Also `maxQueued`.
//!
//! Each test identifies deliveries by the `n` of their payload, and makes the receiver
//! answer by content (hold, fail) so nothing depends on timing.

use axum::http::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::helpers::{
    ApiResponse, Received, Reply, TestApp, TestReceiver, eventually, payload, spawn_app,
};

/// The `n` of a delivered `payload(n)`.
fn n_of(delivery: &Received) -> u64 {
    let body: Value = serde_json::from_slice(&delivery.body).expect("a JSON body");
    body["n"].as_u64().expect("a payload(n)")
}

/// The `n`s delivered so far, in arrival order (every attempt).
fn arrivals(receiver: &TestReceiver) -> Vec<u64> {
    receiver.received().iter().map(n_of).collect()
}

/// Wait until every `n` in `wanted` has arrived at least once.
async fn wait_for_ns(receiver: &TestReceiver, wanted: &[u64]) -> Vec<u64> {
    let received = receiver
        .wait_until(&format!("deliveries of {wanted:?}"), |all| {
            wanted.iter().all(|n| all.iter().any(|d| n_of(d) == *n))
        })
        .await;
    received.iter().map(n_of).collect()
}

/// Enqueue `payload(n)` with the options in `query`; its id.
async fn enqueue_n(app: &TestApp, queue: &str, n: usize, query: &str) -> String {
    let body = app
        .enqueue_job_with(queue, &payload(n), query, &[])
        .await
        .expect(201);
    body["id"].as_str().unwrap().to_owned()
}

async fn stats(app: &TestApp, queue: &str) -> Value {
    app.get(&format!("/queue/{queue}/_stats")).await.expect(200)
}

async fn resume(app: &TestApp, queue: &str) {
    app.call(Method::POST, &format!("/queue/{queue}/_resume"), None)
        .await
        .expect(200);
}

/// A target nothing listens on, for queues that stay paused.
const NO_WORKER: &str = "http://127.0.0.1:9/";

/// A server with queue `q` delivering to `target` under `policy` (any settings but the
/// target).
async fn app_with_queue(target: &str, policy: Value) -> TestApp {
    let app = spawn_app(|_| {}).await;
    let mut settings = json!({ "target": target });
    if let (Some(settings), Some(policy)) = (settings.as_object_mut(), policy.as_object()) {
        settings.extend(policy.clone());
    }
    app.put_queue("q", &settings).await.expect(201);
    app
}

/// Queue `q`, paused (so every job is due before the first claim) and delivering one job at
/// a time (so the claims show the order), to a receiver that answers 200.
async fn paused_one_at_a_time() -> (TestReceiver, TestApp) {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = app_with_queue(&receiver.url, json!({"paused": true, "concurrency": 1})).await;
    (receiver, app)
}

/// Where `n` first arrived.
fn position(order: &[u64], n: u64) -> usize {
    order
        .iter()
        .position(|m| *m == n)
        .unwrap_or_else(|| panic!("{n} never arrived: {order:?}"))
}

#[tokio::test]
async fn among_due_jobs_higher_priority_goes_first_and_equal_priority_keeps_enqueue_order() {
    let (receiver, app) = paused_one_at_a_time().await;
    for (n, priority) in [(1, 0), (2, 5), (3, -3), (4, 5), (5, 100), (6, 0)] {
        enqueue_n(&app, "q", n, &format!("priority={priority}")).await;
    }
    app.enqueue_job_with("q", &payload(7), "", &[("X-Hookq-Priority", "50")])
        .await
        .expect(201);
    resume(&app, "q").await;
    let order = wait_for_ns(&receiver, &[1, 2, 3, 4, 5, 6, 7]).await;
    assert_eq!(order, vec![5, 7, 2, 4, 1, 6, 3]);
}

#[tokio::test]
async fn listed_and_single_jobs_show_their_priority_and_ordering_key() {
    let app = app_with_queue(NO_WORKER, json!({"paused": true})).await;
    let keyed = enqueue_n(&app, "q", 1, "priority=-7&orderingKey=customer%2042").await;
    let plain = enqueue_n(&app, "q", 2, "").await;
    let job = app.get_job("q", &keyed).await.expect(200);
    assert_eq!(
        (&job["priority"], &job["orderingKey"]),
        (&json!(-7), &json!("customer 42"))
    );
    let job = app.get_job("q", &plain).await.expect(200);
    assert!(
        job.get("priority").is_none() && job.get("orderingKey").is_none(),
        "defaults are not shown: {job}"
    );
    let listed = app.list("q", "READY").await;
    assert_eq!(listed[0]["orderingKey"], "customer 42");
    assert_eq!(listed[0]["priority"], -7);
}

#[tokio::test]
async fn invalid_priorities_and_ordering_keys_are_422_and_store_nothing() {
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", NO_WORKER, None).await;
    let long = "k".repeat(201);
    let cases: Vec<(String, Vec<(&str, &str)>)> = vec![
        ("priority=101".into(), vec![]),
        ("priority=-101".into(), vec![]),
        ("priority=high".into(), vec![]),
        ("priority=1.5".into(), vec![]),
        (String::new(), vec![("X-Hookq-Priority", "1000")]),
        ("priority=1".into(), vec![("X-Hookq-Priority", "2")]),
        ("orderingKey=".into(), vec![]),
        (format!("orderingKey={long}"), vec![]),
        (String::new(), vec![("X-Hookq-Ordering-Key", long.as_str())]),
    ];
    for (query, headers) in &cases {
        let response = app.enqueue_with("q", query, headers).await;
        let msg = response.expect_error(422);
        assert!(
            msg.contains("priority") || msg.contains("orderingKey"),
            "{query} {headers:?}: {msg}"
        );
    }
    assert!(app.list("q", "READY").await.is_empty());
    // The edges are fine.
    for query in [
        "priority=100",
        "priority=-100",
        &format!("orderingKey={}", "k".repeat(200)),
    ] {
        app.enqueue_with("q", query, &[]).await.expect(201);
    }
}

#[tokio::test]
async fn a_key_in_flight_holds_back_its_own_later_jobs_and_no_one_elses() {
    let gate = CancellationToken::new();
    let held = gate.clone();
    let receiver =
        TestReceiver::by_rule(move |d| (n_of(d) == 1).then(|| Reply::HoldUntil(held.clone())))
            .await;
    let app = app_with_queue(&receiver.url, json!({"concurrency": 8})).await;
    enqueue_n(&app, "q", 1, "orderingKey=a").await;
    wait_for_ns(&receiver, &[1]).await; // a's head is in flight, held
    enqueue_n(&app, "q", 2, "orderingKey=a").await;
    enqueue_n(&app, "q", 3, "orderingKey=a").await;
    let others = [
        enqueue_n(&app, "q", 4, "orderingKey=b").await,
        enqueue_n(&app, "q", 5, "orderingKey=b").await,
        enqueue_n(&app, "q", 6, "").await,
    ];
    let order = wait_for_ns(&receiver, &[4, 5, 6]).await;
    assert!(position(&order, 4) < position(&order, 5), "{order:?}");
    // Their outcomes recorded (the receiver answers before hookq commits the outcome).
    for id in &others {
        app.wait_until_gone("q", id).await;
    }
    assert!(
        !arrivals(&receiver).contains(&2) && !arrivals(&receiver).contains(&3),
        "a's later jobs waited: {:?}",
        arrivals(&receiver)
    );
    let figures = stats(&app, "q").await;
    assert_eq!(
        (&figures["blocked"], &figures["inFlight"]),
        (&json!(2), &json!(1)),
        "{figures}"
    );

    gate.cancel();
    let order = wait_for_ns(&receiver, &[2, 3]).await;
    assert_eq!(
        order
            .iter()
            .filter(|n| **n <= 3)
            .copied()
            .collect::<Vec<_>>(),
        vec![1, 2, 3],
        "key a in enqueue order, each once"
    );
}

#[tokio::test]
async fn a_key_waiting_for_a_retry_holds_back_only_itself_until_its_head_is_cancelled() {
    let receiver = failing_first_attempt_of(|n| n == 1).await;
    let app = app_with_queue(&receiver.url, json!({"concurrency": 8, "backoff": ["1h"]})).await;
    let head = enqueue_n(&app, "q", 1, "orderingKey=a").await;
    enqueue_n(&app, "q", 2, "orderingKey=a").await;
    enqueue_n(&app, "q", 3, "orderingKey=b").await;
    enqueue_n(&app, "q", 4, "").await;
    wait_for_ns(&receiver, &[1, 3, 4]).await;
    // The head's failure is recorded: it waits an hour for its retry.
    let job = app
        .wait_for_job("q", &head, "the head's retry", |r| {
            r.json()["attempts"] == 1 && r.json().get("inFlight").is_none()
        })
        .await
        .json();
    assert!(
        job["nextAttemptAt"].as_i64().unwrap() > hookq::model::now_millis() + 3_000_000,
        "{job}"
    );
    let figures = stats(&app, "q").await;
    assert_eq!(
        (
            &figures["scheduled"],
            &figures["blocked"],
            &figures["ready"]
        ),
        (&json!(1), &json!(1), &json!(0)),
        "{figures}"
    );
    assert!(!arrivals(&receiver).contains(&2), "2 waits for its key");

    // The head goes: the key moves on at once.
    app.cancel("q", &head).await.expect(201);
    wait_for_ns(&receiver, &[2]).await;
}

#[tokio::test]
async fn a_delayed_job_holds_back_the_later_jobs_of_its_key() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = app_with_queue(&receiver.url, json!({"concurrency": 8})).await;
    let delayed = enqueue_n(&app, "q", 1, "orderingKey=a&delay=1h").await;
    let behind = enqueue_n(&app, "q", 2, "orderingKey=a").await;
    enqueue_n(&app, "q", 3, "orderingKey=b").await;
    wait_for_ns(&receiver, &[3]).await;
    assert_eq!(
        app.get_job("q", &behind).await.expect(200)["status"],
        "READY"
    );
    let figures = stats(&app, "q").await;
    assert_eq!(
        (&figures["scheduled"], &figures["blocked"]),
        (&json!(1), &json!(1)),
        "{figures}"
    );
    assert_eq!(arrivals(&receiver), vec![3]);
    app.cancel("q", &delayed).await.expect(201);
    wait_for_ns(&receiver, &[2]).await;
    app.wait_until_gone("q", &behind).await;
}

#[tokio::test]
async fn a_dead_lettered_job_lets_its_key_move_on_and_a_replay_delivers_it() {
    let fail_first = |d: &Received| (n_of(d) == 1).then(|| Reply::with_body(500, "broken"));
    let receiver = TestReceiver::by_rule(fail_first).await;
    let app = app_with_queue(&receiver.url, json!({"concurrency": 8, "maxAttempts": 1})).await;
    let first = enqueue_n(&app, "q", 1, "orderingKey=a").await;
    enqueue_n(&app, "q", 2, "orderingKey=a").await;
    enqueue_n(&app, "q", 3, "orderingKey=a").await;
    let order = wait_for_ns(&receiver, &[1, 2, 3]).await;
    assert_eq!(order, vec![1, 2, 3]);
    let dead = app.wait_until_error("q", &first).await;
    assert_eq!(dead["orderingKey"], "a", "{dead}");
    // Replayed, it takes its key's turn again (the key is free) and goes out.
    app.retry("q", &first).await.expect(201);
    let deliveries = receiver.wait_for(4).await;
    assert_eq!(n_of(&deliveries[3]), 1);
}

#[tokio::test]
async fn priority_does_not_reorder_the_jobs_of_one_key() {
    let (receiver, app) = paused_one_at_a_time().await;
    enqueue_n(&app, "q", 1, "orderingKey=k").await;
    enqueue_n(&app, "q", 2, "orderingKey=k&priority=100").await;
    enqueue_n(&app, "q", 3, "priority=50").await;
    resume(&app, "q").await;
    let order = wait_for_ns(&receiver, &[1, 2, 3]).await;
    assert_eq!(order, vec![3, 1, 2]);
}

/// A receiver failing the first attempt of every job whose `n` satisfies `fails`.
async fn failing_first_attempt_of(
    fails: impl Fn(u64) -> bool + Send + Sync + 'static,
) -> TestReceiver {
    TestReceiver::by_rule(move |d| {
        (fails(n_of(d)) && d.attempt() == 1).then(|| Reply::with_body(500, "once more"))
    })
    .await
}

#[tokio::test]
async fn many_keys_at_full_concurrency_each_keep_their_order_through_retries() {
    const KEYS: u64 = 6;
    const PER_KEY: u64 = 15;
    // The 4th job of every key fails once: the key's later jobs wait for its retry.
    let receiver = failing_first_attempt_of(|n| n < 100_000 && n % 1000 == 3).await;
    let app = app_with_queue(
        &receiver.url,
        json!({"concurrency": 16, "backoff": ["50ms"]}),
    )
    .await;
    // Interleaved keys, and jobs without a key, enqueued by several producers at once.
    let producers = (0..KEYS).map(|key| {
        let app = &app;
        async move {
            for i in 0..PER_KEY {
                let n = (key * 1000 + i) as usize;
                enqueue_n(app, "q", n, &format!("orderingKey=key-{key}")).await;
                enqueue_n(app, "q", 100_000 + n, "").await;
            }
        }
    });
    futures_util::future::join_all(producers).await;
    let deliveries = receiver
        .wait_for((2 * KEYS * PER_KEY + KEYS) as usize)
        .await;
    let order: Vec<u64> = deliveries.iter().map(n_of).collect();
    for key in 0..KEYS {
        let of_key: Vec<u64> = order
            .iter()
            .copied()
            .filter(|n| *n < 100_000 && n / 1000 == key)
            .collect();
        let mut expected: Vec<u64> = (0..PER_KEY).map(|i| key * 1000 + i).collect();
        expected.insert(3, key * 1000 + 3); // its retry, before the key moves on
        assert_eq!(of_key, expected, "key-{key} in enqueue order");
    }
}

#[tokio::test]
async fn a_batch_with_an_ordering_key_is_delivered_in_batch_order() {
    let receiver = failing_first_attempt_of(|n| n == 1).await;
    let app = app_with_queue(
        &receiver.url,
        json!({"concurrency": 8, "backoff": ["50ms"]}),
    )
    .await;
    let jobs: Vec<Value> = (1..=8).map(payload).collect();
    app.call(
        Method::POST,
        "/queue/q/_batch?orderingKey=batch",
        Some(Value::from(jobs).to_string().as_bytes()),
    )
    .await
    .expect(201);
    let order: Vec<u64> = receiver.wait_for(9).await.iter().map(n_of).collect();
    assert_eq!(order, vec![1, 1, 2, 3, 4, 5, 6, 7, 8]);
}

// ---------------------------------------------------------------------------------------
// maxQueued
// ---------------------------------------------------------------------------------------

fn assert_queue_full(response: &ApiResponse) {
    let msg = response.expect_error(429);
    assert!(msg.contains("queue full"), "{msg}");
    assert_eq!(
        response.header("retry-after"),
        Some("1"),
        "a full queue says when to come back"
    );
}

#[tokio::test]
async fn a_queue_at_its_max_queued_refuses_enqueues_with_429_until_it_drains() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = app_with_queue(&receiver.url, json!({"paused": true, "maxQueued": 3})).await;
    for n in 1..=3 {
        enqueue_n(&app, "q", n, "").await;
    }
    assert_queue_full(&app.enqueue("q", &payload(4)).await);
    assert_queue_full(&app.enqueue_with("q", "delay=1h", &[]).await);
    let batch = Value::from(vec![payload(5)]).to_string();
    assert_queue_full(
        &app.call(Method::POST, "/queue/q/_batch", Some(batch.as_bytes()))
            .await,
    );
    assert_eq!(app.list("q", "READY").await.len(), 3, "nothing more stored");

    // Raising the cap makes room at once; a batch that does not fit stores none of its jobs.
    app.patch_queue("q", &json!({"maxQueued": 5}))
        .await
        .expect(200);
    let three = Value::from(vec![payload(6), payload(7), payload(8)]).to_string();
    assert_queue_full(
        &app.call(Method::POST, "/queue/q/_batch", Some(three.as_bytes()))
            .await,
    );
    assert_eq!(app.list("q", "READY").await.len(), 3);
    enqueue_n(&app, "q", 9, "").await;

    // Delivered jobs no longer count.
    resume(&app, "q").await;
    receiver.wait_for(4).await;
    eventually("the queue to drain", || async {
        app.list("q", "READY").await.is_empty().then_some(())
    })
    .await;
    for n in 10..=14 {
        enqueue_n(&app, "q", n, "").await;
    }
    // Without a cap, anything goes.
    app.patch_queue("q", &json!({"maxQueued": null}))
        .await
        .expect(200);
    enqueue_n(&app, "q", 15, "").await;
}

#[tokio::test]
async fn a_cap_set_on_a_queue_that_already_holds_more_counts_what_it_holds() {
    let app = app_with_queue(NO_WORKER, json!({"paused": true})).await;
    let ids: Vec<String> =
        futures_util::future::join_all((0..4).map(|n| enqueue_n(&app, "q", n, ""))).await;
    app.patch_queue("q", &json!({"maxQueued": 3}))
        .await
        .expect(200);
    assert_queue_full(&app.enqueue("q", &payload(9)).await);
    // Cancelling two makes room for one more than the cap's three.
    app.cancel("q", &ids[0]).await.expect(201);
    assert_queue_full(&app.enqueue("q", &payload(9)).await);
    app.cancel("q", &ids[1]).await.expect(201);
    enqueue_n(&app, "q", 9, "").await;
    assert_queue_full(&app.enqueue("q", &payload(10)).await);
}

#[tokio::test]
async fn caps_stay_exact_as_other_queues_gain_and_lose_theirs_and_across_a_restart() {
    let app = spawn_app(|_| {}).await;
    for (name, cap) in [("a", json!(2)), ("b", json!(2)), ("c", Value::Null)] {
        app.put_queue(
            name,
            &json!({"target": NO_WORKER, "paused": true, "maxQueued": cap}),
        )
        .await
        .expect(201);
    }
    enqueue_n(&app, "a", 1, "").await;
    // b's cap goes (a still has one); c's jobs are not counted against anyone.
    app.patch_queue("b", &json!({"maxQueued": null}))
        .await
        .expect(200);
    for n in 0..3 {
        enqueue_n(&app, "b", n, "").await;
        enqueue_n(&app, "c", n, "").await;
    }
    enqueue_n(&app, "a", 2, "").await;
    assert_queue_full(&app.enqueue("a", &payload(3)).await);

    // The last cap goes with its queue; a new cap counts what its queue holds.
    app.delete_queue("a").await.expect(200);
    app.patch_queue("c", &json!({"maxQueued": 4}))
        .await
        .expect(200);
    enqueue_n(&app, "c", 3, "").await;
    assert_queue_full(&app.enqueue("c", &payload(4)).await);

    // After a restart the counts go on from where they were.
    let app = app.restart(|_| {}).await;
    assert_queue_full(&app.enqueue("c", &payload(5)).await);
    enqueue_n(&app, "b", 9, "").await;
}
