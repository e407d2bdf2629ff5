//! `POST /queue/{name}/_batch`: up to 1 000 jobs in one commit, all or nothing.

use axum::http::Method;
use hookq::store::{NewJob, StoreError};
use serde_json::{Value, json};

use crate::dlq_support::StoreFixture;
use crate::helpers::{ApiResponse, Reply, TestApp, TestReceiver, spawn_app};

async fn batch(app: &TestApp, query: &str, body: &str, key: Option<&str>) -> ApiResponse {
    let mut request = app
        .request(Method::POST, &format!("/queue/q/_batch{query}"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    app.send(request).await
}

fn jobs(n: usize) -> String {
    json!((0..n).map(|i| json!({"n": i})).collect::<Vec<_>>()).to_string()
}

#[tokio::test]
async fn a_batch_is_stored_in_one_commit_and_delivered_in_order() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|c| c.max_in_flight_per_queue = 1).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let answer = batch(&app, "", &jobs(5), None).await.expect(201);
    let ids: Vec<&str> = answer["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 5);
    let delivered = receiver.wait_for(5).await;
    let order: Vec<&str> = delivered.iter().map(|d| d.job_id()).collect();
    assert_eq!(order, ids, "in the batch's order");
    assert_eq!(delivered[3].body_text(), r#"{"n":3}"#);
}

#[tokio::test]
async fn one_bad_job_refuses_the_whole_batch() {
    let app = spawn_app(|c| {
        c.dispatch = false;
        c.max_job_bytes = 64;
        c.max_batch_bytes = 4096;
    })
    .await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let long = "x".repeat(100);
    for (body, status, named) in [
        (
            r#"[{"a":1},{"b":2},[3],{"d":4}]"#.to_owned(),
            422,
            Some("job 2"),
        ),
        (r#"[{"a":1},"text"]"#.to_owned(), 422, Some("job 1")),
        (
            format!(r#"[{{"a":1}},{{"long":"{long}"}}]"#),
            413,
            Some("job 1"),
        ),
        (r#"[{"a":1},{"b":"\ud800"}]"#.to_owned(), 400, Some("job 1")),
        ("[]".to_owned(), 422, None),
        (r#"{"a":1}"#.to_owned(), 422, None),
        (r#"[{"a":1},"#.to_owned(), 400, None),
        (format!("[{}]", vec!["{}"; 1001].join(",")), 422, None),
        (
            format!("[{}]", vec![r#"{"a":1}"#; 600].join(",")),
            413,
            None,
        ),
    ] {
        let msg = batch(&app, "", &body, None).await.expect_error(status);
        if let Some(named) = named {
            assert!(msg.contains(named), "{msg}");
        }
    }
    assert!(
        app.list("q", "READY").await.is_empty(),
        "nothing was stored"
    );
    batch(&app, "", "[]", None).await.expect_error(422);
    app.call(Method::POST, "/queue/nope/_batch", Some(b"[{}]"))
        .await
        .expect_error(404);
}

#[tokio::test]
async fn the_enqueue_options_apply_to_every_job_of_a_batch() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    batch(&app, "?delay=1h", &jobs(3), None).await.expect(201);
    let listed = app.list("q", "READY").await;
    assert_eq!(listed.len(), 3);
    assert!(listed.iter().all(|job| job["runAt"].is_i64()), "{listed:?}");
    // A repeated batch with the same key stores nothing and answers with the first ids.
    let first = batch(&app, "", &jobs(2), Some("import-7"))
        .await
        .expect(201);
    let again = batch(&app, "", &jobs(2), Some("import-7"))
        .await
        .expect(200);
    assert_eq!(again["duplicate"], Value::Bool(true));
    assert_eq!(again["ids"], first["ids"]);
    assert_eq!(app.list("q", "READY").await.len(), 5);
    batch(&app, "?delay=soon", &jobs(1), None)
        .await
        .expect_error(422);
}

#[tokio::test]
async fn a_batch_that_fails_in_the_store_stores_none_of_its_jobs() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    let now = hookq::model::now_millis();
    let existing = fx.enqueue(&queue, 1, now).await[0];
    let job = |id| NewJob::now(id, hookq::json::canonicalize(b"{}").unwrap(), now);
    // The middle job collides with a stored one: the insert fails after the first succeeded.
    let err = fx
        .store
        .enqueue_batch(
            queue.clone(),
            vec![
                job(hookq::model::JobId::new()),
                job(existing),
                job(hookq::model::JobId::new()),
            ],
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err:?}");
    let ready = fx.store.list_ready(queue, None, 10).await.unwrap();
    assert_eq!(ready.len(), 1, "only the job stored before");
    fx.close().await;
}
