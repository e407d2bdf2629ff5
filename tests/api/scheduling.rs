//! Delayed and scheduled jobs: `delay` and `runAt` (query parameter or header) keep a job
//! from being delivered before its time, and show it as READY with its start.

use std::time::{Duration, Instant};

use axum::http::Method;
use serde_json::Value;

use crate::helpers::{Reply, TestReceiver, payload, spawn_app};

fn id_of(response: &crate::helpers::ApiResponse) -> String {
    response.expect(201)["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_delayed_job_is_not_delivered_before_its_time() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    for (query, headers) in [
        ("delay=400ms", vec![]),
        ("", vec![("X-Hookq-Delay", "400ms")]),
    ] {
        let sent = Instant::now();
        let before = hookq::model::now_millis();
        let id = id_of(&app.enqueue_with("q", query, &headers).await);
        let job = app.get_job("q", &id).await.expect(200);
        assert_eq!(job["status"], "READY");
        let run_at = job["runAt"].as_i64().expect("runAt is shown");
        assert!(run_at >= before + 400, "{job}");
        assert_eq!(job["nextAttemptAt"], job["runAt"]);
        let delivery = receiver
            .wait_until("the delayed job", |all| {
                all.iter().any(|d| d.job_id() == id)
            })
            .await
            .into_iter()
            .find(|d| d.job_id() == id)
            .unwrap();
        // A lower bound: it cannot arrive sooner than its delay, whatever the machine.
        assert!(
            delivery.at - sent >= Duration::from_millis(400),
            "delivered after {:?}",
            delivery.at - sent
        );
        app.wait_until_gone("q", &id).await;
    }
}

#[tokio::test]
async fn a_job_scheduled_with_run_at_waits_as_scheduled() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let at = hookq::model::now_millis() + 24 * 3600 * 1000;
    let by_query = id_of(&app.enqueue_with("q", &format!("runAt={at}"), &[]).await);
    let by_header = id_of(
        &app.enqueue_with("q", "", &[("X-Hookq-Run-At", &at.to_string())])
            .await,
    );
    for id in [&by_query, &by_header] {
        let job = app.get_job("q", id).await.expect(200);
        assert_eq!(
            (&job["runAt"], &job["nextAttemptAt"]),
            (&Value::from(at), &Value::from(at))
        );
    }
    let listed = app.list("q", "READY").await;
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|job| job["runAt"] == at), "{listed:?}");
    let stats = app.get("/queue/q/_stats").await.expect(200);
    assert_eq!(
        (&stats["scheduled"], &stats["ready"]),
        (&Value::from(2), &Value::from(0))
    );
    // A job without a start goes out at once, past the scheduled ones.
    let now = app.enqueue_ok("q", &payload(2)).await;
    assert_eq!(receiver.wait_for(1).await[0].job_id(), now);
    app.wait_until_gone("q", &now).await;
    assert!(receiver.received().iter().all(|d| d.job_id() != by_query));
}

#[tokio::test]
async fn invalid_delays_and_starts_are_422_and_store_nothing() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let now = hookq::model::now_millis();
    let past = (now - 60_000).to_string();
    let too_far = (now + 367 * 24 * 3600 * 1000).to_string();
    let cases: Vec<(String, Vec<(&str, &str)>)> = vec![
        ("delay=soon".into(), vec![]),
        ("delay=-5s".into(), vec![]),
        ("delay=367d".into(), vec![]),
        (format!("runAt={past}"), vec![]),
        (format!("runAt={too_far}"), vec![]),
        ("runAt=tomorrow".into(), vec![]),
        (format!("delay=5s&runAt={}", now + 60_000), vec![]),
        (
            "delay=5s".into(),
            vec![("X-Hookq-Run-At", "99999999999999")],
        ),
        ("delay=5s".into(), vec![("X-Hookq-Delay", "10s")]),
        (String::new(), vec![("X-Hookq-Delay", "later")]),
    ];
    for (query, headers) in &cases {
        let response = app.enqueue_with("q", query, headers).await;
        response.expect_error(422);
    }
    assert!(app.list("q", "READY").await.is_empty());
    // The same value as parameter and header is fine.
    let response = app
        .enqueue_with("q", "delay=5s", &[("X-Hookq-Delay", "5s")])
        .await;
    let delayed = id_of(&response);
    assert!(app.get_job("q", &delayed).await.expect(200)["runAt"].is_i64());
    // A job without delay or runAt shows none.
    let plain = app.enqueue_ok("q", &payload(2)).await;
    assert!(
        app.get_job("q", &plain)
            .await
            .expect(200)
            .get("runAt")
            .is_none()
    );
}

#[tokio::test]
async fn enqueues_beyond_the_pending_write_bound_get_429_and_everything_else_stays_up() {
    let app = spawn_app(|c| {
        c.dispatch = false;
        c.max_pending_writes = 2;
    })
    .await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    // Hold the writer: the first two enqueues wait for their commit, the bound is full.
    let hold = hookq::store::testing::WriteHold::start(app.store())
        .await
        .unwrap();
    let waiting: Vec<_> = (0..2)
        .map(|n| {
            let api = app.api.clone();
            tokio::spawn(async move { api.enqueue("q", &payload(n)).await })
        })
        .collect();
    crate::helpers::eventually("two enqueues waiting for their commit", || async {
        (app.store().enqueues_waiting() == 2).then_some(())
    })
    .await;
    // The bound is full: the next one is refused at once, not queued.
    let refused = app.enqueue("q", &payload(9)).await;
    let msg = refused.expect_error(429);
    assert!(msg.contains("retry"), "{msg}");
    let raw = app
        .request(Method::POST, "/queue/q")
        .body(payload(8).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 429);
    assert_eq!(raw.headers()["retry-after"], "1");
    // Reads and health stay responsive while the write path is full.
    assert_eq!(app.get("/healthz").await.status, 200);
    assert_eq!(app.get("/queue").await.status, 200);
    drop(hold);
    for task in waiting {
        task.await.unwrap().expect(201);
    }
    assert_eq!(
        app.list("q", "READY").await.len(),
        2,
        "every 201 is stored, no 429 is"
    );
    app.enqueue_ok("q", &payload(3)).await;
}
