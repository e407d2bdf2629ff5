//! A queue's own delivery policy: set at creation or with PATCH, read back with its effective
//! values, applied to the next attempt of jobs already queued; pause and resume.

use std::time::Duration;

use axum::http::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::helpers::{Reply, TestApp, TestReceiver, assert_signed, payload, spawn_app};

async fn settings(app: &TestApp, queue: &str) -> Value {
    app.get(&format!("/queue/{queue}/_settings"))
        .await
        .expect(200)
}

/// Enqueue `payload(n)` for every `n` of `range` to queue `q`, in one batch.
async fn post_batch(app: &TestApp, range: std::ops::Range<usize>) {
    let jobs: Vec<Value> = range.map(payload).collect();
    app.call(
        Method::POST,
        "/queue/q/_batch",
        Some(Value::from(jobs).to_string().as_bytes()),
    )
    .await
    .expect(201);
}

#[tokio::test]
async fn a_queue_created_with_a_policy_shows_it_and_follows_the_server_for_the_rest() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.put_queue(
        "q",
        &json!({
            "target": "http://127.0.0.1:9/hook",
            "secret": "s3cret",
            "maxAttempts": 7,
            "backoff": ["250ms", "2s"],
            "concurrency": 4,
            "ratePerSecond": 2.5,
        }),
    )
    .await
    .expect(201);
    let shown = settings(&app, "q").await;
    assert_eq!(
        shown,
        json!({
            "ok": true,
            "name": "q",
            "target": "http://127.0.0.1:9/hook",
            "delivery": "push",
            "hasSecret": true,
            "maxAttempts": 7,
            "backoff": ["250ms", "2s"],
            // The test server's own settings (helpers::test_config).
            "timeout": "2s",
            "concurrency": 4,
            "ratePerSecond": 2.5,
            "burst": 3,
            "maxQueued": null,
            "keepDelivered": "0s",
            "paused": false,
            "signatureScheme": "hyper",
            "previousSecretExpiresAt": null,
            "overrides": ["maxAttempts", "backoff", "concurrency", "ratePerSecond"],
        })
    );
    assert!(!shown.to_string().contains("s3cret"), "never the secret");
    // A queue without a policy shows the server's settings.
    app.create_queue_ok("plain", "http://127.0.0.1:9/hook", None)
        .await;
    let plain = settings(&app, "plain").await;
    assert_eq!(plain["maxAttempts"], 3);
    assert_eq!(plain["backoff"], json!(["20ms"]));
    assert_eq!(plain["hasSecret"], false);
    assert_eq!(plain["overrides"], json!([]));
}

#[tokio::test]
async fn invalid_policy_values_are_422_and_change_nothing() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let before = settings(&app, "q").await;
    let target = "http://127.0.0.1:9/hook";
    for bad in [
        json!({"maxAttempts": 0}),
        json!({"maxAttempts": 101}),
        json!({"maxAttempts": "5"}),
        json!({"backoff": []}),
        json!({"backoff": ["soon"]}),
        json!({"backoff": vec!["1s"; 21]}),
        json!({"timeout": "99ms"}),
        json!({"timeout": "16m"}),
        json!({"concurrency": 0}),
        json!({"concurrency": 10001}),
        json!({"ratePerSecond": 0}),
        json!({"ratePerSecond": -1}),
        json!({"burst": 0, "ratePerSecond": 1}),
        json!({"burst": 5}),
        json!({"maxQueued": 0}),
        json!({"paused": "yes"}),
    ] {
        let mut create = bad.clone();
        create["target"] = json!(target);
        app.put_queue("new", &create).await.expect_error(422);
        app.patch_queue("q", &bad).await.expect_error(422);
    }
    // PATCH refuses what PUT ignores (a `null` target makes a pull queue: tests/api/pull.rs).
    app.patch_queue("q", &json!({"colour": "blue"}))
        .await
        .expect_error(422);
    app.patch_queue("q", &json!({"maxAttempts": 2}))
        .await
        .expect(200);
    app.patch_queue("nope", &json!({"maxAttempts": 2}))
        .await
        .expect_error(404);
    app.call(Method::POST, "/queue/nope/_pause", None)
        .await
        .expect_error(404);
    assert!(app.queues().await == ["q"], "nothing was created");
    let mut after = settings(&app, "q").await;
    assert_eq!(after["maxAttempts"], 2);
    after["maxAttempts"] = before["maxAttempts"].clone();
    after["overrides"] = json!([]);
    assert_eq!(after, before, "only the valid change was applied");
}

