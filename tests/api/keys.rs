//! Scoped API keys: each role gets exactly its routes on its queues on every route family
//! (system, queues, settings, stats, batch, schedules, jobs, dead letters, keys), 403 beyond,
//! 401 for unknown and revoked keys (at once, and on a second node of one PostgreSQL
//! database), the `/admin/keys` routes' validation, `HOOKQ_API_KEY_PREVIOUS` and
//! `HOOKQ_JWT_MAX_LIFETIME`.

use std::time::Duration;

use hookq::config::{ApiKey, Config, Database};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::helpers::{ApiClient, ApiResponse, TestApp, create_key, spawn_app};
use crate::postgres::TestDatabase;

const KEY: &str = "the-configured-api-key-0123456789";

fn with_key(config: &mut Config) {
    config.api_key = Some(ApiKey::new(KEY.into()));
    config.dispatch = false;
}

/// `app`'s address with `key` as the credentials.
fn as_key(app: &TestApp, key: &str) -> ApiClient {
    let mut client = app.api.clone();
    client.api_key = Some(key.to_owned());
    client
}

/// Every route, on the in-scope queue `billing-eu` (or beside it), and the roles that may
/// call it (besides admin, which may call everything). Written from docs/security.md, not
/// from the code's table, so that the two are checked against each other.
fn routes(job: &str) -> Vec<(Method, String, Option<Value>, &'static [&'static str])> {
    const ANY: &[&str] = &["producer", "consumer", "reader", "reader-all"];
    const READ: &[&str] = &["reader", "reader-all"];
    const ALL_READ: &[&str] = &["reader-all"];
    const PRODUCE: &[&str] = &["producer"];
    const STATUS: &[&str] = &["producer", "consumer", "reader", "reader-all"];
    const CONSUME: &[&str] = &["consumer"];
    const ADMIN: &[&str] = &[];
    let q = "/queue/billing-eu";
    let t = "/topic/billing-eu";
    let none = "0190a0b0-0000-7000-8000-000000000000";
    vec![
        // system
        (Method::GET, "/".into(), None, ANY),
        (Method::GET, "/metrics".into(), None, ALL_READ),
        // queues
        (Method::GET, "/queue".into(), None, ANY),
        (Method::POST, q.into(), Some(json!({"n": 1})), PRODUCE),
        (Method::GET, format!("{q}?status=READY"), None, READ),
        (
            Method::PUT,
            "/queue/billing-new".into(),
            Some(json!({"target": "https://w.example/x"})),
            ADMIN,
        ),
        (Method::DELETE, "/queue/billing-gone".into(), None, ADMIN),
        // settings
        (Method::GET, format!("{q}/_settings"), None, READ),
        (
            Method::PATCH,
            q.into(),
            Some(json!({"maxAttempts": 5})),
            ADMIN,
        ),
        (Method::POST, format!("{q}/_pause"), None, ADMIN),
        (Method::POST, format!("{q}/_close-breaker"), None, ADMIN),
        (Method::POST, format!("{q}/_resume"), None, ADMIN),
        // stats
        (Method::GET, format!("{q}/_stats"), None, READ),
        // batch
        (
            Method::POST,
            format!("{q}/_batch"),
            Some(json!([{"n": 2}])),
            PRODUCE,
        ),
        // schedules
        (Method::GET, format!("{q}/_schedules"), None, READ),
        (Method::GET, format!("{q}/_schedules/nightly"), None, READ),
        (
            Method::PUT,
            format!("{q}/_schedules/hourly"),
            Some(json!({"cron": "0 * * * *", "job": {"n": 3}})),
            ADMIN,
        ),
        (
            Method::POST,
            format!("{q}/_schedules/nightly/_pause"),
            None,
            ADMIN,
        ),
        (
            Method::POST,
            format!("{q}/_schedules/nightly/_resume"),
            None,
            ADMIN,
        ),
        (Method::DELETE, format!("{q}/_schedules/none"), None, ADMIN),
        // jobs
        (Method::GET, format!("{q}/{job}"), None, STATUS),
        (Method::POST, format!("{q}/{none}/_cancel"), None, ADMIN),
        (Method::POST, format!("{q}/{none}/_retry"), None, ADMIN),
        (
            Method::POST,
            format!("{q}/_jobs/bulk"),
            Some(json!({"action": "cancel", "ids": [none]})),
            ADMIN,
        ),
        // pull consumers (billing-eu pushes: an allowed key hears 409, not 403)
        (Method::POST, format!("{q}/_lease"), None, CONSUME),
        (
            Method::POST,
            format!("{q}/{none}/_ack"),
            Some(json!({"leaseId": "1-2-3"})),
            CONSUME,
        ),
        (
            Method::POST,
            format!("{q}/{none}/_nack"),
            Some(json!({"leaseId": "1-2-3"})),
            CONSUME,
        ),
        (
            Method::POST,
            format!("{q}/{none}/_extend"),
            Some(json!({"leaseId": "1-2-3", "visibility": "1m"})),
            CONSUME,
        ),
        // dead letters
        (Method::GET, "/admin/dlq".into(), None, ALL_READ),
        (Method::GET, "/admin/dlq/stats".into(), None, ALL_READ),
        (Method::GET, "/admin/dlq/groups".into(), None, ALL_READ),
        // narrowed to one queue: that queue's readers
        (
            Method::GET,
            "/admin/dlq/stats?queue=billing-eu".into(),
            None,
            READ,
        ),
        (
            Method::GET,
            "/admin/dlq/groups?queue=billing-eu".into(),
            None,
            READ,
        ),
        (
            Method::GET,
            "/admin/jobs?id=0190a0b0".into(),
            None,
            ALL_READ,
        ),
        (Method::GET, "/admin/search?text=x".into(), None, ALL_READ),
        (
            Method::GET,
            "/admin/search?queue=billing-eu&text=x".into(),
            None,
            READ,
        ),
        (
            Method::POST,
            "/admin/dlq/replayed".into(),
            Some(json!({"ids": [none]})),
            ALL_READ,
        ),
        (Method::GET, "/admin/queues/stats".into(), None, ALL_READ),
        (Method::GET, "/admin/queues/health".into(), None, ALL_READ),
        (
            Method::GET,
            "/admin/queues/series?range=7d".into(),
            None,
            ALL_READ,
        ),
        // narrowed to one queue: that queue's readers
        (
            Method::GET,
            "/admin/queues/series?range=6h&queue=billing-eu".into(),
            None,
            READ,
        ),
        (
            Method::POST,
            "/admin/dlq/replay".into(),
            Some(json!({"ids": [none]})),
            ADMIN,
        ),
        (
            Method::POST,
            "/admin/dlq/acknowledge".into(),
            Some(json!({"ids": [none]})),
            ADMIN,
        ),
        (Method::DELETE, format!("/admin/dlq/{none}"), None, ADMIN),
        (
            Method::DELETE,
            "/admin/dlq?queue=billing-eu".into(),
            None,
            ADMIN,
        ),
        // keys
        (Method::GET, "/admin/keys".into(), None, ADMIN),
        (Method::DELETE, format!("/admin/keys/{none}"), None, ADMIN),
        // the audit log
        (Method::GET, "/admin/audit".into(), None, ADMIN),
        // the pull workers in view: every queue's readers, or the queue's when narrowed
        (Method::GET, "/admin/leases".into(), None, ALL_READ),
        (
            Method::GET,
            "/admin/leases?queue=billing-eu".into(),
            None,
            READ,
        ),
        // topics: a key's names cover topics; routing is admin's
        (Method::POST, t.into(), Some(json!({"n": 1})), PRODUCE),
        (
            Method::POST,
            format!("{t}/_batch"),
            Some(json!({"jobs": [{"n": 2}]})),
            PRODUCE,
        ),
        (Method::GET, t.into(), None, READ),
        (Method::GET, "/topics".into(), None, ALL_READ),
        (Method::GET, format!("{q}/_subscriptions"), None, READ),
        (
            Method::PUT,
            "/topic/billing-new".into(),
            Some(json!({})),
            ADMIN,
        ),
        (
            Method::PATCH,
            t.into(),
            Some(json!({"retain": "1h"})),
            ADMIN,
        ),
        (
            Method::PUT,
            format!("{t}/_subscriptions/billing-eu"),
            Some(json!({})),
            ADMIN,
        ),
        (
            Method::POST,
            format!("{t}/_subscriptions/billing-eu/_replay"),
            Some(json!({"since": "1h"})),
            ADMIN,
        ),
        (
            Method::DELETE,
            format!("{t}/_subscriptions/emails"),
            None,
            ADMIN,
        ),
        (Method::DELETE, "/topic/billing-gone".into(), None, ADMIN),
    ]
}

