//! Delivery to a real worker endpoint: headers, an independently verified signature, the
//! canonical body, retries, dead-lettering, timeouts, refused connections and redirects.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;

use crate::helpers::{
    Received, Reply, TestReceiver, as_listed, assert_signed, payload, refused_url, spawn_app,
};

#[tokio::test]
async fn a_job_is_posted_to_the_target_signed_with_the_queue_secret() {
    let secret = "whsec-0123456789";
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, Some(secret)).await;
    let id = app
        .enqueue_ok("q", &json!({ "to": "ünïcode@example.com", "n": 3 }))
        .await;

    let delivery = receiver.wait_for(1).await.remove(0);
    assert_eq!(delivery.method, "POST");
    assert_eq!(delivery.uri.path(), "/hook");
    assert_eq!(delivery.header("content-type"), Some("application/json"));
    assert_eq!(delivery.job_id(), id);
    assert_eq!(delivery.attempt(), 1);
    assert_eq!(
        delivery.body_text(),
        r#"{"to":"ünïcode@example.com","n":3}"#
    );
    assert_signed(&delivery, secret);

    // 2xx acknowledges: the job is gone, and not delivered twice.
    app.wait_until_gone("q", &id).await;
    assert!(app.list("q", "READY").await.is_empty());
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn an_enqueue_is_delivered_without_waiting_for_the_periodic_sweep() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    // The safety-net sweep is pushed beyond the test: every delivery below can only come
    // from the enqueue itself (a direct hand-off, or the dispatcher woken at once).
    let app = spawn_app(|c| c.delivery.sweep_interval = Duration::from_secs(3600)).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    for n in 0..5 {
        app.enqueue_ok("q", &payload(n)).await;
        receiver.wait_for(n + 1).await;
    }
    // And with a backlog, the dispatcher's own wake-ups carry the rest.
    for n in 5..55 {
        app.enqueue_ok("q", &payload(n)).await;
    }
    receiver.wait_for(55).await;
}

#[tokio::test]
async fn a_queue_without_a_secret_gets_unsigned_deliveries() {
    let receiver = TestReceiver::always(Reply::status(204)).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    let delivery = receiver.wait_for(1).await.remove(0);
    assert_eq!(delivery.job_id(), id);
    assert!(delivery.header("x-hyper-signature").is_none());
    app.wait_until_gone("q", &id).await;
}

/// Enqueue `raw` as sent by a producer; the worker must get exactly `canonical`, which is
/// what JavaScript's `JSON.stringify(JSON.parse(raw))` gives, and the signature covers it.
async fn assert_delivered_as(raw: &str, canonical: &str) {
    let secret = "canonical-secret";
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, Some(secret)).await;
    let body = app.enqueue_raw("q", raw.as_bytes()).await.expect(201);
    let id = body["id"].as_str().unwrap();
    let delivery = receiver.wait_for(1).await.remove(0);
    assert_eq!(delivery.job_id(), id);
    assert_eq!(delivery.body_text(), canonical, "delivered bytes of {raw}");
    assert_signed(&delivery, secret);
}

