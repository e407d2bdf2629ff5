//! The circuit breaker seen from outside: a failing target is paused, then probed once.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{Reply, TestReceiver, eventually, spawn_app};

const COOLDOWN: Duration = Duration::from_millis(700);

#[tokio::test]
async fn a_failing_target_is_paused_for_the_cooldown_then_one_probe_closes_the_breaker() {
    let receiver = TestReceiver::always(Reply::with_body(503, "down")).await;
    let app = spawn_app(|c| {
        c.delivery.breaker_threshold = 2;
        c.delivery.breaker_cooldown = COOLDOWN;
        c.delivery.defaults.max_attempts = 20;
        c.delivery.defaults.backoff = vec![Duration::from_millis(10)];
    })
    .await;
    app.create_queue_ok("fragile", &receiver.url, None).await;
    let first = app.enqueue_ok("fragile", &json!({ "n": 1 })).await;

    // Two failures in a row open the breaker.
    receiver.wait_for(2).await;
    eventually("the breaker to open", || async {
        let text = app.get("/metrics").await.text();
        text.contains("hookq_breaker_state{queue=\"fragile\"} 2")
            .then_some(())
    })
    .await;
    // While open, the job keeps its remaining attempts: it is not retried every 10 ms.
    let second = app.enqueue_ok("fragile", &json!({ "n": 2 })).await;
    receiver.set_default(Reply::ok());

    // After the cooldown one probe goes out; it succeeds and the breaker closes, so both jobs
    // are delivered.
    let all = receiver.wait_for(4).await;
    let pause = all[2].at.duration_since(all[1].at);
    assert!(
        pause >= COOLDOWN - Duration::from_millis(50),
        "the third attempt came {pause:?} after the second, inside the cooldown"
    );
    app.wait_until_gone("fragile", &first).await;
    app.wait_until_gone("fragile", &second).await;
    eventually("the breaker to close", || async {
        let text = app.get("/metrics").await.text();
        text.contains("hookq_breaker_state{queue=\"fragile\"} 0")
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_4xx_about_the_job_does_not_open_the_breaker() {
    let receiver = TestReceiver::always(Reply::with_body(422, "bad job")).await;
    let app = spawn_app(|c| {
        c.delivery.breaker_threshold = 2;
        c.delivery.breaker_cooldown = Duration::from_secs(3600);
        c.delivery.defaults.max_attempts = 1;
    })
    .await;
    app.create_queue_ok("picky", &receiver.url, None).await;
    let mut ids = Vec::new();
    for n in 0..4 {
        ids.push(app.enqueue_ok("picky", &json!({ "n": n })).await);
    }
    // Every job gets its attempt although each one fails: the target is up, the jobs are bad.
    for id in &ids {
        app.wait_until_error("picky", id).await;
    }
    assert_eq!(receiver.received().len(), 4);
}