async fn send(
    client: &ApiClient,
    method: &Method,
    path: &str,
    body: &Option<Value>,
) -> ApiResponse {
    let bytes = body.as_ref().map(|b| b.to_string().into_bytes());
    client.call(method.clone(), path, bytes.as_deref()).await
}

#[tokio::test]
async fn each_role_gets_exactly_its_routes_on_every_route_family() {
    let app = spawn_app(with_key).await;
    for queue in ["billing-eu", "emails"] {
        app.create_queue_ok(queue, "https://worker.example.com/jobs", None)
            .await;
    }
    let job = app.enqueue_ok("billing-eu", &json!({"first": true})).await;
    for topic in ["billing-eu", "emails"] {
        app.call(Method::PUT, &format!("/topic/{topic}"), Some(b"{}"))
            .await
            .expect(201);
    }
    let other_job = app.enqueue_ok("emails", &json!({"other": true})).await;
    app.put_schedule(
        "billing-eu",
        "nightly",
        &json!({"cron": "0 3 * * *", "job": {"n": 0}}),
    )
    .await
    .expect(201);

    let mut keys = Vec::new();
    for (label, role, queues) in [
        ("producer", "producer", Some(&["billing-*"][..])),
        ("consumer", "consumer", Some(&["billing-*"][..])),
        ("reader", "reader", Some(&["billing-eu", "other"][..])),
        ("reader-all", "reader", Some(&["*"][..])),
        ("admin", "admin", None),
    ] {
        let (_, key) = create_key(&app, label, role, queues).await;
        keys.push((label, as_key(&app, &key)));
    }

    // Admin last: its changes (pausing, a new queue) must not change what the others see.
    for (label, client) in &keys {
        for (method, path, body, allowed) in routes(&job) {
            let may = *label == "admin" || allowed.contains(label);
            let response = send(client, &method, &path, &body).await;
            if may {
                assert!(
                    ![401, 403].contains(&response.status),
                    "{label} may {method} {path}: {} {}",
                    response.status,
                    response.text()
                );
            } else {
                let msg = response.expect_error(403);
                assert!(
                    msg.contains(label.trim_end_matches("-all")),
                    "{label}: {msg}"
                );
            }
            // The same route on a queue outside the key's scope: 403 for every scoped role
            // but admin, and for reader-all (every queue) only where its role fits.
            let in_scope = path.starts_with("/queue/billing-eu")
                || path.starts_with("/topic/billing-eu")
                || path.ends_with("?queue=billing-eu");
            if in_scope && *label != "admin" && *label != "reader-all" {
                let outside = path
                    .replace("/queue/billing-eu", "/queue/emails")
                    .replace("/topic/billing-eu", "/topic/emails")
                    .replace("?queue=billing-eu", "?queue=emails")
                    .replace(&job, &other_job);
                send(client, &method, &outside, &body)
                    .await
                    .expect_error(403);
            }
        }
    }

    // `GET /queue` lists only the key's queues.
    let listed = |client: &ApiClient| {
        let client = client.clone();
        async move { client.get("/queue").await.expect(200)["queues"].clone() }
    };
    assert_eq!(
        listed(&keys[0].1).await,
        json!(["billing-eu", "billing-new"])
    );
    assert_eq!(listed(&keys[2].1).await, json!(["billing-eu"]));
    assert_eq!(
        listed(&keys[3].1).await,
        json!(["billing-eu", "billing-new", "emails"])
    );
    // A reader sees the jobs it lists, payload included; a producer reads one job's status.
    let jobs = keys[2]
        .1
        .get("/queue/billing-eu?status=READY")
        .await
        .expect(200);
    assert!(jobs.to_string().contains("\"first\":true"), "{jobs}");
    keys[0]
        .1
        .get(&format!("/queue/billing-eu/{job}"))
        .await
        .expect(200);
    // The configured key still does everything.
    app.get("/admin/keys").await.expect(200);
}