#[tokio::test]
async fn delivered_bodies_are_canonical_json_with_js_number_formatting() {
    assert_delivered_as(r#"{"n":1.0}"#, r#"{"n":1}"#).await;
    assert_delivered_as(
        r#"{ "big": 1e21, "small": 1.5e-7, "neg": -0.0, "int": 12345678901234567890 }"#,
        r#"{"big":1e+21,"small":1.5e-7,"neg":0,"int":12345678901234567000}"#,
    )
    .await;
}

#[tokio::test]
async fn delivered_bodies_are_canonical_json_with_js_key_order_and_escapes() {
    assert_delivered_as(
        "{\"b\":1,\"10\":2,\"a\":{},\"2\":[],\"s\":\"\\u00e9\\u001f\\n\\/\"}",
        "{\"2\":[],\"10\":2,\"b\":1,\"a\":{},\"s\":\"é\\u001f\\n/\"}",
    )
    .await;
}

#[tokio::test]
async fn a_failed_attempt_is_retried_until_it_succeeds() {
    let receiver = TestReceiver::scripted(
        vec![Reply::with_body(500, "busy"), Reply::status(404)],
        Reply::ok(),
    )
    .await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, Some("s")).await;
    let id = app.enqueue_ok("q", &payload(7)).await;

    let received = receiver.wait_for(3).await;
    let attempts: Vec<u32> = received.iter().map(Received::attempt).collect();
    assert_eq!(attempts, [1, 2, 3]);
    for delivery in &received {
        assert_eq!(delivery.job_id(), id);
        assert_eq!(delivery.body_text(), r#"{"n":7}"#);
        assert_signed(delivery, "s");
    }
    app.wait_until_gone("q", &id).await;
    assert_eq!(receiver.received().len(), 3);
}

#[tokio::test]
async fn retries_of_jobs_that_failed_together_are_spread_by_the_jitter() {
    let receiver = TestReceiver::always(Reply::status(503)).await;
    let app = spawn_app(|c| {
        c.delivery.defaults.backoff = vec![Duration::from_secs(100)];
        c.delivery.jitter = 0.2;
    })
    .await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let mut ids = Vec::new();
    for n in 0..20 {
        ids.push(app.enqueue_ok("q", &payload(n)).await);
    }
    let mut delays = std::collections::BTreeSet::new();
    for id in &ids {
        let job = app
            .wait_for_job("q", id, "the first failure", |r| {
                r.json().get("error").is_some()
            })
            .await
            .json();
        let failed_at = job["history"][0]["at"].as_i64().unwrap();
        let delay = job["nextAttemptAt"].as_i64().unwrap() - failed_at;
        assert!(
            (80_000..=120_000).contains(&delay),
            "{delay} ms: 100 s ± 20%"
        );
        delays.insert(delay);
    }
    assert!(
        delays.len() > 10,
        "20 retries at {} distinct times",
        delays.len()
    );
}

#[tokio::test]
async fn a_job_waiting_for_its_retry_is_ready_with_its_last_error() {
    // A long backoff keeps the job waiting after its first failure.
    let receiver = TestReceiver::always(Reply::with_body(503, "try later")).await;
    let app = spawn_app(|c| c.delivery.defaults.backoff = vec![Duration::from_secs(60)]).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    receiver.wait_for(1).await;
    let job = app
        .wait_for_job("q", &id, "the failure to be recorded", |r| {
            r.status == 200 && r.json().get("error").is_some()
        })
        .await
        .json();
    assert_eq!(job["status"], "READY");
    assert_eq!(job["attempts"], 1);
    assert_eq!(job["error"], "try later");
    assert_eq!(job["lastStatus"], 503);
    let next = job["nextAttemptAt"].as_i64().unwrap();
    assert!(
        next >= hookq::model::now_millis() + 50_000,
        "retry in ~60 s"
    );
}

#[tokio::test]
async fn exhausted_retries_dead_letter_the_job_with_the_workers_body() {
    let receiver = TestReceiver::always(Reply::with_body(500, "worker exploded: db down")).await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 3).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &json!({ "x": true })).await;

    let job = app.wait_until_error("q", &id).await;
    assert_eq!(job["status"], "ERROR");
    assert_eq!(job["attempts"], 3);
    assert_eq!(job["error"], "worker exploded: db down");
    assert_eq!(job["lastStatus"], 500);
    assert_eq!(job["job"], json!({ "x": true }));
    assert!(
        job.get("nextAttemptAt").is_none(),
        "a dead job is not scheduled"
    );

    let received = receiver.received();
    let attempts: Vec<u32> = received.iter().map(Received::attempt).collect();
    assert_eq!(attempts, [1, 2, 3]);
    let errors = app.list("q", "ERROR").await;
    assert_eq!(errors, [as_listed(job)]);
    assert!(app.list("q", "READY").await.is_empty());
}

#[tokio::test]
async fn a_dead_letter_keeps_at_most_64_kib_of_the_workers_body() {
    let huge = "x".repeat(100 * 1024);
    let receiver = TestReceiver::always(Reply::with_body(502, huge)).await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    let job = app.wait_until_error("q", &id).await;
    assert_eq!(job["error"].as_str().unwrap().len(), 64 * 1024);
    assert_eq!(job["lastStatus"], 502);
}

