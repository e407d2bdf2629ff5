//! Idempotent enqueues: the same `Idempotency-Key` on the same queue, within
//! `HOOKQ_IDEMPOTENCY_TTL`, stores one job and answers every repeat of it with its id; the
//! key reused for a different job is refused.

use axum::http::Method;
use hookq::store::testing::{Inspector, Stored};
use hookq::store::{BatchEnqueued, BatchKey, Enqueued, IdempotencyKey, NewJob};
use serde_json::json;

use crate::dlq_support::{DAY_MS, StoreFixture};
use crate::helpers::{ApiResponse, Reply, TestApp, TestReceiver, payload, spawn_app};

async fn enqueue_keyed(app: &TestApp, queue: &str, key: &str, n: usize) -> ApiResponse {
    app.send(
        app.request(Method::POST, &format!("/queue/{queue}"))
            .header("content-type", "application/json")
            .header("Idempotency-Key", key)
            .body(payload(n).to_string()),
    )
    .await
}

#[tokio::test]
async fn a_repeated_key_answers_with_the_first_job_and_stores_nothing_even_after_delivery() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    app.create_queue_ok("other", &receiver.url, None).await;
    let first = enqueue_keyed(&app, "q", "order-42", 1).await.expect(201);
    assert!(first.get("duplicate").is_none(), "{first}");
    let id = first["id"].as_str().unwrap().to_owned();
    let again = enqueue_keyed(&app, "q", "order-42", 1).await.expect(200);
    assert_eq!(again, json!({"ok": true, "id": id, "duplicate": true}));
    // Delivered, and still a duplicate.
    receiver.wait_for(1).await;
    app.wait_until_gone("q", &id).await;
    let later = enqueue_keyed(&app, "q", "order-42", 1).await.expect(200);
    assert_eq!(later["id"], id.as_str());
    // Another queue, or another key, is another job.
    let elsewhere = enqueue_keyed(&app, "other", "order-42", 4)
        .await
        .expect(201);
    assert_ne!(elsewhere["id"], id.as_str());
    enqueue_keyed(&app, "q", "order-43", 5).await.expect(201);
    receiver.wait_for(3).await;
    assert_eq!(
        receiver.received()[0].body_text(),
        payload(1).to_string(),
        "the first job's body went out, never a duplicate's"
    );
}

#[tokio::test]
async fn concurrent_enqueues_with_one_key_store_one_job() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let sent = (0..20).map(|_| enqueue_keyed(&app, "q", "same", 7));
    let answers = futures_util::future::join_all(sent).await;
    let created: Vec<_> = answers.iter().filter(|a| a.status == 201).collect();
    assert_eq!(created.len(), 1, "exactly one enqueue stored a job");
    let id = created[0].json()["id"].clone();
    for answer in &answers {
        if answer.status != 201 {
            assert_eq!(
                answer.expect(200),
                json!({"ok": true, "id": id, "duplicate": true})
            );
        }
    }
    assert_eq!(app.list("q", "READY").await.len(), 1);
}