#[tokio::test]
async fn patch_changes_what_it_names_and_null_puts_a_setting_back_on_the_server() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.put_queue("q",
        &json!({"target": "http://127.0.0.1:9/a", "secret": "one", "maxAttempts": 9, "ratePerSecond": 10, "burst": 4}),
    )
    .await
    .expect(201);
    app.patch_queue("q", &json!({"timeout": "500ms", "maxQueued": 1000}))
        .await
        .expect(200);
    let shown = settings(&app, "q").await;
    assert_eq!(shown["maxAttempts"], 9, "untouched");
    assert_eq!(shown["timeout"], "500ms");
    assert_eq!(shown["maxQueued"], 1000);
    assert_eq!(shown["burst"], 4);

    app.patch_queue("q",
        &json!({"maxAttempts": null, "ratePerSecond": null, "secret": null, "target": "http://127.0.0.1:9/b"}),
    )
    .await
    .expect(200);
    let shown = settings(&app, "q").await;
    assert_eq!(shown["maxAttempts"], 3, "the server's again");
    assert_eq!(shown["ratePerSecond"], Value::Null);
    assert_eq!(shown["burst"], Value::Null, "no rate, no burst");
    assert_eq!(shown["hasSecret"], false);
    assert_eq!(shown["target"], "http://127.0.0.1:9/b");
    assert_eq!(shown["overrides"], json!(["timeout", "maxQueued"]));

    // Kept across a restart.
    let app = app.restart(|_| {}).await;
    assert_eq!(settings(&app, "q").await, shown);
}

#[tokio::test]
async fn concurrent_patches_all_apply() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let changes = [
        json!({"maxAttempts": 4}),
        json!({"timeout": "1s"}),
        json!({"concurrency": 3}),
        json!({"maxQueued": 50}),
        json!({"backoff": ["1s"]}),
        json!({"paused": true}),
    ];
    let sent = changes.iter().map(|change| app.patch_queue("q", change));
    for response in futures_util::future::join_all(sent).await {
        response.expect(200);
    }
    let shown = settings(&app, "q").await;
    assert_eq!(shown["maxAttempts"], 4);
    assert_eq!(shown["timeout"], "1s");
    assert_eq!(shown["concurrency"], 3);
    assert_eq!(shown["maxQueued"], 50);
    assert_eq!(shown["backoff"], json!(["1s"]));
    assert_eq!(shown["paused"], true);
}

#[tokio::test]
async fn queued_jobs_use_the_new_target_and_secret_from_their_next_attempt() {
    let old = TestReceiver::always(Reply::status(500)).await;
    let new = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue(
        "q",
        &json!({"target": old.url, "secret": "old-secret", "backoff": ["300ms"], "maxAttempts": 5}),
    )
    .await
    .expect(201);
    let id = app.enqueue_ok("q", &payload(1)).await;
    let first = old.wait_for(1).await.remove(0);
    assert_signed(&first, "old-secret");
    app.patch_queue("q", &json!({"target": new.url, "secret": "new-secret"}))
        .await
        .expect(200);
    let delivered = new.wait_for(1).await.remove(0);
    assert_eq!(delivered.job_id(), id);
    assert_eq!(delivered.attempt(), 2, "the same job, its next attempt");
    assert_signed(&delivered, "new-secret");
    app.wait_until_gone("q", &id).await;

    // And without a secret, deliveries are no longer signed.
    app.patch_queue("q", &json!({"secret": null}))
        .await
        .expect(200);
    app.enqueue_ok("q", &payload(2)).await;
    let unsigned = new.wait_for(2).await.remove(1);
    assert!(unsigned.header("x-hyper-signature").is_none());
}

#[tokio::test]
async fn a_queues_max_attempts_decides_when_its_jobs_are_dead_lettered() {
    let receiver = TestReceiver::always(Reply::status(500)).await;
    // The server allows 3 attempts; this queue 1, that one 5.
    let app = spawn_app(|_| {}).await;
    app.put_queue("once", &json!({"target": receiver.url, "maxAttempts": 1}))
        .await
        .expect(201);
    app.put_queue(
        "often",
        &json!({"target": receiver.url, "maxAttempts": 5, "backoff": ["10ms"]}),
    )
    .await
    .expect(201);
    let once = app.enqueue_ok("once", &payload(1)).await;
    let often = app.enqueue_ok("often", &payload(2)).await;
    assert_eq!(app.wait_until_error("once", &once).await["attempts"], 1);
    assert_eq!(app.wait_until_error("often", &often).await["attempts"], 5);
}