#[tokio::test]
async fn unknown_and_revoked_keys_are_401_and_keys_outside_their_role_403() {
    let app = spawn_app(with_key).await;
    app.create_queue_ok("billing", "https://worker.example.com/jobs", None)
        .await;
    let (id, key) = create_key(&app, "producer", "producer", Some(&["billing"])).await;
    let producer = as_key(&app, &key);
    producer
        .enqueue("billing", &json!({"a": 1}))
        .await
        .expect(201);
    // As X-API-Key too.
    let by_header = app
        .send(
            app.http
                .post(app.url("/queue/billing"))
                .header("x-api-key", &key)
                .header("content-type", "application/json")
                .body("{}"),
        )
        .await;
    by_header.expect(201);
    let msg = producer
        .get("/queue/billing/_stats")
        .await
        .expect_error(403);
    assert!(msg.contains("producer") && msg.contains("reader"), "{msg}");

    // Unknown keys (well-formed or not) are the one 401.
    let unknown = as_key(&app, &format!("hq_{}", "0".repeat(64)));
    assert_eq!(
        unknown.get("/queue").await.expect_error(401),
        "not authorized"
    );
    let garbage = as_key(&app, "hq_");
    garbage.get("/queue").await.expect_error(401);

    // Revoked: refused by the very next request.
    app.call(Method::DELETE, &format!("/admin/keys/{id}"), None)
        .await
        .expect(200);
    assert_eq!(
        producer
            .enqueue("billing", &json!({"a": 2}))
            .await
            .expect_error(401),
        "not authorized"
    );
    app.call(Method::DELETE, &format!("/admin/keys/{id}"), None)
        .await
        .expect_error(404);
    let listed = app.get("/admin/keys").await.expect(200);
    assert!(listed["keys"][0]["revokedAt"].is_i64(), "{listed}");
    // A scoped admin key may manage keys, a reader may not.
    let (_, admin) = create_key(&app, "admin", "admin", None).await;
    let (_, reader) = create_key(&app, "reader", "reader", Some(&["*"])).await;
    as_key(&app, &admin).get("/admin/keys").await.expect(200);
    as_key(&app, &reader)
        .get("/admin/keys")
        .await
        .expect_error(403);
}

