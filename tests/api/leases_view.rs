//! The pull workers in view (issue 44): `GET /admin/leases` lists the pull leases held
//! (who holds each, since when, until when, extended or not) and the lease requests waiting
//! per node and queue; readers of every queue or of the one asked about; bad input in the
//! API's shape. Runs on SQLite and, through the suite, on PostgreSQL; two nodes on one
//! PostgreSQL database see each other's waiting requests.
//!
//! Nothing sleeps to synchronise: a waiting request is awaited until the route reports it.

use std::path::Path;

use hookq::config::{ApiKey, Config};
use hookq::model::now_millis;
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{
    ApiClient, BinaryApp, TestApp, create_key, eventually, payload, spawn_app, suite_on_postgres,
};
use crate::postgres::TestDatabase;

const KEY: &str = "the-configured-api-key-0123456789";

fn with_key(config: &mut Config) {
    config.api_key = Some(ApiKey::new(KEY.into()));
}

fn as_key(app: &TestApp, key: &str) -> ApiClient {
    let mut client = app.api.clone();
    client.api_key = Some(key.to_owned());
    client
}

async fn lease(api: &ApiClient, queue: &str, body: Value) -> Vec<Value> {
    let answer = api
        .call(
            Method::POST,
            &format!("/queue/{queue}/_lease"),
            Some(body.to_string().as_bytes()),
        )
        .await
        .expect(200);
    answer["jobs"].as_array().expect("jobs").clone()
}

async fn answer(api: &ApiClient, queue: &str, job: &Value, verb: &str, body: Value) -> Value {
    let id = job["id"].as_str().expect("id");
    api.call(
        Method::POST,
        &format!("/queue/{queue}/{id}/_{verb}"),
        Some(body.to_string().as_bytes()),
    )
    .await
    .expect(200)
}