#[tokio::test]
async fn a_queues_timeout_bounds_its_attempts() {
    // The worker answers only once released. The server's timeout (60 s) would outlast the
    // test's wait; this queue's (200 ms) ends the attempt.
    let release = CancellationToken::new();
    let receiver = TestReceiver::always(Reply::HoldUntil(release.clone())).await;
    let app = spawn_app(|c| {
        c.delivery.defaults.timeout = std::time::Duration::from_secs(60);
        c.delivery.lease_timeout = std::time::Duration::from_secs(120);
    })
    .await;
    app.put_queue(
        "q",
        &json!({"target": receiver.url, "timeout": "200ms", "maxAttempts": 1}),
    )
    .await
    .expect(201);
    let id = app.enqueue_ok("q", &payload(1)).await;
    let job = app.wait_until_error("q", &id).await;
    let error = job["error"].as_str().unwrap_or_default();
    assert!(error.contains("timed out"), "{job}");
    release.cancel();
}

#[tokio::test]
async fn a_queues_concurrency_bounds_its_deliveries_in_flight() {
    let release = CancellationToken::new();
    let receiver = TestReceiver::always(Reply::HoldUntil(release.clone())).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({"target": receiver.url, "concurrency": 2}))
        .await
        .expect(201);
    for n in 0..6 {
        app.enqueue_ok("q", &payload(n)).await;
    }
    receiver.wait_for(2).await;
    // Held: no third delivery may start while two are in flight.
    let third =
        tokio::time::timeout(std::time::Duration::from_millis(300), receiver.wait_for(3)).await;
    assert!(
        third.is_err(),
        "a third delivery started beyond the queue's concurrency of 2"
    );
    // Raising it lets more start at once.
    app.patch_queue("q", &json!({"concurrency": 4}))
        .await
        .expect(200);
    receiver.wait_for(4).await;
    release.cancel();
    receiver.wait_for(6).await;
}

#[tokio::test]
async fn a_paused_queue_accepts_jobs_and_delivers_them_only_once_resumed() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("paused", &receiver.url, None).await;
    app.create_queue_ok("running", &receiver.url, None).await;
    app.call(Method::POST, "/queue/paused/_pause", None)
        .await
        .expect(200);
    assert_eq!(settings(&app, "paused").await["paused"], true);
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(app.enqueue_ok("paused", &payload(n)).await);
    }
    // Other queues' jobs go out meanwhile, in two claim rounds: the claim loop ran, and
    // passed the paused queue by.
    for n in 0..2 {
        let other = app.enqueue_ok("running", &payload(10 + n)).await;
        let delivered = receiver.wait_for(n + 1).await;
        assert_eq!(delivered[n].job_id(), other);
        app.wait_until_gone("running", &other).await;
    }
    let waiting = app.list("paused", "READY").await;
    assert_eq!(waiting.len(), 3);
    assert!(
        waiting.iter().all(|job| job["attempts"] == 0),
        "{waiting:?}"
    );
    assert_eq!(
        receiver.received().len(),
        2,
        "nothing of the paused queue went out"
    );

    app.call(Method::POST, "/queue/paused/_resume", None)
        .await
        .expect(200);
    receiver.wait_for(5).await;
    for id in &ids {
        app.wait_until_gone("paused", id).await;
    }
}