/// Stripe's rule: a repeat must be the same request. The same job (its payload as it would
/// be delivered, whatever the spacing; its priority and ordering key; the delay may differ)
/// is a duplicate; anything else under the key is `409` and stores nothing.
#[tokio::test]
async fn a_key_reused_for_a_different_job_is_409_and_stores_nothing() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let keyed = |path: &str, body: &str| {
        app.request(Method::POST, path)
            .header("content-type", "application/json")
            .header("Idempotency-Key", "order-7")
            .body(body.to_owned())
    };
    let first = app
        .send(keyed("/queue/q?priority=5", r#"{"a":1,"b":[1,2]}"#))
        .await
        .expect(201);
    let id = first["id"].clone();
    let same = app
        .send(keyed(
            "/queue/q?priority=5&delay=10s",
            r#"{ "a": 1, "b": [ 1, 2 ] }"#,
        ))
        .await
        .expect(200);
    assert_eq!(same, json!({"ok": true, "id": id, "duplicate": true}));
    for (path, body) in [
        ("/queue/q?priority=5", r#"{"a":2,"b":[1,2]}"#),
        ("/queue/q?priority=5", r#"{"b":[1,2],"a":1}"#),
        ("/queue/q", r#"{"a":1,"b":[1,2]}"#),
        ("/queue/q?priority=5&orderingKey=k", r#"{"a":1,"b":[1,2]}"#),
    ] {
        let refused = app.send(keyed(path, body)).await.expect_error(409);
        assert!(
            refused.contains("Idempotency-Key was used for a different job"),
            "{path} {body}: {refused}"
        );
    }
    assert_eq!(app.list("q", "READY").await.len(), 1, "nothing more stored");
}

#[tokio::test]
async fn invalid_keys_are_422_and_store_nothing() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    for key in [String::new(), " ".into(), "k".repeat(201)] {
        enqueue_keyed(&app, "q", &key, 1).await.expect_error(422);
    }
    enqueue_keyed(&app, "q", &"k".repeat(200), 1)
        .await
        .expect(201);
    assert_eq!(app.list("q", "READY").await.len(), 1);
}

#[tokio::test]
async fn a_key_expires_after_its_time_to_live_and_the_sweep_deletes_it() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    let t0 = hookq::model::now_millis();
    let ttl = 24 * 3600 * 1000;
    let keyed = |now: i64| {
        let mut job = NewJob::now(
            hookq::model::JobId::new(),
            hookq::json::canonicalize(b"{}").unwrap(),
            now,
        );
        job.idempotency = Some(IdempotencyKey {
            key: "k".into(),
            valid_since: now - ttl,
        });
        job
    };
    let first = keyed(t0);
    assert_eq!(
        fx.store
            .enqueue(queue.clone(), first.clone())
            .await
            .unwrap(),
        Enqueued::Stored
    );
    assert_eq!(
        fx.store
            .enqueue(queue.clone(), keyed(t0 + ttl))
            .await
            .unwrap(),
        Enqueued::Duplicate(first.id),
        "still within its TTL"
    );
    let after = keyed(t0 + ttl + 1);
    assert_eq!(
        fx.store
            .enqueue(queue.clone(), after.clone())
            .await
            .unwrap(),
        Enqueued::Stored,
        "expired: a new job"
    );
    assert_eq!(
        fx.store
            .enqueue(queue.clone(), keyed(t0 + ttl + 2))
            .await
            .unwrap(),
        Enqueued::Duplicate(after.id),
        "the key stands for the new job now"
    );
    let inspector = Inspector::connect(&fx.database()).await.unwrap();
    let keys = || async { inspector.count(Stored::IdempotencyKeys).await.unwrap() };
    assert_eq!(keys().await, 1);
    assert_eq!(
        fx.maintenance.purge_idempotency_keys(t0 + 2 * DAY_MS).await,
        0
    );
    assert_eq!(
        fx.maintenance
            .purge_idempotency_keys(t0 + ttl + 1 + ttl + 1)
            .await,
        1
    );
    assert_eq!(keys().await, 0);
    fx.close().await;
}

#[tokio::test]
async fn a_batch_key_expires_after_its_time_to_live_and_the_sweep_deletes_it() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    let t0 = hookq::model::now_millis();
    let ttl = 24 * 3600 * 1000;
    let batch = |now: i64| {
        let jobs: Vec<NewJob> = (0..2)
            .map(|_| {
                NewJob::now(
                    hookq::model::JobId::new(),
                    hookq::json::canonicalize(b"{}").unwrap(),
                    now,
                )
            })
            .collect();
        let key = IdempotencyKey {
            key: "b".into(),
            valid_since: now - ttl,
        };
        let key = BatchKey::new(key, &jobs, now);
        (jobs, key)
    };
    let (first, key) = batch(t0);
    let first_ids: Vec<_> = first.iter().map(|job| job.id).collect();
    let stored = fx.store.enqueue_batch(queue.clone(), first, Some(key));
    assert_eq!(stored.await.unwrap(), BatchEnqueued::Stored);
    let (again, key) = batch(t0 + ttl);
    let again = fx.store.enqueue_batch(queue.clone(), again, Some(key));
    assert_eq!(
        again.await.unwrap(),
        BatchEnqueued::Duplicate(first_ids),
        "still within its TTL"
    );
    let (after, key) = batch(t0 + ttl + 1);
    let after = fx.store.enqueue_batch(queue.clone(), after, Some(key));
    assert_eq!(
        after.await.unwrap(),
        BatchEnqueued::Stored,
        "expired: stored"
    );
    let inspector = Inspector::connect(&fx.database()).await.unwrap();
    let keys = || async { inspector.count(Stored::BatchKeys).await.unwrap() };
    assert_eq!(keys().await, 1);
    fx.maintenance
        .purge_idempotency_keys(t0 + ttl + 1 + ttl + 1)
        .await;
    assert_eq!(keys().await, 0);
    assert_eq!(inspector.count(Stored::Jobs).await.unwrap(), 4);
    fx.close().await;
}
