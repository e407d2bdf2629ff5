//! The audit log (issue 44): every audited action writes who did it (a scoped key by id and
//! name, a configured key, a UI session), what, to what and when, in the action's own
//! transaction (an action that fails writes nothing); `GET /admin/audit` pages it newest
//! first and filters it, admin only; entries past the retention are pruned. And scoped
//! keys' `lastUsedAt` (written at most once a minute, off the request's path) and
//! `expiresAt` (401 once past, saying so).

use std::time::Duration;

use hookq::config::{ApiKey, Config};
use reqwest::Method;
use serde_json::{Value, json};

use crate::dlq_support::{make_dead_letters, post_admin};
use crate::helpers::{ApiClient, Reply, TestApp, TestReceiver, create_key, eventually, spawn_app};

const KEY: &str = "the-configured-api-key-0123456789";

fn with_key(config: &mut Config) {
    config.api_key = Some(ApiKey::new(KEY.into()));
}

fn as_key(app: &TestApp, key: &str) -> ApiClient {
    let mut client = app.api.clone();
    client.api_key = Some(key.to_owned());
    client
}

/// Every entry of the log, newest first, walking its pages.
async fn whole_log(app: &TestApp, query: &str) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/admin/audit?limit=3&{query}");
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let page = app.get(&path).await.expect(200);
        entries.extend(page["entries"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => {
                assert_eq!(page["has_more"], false, "{page}");
                return entries;
            }
        }
    }
}