#[tokio::test]
async fn queue_stats_count_jobs_by_state_and_the_last_minutes_attempts() {
    let release = CancellationToken::new();
    let receiver = TestReceiver::scripted(
        vec![Reply::status(500), Reply::ok()],
        Reply::HoldUntil(release.clone()),
    )
    .await;
    let failing = TestReceiver::always(Reply::status(500)).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue(
        "q",
        &json!({"target": receiver.url, "maxAttempts": 2, "backoff": ["1h"], "concurrency": 5}),
    )
    .await
    .expect(201);
    app.put_queue("d", &json!({"target": failing.url, "maxAttempts": 1}))
        .await
        .expect(201);

    // Failed once, its retry an hour away: scheduled.
    let retrying = app.enqueue_ok("q", &payload(1)).await;
    app.wait_for_job("q", &retrying, "the failed first attempt", |r| {
        let job = r.json();
        job["attempts"] == 1 && job.get("inFlight").is_none()
    })
    .await;
    // Delivered.
    let delivered = app.enqueue_ok("q", &payload(2)).await;
    app.wait_until_gone("q", &delivered).await;
    // Held by the worker: in flight.
    app.enqueue_ok("q", &payload(3)).await;
    receiver.wait_for(3).await;
    // Due, but the queue is paused: ready.
    app.call(Method::POST, "/queue/q/_pause", None)
        .await
        .expect(200);
    app.enqueue_ok("q", &payload(4)).await;
    // A dead letter elsewhere.
    let dead = app.enqueue_ok("d", &payload(5)).await;
    app.wait_until_error("d", &dead).await;

    let stats = app.get("/queue/q/_stats").await.expect(200);
    assert!(
        stats["oldestReadyAgeMs"]
            .as_i64()
            .is_some_and(|age| age >= 0),
        "{stats}"
    );
    // The hour, minute by minute, oldest first: this minute (or, across a minute's turn,
    // the two last) holds the one delivery and the one failure.
    let minutes = |series: &str| -> Vec<u64> {
        let list = stats["lastHour"][series]
            .as_array()
            .expect("a list")
            .clone();
        list.into_iter().map(|n| n.as_u64().unwrap()).collect()
    };
    for series in ["delivered", "failed"] {
        let counts = minutes(series);
        assert_eq!(counts.len(), 60, "{stats}");
        assert_eq!(counts.iter().sum::<u64>(), 1, "{series}: {stats}");
        assert_eq!(counts[58] + counts[59], 1, "{series}: {stats}");
    }
    let mut stats = stats;
    stats["oldestReadyAgeMs"] = json!("checked");
    stats["lastHour"] = json!("checked");
    assert_eq!(
        stats,
        json!({
            "ok": true,
            "ready": 1,
            "scheduled": 1,
            "blocked": 0,
            "inFlight": 1,
            "dead": 0,
            "oldestReadyAgeMs": "checked",
            "deliveredLastMinute": 1,
            "failedLastMinute": 1,
            "lastHour": "checked",
            "concurrency": {"limit": 5, "effective": 5},
            "breaker": "closed",
            "breakerProbeAt": null,
            "breakerThreshold": 0,
            "paused": true,
        })
    );
    let d = app.get("/queue/d/_stats").await.expect(200);
    assert_eq!(
        (
            &d["dead"],
            &d["failedLastMinute"],
            &d["ready"],
            &d["oldestReadyAgeMs"]
        ),
        (&json!(1), &json!(1), &json!(0), &Value::Null)
    );
    app.get("/queue/nope/_stats").await.expect_error(404);
    release.cancel();
}

#[tokio::test]
async fn a_rate_limited_queue_starts_no_more_deliveries_than_its_rate_allows() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue(
        "q",
        &json!({"target": receiver.url, "ratePerSecond": 20, "burst": 2}),
    )
    .await
    .expect(201);
    let sent = std::time::Instant::now();
    post_batch(&app, 0..30).await;
    let delivered = receiver.wait_for(30).await;
    // A lower bound, so it holds on any machine: 2 at once, then 20 a second, so the 30th
    // cannot start before 28 / 20 = 1.4 s after the batch was sent.
    let last = delivered.iter().map(|d| d.at).max().unwrap();
    assert!(
        last - sent >= Duration::from_millis(1400),
        "30 deliveries in {:?}: faster than 20/s with a burst of 2",
        last - sent
    );
    crate::helpers::eventually("30 deliveries counted", || async {
        let stats = app.get("/queue/q/_stats").await.expect(200);
        (stats["deliveredLastMinute"] == 30).then_some(())
    })
    .await;
}

#[tokio::test]
async fn an_overloaded_target_halves_its_queues_concurrency_and_successes_win_it_back() {
    // One 503, then successes.
    let receiver = TestReceiver::scripted(vec![Reply::status(503)], Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue(
        "q",
        &json!({"target": receiver.url, "concurrency": 8, "maxAttempts": 1}),
    )
    .await
    .expect(201);
    let concurrency = |stats: &Value| stats["concurrency"].clone();
    let first = app.enqueue_ok("q", &payload(0)).await;
    app.wait_until_error("q", &first).await;
    let stats = app.get("/queue/q/_stats").await.expect(200);
    assert_eq!(concurrency(&stats), json!({"limit": 8, "effective": 4}));
    // 4 -> 8 takes 4 + 5 + 6 + 7 = 22 successes.
    post_batch(&app, 1..31).await;
    receiver.wait_for(31).await;
    crate::helpers::eventually("the limit won back", || async {
        let stats = app.get("/queue/q/_stats").await.expect(200);
        (concurrency(&stats) == json!({"limit": 8, "effective": 8})).then_some(())
    })
    .await;
}