/// The leases `GET /admin/leases{query}` lists, by job id.
fn by_id(page: &Value) -> Vec<(String, Value)> {
    let mut leases: Vec<(String, Value)> = page["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .map(|l| (l["id"].as_str().expect("id").to_owned(), l.clone()))
        .collect();
    leases.sort_by(|a, b| a.0.cmp(&b.0));
    leases
}

#[tokio::test]
async fn a_workers_leases_are_listed_with_its_key_since_when_and_until_when() {
    let app = spawn_app(with_key).await;
    app.put_queue("work", &json!({})).await.expect(201);
    let (key_id, key) = create_key(&app, "billing-worker", "consumer", Some(&["work"])).await;
    let worker = as_key(&app, &key);
    let first = app.enqueue_ok("work", &payload(1)).await;
    let second = app.enqueue_ok("work", &payload(2)).await;

    let before = now_millis();
    let jobs = lease(&worker, "work", json!({"max": 2, "visibility": "5m"})).await;
    let after = now_millis();
    assert_eq!(jobs.len(), 2);

    let page = app.get("/admin/leases").await.expect(200);
    assert_eq!(page["ok"], true, "{page}");
    assert_eq!(page["next_cursor"], Value::Null, "{page}");
    let leases = by_id(&page);
    let mut ids = vec![first.clone(), second.clone()];
    ids.sort();
    assert_eq!(
        leases.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
        ids
    );
    for (_, held) in &leases {
        assert_eq!(held["queue"], "work", "{held}");
        assert_eq!(held["attempt"], 1, "{held}");
        assert_eq!(held["holder"], format!("key:{key_id}"), "{held}");
        assert_eq!(held["holderName"], "billing-worker", "{held}");
        assert_eq!(held["extended"], false, "{held}");
        let at = held["leasedAt"].as_i64().expect("leasedAt");
        let until = held["leasedUntil"].as_i64().expect("leasedUntil");
        assert!(before <= at && at <= after, "{held}");
        let now = now_millis();
        assert!(at <= now && now <= until, "{held}");
        assert_eq!(until, at + 300_000, "{held}");
    }

    // An extension shows, with the new expiry.
    let job = &jobs[0];
    let extended = answer(
        &worker,
        "work",
        job,
        "extend",
        json!({"leaseId": job["leaseId"], "visibility": "1h"}),
    )
    .await;
    let page = app.get("/admin/leases?queue=work").await.expect(200);
    let held = by_id(&page)
        .into_iter()
        .find(|(id, _)| Some(id.as_str()) == job["id"].as_str())
        .expect("the extended lease")
        .1;
    assert_eq!(held["extended"], true, "{held}");
    assert_eq!(held["leasedUntil"], extended["leaseExpiresAt"], "{held}");

    // An ack ends it; the other stays.
    answer(
        &worker,
        "work",
        job,
        "ack",
        json!({"leaseId": job["leaseId"]}),
    )
    .await;
    let page = app.get("/admin/leases").await.expect(200);
    let left: Vec<String> = by_id(&page).into_iter().map(|(id, _)| id).collect();
    assert_eq!(left, [jobs[1]["id"].as_str().expect("id").to_owned()]);

    // The configured key is named as the audit log names it.
    app.enqueue_ok("work", &payload(3)).await;
    lease(&app.api, "work", json!({})).await;
    let page = app.get("/admin/leases").await.expect(200);
    let names: Vec<&str> = page["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .filter_map(|l| l["holderName"].as_str())
        .collect();
    assert!(names.contains(&"API key"), "{page}");
}

#[tokio::test]
async fn leases_page_soonest_expiry_first() {
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({})).await.expect(201);
    for n in 0..5 {
        app.enqueue_ok("q", &payload(n)).await;
    }
    // Longer leases first, so expiry order is not lease order.
    for visibility in ["5m", "4m", "3m", "2m", "1m"] {
        lease(&app.api, "q", json!({"visibility": visibility})).await;
    }
    let mut seen = Vec::new();
    let mut query = "/admin/leases?limit=2".to_owned();
    loop {
        let page = app.get(&query).await.expect(200);
        for held in page["leases"].as_array().expect("leases") {
            seen.push(held["leasedUntil"].as_i64().expect("leasedUntil"));
            assert_eq!(held["holder"], "open", "{held}");
        }
        match page["next_cursor"].as_str() {
            Some(cursor) => query = format!("/admin/leases?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
}

#[tokio::test]
async fn a_waiting_lease_request_shows_per_node_and_queue_until_it_is_served() {
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({})).await.expect(201);
    let waiting = {
        let api = app.api.clone();
        tokio::spawn(async move { lease(&api, "q", json!({"wait": "30s"})).await })
    };
    let shown = eventually("the waiting request in the view", || async {
        let page = app.get("/admin/leases?queue=q").await.expect(200);
        let waiting = page["waiting"].as_array().expect("waiting").clone();
        (!waiting.is_empty()).then_some(waiting)
    })
    .await;
    // Alone (SQLite) the node is `this node`; on a shared database its id.
    let node = if suite_on_postgres() {
        shown[0]["node"].as_str().expect("node").to_owned()
    } else {
        "this node".to_owned()
    };
    assert_eq!(
        shown,
        [json!({"node": node, "thisNode": true, "queue": "q", "requests": 1})]
    );
    let id = app.enqueue_ok("q", &payload(1)).await;
    let served = waiting.await.expect("the lease task");
    assert_eq!(served[0]["id"], id);
    let page = app.get("/admin/leases").await.expect(200);
    assert_eq!(page["waiting"], json!([]), "{page}");
    assert_eq!(by_id(&page).len(), 1, "{page}");
}

#[tokio::test]
async fn readers_of_every_queue_or_of_the_queue_asked_may_look_and_bad_input_is_refused() {
    let app = spawn_app(with_key).await;
    for name in ["work", "other"] {
        app.put_queue(name, &json!({})).await.expect(201);
    }
    let (_, all) = create_key(&app, "all-reader", "reader", Some(&["*"])).await;
    let (_, work) = create_key(&app, "work-reader", "reader", Some(&["work"])).await;
    let (_, consumer) = create_key(&app, "worker", "consumer", Some(&["*"])).await;
    let (_, admin) = create_key(&app, "ops", "admin", None).await;

    as_key(&app, &all).get("/admin/leases").await.expect(200);
    as_key(&app, &admin).get("/admin/leases").await.expect(200);
    app.get("/admin/leases").await.expect(200);
    as_key(&app, &work)
        .get("/admin/leases?queue=work")
        .await
        .expect(200);
    as_key(&app, &work)
        .get("/admin/leases?queue=other")
        .await
        .expect_error(403);
    as_key(&app, &work)
        .get("/admin/leases")
        .await
        .expect_error(403);
    as_key(&app, &consumer)
        .get("/admin/leases")
        .await
        .expect_error(403);

    for (query, status) in [
        ("?limit=0", 422),
        ("?limit=many", 422),
        ("?cursor=nope", 400),
        ("?queue=nowhere", 404),
        ("?queue=not%20a%20name", 404),
    ] {
        app.get(&format!("/admin/leases{query}"))
            .await
            .expect_error(status);
    }
    // A cursor of another listing is not one of this one's.
    let audit_cursor = "QQAAAAAAAAAB";
    app.get(&format!("/admin/leases?cursor={audit_cursor}"))
        .await
        .expect_error(400);
}

#[tokio::test]
async fn a_request_waiting_on_another_node_is_seen_from_this_one() {
    let Some(db) = TestDatabase::create("the leases view across nodes").await else {
        return;
    };
    let mut a = BinaryApp::start(Path::new(&db.url), &[]).await;
    let mut b = BinaryApp::start(Path::new(&db.url), &[]).await;
    a.put_queue("q", &json!({})).await.expect(201);
    eventually("q known to b", || async {
        (b.get("/queue/q/_stats").await.status == 200).then_some(())
    })
    .await;
    let waiting = {
        let api = b.api.clone();
        tokio::spawn(async move { lease(&api, "q", json!({"wait": "30s"})).await })
    };
    let from_a = eventually("b's waiting request seen from a", || async {
        let page = a.get("/admin/leases").await.expect(200);
        let waiting = page["waiting"].as_array().expect("waiting").clone();
        (!waiting.is_empty()).then_some(waiting)
    })
    .await;
    assert_eq!(from_a.len(), 1, "{from_a:?}");
    assert_eq!(from_a[0]["queue"], "q");
    assert_eq!(from_a[0]["requests"], 1);
    assert_eq!(from_a[0]["thisNode"], false);
    let on_b = b.get("/admin/leases").await.expect(200);
    assert_eq!(on_b["waiting"][0]["thisNode"], true, "{on_b}");
    assert_eq!(on_b["waiting"][0]["node"], from_a[0]["node"], "{on_b}");

    // Served on b, the lease held is seen from a, and the request leaves the view.
    let id = a.enqueue_ok("q", &payload(1)).await;
    let served = waiting.await.expect("the lease task");
    assert_eq!(served[0]["id"], id);
    let page = a.get("/admin/leases").await.expect(200);
    assert_eq!(page["leases"][0]["id"], id, "{page}");
    eventually("the request gone from a's view", || async {
        let page = a.get("/admin/leases").await.expect(200);
        (page["waiting"] == json!([])).then_some(())
    })
    .await;
    a.kill_9().await;
    b.kill_9().await;
    db.drop_database().await;
}