#[tokio::test]
async fn key_routes_validate_their_input_and_never_show_a_key_again() {
    let app = spawn_app(with_key).await;
    for body in [
        json!({"name": "x", "role": "owner", "queues": ["*"]}),
        json!({"name": "x", "role": "producer"}),
        json!({"name": "x", "role": "producer", "queues": []}),
        json!({"name": "x", "role": "producer", "queues": ["a*b"]}),
        json!({"name": "x", "role": "producer", "queues": ["bad name"]}),
        json!({"name": "", "role": "reader", "queues": ["*"]}),
        json!({"name": "x", "role": "admin", "queues": ["billing"]}),
        json!({"role": "reader", "queues": ["*"]}),
    ] {
        app.call(
            Method::POST,
            "/admin/keys",
            Some(body.to_string().as_bytes()),
        )
        .await
        .expect_error(422);
    }
    let (id, key) = create_key(&app, "dashboard", "reader", Some(&["Billing-*"])).await;
    let listed = app.get("/admin/keys").await.expect(200);
    assert_eq!(
        listed["keys"],
        json!([{
            "id": id,
            "name": "dashboard",
            "role": "reader",
            "queues": ["billing-*"],
            "createdAt": listed["keys"][0]["createdAt"],
        }])
    );
    let hash = hex_sha256(&key);
    let text = listed.to_string();
    assert!(!text.contains(&key) && !text.contains(&key[3..]) && !text.contains(&hash));
}

