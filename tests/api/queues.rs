//! Service routes and queue routes: `GET /`, `GET /healthz`, `GET /queue`, `PUT`, `DELETE`
//! and `POST /queue/{name}`.

use serde_json::{Value, json};

use crate::helpers::{payload, refused_url, spawn_app};

#[tokio::test]
async fn root_describes_the_service() {
    let app = spawn_app(|_| {}).await;
    let body = app.get("/").await.expect(200);
    assert_eq!(body["name"], "hookq");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(body["services"], json!(["queue"]));
}

#[tokio::test]
async fn healthz_answers_200_when_the_database_is_reachable() {
    let app = spawn_app(|_| {}).await;
    let body = app.get("/healthz").await.expect(200);
    assert_eq!(body["ok"], true);
}

#[tokio::test]
async fn a_new_server_lists_no_queues() {
    let app = spawn_app(|_| {}).await;
    let body = app.get("/queue").await.expect(200);
    assert_eq!(body, json!({ "ok": true, "name": "queue", "queues": [] }));
}

#[tokio::test]
async fn create_queue_returns_201_and_the_queue_is_listed_lower_cased() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("Emails", "http://127.0.0.1:9/hook", None)
        .await;
    app.create_queue_ok("b~q_1-x", "https://example.com/", Some("s"))
        .await;
    assert_eq!(app.queues().await, ["b~q_1-x", "emails"]);
    // The lower-cased name is the queue's name everywhere.
    app.enqueue_ok("EMAILS", &payload(1)).await;
    assert_eq!(app.list("emails", "READY").await.len(), 1);
}

#[tokio::test]
async fn create_queue_returns_409_for_an_existing_name_in_any_case() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("jobs", "http://127.0.0.1:9/a", None)
        .await;
    app.create_queue("jobs", "http://127.0.0.1:9/b", None)
        .await
        .expect_error(409);
    app.create_queue("JOBS", "http://127.0.0.1:9/b", None)
        .await
        .expect_error(409);
    assert_eq!(app.queues().await, ["jobs"]);
}

#[tokio::test]
async fn enqueue_returns_201_with_a_uuidv7_id() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let first = app.enqueue_ok("q", &payload(1)).await;
    let second = app.enqueue_ok("q", &payload(2)).await;
    for id in [&first, &second] {
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12],
            "{id}"
        );
        assert!(parts[2].starts_with('7'), "{id} is a version-7 UUID");
        assert!(id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
    }
    assert!(first < second, "ids sort by creation time");
}

#[tokio::test]
async fn enqueue_returns_404_for_a_missing_queue() {
    let app = spawn_app(|_| {}).await;
    app.enqueue("nope", &payload(1)).await.expect_error(404);
    assert!(app.queues().await.is_empty());
}

#[tokio::test]
async fn delete_queue_removes_it_with_its_ready_and_error_jobs() {
    // Deliveries are refused and there is one attempt, so a job turns ERROR at once.
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("dead", &refused_url(), None).await;
    let dead = app.enqueue_ok("dead", &payload(1)).await;
    app.wait_until_error("dead", &dead).await;

    // Without dispatch, new jobs stay READY: one in the doomed queue, one in another.
    let app = app.restart(|c| c.dispatch = false).await;
    let waiting = app.enqueue_ok("dead", &payload(2)).await;
    app.create_queue_ok("other", "http://127.0.0.1:9/hook", None)
        .await;
    let ready = app.enqueue_ok("other", &payload(3)).await;
    assert_eq!(app.list("dead", "READY").await.len(), 1);
    assert_eq!(app.list("dead", "ERROR").await.len(), 1);

    let body = app.delete_queue("dead").await.expect(200);
    assert_eq!(body, json!({ "ok": true }));
    assert_eq!(app.queues().await, ["other"]);
    for id in [&dead, &waiting] {
        app.get_job("dead", id).await.expect_error(404);
    }
    app.list_raw("dead", "status=READY").await.expect_error(404);
    app.enqueue("dead", &payload(4)).await.expect_error(404);
    app.delete_queue("dead").await.expect_error(404);

    // The other queue is untouched.
    let other = app.list("other", "READY").await;
    assert_eq!(other.len(), 1);
    assert_eq!(other[0]["id"], Value::from(ready));
}

#[tokio::test]
async fn a_deleted_queue_can_be_created_again_empty() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    app.enqueue_ok("q", &payload(1)).await;
    app.delete_queue("q").await.expect(200);
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    assert!(app.list("q", "READY").await.is_empty());
}
