//! `POST /queue/{name}/_batch`: up to 1 000 jobs in one commit, all or nothing.

use axum::http::Method;
use hookq::store::{JobsPage, NewJob, StoreError};
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
    let app = spawn_app(|c| c.delivery.defaults.concurrency = 1).await;
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
    batch(&app, "?delay=soon", &jobs(1), None)
        .await
        .expect_error(422);
}

fn ids_of(answer: &Value) -> Vec<String> {
    answer["ids"]
        .as_array()
        .unwrap_or_else(|| panic!("ids: {answer}"))
        .iter()
        .map(|id| id.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_repeated_batch_key_with_the_same_batch_stores_nothing_and_answers_the_first_ids() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let first = batch(&app, "?delay=1h", &jobs(3), Some("import-7"))
        .await
        .expect(201);
    assert!(first.get("duplicate").is_none(), "{first}");
    // A retry sends the same jobs; its delay is a different instant, and does not matter.
    let again = batch(&app, "?delay=2h", &jobs(3), Some("import-7"))
        .await
        .expect(200);
    assert_eq!(again["duplicate"], Value::Bool(true));
    assert_eq!(ids_of(&again), ids_of(&first));
    assert_eq!(
        app.list("q", "READY").await.len(),
        3,
        "nothing stored again"
    );
}

#[tokio::test]
async fn a_batch_key_names_the_batch_in_its_own_space_apart_from_single_job_keys() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    // A single job keyed `K/5` (the key a batch's job 5 once took) and one keyed `K`.
    let single = |key: &'static str| {
        let app = &app;
        async move {
            let request = app
                .request(Method::POST, "/queue/q")
                .header("content-type", "application/json")
                .header("Idempotency-Key", key)
                .body(r#"{"single":true}"#);
            app.send(request).await.expect(201)["id"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let single_5 = single("K/5").await;
    let single_k = single("K").await;
    // A batch of 6 keyed `K` is stored whole, each id its own job's.
    let answer = batch(&app, "", &jobs(6), Some("K")).await.expect(201);
    let ids = ids_of(&answer);
    assert_eq!(ids.len(), 6);
    assert!(
        !ids.contains(&single_5) && !ids.contains(&single_k),
        "{ids:?}"
    );
    for (n, id) in ids.iter().enumerate() {
        let job = app.get_job("q", id).await.expect(200);
        assert_eq!(
            job["job"],
            json!({ "n": n }),
            "job {n} is the batch's: {job}"
        );
    }
    assert_eq!(app.list("q", "READY").await.len(), 8);
}

#[tokio::test]
async fn a_batch_key_used_for_a_different_batch_is_refused_and_stores_nothing() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    batch(&app, "", &jobs(3), Some("import-8"))
        .await
        .expect(201);
    let other_content = r#"[{"n":0},{"n":1},{"n":"two"}]"#;
    for (body, query) in [
        (jobs(5), ""), // more jobs
        (jobs(2), ""), // fewer jobs
        (other_content.to_owned(), ""),
        (jobs(3), "?priority=5"), // the same jobs, delivered otherwise
    ] {
        let msg = batch(&app, query, &body, Some("import-8"))
            .await
            .expect_error(409);
        assert!(msg.contains("different batch"), "{msg}");
    }
    assert_eq!(app.list("q", "READY").await.len(), 3, "nothing more stored");
    // The same key on another queue is another key.
    app.create_queue_ok("r", "http://127.0.0.1:9/hook", None)
        .await;
    let request = app
        .request(Method::POST, "/queue/r/_batch")
        .header("content-type", "application/json")
        .header("Idempotency-Key", "import-8")
        .body(jobs(5));
    app.send(request).await.expect(201);
}

#[tokio::test]
async fn what_a_batch_stores_wakes_its_queue_and_counts_as_enqueued_at_once() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    // No sweep within the test's deadline: only the batch's own wake-up delivers it.
    let app = spawn_app(|c| c.delivery.sweep_interval = std::time::Duration::from_secs(3600)).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let before = enqueued_total(&app, "q").await;
    let answer = batch(&app, "", &jobs(4), Some("wake-1")).await.expect(201);
    let delivered = receiver.wait_for(4).await;
    assert_eq!(delivered.len(), 4);
    assert_eq!(enqueued_total(&app, "q").await - before, 4.0);
    // The duplicate stores nothing and counts nothing.
    batch(&app, "", &jobs(4), Some("wake-1")).await.expect(200);
    assert_eq!(enqueued_total(&app, "q").await - before, 4.0);
    assert_eq!(ids_of(&answer).len(), 4);
}

/// `hookq_jobs_enqueued_total{queue}` as `/metrics` shows it now.
async fn enqueued_total(app: &TestApp, queue: &str) -> f64 {
    let text = app.get("/metrics").await.text();
    text.lines()
        .filter(|line| line.starts_with("hookq_jobs_enqueued_total{"))
        .filter(|line| line.contains(&format!("queue=\"{queue}\"")))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
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
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err:?}");
    let ready = fx
        .store
        .list_ready(queue, JobsPage::oldest(None, 10))
        .await
        .unwrap();
    assert_eq!(ready.len(), 1, "only the job stored before");
    fx.close().await;
}

#[tokio::test]
async fn concurrent_batches_with_one_key_store_one_batch_and_answer_its_ids() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let body = jobs(5);
    let answers =
        futures_util::future::join_all((0..8).map(|_| batch(&app, "", &body, Some("import-9"))))
            .await;
    let created: Vec<&ApiResponse> = answers.iter().filter(|a| a.status == 201).collect();
    assert_eq!(created.len(), 1, "one batch stored: {answers:?}");
    let first = ids_of(&created[0].json());
    for answer in answers.iter().filter(|a| a.status != 201) {
        let body = answer.expect(200);
        assert_eq!(body["duplicate"], Value::Bool(true));
        assert_eq!(
            ids_of(&body),
            first,
            "every duplicate names the stored batch"
        );
    }
    assert_eq!(app.list("q", "READY").await.len(), 5);
}