fn hex_sha256(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// A second server on `config`'s database; stopped when the token is cancelled.
async fn second_node(config: Config) -> (ApiClient, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = hookq::Server::build(config, listener)
        .await
        .expect("the node builds");
    let addr = server.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(server.run(stop.clone()));
    (ApiClient::new(addr, Some(KEY.into())), stop)
}

#[tokio::test]
async fn a_key_revoked_on_one_node_is_refused_by_another_at_once() {
    let Some(db) = TestDatabase::create("keys_revoked_across_nodes").await else {
        eprintln!("skipped: no PostgreSQL (HOOKQ_TEST_POSTGRES_URL)");
        return;
    };
    let url = db.url.clone();
    let app = spawn_app(|config| {
        with_key(config);
        config.database = Database::Postgres(url.clone());
    })
    .await;
    let mut config = app.config();
    with_key(&mut config);
    let (other, stop) = second_node(config).await;
    app.create_queue_ok("billing", "https://worker.example.com/jobs", None)
        .await;
    let (id, key) = create_key(&app, "producer", "producer", Some(&["billing"])).await;
    let mut on_other = other.clone();
    on_other.api_key = Some(key.clone());
    // The other node knows the queue within a second (its queue refresh).
    crate::helpers::eventually("the queue known to the other node", || async {
        (other.get("/queue/billing/_stats").await.status == 200).then_some(())
    })
    .await;
    // A key created on one node works on the other at once.
    on_other
        .enqueue("billing", &json!({"a": 1}))
        .await
        .expect(201);
    // Revoked on the first node: the other refuses the very next request.
    app.call(Method::DELETE, &format!("/admin/keys/{id}"), None)
        .await
        .expect(200);
    on_other
        .enqueue("billing", &json!({"a": 2}))
        .await
        .expect_error(401);
    stop.cancel();
    app.stop().await;
    db.drop_database().await;
}

fn jwt(key: &str, claims: Value) -> String {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(key.as_bytes()),
    )
    .unwrap()
}

#[tokio::test]
async fn the_previous_api_key_works_like_the_api_key_during_a_rotation() {
    const OLD: &str = "the-old-api-key-abcdefghijklmnop";
    let app = spawn_app(|config| {
        with_key(config);
        config.api_key_previous = Some(ApiKey::new(OLD.into()));
    })
    .await;
    let now = jsonwebtoken::get_current_timestamp() as i64;
    for credential in [
        KEY.to_owned(),
        OLD.to_owned(),
        jwt(OLD, json!({"exp": now + 300})),
        jwt(KEY, json!({"exp": now + 300})),
    ] {
        let client = as_key(&app, &credential);
        client.get("/queue").await.expect(200);
        // Without an admin key, /admin takes the API key, and so its previous one.
        client.get("/admin/dlq/stats").await.expect(200);
    }
    as_key(&app, "another-key-entirely")
        .get("/queue")
        .await
        .expect_error(401);
    as_key(
        &app,
        &jwt("another-key-entirely", json!({"exp": now + 300})),
    )
    .get("/queue")
    .await
    .expect_error(401);
}

#[tokio::test]
async fn jwts_valid_for_longer_than_the_maximum_lifetime_are_refused() {
    let app = spawn_app(|config| {
        with_key(config);
        config.jwt_max_lifetime = Some(Duration::from_secs(3600));
    })
    .await;
    let now = jsonwebtoken::get_current_timestamp() as i64;
    for (claims, status) in [
        (json!({"exp": now + 600, "iat": now}), 200),
        (json!({"exp": now + 600}), 200),
        (json!({"exp": now + 3600 * 24, "iat": now}), 401),
        (json!({"exp": now + 3600 * 24}), 401),
        // Issued long ago for a long time, still unexpired: too long, whatever is left.
        (json!({"exp": now + 600, "iat": now - 3600 * 24}), 401),
    ] {
        let response = as_key(&app, &jwt(KEY, claims.clone())).get("/queue").await;
        assert_eq!(response.status, status, "{claims}");
    }
}