/// The (actor, action, target) of each entry, oldest first.
fn trail(entries: &[Value]) -> Vec<(String, String, String)> {
    entries
        .iter()
        .rev()
        .map(|e| {
            (
                e["actor"].as_str().unwrap_or_default().to_owned(),
                e["action"].as_str().unwrap_or_default().to_owned(),
                e["target"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_audited_action_is_logged_with_who_did_it_what_and_when() {
    let receiver = TestReceiver::always(Reply::with_body(500, "nope")).await;
    let app = spawn_app(with_key).await;
    let started = hookq::model::now_millis();
    let (admin_id, admin_key) = create_key(&app, "ops-admin", "admin", None).await;
    let ops = as_key(&app, &admin_key);
    ops.create_queue("orders", &receiver.url, None)
        .await
        .expect(201);
    for path in ["/queue/orders/_pause", "/queue/orders/_resume"] {
        ops.call(Method::POST, path, None).await.expect(200);
    }
    ops.call(
        Method::PATCH,
        "/queue/orders",
        Some(br#"{"maxAttempts":1,"secret":"s3cr3t-value-0123456789"}"#),
    )
    .await
    .expect(200);
    ops.call(Method::POST, "/queue/orders/_close-breaker", None)
        .await
        .expect(200);
    let ids = make_dead_letters(&app, "orders", 3).await;
    receiver.set_default(Reply::ok());
    post_admin(&app, "/admin/dlq/replay", &json!({ "ids": [ids[0]] }))
        .await
        .expect(200);
    post_admin(&app, "/admin/dlq/acknowledge", &json!({ "ids": [ids[1]] }))
        .await
        .expect(200);
    app.call(Method::DELETE, &format!("/admin/dlq/{}", ids[2]), None)
        .await
        .expect(200);
    app.call(Method::PUT, "/topic/events", Some(b"{}"))
        .await
        .expect(201);
    app.call(
        Method::PUT,
        "/topic/events/_subscriptions/orders",
        Some(br#"{"filter":{"type":["order.created"]}}"#),
    )
    .await
    .expect(201);
    app.call(Method::DELETE, "/topic/events/_subscriptions/orders", None)
        .await
        .expect(200);
    app.call(Method::DELETE, "/topic/events", None)
        .await
        .expect(200);
    let (reader_id, _) = create_key(&app, "dashboard", "reader", Some(&["*"])).await;
    app.call(Method::DELETE, &format!("/admin/keys/{reader_id}"), None)
        .await
        .expect(200);
    app.call(Method::DELETE, "/queue/orders", None)
        .await
        .expect(200);

    let entries = whole_log(&app, "").await;
    let key = format!("key:{admin_id}");
    let master = "master".to_owned();
    let s = |text: &str| text.to_owned();
    assert_eq!(
        trail(&entries),
        vec![
            (master.clone(), s("key.create"), admin_id.clone()),
            (key.clone(), s("queue.create"), s("orders")),
            (key.clone(), s("queue.pause"), s("orders")),
            (key.clone(), s("queue.resume"), s("orders")),
            (key.clone(), s("queue.settings"), s("orders")),
            (key.clone(), s("queue.close_breaker"), s("orders")),
            (
                master.clone(),
                s("dlq.replay"),
                format!("dead letter {}", ids[0])
            ),
            (
                master.clone(),
                s("dlq.acknowledge"),
                format!("dead letter {}", ids[1])
            ),
            (
                master.clone(),
                s("dlq.delete"),
                format!("dead letter {}", ids[2])
            ),
            (master.clone(), s("topic.create"), s("topic events")),
            (
                master.clone(),
                s("subscription.put"),
                s("topic events → queue orders")
            ),
            (
                master.clone(),
                s("subscription.delete"),
                s("topic events → queue orders")
            ),
            (master.clone(), s("topic.delete"), s("topic events")),
            (master.clone(), s("key.create"), reader_id.clone()),
            (master.clone(), s("key.revoke"), reader_id.clone()),
            (master.clone(), s("queue.delete"), s("orders")),
        ]
    );
    let by_key = entries
        .iter()
        .find(|e| e["action"] == "queue.pause")
        .cloned()
        .unwrap_or_default();
    assert_eq!(by_key["actorName"], "ops-admin", "{by_key}");
    assert_eq!(by_key["queue"], "orders", "{by_key}");
    let at = by_key["at"].as_i64().unwrap_or_default();
    assert!(
        (started..=hookq::model::now_millis()).contains(&at),
        "{by_key}"
    );
    let settings = entries
        .iter()
        .find(|e| e["action"] == "queue.settings")
        .cloned()
        .unwrap_or_default();
    assert_eq!(settings["detail"], "changed secret, maxAttempts");
    assert!(!entries.iter().any(|e| e.to_string().contains("s3cr3t")));
    let replayed = entries
        .iter()
        .find(|e| e["action"] == "dlq.replay")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (&replayed["count"], &replayed["queue"]),
        (&json!(1), &Value::Null)
    );
    assert_eq!(
        entries
            .iter()
            .find(|e| e["action"] == "key.revoke")
            .map(|e| e["detail"].clone()),
        Some(json!("\"dashboard\""))
    );
}

#[tokio::test]
async fn an_action_that_fails_is_not_logged() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://worker.example.com/hook", None)
        .await;
    app.create_queue("q", "http://worker.example.com/hook", None)
        .await
        .expect_error(409);
    app.call(Method::DELETE, "/topic/nope", None)
        .await
        .expect_error(404);
    app.call(Method::DELETE, "/topic/nope/_subscriptions/q", None)
        .await
        .expect_error(404);
    app.call(
        Method::DELETE,
        "/admin/keys/0190a0b0-0000-7000-8000-000000000000",
        None,
    )
    .await
    .expect_error(404);
    app.call(Method::PATCH, "/queue/q", Some(br#"{"maxAttempts":0}"#))
        .await
        .expect_error(422);
    app.call(Method::POST, "/queue/nope/_pause", None)
        .await
        .expect_error(404);
    let entries = whole_log(&app, "").await;
    assert_eq!(
        trail(&entries),
        vec![("open".to_owned(), "queue.create".to_owned(), "q".to_owned())],
        "only the queue created: on an open server the actor is `open`"
    );
}

#[tokio::test]
async fn the_log_is_paged_newest_first_filtered_and_admin_only() {
    let app = spawn_app(with_key).await;
    for name in ["a", "b", "c"] {
        app.create_queue_ok(name, "http://worker.example.com/hook", None)
            .await;
    }
    for name in ["a", "b"] {
        app.call(Method::POST, &format!("/queue/{name}/_pause"), None)
            .await
            .expect(200);
    }
    let (_, reader) = create_key(&app, "everything-reader", "reader", Some(&["*"])).await;
    let (admin_id, admin) = create_key(&app, "second admin", "admin", None).await;
    as_key(&app, &admin)
        .call(Method::POST, "/queue/c/_pause", None)
        .await
        .expect(200);

    let all = whole_log(&app, "").await;
    assert_eq!(all.len(), 8, "{all:#?}");
    let ids: Vec<i64> = all.iter().filter_map(|e| e["id"].as_i64()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    let pauses = whole_log(&app, "action=queue.pause").await;
    assert_eq!(pauses.len(), 3);
    let of_b = whole_log(&app, "queue=b").await;
    assert_eq!(trail(&of_b).len(), 2, "{of_b:#?}");
    for actor in [format!("key:{admin_id}"), "second%20admin".to_owned()] {
        let by = whole_log(&app, &format!("actor={actor}")).await;
        assert_eq!(
            trail(&by),
            vec![(
                format!("key:{admin_id}"),
                "queue.pause".to_owned(),
                "c".to_owned()
            )]
        );
    }
    assert!(whole_log(&app, "action=queue.delete").await.is_empty());
    // Bad input, in the route's own shape.
    app.get("/admin/audit?limit=0").await.expect_error(422);
    app.get("/admin/audit?cursor=nope").await.expect_error(400);
    let other_listing = app.get("/admin/dlq?limit=1").await.expect(200);
    assert!(other_listing["next_cursor"].is_null());
    app.get(&format!("/admin/audit?actor={}", "x".repeat(201)))
        .await
        .expect_error(422);
    app.get("/admin/audit?since=1h").await.expect_error(422);
    // Admin only: a reader of every queue is refused.
    let msg = as_key(&app, &reader)
        .get("/admin/audit")
        .await
        .expect_error(403);
    assert!(msg.contains("admin only"), "{msg}");
}

#[tokio::test]
async fn entries_past_the_retention_are_pruned_by_the_maintenance_sweep() {
    let app = spawn_app(|c| c.dispatch = false).await;
    let now = hookq::model::now_millis();
    let day = 24 * 3600 * 1000;
    let entry = |at: i64, target: &str| hookq::store::audit::AuditEntry {
        at,
        actor: "master".into(),
        actor_name: "admin key".into(),
        action: "queue.pause".into(),
        queue: None,
        target: target.into(),
        detail: String::new(),
        count: None,
    };
    for (at, target) in [
        (now - 91 * day, "old"),
        (now - 89 * day, "kept"),
        (now, "new"),
    ] {
        app.store().record_audit(entry(at, target)).await.unwrap();
    }
    let pruned = crate::dlq_support::maintenance(app.store())
        .prune_audit(now)
        .await;
    assert_eq!(pruned, 1);
    let targets: Vec<String> = whole_log(&app, "")
        .await
        .iter()
        .map(|e| e["target"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(targets, ["new", "kept"]);
}

#[tokio::test]
async fn a_key_records_its_last_use_at_most_once_a_minute() {
    let app = spawn_app(with_key).await;
    app.create_queue_ok("q", "http://worker.example.com/hook", None)
        .await;
    let (id, key) = create_key(&app, "reader", "reader", Some(&["q"])).await;
    let listed = |app: &TestApp| {
        let id = id.clone();
        let api = app.api.clone();
        async move {
            let keys = api.get("/admin/keys").await.expect(200);
            keys["keys"]
                .as_array()
                .and_then(|keys| keys.iter().find(|k| k["id"] == id.as_str()).cloned())
                .unwrap_or_default()
        }
    };
    assert!(listed(&app).await.get("lastUsedAt").is_none(), "never used");
    let reader = as_key(&app, &key);
    reader.get("/queue/q/_stats").await.expect(200);
    let first = eventually("the key's use recorded", || async {
        listed(&app).await["lastUsedAt"].as_i64()
    })
    .await;
    // Used again within the minute: not written again.
    for _ in 0..5 {
        reader.get("/queue/q/_stats").await.expect(200);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(listed(&app).await["lastUsedAt"], json!(first));
    // The store writes a use only a minute after the last (whatever node asks).
    app.store()
        .touch_api_key(id.clone(), first + 30_000)
        .await
        .unwrap();
    assert_eq!(listed(&app).await["lastUsedAt"], json!(first));
    app.store()
        .touch_api_key(id.clone(), first + 61_000)
        .await
        .unwrap();
    assert_eq!(listed(&app).await["lastUsedAt"], json!(first + 61_000));
}

#[tokio::test]
async fn an_expired_key_answers_401_saying_so() {
    let app = spawn_app(with_key).await;
    app.create_queue_ok("q", "http://worker.example.com/hook", None)
        .await;
    let soon = hookq::model::now_millis() + 1_500;
    let created = app
        .call(
            Method::POST,
            "/admin/keys",
            Some(
                json!({ "name": "short-lived", "role": "reader", "queues": ["q"], "expiresAt": soon })
                    .to_string()
                    .as_bytes(),
            ),
        )
        .await
        .expect(201);
    assert_eq!(created["expiresAt"], soon);
    let key = created["key"].as_str().unwrap_or_default().to_owned();
    let reader = as_key(&app, &key);
    reader.get("/queue/q/_stats").await.expect(200);
    let keys = app.get("/admin/keys").await.expect(200);
    assert_eq!(keys["keys"][0]["expiresAt"], soon, "{keys}");
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let msg = reader.get("/queue/q/_stats").await.expect_error(401);
    assert!(
        msg.contains("\"short-lived\" expired at"),
        "a clear message: {msg}"
    );
    // A duration from now, or an RFC 3339 time; refused: past, garbage, too far.
    for (expires, status) in [
        (json!("90d"), 201),
        (json!("2099-01-01T00:00:00Z"), 422),
        (json!("2030-01-01T00:00:00Z"), 201),
        (json!(1_000), 422),
        (json!("soon"), 422),
        (json!(true), 422),
    ] {
        let body = json!({ "name": "k", "role": "reader", "queues": ["q"], "expiresAt": expires });
        let response = app
            .call(
                Method::POST,
                "/admin/keys",
                Some(body.to_string().as_bytes()),
            )
            .await;
        if status == 201 {
            response.expect(201);
        } else {
            let msg = response.expect_error(422);
            assert!(msg.starts_with("expiresAt"), "{msg}");
        }
    }
}
