//! Topics: publish once, a job in every subscribed queue whose filter matches, in one
//! transaction; the payload stored once; retention and replay; each subscriber a queue in
//! every way (push or pull, its own signing, ordering, caps).

use std::collections::HashSet;

use axum::http::Method;
use hookq::store::testing::{Inspector, Stored};
use serde_json::{Value, json};

use crate::helpers::{
    ApiClient, ApiResponse, Reply, TestApp, TestReceiver, create_key, eventually,
    skipped_on_postgres, spawn_app,
};

async fn put(app: &ApiClient, path: &str, body: Value) -> ApiResponse {
    app.call(Method::PUT, path, Some(body.to_string().as_bytes()))
        .await
}

async fn post(app: &ApiClient, path: &str, body: Value) -> ApiResponse {
    app.call(Method::POST, path, Some(body.to_string().as_bytes()))
        .await
}

async fn subscribe(app: &TestApp, topic: &str, queue: &str, filter: Option<Value>) {
    let body = filter.map_or_else(|| json!({}), |f| json!({ "filter": f }));
    put(app, &format!("/topic/{topic}/_subscriptions/{queue}"), body)
        .await
        .expect(201);
}

async fn publish(app: &ApiClient, topic: &str, message: Value) -> Value {
    post(app, &format!("/topic/{topic}"), message)
        .await
        .expect(201)
}

async fn inspector(app: &TestApp) -> Inspector {
    Inspector::connect(&app.database())
        .await
        .expect("inspector")
}