#[tokio::test]
async fn a_worker_that_never_answers_times_out_and_the_attempt_fails() {
    let receiver = TestReceiver::always(Reply::Hang).await;
    let app = spawn_app(|c| {
        c.delivery.defaults.max_attempts = 2;
        c.delivery.defaults.timeout = Duration::from_millis(300);
    })
    .await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &payload(1)).await;

    let job = app.wait_until_error("q", &id).await;
    assert_eq!(job["attempts"], 2);
    let error = job["error"].as_str().unwrap();
    assert!(error.contains("timed out"), "error text: {error}");
    assert!(job.get("lastStatus").is_none(), "no HTTP status: {job}");
    assert_eq!(receiver.received().len(), 2);
}

#[tokio::test]
async fn a_refused_connection_is_a_failed_attempt() {
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 2).await;
    app.create_queue_ok("q", &refused_url(), None).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    let job = app.wait_until_error("q", &id).await;
    assert_eq!(job["attempts"], 2);
    let error = job["error"].as_str().unwrap();
    assert!(error.contains("connect"), "error text: {error}");
    assert!(job.get("lastStatus").is_none(), "no HTTP status: {job}");
}

#[tokio::test]
async fn a_redirect_is_a_failed_attempt_and_is_not_followed() {
    let receiver = TestReceiver::always(Reply::Respond {
        status: 307,
        body: String::new(),
        headers: vec![("location", "/elsewhere".to_owned())],
    })
    .await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("q", &receiver.url, Some("s")).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    let job = app.wait_until_error("q", &id).await;
    assert_eq!(job["lastStatus"], 307);
    let error = job["error"].as_str().unwrap();
    assert!(error.contains("/elsewhere"), "error text: {error}");
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].uri.path(), "/hook");
}

#[tokio::test]
async fn every_job_of_a_burst_is_delivered_once() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("a", &receiver.url, None).await;
    app.create_queue_ok("b", &receiver.url, Some("b-secret"))
        .await;
    let mut ids = Vec::new();
    for n in 0..20 {
        let queue = if n % 2 == 0 { "a" } else { "b" };
        ids.push((queue, app.enqueue_ok(queue, &payload(n)).await));
    }
    let received = receiver.wait_for(ids.len()).await;
    let mut by_id: HashMap<&str, &Received> = HashMap::new();
    for delivery in &received {
        assert!(
            by_id.insert(delivery.job_id(), delivery).is_none(),
            "delivered twice: {}",
            delivery.job_id()
        );
    }
    for (n, (queue, id)) in ids.iter().enumerate() {
        let delivery = by_id[id.as_str()];
        assert_eq!(delivery.body_text(), format!(r#"{{"n":{n}}}"#));
        if *queue == "b" {
            assert_signed(delivery, "b-secret");
        } else {
            assert!(delivery.header("x-hyper-signature").is_none());
        }
        app.wait_until_gone(queue, id).await;
    }
}

#[tokio::test]
async fn a_410_gone_dead_letters_the_job_at_once_without_spending_its_attempts() {
    let receiver = TestReceiver::always(Reply::with_body(
        410,
        "subscription cancelled by the customer",
    ))
    .await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 5).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &json!({ "x": 1 })).await;

    let job = app.wait_until_error("q", &id).await;
    assert_eq!(job["attempts"], 1, "no retry after a 410: {job}");
    assert_eq!(job["lastStatus"], 410);
    assert_eq!(job["error"], "subscription cancelled by the customer");
    assert_eq!(receiver.received().len(), 1);
    assert!(app.list("q", "READY").await.is_empty());

    // Any other 4xx is still an ordinary failed attempt, retried.
    let receiver = TestReceiver::scripted(vec![Reply::status(404)], Reply::ok()).await;
    app.patch_queue("q", &json!({ "target": receiver.url }))
        .await
        .expect(200);
    let id = app.enqueue_ok("q", &json!({ "x": 2 })).await;
    receiver.wait_for(2).await;
    app.wait_until_gone("q", &id).await;
}