#[tokio::test]
async fn the_ui_lists_keys_as_text_and_revokes_one() {
    use crate::ui::{ADMIN_KEY, UiVisitor};
    let app = spawn_app(|config| {
        with_key(config);
        config.admin_key = Some(ApiKey::new(ADMIN_KEY.into()));
    })
    .await;
    let admin = as_key(&app, ADMIN_KEY);
    let body = json!({"name": "<b>dash</b>", "role": "reader", "queues": ["billing-*"]});
    let created = admin
        .call(
            Method::POST,
            "/admin/keys",
            Some(body.to_string().as_bytes()),
        )
        .await
        .expect(201);
    let (id, key) = (
        created["id"].as_str().unwrap().to_owned(),
        created["key"].as_str().unwrap().to_owned(),
    );
    let mut visitor = UiVisitor::logged_in(&app, ADMIN_KEY).await;
    let page = visitor.get("/ui/keys").await;
    assert_eq!(page.status, 200, "{}", page.body);
    for shown in [
        "&lt;b&gt;dash&lt;/b&gt;",
        "reader",
        "billing-*",
        id.as_str(),
        "Revoke",
    ] {
        assert!(page.body.contains(shown), "{shown} in {}", page.body);
    }
    assert!(!page.body.contains("<b>dash") && !page.body.contains(&key));
    let done = visitor.submit("/ui/keys/revoke", &[("id", &id)]).await;
    let page = visitor.follow(done).await;
    assert!(page.body.contains("Revoked key"), "{}", page.body);
    assert!(page.body.contains("revoked"), "{}", page.body);
    as_key(&app, &key).get("/queue").await.expect_error(401);
}

/// The keys page creates a key and shows it once, beside its form: the key works, and the
/// next visit shows it no more. A refused key keeps what was typed and says why.
#[tokio::test]
async fn the_ui_creates_a_key_and_shows_it_once() {
    use crate::ui::{ADMIN_KEY, UiVisitor};
    let app = spawn_app(|config| {
        with_key(config);
        config.admin_key = Some(ApiKey::new(ADMIN_KEY.into()));
    })
    .await;
    let mut visitor = UiVisitor::logged_in(&app, ADMIN_KEY).await;
    let page = visitor.get("/ui/keys").await;
    assert!(
        page.body.contains(r#"action="/ui/keys/create""#),
        "{}",
        page.body
    );
    let done = visitor
        .submit(
            "/ui/keys/create",
            &[
                ("name", "billing reader"),
                ("role", "reader"),
                ("queues", "billing-*, audit"),
            ],
        )
        .await;
    assert!(
        done.location().ends_with("#new-key-result"),
        "{}",
        done.location()
    );
    let page = visitor.follow(done).await;
    let shown = page
        .body
        .split("it is not shown again: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no key shown in {}", page.body));
    let key: String = shown
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    assert!(key.starts_with("hq_") && key.len() == 67, "{key}");
    let listed = as_key(&app, ADMIN_KEY).get("/admin/keys").await.expect(200);
    let entry = &listed["keys"][0];
    assert_eq!(entry["name"], "billing reader");
    assert_eq!(entry["role"], "reader");
    assert_eq!(entry["queues"], json!(["billing-*", "audit"]));
    // The key is live: a reader sees the queues it covers.
    as_key(&app, &key).get("/queue").await.expect(200);
    let again = visitor.get("/ui/keys").await;
    assert!(!again.body.contains(&key), "shown once only");
    // A producer key needs queues: refused, what was typed kept.
    let refused = visitor
        .submit(
            "/ui/keys/create",
            &[("name", "sender"), ("role", "producer"), ("queues", "")],
        )
        .await;
    let page = visitor.follow(refused).await;
    assert!(
        page.body.contains("The key was not created"),
        "{}",
        page.body
    );
    assert!(page.body.contains(r#"value="sender""#), "{}", page.body);
    assert_eq!(
        as_key(&app, ADMIN_KEY).get("/admin/keys").await.expect(200)["keys"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}