#[tokio::test]
async fn topics_are_created_read_changed_listed_and_deleted() {
    let app = spawn_app(|c| c.dispatch = false).await;
    put(&app, "/topic/Orders", json!({})).await.expect(201);
    let msg = put(&app, "/topic/orders", json!({}))
        .await
        .expect_error(409);
    assert!(msg.contains("exists"), "{msg}");
    put(&app, "/topic/kept", json!({"retain": "7d"}))
        .await
        .expect(201);
    for (path, body, why) in [
        ("/topic/bad%20name", json!({}), "topic name"),
        ("/topic/t2", json!({"retain": "31d"}), "30d"),
        ("/topic/t2", json!({"retain": "soon"}), "retain"),
        ("/topic/t2", json!({"retian": "1h"}), "retian"),
    ] {
        let msg = put(&app, path, body).await.expect_error(422);
        assert!(msg.contains(why), "{path}: {msg}");
    }
    let topic = app.get("/topic/orders").await.expect(200);
    assert_eq!(topic["name"], "orders");
    assert_eq!(topic["retain"], "0s");
    assert_eq!(topic["subscriptions"], json!([]));
    assert_eq!(topic["published"], 0);
    let changed = app
        .call(Method::PATCH, "/topic/orders", Some(br#"{"retain":"1h"}"#))
        .await
        .expect(200);
    assert_eq!(changed["retain"], "1h");
    let list = app.get("/topics?limit=1").await.expect(200);
    assert_eq!(list["topics"][0]["name"], "kept");
    let next = list["next"].as_str().expect("a next page");
    let list = app
        .get(&format!("/topics?limit=1&after={next}"))
        .await
        .expect(200);
    assert_eq!(list["topics"][0]["name"], "orders");
    app.call(Method::DELETE, "/topic/orders", None)
        .await
        .expect(200);
    app.get("/topic/orders").await.expect_error(404);
    app.call(Method::DELETE, "/topic/orders", None)
        .await
        .expect_error(404);
    post(&app, "/topic/orders", json!({"a": 1}))
        .await
        .expect_error(404);
}

#[tokio::test]
async fn subscriptions_need_a_topic_and_a_queue_and_a_valid_filter() {
    let app = spawn_app(|c| c.dispatch = false).await;
    put(&app, "/topic/t", json!({})).await.expect(201);
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    put(&app, "/topic/none/_subscriptions/q", json!({}))
        .await
        .expect_error(404);
    put(&app, "/topic/t/_subscriptions/none", json!({}))
        .await
        .expect_error(404);
    let msg = put(
        &app,
        "/topic/t/_subscriptions/q",
        json!({"filter": {"detail": {"amount": [{"numeric": [">", "ten"]}]}}}),
    )
    .await
    .expect_error(422);
    assert!(msg.contains("filter.detail.amount"), "{msg}");
    put(
        &app,
        "/topic/t/_subscriptions/q",
        json!({"filter": {"kind": ["a"]}}),
    )
    .await
    .expect(201);
    put(
        &app,
        "/topic/t/_subscriptions/q",
        json!({"filter": {"kind": ["b"]}}),
    )
    .await
    .expect(200);
    let topic = app.get("/topic/t").await.expect(200);
    assert_eq!(topic["subscriptions"][0]["queue"], "q");
    assert_eq!(topic["subscriptions"][0]["filter"], json!({"kind": ["b"]}));
    let of_queue = app.get("/queue/q/_subscriptions").await.expect(200);
    assert_eq!(of_queue["subscriptions"][0]["topic"], "t");
    app.get("/queue/none/_subscriptions")
        .await
        .expect_error(404);
    app.call(Method::DELETE, "/topic/t/_subscriptions/q", None)
        .await
        .expect(200);
    app.call(Method::DELETE, "/topic/t/_subscriptions/q", None)
        .await
        .expect_error(404);
}

/// One publish, three subscribers (two push, one pull), one of them filtered out: each
/// matching queue gets a job of its own naming the same message, and the push deliveries
/// say so in their headers.
#[tokio::test]
async fn a_publish_reaches_every_matching_subscriber_push_and_pull() {
    let a = TestReceiver::always(Reply::ok()).await;
    let b = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("push-a", &a.url, None).await;
    app.create_queue_ok("push-b", &b.url, None).await;
    app.put_queue("pull", &json!({})).await.expect(201);
    app.create_queue_ok("refunds", "http://127.0.0.1:9/hook", None)
        .await;
    put(&app, "/topic/orders", json!({})).await.expect(201);
    subscribe(&app, "orders", "push-a", None).await;
    subscribe(
        &app,
        "orders",
        "push-b",
        Some(json!({"type": [{"prefix": "order."}]})),
    )
    .await;
    subscribe(
        &app,
        "orders",
        "pull",
        Some(json!({"amount": [{"numeric": [">", 100]}]})),
    )
    .await;
    subscribe(
        &app,
        "orders",
        "refunds",
        Some(json!({"type": ["refund.created"]})),
    )
    .await;

    let answer = publish(
        &app,
        "orders",
        json!({"type": "order.created", "amount": 250}),
    )
    .await;
    assert_eq!(answer["queues"], 3, "{answer}");
    let message = answer["id"].as_str().unwrap().to_owned();

    let got_a = a.wait_for(1).await;
    let got_b = b.wait_for(1).await;
    for got in [&got_a[0], &got_b[0]] {
        assert_eq!(got.header("x-hookq-topic"), Some("orders"));
        assert_eq!(got.header("x-hookq-message-id"), Some(message.as_str()));
        assert_eq!(got.body_text(), r#"{"type":"order.created","amount":250}"#);
    }
    assert_ne!(
        got_a[0].job_id(),
        got_b[0].job_id(),
        "a job of its own each"
    );
    let leased = post(&app, "/queue/pull/_lease", json!({"max": 5}))
        .await
        .expect(200);
    let job = &leased["jobs"][0];
    assert_eq!(job["topic"], "orders");
    assert_eq!(job["messageId"], message.as_str());
    assert_eq!(job["job"], json!({"type": "order.created", "amount": 250}));
    let view = app
        .get_job("pull", job["id"].as_str().unwrap())
        .await
        .expect(200);
    assert_eq!(view["messageId"], message.as_str());
    assert_eq!(view["topic"], "orders");
    assert_eq!(app.list("refunds", "READY").await.len(), 0);

    let nothing = publish(&app, "orders", json!({"type": "other", "amount": 1})).await;
    assert_eq!(
        nothing["queues"], 1,
        "only the unfiltered subscriber: {nothing}"
    );
    eventually("published counted", || async {
        (app.get("/topic/orders").await.expect(200)["published"] == 2).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_publish_without_subscribers_is_still_a_publish() {
    let app = spawn_app(|c| c.dispatch = false).await;
    put(&app, "/topic/quiet", json!({})).await.expect(201);
    let answer = publish(&app, "quiet", json!({"a": 1})).await;
    assert_eq!(answer["queues"], 0);
    assert!(answer["id"].is_string());
    // Nothing refers to the message and nothing retains it: it is not kept.
    assert_eq!(
        inspector(&app).await.count(Stored::Messages).await.unwrap(),
        0
    );
}

/// A 60 KB message to 150 queues is stored once: the jobs keep no copy of their own, and
/// the message goes when its last job is done with it.
#[tokio::test]
async fn the_payload_is_stored_once_however_many_queues_it_reaches() {
    let app = spawn_app(|c| c.dispatch = false).await;
    put(&app, "/topic/big", json!({})).await.expect(201);
    for n in 0..150 {
        let queue = format!("q{n}");
        app.put_queue(
            &queue,
            &json!({"target": "http://127.0.0.1:9/hook", "paused": true}),
        )
        .await
        .expect(201);
        subscribe(&app, "big", &queue, None).await;
    }
    let db = inspector(&app).await;
    let before = db.database_bytes().await.unwrap();
    let message = json!({"blob": "x".repeat(60_000)});
    let answer = publish(&app, "big", message).await;
    assert_eq!(answer["queues"], 150);
    let stored = db.payload_bytes().await.unwrap();
    assert!(
        stored < 61_000,
        "{stored} bytes of payload stored for one 60 KB message"
    );
    if !skipped_on_postgres("the file's growth is SQLite's") {
        let grown = db.database_bytes().await.unwrap().saturating_sub(before);
        assert!(grown < 2_000_000, "the database grew by {grown} bytes");
    }
    assert_eq!(db.count(Stored::Messages).await.unwrap(), 1);
    // Each queue's job goes; with the last one, the message goes too.
    for n in 0..150 {
        app.delete_queue(&format!("q{n}")).await.expect(200);
    }
    assert_eq!(db.count(Stored::Jobs).await.unwrap(), 0);
    // Past any later look the sweep may have planned while the jobs were there. The
    // server's own sweep may hold the row a moment (PostgreSQL's skips what is locked).
    let later = hookq::model::now_millis() + 2 * 3_600_000;
    eventually("the message to go with its last job", || async {
        app.store().purge_messages(later, 1000).await.unwrap();
        (db.count(Stored::Messages).await.unwrap() == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_repeated_publish_with_its_key_stores_nothing_and_another_message_is_refused() {
    let app = spawn_app(|c| c.dispatch = false).await;
    put(&app, "/topic/t", json!({})).await.expect(201);
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    subscribe(&app, "t", "q", None).await;
    let keyed = |body: &str, path: &str| {
        app.request(Method::POST, path)
            .header("Idempotency-Key", "k1")
            .body(body.to_owned())
    };
    let first = app.send(keyed(r#"{"a":1}"#, "/topic/t")).await.expect(201);
    let again = app
        .send(keyed(r#"{ "a": 1 }"#, "/topic/t"))
        .await
        .expect(200);
    assert_eq!(again["id"], first["id"]);
    assert_eq!(again["duplicate"], true);
    app.send(keyed(r#"{"a":2}"#, "/topic/t"))
        .await
        .expect_error(409);
    assert_eq!(app.list("q", "READY").await.len(), 1);

    let batch = r#"{"jobs":[{"n":1},{"n":2}]}"#;
    let first = app.send(keyed(batch, "/topic/t/_batch")).await.expect(201);
    assert_eq!(first["queues"], json!([1, 1]));
    let again = app.send(keyed(batch, "/topic/t/_batch")).await.expect(200);
    assert_eq!(again["ids"], first["ids"]);
    app.send(keyed(r#"{"jobs":[{"n":3}]}"#, "/topic/t/_batch"))
        .await
        .expect_error(409);
    assert_eq!(app.list("q", "READY").await.len(), 3);
}

#[tokio::test]
async fn a_batch_publish_is_all_or_nothing_and_checked_like_a_queues_batch() {
    let app = spawn_app(|c| c.dispatch = false).await;
    put(&app, "/topic/t", json!({})).await.expect(201);
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    subscribe(&app, "t", "q", None).await;
    for (body, status) in [
        (json!({"jobs": []}), 422),
        (json!({"jobs": [{"a": 1}, [2]]}), 422),
        (json!([{"a": 1}]), 422),
        (json!({"jobs": [{"a": 1}], "extra": 1}), 422),
    ] {
        post(&app, "/topic/t/_batch", body)
            .await
            .expect_error(status);
    }
    assert_eq!(app.list("q", "READY").await.len(), 0);
    let answer = post(
        &app,
        "/topic/t/_batch",
        json!({"jobs": [{"n": 1}, {"n": 2}]}),
    )
    .await
    .expect(201);
    assert_eq!(answer["ids"].as_array().unwrap().len(), 2);
    assert_eq!(app.list("q", "READY").await.len(), 2);
}

/// A full subscriber (at its `maxQueued`) is skipped: named in the answer, counted, and told
/// as an operational event; the others get their jobs.
#[tokio::test]
async fn a_full_subscriber_is_skipped_and_named_never_blocking_the_others() {
    let events = TestReceiver::always(Reply::ok()).await;
    let target = hookq::events::EventsTarget {
        url: hookq::model::Target::parse(&events.url).unwrap(),
        secret: None,
        scheme: hookq::model::SignatureScheme::Hyper,
    };
    let app = spawn_app(move |c| {
        c.dispatch = false;
        c.events = Some(target);
    })
    .await;
    put(&app, "/topic/t", json!({})).await.expect(201);
    app.put_queue(
        "full",
        &json!({"target": "http://127.0.0.1:9/hook", "maxQueued": 1}),
    )
    .await
    .expect(201);
    app.create_queue_ok("free", "http://127.0.0.1:9/hook", None)
        .await;
    subscribe(&app, "t", "full", None).await;
    subscribe(&app, "t", "free", None).await;
    let first = publish(&app, "t", json!({"n": 1})).await;
    assert_eq!(first["queues"], 2);
    let second = publish(&app, "t", json!({"n": 2})).await;
    assert_eq!(second["queues"], 1, "{second}");
    assert_eq!(second["skipped"], json!(["full"]));
    assert_eq!(app.list("free", "READY").await.len(), 2);
    assert_eq!(app.list("full", "READY").await.len(), 1);
    let told = events
        .wait_until("a topic.subscriber_skipped event", |all| {
            all.iter()
                .any(|e| e.header("x-hookq-event") == Some("topic.subscriber_skipped"))
        })
        .await;
    let event: Value = told
        .iter()
        .find(|e| e.header("x-hookq-event") == Some("topic.subscriber_skipped"))
        .map(|e| serde_json::from_slice(&e.body).unwrap())
        .unwrap();
    assert_eq!(event["data"]["queue"], "full");
    assert_eq!(event["data"]["topic"], "t");
    assert_eq!(event["data"]["messageId"], second["id"]);
    let metrics = app.get("/metrics").await.text();
    for series in [
        r#"hookq_topic_published_total{topic="t"}"#,
        r#"hookq_topic_fanout_jobs_total{topic="t"}"#,
        r#"hookq_topic_skipped_total{topic="t",queue="full"}"#,
    ] {
        assert!(metrics.contains(series), "{series} in /metrics");
    }
}

#[tokio::test]
async fn deleting_a_queue_removes_its_subscriptions() {
    let app = spawn_app(|c| c.dispatch = false).await;
    put(&app, "/topic/t", json!({})).await.expect(201);
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    subscribe(&app, "t", "q", None).await;
    assert_eq!(publish(&app, "t", json!({"n": 1})).await["queues"], 1);
    app.delete_queue("q").await.expect(200);
    assert_eq!(
        app.get("/topic/t").await.expect(200)["subscriptions"],
        json!([])
    );
    assert_eq!(publish(&app, "t", json!({"n": 2})).await["queues"], 0);
    // A queue of the same name made again is not subscribed.
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    assert_eq!(publish(&app, "t", json!({"n": 3})).await["queues"], 0);
}

/// A topic that retains keeps its messages, subscribers or not; a replay backfills a new
/// subscriber with the retained messages its filter matches, in publish order, as new jobs
/// of the same messages.
#[tokio::test]
async fn a_replay_backfills_a_new_subscriber_in_publish_order() {
    let app = spawn_app(|c| c.dispatch = false).await;
    put(&app, "/topic/t", json!({"retain": "1h"}))
        .await
        .expect(201);
    let mut published = Vec::new();
    for n in 0..6 {
        let answer = publish(&app, "t", json!({"n": n, "even": n % 2 == 0})).await;
        assert_eq!(answer["queues"], 0);
        published.push(answer["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(app.get("/topic/t").await.expect(200)["retained"], 6);
    app.create_queue_ok("late", "http://127.0.0.1:9/hook", None)
        .await;
    subscribe(&app, "t", "late", Some(json!({"even": [true]}))).await;
    let replayed = post(
        &app,
        "/topic/t/_subscriptions/late/_replay",
        json!({"since": "1h"}),
    )
    .await
    .expect(201);
    assert_eq!(replayed["requested"], 3);
    let mut jobs = app.list("late", "READY").await;
    jobs.sort_by_key(|job| job["createdAt"].as_i64());
    let messages: Vec<&str> = jobs
        .iter()
        .map(|j| j["messageId"].as_str().unwrap())
        .collect();
    assert_eq!(messages, [&published[0], &published[2], &published[4]]);
    assert_eq!(jobs[1]["job"], json!({"n": 2, "even": true}));

    // A range with nothing in it, and the errors.
    let none = post(
        &app,
        "/topic/t/_subscriptions/late/_replay",
        json!({"since": 0, "until": "2001-01-01T00:00:00Z"}),
    )
    .await
    .expect(201);
    assert_eq!(none["requested"], 0);
    let msg = post(
        &app,
        "/topic/t/_subscriptions/late/_replay",
        json!({"since": "1m", "until": "2h"}),
    )
    .await
    .expect_error(422);
    assert!(msg.contains("until is before since"), "{msg}");
    for body in [
        json!({"since": "yesterday"}),
        json!({}),
        json!({"since": "1h", "x": 1}),
    ] {
        post(&app, "/topic/t/_subscriptions/late/_replay", body)
            .await
            .expect_error(422);
    }
    app.create_queue_ok("other", "http://127.0.0.1:9/hook", None)
        .await;
    post(
        &app,
        "/topic/t/_subscriptions/other/_replay",
        json!({"since": "1h"}),
    )
    .await
    .expect_error(404);

    // A topic that retains nothing replays nothing.
    put(&app, "/topic/plain", json!({})).await.expect(201);
    subscribe(&app, "plain", "other", None).await;
    publish(&app, "plain", json!({"n": 1})).await;
    let plain = post(
        &app,
        "/topic/plain/_subscriptions/other/_replay",
        json!({"since": "1h"}),
    )
    .await
    .expect(201);
    assert_eq!(plain["requested"], 0);
}

/// Standard Webhooks' `webhook-id` is the message id, the same for every subscriber (as
/// Svix does), so a receiver can deduplicate across retries and subscribers.
#[tokio::test]
async fn a_standard_webhooks_delivery_names_the_message() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue(
        "std",
        &json!({
            "target": receiver.url,
            "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "signatureScheme": "standard"
        }),
    )
    .await
    .expect(201);
    put(&app, "/topic/t", json!({})).await.expect(201);
    subscribe(&app, "t", "std", None).await;
    let message = publish(&app, "t", json!({"n": 1})).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].header("webhook-id"), Some(message.as_str()));
    assert_ne!(got[0].job_id(), message, "the job keeps an id of its own");
}

/// Each subscriber keeps an ordering key's order, on its own.
#[tokio::test]
async fn each_subscriber_keeps_the_ordering_keys_order() {
    let a = TestReceiver::always(Reply::ok()).await;
    let b = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("a", &a.url, None).await;
    app.create_queue_ok("b", &b.url, None).await;
    put(&app, "/topic/t", json!({})).await.expect(201);
    subscribe(&app, "t", "a", None).await;
    subscribe(&app, "t", "b", None).await;
    for n in 0..5 {
        app.send(
            app.request(Method::POST, "/topic/t?orderingKey=customer-1")
                .body(json!({"n": n}).to_string()),
        )
        .await
        .expect(201);
    }
    for receiver in [&a, &b] {
        let got = receiver.wait_for(5).await;
        let order: Vec<&str> = got.iter().map(|g| g.body_text()).collect();
        let expected: Vec<String> = (0..5).map(|n| format!(r#"{{"n":{n}}}"#)).collect();
        assert_eq!(order, expected);
    }
}

/// A producer key scoped to a topic's name publishes to it without any right on the
/// subscriber queues; subscribing is admin's.
#[tokio::test]
async fn a_producer_may_publish_to_its_topics_without_rights_on_the_subscribers() {
    let app = spawn_app(|c| {
        c.api_key = Some(hookq::config::ApiKey::new("the-key".into()));
        c.dispatch = false;
    })
    .await;
    app.create_queue_ok("billing", "https://worker.example.com/jobs", None)
        .await;
    put(&app, "/topic/orders-eu", json!({})).await.expect(201);
    subscribe(&app, "orders-eu", "billing", None).await;
    let (_, key) = create_key(&app, "publisher", "producer", Some(&["orders-*"])).await;
    let mut client = app.api.clone();
    client.api_key = Some(key);
    assert_eq!(
        publish(&client, "orders-eu", json!({"n": 1})).await["queues"],
        1
    );
    client
        .enqueue("billing", &json!({"n": 2}))
        .await
        .expect_error(403);
    put(
        &client,
        "/topic/orders-eu/_subscriptions/billing",
        json!({}),
    )
    .await
    .expect_error(403);
    put(&client, "/topic/orders-new", json!({}))
        .await
        .expect_error(403);
    post(&client, "/topic/other", json!({"n": 3}))
        .await
        .expect_error(403);
}

/// The message ids a publish hands out are unique, and each subscriber's jobs are its own.
#[tokio::test]
async fn every_publish_has_a_message_id_of_its_own() {
    let app = spawn_app(|c| c.dispatch = false).await;
    put(&app, "/topic/t", json!({})).await.expect(201);
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    subscribe(&app, "t", "q", None).await;
    let mut ids = HashSet::new();
    for n in 0..20 {
        ids.insert(publish(&app, "t", json!({"n": n})).await["id"].to_string());
    }
    assert_eq!(ids.len(), 20);
}

/// A pull subscriber's lease that runs out puts its job back for another worker: the job
/// is the subscriber's, with its attempts, and still names its message.
#[tokio::test]
async fn a_pull_subscribers_expired_lease_offers_the_message_again() {
    let app = spawn_app(|c| c.delivery.lease_timeout = std::time::Duration::from_secs(30)).await;
    app.put_queue("pull", &json!({})).await.expect(201);
    put(&app, "/topic/t", json!({})).await.expect(201);
    subscribe(&app, "t", "pull", None).await;
    let message = publish(&app, "t", json!({"n": 1})).await["id"].clone();
    let first = post(
        &app,
        "/queue/pull/_lease",
        json!({"max": 1, "visibility": "1s"}),
    )
    .await
    .expect(200);
    assert_eq!(first["jobs"][0]["attempt"], 1);
    let again = eventually("the lease to run out and the job to come back", || async {
        let leased = post(&app, "/queue/pull/_lease", json!({"max": 1, "wait": "1s"}))
            .await
            .expect(200);
        (!leased["jobs"].as_array().unwrap().is_empty()).then_some(leased)
    })
    .await;
    assert_eq!(again["jobs"][0]["id"], first["jobs"][0]["id"]);
    assert_eq!(again["jobs"][0]["attempt"], 2);
    assert_eq!(again["jobs"][0]["messageId"], message);
}

/// One subscriber's open breaker holds its own jobs only: the others deliver.
#[tokio::test]
async fn a_subscribers_open_breaker_does_not_hold_the_others() {
    let failing = TestReceiver::always(Reply::status(503)).await;
    let healthy = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|c| c.delivery.breaker_threshold = 2).await;
    app.put_queue("down", &json!({"target": failing.url, "maxAttempts": 50}))
        .await
        .expect(201);
    app.create_queue_ok("up", &healthy.url, None).await;
    put(&app, "/topic/t", json!({})).await.expect(201);
    subscribe(&app, "t", "down", None).await;
    subscribe(&app, "t", "up", None).await;
    for n in 0..5 {
        publish(&app, "t", json!({"n": n})).await;
    }
    eventually("the failing subscriber's breaker to open", || async {
        let stats = app.get("/queue/down/_stats").await.expect(200);
        (stats["breaker"] == "open").then_some(())
    })
    .await;
    healthy.wait_for(5).await;
    assert_eq!(app.list("down", "READY").await.len(), 5, "kept, not lost");
}

/// Queues deleted while messages are published: every publish answers 201 or fails
/// cleanly, never stores a job in a deleted queue, and the surviving subscriber gets every
/// message.
#[tokio::test]
async fn queues_deleted_while_publishing_leave_every_publish_whole() {
    let app = spawn_app(|c| c.dispatch = false).await;
    put(&app, "/topic/t", json!({})).await.expect(201);
    app.create_queue_ok("stays", "http://127.0.0.1:9/hook", None)
        .await;
    subscribe(&app, "t", "stays", None).await;
    for n in 0..10 {
        let queue = format!("goes{n}");
        app.create_queue_ok(&queue, "http://127.0.0.1:9/hook", None)
            .await;
        subscribe(&app, "t", &queue, None).await;
    }
    let publisher = {
        let client = app.api.clone();
        tokio::spawn(async move {
            let mut answers = Vec::new();
            for n in 0..100 {
                answers.push(publish(&client, "t", json!({"n": n})).await["queues"].clone());
            }
            answers
        })
    };
    for n in 0..10 {
        app.delete_queue(&format!("goes{n}")).await.expect(200);
    }
    let answers = publisher.await.unwrap();
    assert!(
        answers
            .iter()
            .all(|n| n.as_u64().is_some_and(|n| (1..=11).contains(&n)))
    );
    assert_eq!(app.list("stays", "READY").await.len(), 100);
    let db = inspector(&app).await;
    assert_eq!(
        db.count(Stored::Jobs).await.unwrap(),
        100,
        "no job of a deleted queue"
    );
}

/// On a database several nodes share, a subscription made on one node is used by the next
/// publish on another, at once.
#[tokio::test]
async fn a_subscription_made_on_one_node_is_used_by_a_publish_on_another_at_once() {
    let Some(db) = crate::postgres::TestDatabase::create("topics across nodes").await else {
        return;
    };
    let on = |url: String| {
        spawn_app(move |c| {
            c.dispatch = false;
            c.database = hookq::config::Database::Postgres(url);
        })
    };
    let a = on(db.url.clone()).await;
    let b = on(db.url.clone()).await;
    a.create_queue_ok("q1", "http://127.0.0.1:9/hook", None)
        .await;
    a.create_queue_ok("q2", "http://127.0.0.1:9/hook", None)
        .await;
    put(&a, "/topic/t", json!({})).await.expect(201);
    subscribe(&a, "t", "q1", None).await;
    assert_eq!(publish(&b, "t", json!({"n": 1})).await["queues"], 1);
    subscribe(&a, "t", "q2", Some(json!({"n": [2]}))).await;
    assert_eq!(publish(&b, "t", json!({"n": 2})).await["queues"], 2);
    assert_eq!(publish(&b, "t", json!({"n": 3})).await["queues"], 1);
    a.call(Method::DELETE, "/topic/t/_subscriptions/q1", None)
        .await
        .expect(200);
    assert_eq!(publish(&b, "t", json!({"n": 2})).await["queues"], 1);
    a.delete_queue("q2").await.expect(200);
    assert_eq!(publish(&b, "t", json!({"n": 2})).await["queues"], 0);
}

/// A subscriber's job whose attempts are spent is a dead letter with the message's payload
/// and id; the message stays while the dead letter needs it, and a replay puts the same
/// message back.
#[tokio::test]
async fn a_subscribers_dead_letter_keeps_its_message_until_it_is_gone() {
    let failing = TestReceiver::always(Reply::status(500)).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({"target": failing.url, "maxAttempts": 1}))
        .await
        .expect(201);
    put(&app, "/topic/t", json!({})).await.expect(201);
    subscribe(&app, "t", "q", None).await;
    let message = publish(&app, "t", json!({"order": 7})).await["id"].clone();
    failing.wait_for(1).await;
    let dead = eventually("the dead letter", || async {
        let page = app.get("/admin/dlq?include_payload=true").await.expect(200);
        page["messages"].as_array().and_then(|m| m.first().cloned())
    })
    .await;
    assert_eq!(dead["message_id"], message);
    assert_eq!(dead["topic"], "t");
    assert_eq!(dead["payload"], json!({"order": 7}));
    let id = dead["id"].as_str().unwrap().to_owned();
    let job = app.get_job("q", &id).await.expect(200);
    assert_eq!(job["job"], json!({"order": 7}));
    let db = inspector(&app).await;
    let later = hookq::model::now_millis() + 2 * 3_600_000;
    app.store().purge_messages(later, 1000).await.unwrap();
    assert_eq!(
        db.count(Stored::Messages).await.unwrap(),
        1,
        "kept for its dead letter"
    );

    failing.set_default(Reply::ok());
    post(&app, "/admin/dlq/replay", json!({"ids": [id]}))
        .await
        .expect(200);
    let delivered = failing
        .wait_until("the replayed delivery", |all| {
            all.iter().any(|r| r.replied == Some(200))
        })
        .await;
    let last = delivered.iter().find(|r| r.replied == Some(200)).unwrap();
    assert_eq!(last.header("x-hookq-message-id"), message.as_str());
    assert_eq!(last.body_text(), r#"{"order":7}"#);
}

/// The jobs of `message` as `GET /topic/{topic}/messages/{id}` lists them once `settled`
/// holds for them (polled: deliveries and dead-lettering happen on the server's time).
async fn message_once(
    app: &ApiClient,
    topic: &str,
    message: &str,
    what: &str,
    settled: impl Fn(&[Value]) -> bool,
) -> Value {
    eventually(what, || async {
        let answer = app
            .get(&format!("/topic/{topic}/messages/{message}"))
            .await
            .expect(200);
        let jobs = answer["jobs"].as_array().cloned().unwrap_or_default();
        settled(&jobs).then_some(answer)
    })
    .await
}

/// One message, three subscribers that match it and one whose filter does not: the
/// message's answer lists the delivered job (kept by `keepDelivered`), the dead letter and
/// the job still waiting, by queue, and nothing of the subscriber it did not match.
#[tokio::test]
async fn a_messages_answer_lists_its_job_in_every_subscriber_that_got_one() {
    let worker = TestReceiver::always(Reply::ok()).await;
    let failing = TestReceiver::always(Reply::with_body(500, "the ledger is down")).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue(
        "analytics",
        &json!({"target": worker.url, "keepDelivered": "1h"}),
    )
    .await
    .expect(201);
    app.put_queue("billing", &json!({"target": failing.url, "maxAttempts": 1}))
        .await
        .expect(201);
    app.create_queue_ok("search", &worker.url, None).await;
    app.call(Method::POST, "/queue/search/_pause", None)
        .await
        .expect(200);
    app.create_queue_ok("refunds", &worker.url, None).await;
    put(&app, "/topic/orders", json!({"retain": "1h"}))
        .await
        .expect(201);
    for queue in ["analytics", "billing", "search"] {
        subscribe(&app, "orders", queue, None).await;
    }
    subscribe(&app, "orders", "refunds", Some(json!({"kind": ["refund"]}))).await;

    let published = publish(&app, "orders", json!({"kind": "paid", "amount": 12})).await;
    assert_eq!(published["queues"], 3);
    let id = published["id"].as_str().unwrap().to_owned();
    let answer = message_once(
        &app,
        "orders",
        &id,
        "a delivery and a dead letter",
        |jobs| {
            jobs.len() == 3 && jobs[0]["place"] == "delivered" && jobs[1]["place"] == "dead_letter"
        },
    )
    .await;

    assert_eq!(answer["ok"], true);
    assert_eq!(answer["has_more"], false);
    let message = &answer["message"];
    assert_eq!(message["id"], id.as_str());
    assert_eq!(message["topic"], "orders");
    assert_eq!(message["kept"], true);
    assert_eq!(message["payload"], json!({"kind": "paid", "amount": 12}));
    assert_eq!(message["priority"], 0);
    let published_at = message["publishedAt"].as_i64().unwrap();
    assert_eq!(
        message["retainUntil"].as_i64(),
        Some(published_at + 3_600_000)
    );

    let jobs = answer["jobs"].as_array().unwrap();
    let queues: Vec<&str> = jobs.iter().map(|j| j["queue"].as_str().unwrap()).collect();
    assert_eq!(queues, ["analytics", "billing", "search"]);
    let delivered = &jobs[0];
    assert_eq!(delivered["status"], "DELIVERED");
    assert_eq!(delivered["attempts"], 1);
    assert_eq!(delivered["lastStatus"], 200);
    assert!(delivered["deliveredAt"].as_i64().unwrap() >= published_at);
    assert_eq!(
        delivered["id"],
        worker.received()[0].job_id(),
        "the job the worker got"
    );
    let dead = &jobs[1];
    assert_eq!(dead["status"], "ERROR");
    assert_eq!(dead["deadLetterState"], "pending");
    assert_eq!(dead["attempts"], 1);
    assert_eq!(dead["lastStatus"], 500);
    let error = dead["lastError"].as_str().unwrap();
    assert!(error.contains("the ledger is down"), "{error}");
    assert!(error.chars().count() <= 200, "{error}");
    let waiting = &jobs[2];
    assert_eq!(waiting["place"], "live");
    assert_eq!(waiting["status"], "READY");
    assert_eq!(waiting["attempts"], 0);
    let listed = app.list("search", "READY").await;
    assert_eq!(waiting["id"], listed[0]["id"]);
    for job in jobs {
        assert!(job["createdAt"].as_i64().unwrap() >= published_at - 1000);
    }
}

/// An id nothing refers to is a 404, one that is not a UUID too, and a message asked
/// under another topic's name a 404; a message whose row is gone while jobs of it remain
/// still answers, with what is known.
#[tokio::test]
async fn a_message_is_found_by_its_id_under_its_own_topic_only() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    put(&app, "/topic/t", json!({})).await.expect(201);
    put(&app, "/topic/other", json!({})).await.expect(201);
    subscribe(&app, "t", "q", None).await;
    let id = publish(&app, "t", json!({"n": 1})).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = app
        .get(&format!("/topic/t/messages/{id}"))
        .await
        .expect(200);
    assert_eq!(answer["message"]["retainUntil"], Value::Null, "retains 0s");
    assert_eq!(answer["jobs"][0]["status"], "READY");

    let unknown = "01936c2e-1f0a-7c3e-9d4b-8a1f2e3d4c5b";
    let msg = app
        .get(&format!("/topic/t/messages/{unknown}"))
        .await
        .expect_error(404);
    assert!(msg.contains("message not found"), "{msg}");
    app.get(&format!("/topic/other/messages/{id}"))
        .await
        .expect_error(404);
    // An id that is not one is no message either, as a job's route answers.
    app.get("/topic/t/messages/not-a-uuid")
        .await
        .expect_error(404);

    inspector(&app).await.delete_messages().await.unwrap();
    let answer = app
        .get(&format!("/topic/t/messages/{id}"))
        .await
        .expect(200);
    assert_eq!(
        answer["message"],
        json!({"id": id, "topic": "t", "kept": false, "retainUntil": null})
    );
    assert_eq!(answer["jobs"].as_array().unwrap().len(), 1);
}

/// A reader key of the topic reads its messages; a reader of another topic may not.
#[tokio::test]
async fn a_message_is_read_by_a_reader_of_its_topic_only() {
    let app = spawn_app(|c| {
        c.api_key = Some(hookq::config::ApiKey::new("the-key".into()));
        c.dispatch = false;
    })
    .await;
    app.create_queue_ok("billing", "https://worker.example.com/jobs", None)
        .await;
    put(&app, "/topic/orders", json!({})).await.expect(201);
    subscribe(&app, "orders", "billing", None).await;
    let id = publish(&app, "orders", json!({"n": 1})).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/topic/orders/messages/{id}");
    let (_, ours) = create_key(&app, "dashboard", "reader", Some(&["orders"])).await;
    let (_, theirs) = create_key(&app, "elsewhere", "reader", Some(&["payments"])).await;
    let mut client = app.api.clone();
    client.api_key = Some(ours);
    let answer = client.get(&path).await.expect(200);
    assert_eq!(answer["jobs"][0]["queue"], "billing");
    client.api_key = Some(theirs);
    client.get(&path).await.expect_error(403);
}
