//! Forq's producer and consumer API, driven as Forq's SDKs drive it (forq-sdk-go,
//! forq-sdk-java, forq-sdk-typescript at 1.0.0): `X-API-Key` with the raw secret,
//! `Accept: application/json`, `POST` with a JSON body to produce, `GET` to consume (200 with
//! exactly `{id, content, receipt}` or 204), `POST …/ack|nack` with `X-Forq-Receipt` and no
//! body; and as their older versions do, without a receipt. Errors are exactly `{"code"}`
//! with Forq's codes and statuses. Runs on SQLite and, through the suite, on PostgreSQL.

use axum::http::Method;
use serde_json::{Value, json};

use crate::helpers::{ApiClient, ApiResponse, TestApp, eventually, spawn_app};

const SECRET: &str = "forq-secret-forq-secret-forq-secret-0123";

/// A Forq SDK's requests: the API key as `X-API-Key`, JSON accepted.
struct ForqClient {
    api: ApiClient,
    key: Option<String>,
}

impl ForqClient {
    fn of(app: &TestApp, key: Option<&str>) -> Self {
        Self {
            api: app.api.clone(),
            key: key.map(str::to_owned),
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        receipt: Option<&str>,
    ) -> ApiResponse {
        // Not ApiClient::request: that one sends hookq's own key.
        let mut request = self
            .api
            .http
            .request(method, format!("{}{path}", self.api.base))
            .header("Accept", "application/json");
        if let Some(key) = &self.key {
            request = request.header("X-API-Key", key);
        }
        if let Some(body) = body {
            request = request
                .header("Content-Type", "application/json")
                .body(body);
        }
        if let Some(receipt) = receipt {
            request = request.header("X-Forq-Receipt", receipt);
        }
        self.api.send(request).await
    }

    async fn produce(&self, queue: &str, body: Value) -> ApiResponse {
        let path = format!("/api/v1/queues/{queue}/messages");
        self.send(
            Method::POST,
            &path,
            Some(body.to_string().into_bytes()),
            None,
        )
        .await
    }

    async fn consume(&self, queue: &str) -> ApiResponse {
        let path = format!("/api/v1/queues/{queue}/messages");
        self.send(Method::GET, &path, None, None).await
    }

    /// Consume and insist on a message: its body.
    async fn consume_one(&self, queue: &str) -> Value {
        let response = self.consume(queue).await;
        assert_eq!(response.status, 200, "a message: {}", response.text());
        let message = response.json();
        let mut keys: Vec<&String> = message.as_object().expect("an object").keys().collect();
        keys.sort();
        assert_eq!(keys, ["content", "id", "receipt"], "exactly Forq's fields");
        message
    }

    async fn answer(
        &self,
        queue: &str,
        message: &Value,
        verb: &str,
        receipt: Option<&str>,
    ) -> ApiResponse {
        let id = message["id"].as_str().expect("id");
        let path = format!("/api/v1/queues/{queue}/messages/{id}/{verb}");
        self.send(Method::POST, &path, None, receipt).await
    }

    async fn ack(&self, queue: &str, message: &Value) -> ApiResponse {
        self.answer(queue, message, "ack", message["receipt"].as_str())
            .await
    }
}

/// Assert Forq's error: `status` and exactly `{"code": code}`.
#[track_caller]
fn forq_error(response: &ApiResponse, status: u16, code: &str) {
    assert_eq!(response.status, status, "{}", response.text());
    assert_eq!(response.json(), json!({ "code": code }));
}

#[track_caller]
fn no_content(response: &ApiResponse) {
    assert_eq!(response.status, 204, "{}", response.text());
    assert!(response.body.is_empty(), "204 has no body");
}

#[tokio::test]
async fn a_message_is_produced_consumed_and_acked_with_its_receipt() {
    let app = spawn_app(|_| {}).await;
    let forq = ForqClient::of(&app, None);
    no_content(
        &forq
            .produce("Orders", json!({"content": "hello \"you\""}))
            .await,
    );

    let message = forq.consume_one("orders").await;
    assert_eq!(message["content"], "hello \"you\"");
    let receipt = message["receipt"].as_str().expect("receipt");
    // Opaque to clients, as Forq's own (`MessageResponse.Receipt`): a signed lease id.
    assert_eq!(receipt.split('-').count(), 4, "{receipt}");

    // The queue is hookq's: a pull queue with Forq's schedule, its job the content.
    let settings = app.get("/queue/orders/_settings").await.expect(200);
    assert_eq!(settings["delivery"], "pull", "{settings}");
    assert_eq!(settings["maxAttempts"], 5, "{settings}");
    assert_eq!(
        settings["backoff"],
        json!(["1s", "5s", "15s", "30s", "1m"]),
        "{settings}"
    );
    let id = message["id"].as_str().unwrap();
    let job = app.get_job("orders", id).await.expect(200);
    assert_eq!(job["job"], "hello \"you\"", "{job}");

    no_content(&forq.ack("orders", &message).await);
    app.get_job("orders", id).await.expect_error(404);
    // Acked is gone: the same receipt again finds nothing.
    forq_error(
        &forq.ack("orders", &message).await,
        404,
        "not_found.message",
    );
}

#[tokio::test]
async fn a_receipt_of_an_earlier_delivery_changes_nothing() {
    let app = spawn_app(|_| {}).await;
    let forq = ForqClient::of(&app, None);
    forq.produce("q", json!({"content": "x"})).await;
    app.patch_queue("q", &json!({"backoff": ["10ms"]}))
        .await
        .expect(200);
    let first = forq.consume_one("q").await;
    no_content(
        &forq
            .answer("q", &first, "nack", first["receipt"].as_str())
            .await,
    );
    let second = forq.consume_one("q").await;
    assert_eq!(second["id"], first["id"]);
    assert_ne!(second["receipt"], first["receipt"]);

    forq_error(&forq.ack("q", &first).await, 404, "not_found.message");
    forq_error(
        &forq
            .answer("q", &first, "nack", first["receipt"].as_str())
            .await,
        404,
        "not_found.message",
    );
    no_content(&forq.ack("q", &second).await);
}

#[tokio::test]
async fn older_clients_without_receipts_keep_working() {
    let app = spawn_app(|_| {}).await;
    let forq = ForqClient::of(&app, None);
    forq.produce("q", json!({"content": "a"})).await;
    let message = forq.consume_one("q").await;
    // An ack without a receipt acks the current delivery; again, or of an unknown id, 204.
    no_content(&forq.answer("q", &message, "ack", None).await);
    app.get_job("q", message["id"].as_str().unwrap())
        .await
        .expect_error(404);
    no_content(&forq.answer("q", &message, "ack", None).await);
    let unknown = json!({"id": "0190a0a0-0000-7000-8000-000000000000"});
    no_content(&forq.answer("q", &unknown, "ack", None).await);
    forq_error(
        &forq.answer("q", &unknown, "nack", None).await,
        404,
        "not_found.message",
    );

    // A nack without a receipt fails the current delivery.
    forq.produce("q", json!({"content": "b"})).await;
    let message = forq.consume_one("q").await;
    no_content(&forq.answer("q", &message, "nack", None).await);
    let job = app
        .get_job("q", message["id"].as_str().unwrap())
        .await
        .expect(200);
    assert_eq!(job["attempts"], 1, "{job}");
}

#[tokio::test]
async fn a_message_nacked_five_times_is_dead_lettered() {
    let app = spawn_app(|_| {}).await;
    let forq = ForqClient::of(&app, None);
    forq.produce("q", json!({"content": "poison"})).await;
    app.patch_queue("q", &json!({"backoff": ["10ms"]}))
        .await
        .expect(200);
    let mut id = String::new();
    for attempt in 1..=5 {
        let message = forq.consume_one("q").await;
        id = message["id"].as_str().unwrap().to_owned();
        let job = app.get_job("q", &id).await.expect(200);
        assert_eq!(job["attempts"], attempt, "{job}");
        no_content(
            &forq
                .answer("q", &message, "nack", message["receipt"].as_str())
                .await,
        );
    }
    let dead = app.get_job("q", &id).await.expect(200);
    assert_eq!(dead["status"], "ERROR", "{dead}");
}

#[tokio::test]
async fn a_native_job_is_consumed_as_its_json_text_and_a_delay_is_kept() {
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({})).await.expect(201);
    let id = app.enqueue_ok("q", &json!({"b": 1, "a": [true]})).await;
    let forq = ForqClient::of(&app, None);
    let message = forq.consume_one("q").await;
    assert_eq!(message["id"], id);
    assert_eq!(message["content"], r#"{"b":1,"a":[true]}"#);
    no_content(&forq.ack("q", &message).await);

    // processAfter: not consumed before then; a consume waiting meanwhile gets it then.
    let at = hookq::model::now_millis() + 1_500;
    no_content(
        &forq
            .produce("q", json!({"content": "later", "processAfter": at}))
            .await,
    );
    let stats = app.get("/queue/q/_stats").await.expect(200);
    assert_eq!(stats["scheduled"], 1, "{stats}");
    let later = forq.consume_one("q").await;
    assert_eq!(later["content"], "later");
    assert!(hookq::model::now_millis() >= at, "not before processAfter");
}

#[tokio::test]
async fn a_consume_waiting_on_a_queue_nobody_produced_to_gets_the_first_message() {
    let app = spawn_app(|_| {}).await;
    let forq = ForqClient::of(&app, None);
    let waiting = {
        let consumer = ForqClient::of(&app, None);
        tokio::spawn(async move { consumer.consume_one("fresh").await })
    };
    // The producer may come before or after the consumer starts waiting: either way the
    // message reaches it, well within the 30 s wait.
    no_content(&forq.produce("fresh", json!({"content": "first"})).await);
    let message = waiting.await.expect("the consumer");
    assert_eq!(message["content"], "first");
}

#[tokio::test]
async fn bad_requests_get_forqs_codes() {
    let app = spawn_app(|_| {}).await;
    let forq = ForqClient::of(&app, None);
    let now = hookq::model::now_millis();
    for (queue, body, status, code) in [
        (
            "a.b",
            json!({"content": "x"}),
            400,
            "bad_request.queue.invalid_name",
        ),
        (
            &"x".repeat(65)[..],
            json!({"content": "x"}),
            400,
            "bad_request.queue.invalid_name",
        ),
        (
            "q-dlq",
            json!({"content": "x"}),
            400,
            "bad_request.queue.produce_to_dlq",
        ),
        (
            "q",
            json!({"content": "x", "processAfter": now - 60_000}),
            400,
            "bad_request.body.processAfter.in_past",
        ),
        (
            "q",
            json!({"content": "x", "processAfter": now + 367 * 86_400_000}),
            400,
            "bad_request.body.processAfter.too_far",
        ),
        ("q", json!({"content": 42}), 400, "bad_request.body.invalid"),
        (
            "q",
            json!({"content": "x".repeat(256 * 1024 + 1)}),
            400,
            "bad_request.body.content.exceeds_limit",
        ),
    ] {
        forq_error(&forq.produce(queue, body).await, status, code);
    }
    let path = "/api/v1/queues/q/messages";
    forq_error(
        &forq
            .send(Method::POST, path, Some(b"{".to_vec()), None)
            .await,
        400,
        "bad_request.body.invalid",
    );
    let huge = vec![b' '; 2 * 1024 * 1024 + 1];
    forq_error(
        &forq.send(Method::POST, path, Some(huge), None).await,
        413,
        "bad_request.body.content.exceeds_limit",
    );
    // Nothing of it was stored: no queue was created either.
    app.get("/queue/q/_stats").await.expect_error(404);

    forq.produce("q", json!({"content": "x"})).await;
    let message = forq.consume_one("q").await;
    let bad_id = json!({"id": "not-a-uuid"});
    forq_error(
        &forq.answer("q", &bad_id, "ack", Some("1")).await,
        400,
        "bad_request.messageId.invalid",
    );
    forq_error(
        &forq.answer("q", &message, "ack", Some("abc")).await,
        400,
        "bad_request.receipt.invalid",
    );
    forq_error(
        &forq.answer("a.b", &message, "ack", Some("1")).await,
        400,
        "bad_request.queue.invalid_name",
    );
    no_content(&forq.ack("q", &message).await);
}

#[tokio::test]
async fn forqs_key_headers_open_the_api_and_the_healthcheck_needs_none() {
    let app = spawn_app(|c| {
        c.api_key = Some(hookq::config::ApiKey::new(SECRET.into()));
    })
    .await;
    let anonymous = ForqClient::of(&app, None);
    forq_error(
        &anonymous.produce("q", json!({"content": "x"})).await,
        401,
        "unauthorized",
    );
    forq_error(&anonymous.consume("q").await, 401, "unauthorized");
    let wrong = ForqClient::of(&app, Some("not-the-secret"));
    forq_error(
        &wrong.produce("q", json!({"content": "x"})).await,
        401,
        "unauthorized",
    );
    no_content(
        &anonymous
            .send(Method::GET, "/healthcheck", None, None)
            .await,
    );

    let forq = ForqClient::of(&app, Some(SECRET));
    no_content(&forq.produce("q", json!({"content": "x"})).await);
    // A Forq version sent `Authorization: Bearer`.
    let bearer = anonymous
        .api
        .http
        .get(format!("{}/api/v1/queues/q/messages", app.base))
        .header("Authorization", format!("Bearer {SECRET}"));
    let message = anonymous.api.send(bearer).await;
    assert_eq!(message.status, 200, "{}", message.text());
}

#[tokio::test]
async fn a_queues_dead_letters_are_consumed_as_its_dlq_queue() {
    let app = spawn_app(|_| {}).await;
    let forq = ForqClient::of(&app, None);
    forq.produce("q", json!({"content": "poison"})).await;
    app.patch_queue("q", &json!({"maxAttempts": 1}))
        .await
        .expect(200);
    let message = forq.consume_one("q").await;
    no_content(
        &forq
            .answer("q", &message, "nack", message["receipt"].as_str())
            .await,
    );
    let id = message["id"].as_str().unwrap();
    assert_eq!(app.get_job("q", id).await.expect(200)["status"], "ERROR");

    let dead = forq.consume_one("q-dlq").await;
    assert_eq!(dead["id"], message["id"]);
    assert_eq!(dead["content"], "poison");
    // The Workers view lists it as a dead letter held, with who holds it and until when.
    let page = app.get("/admin/leases?queue=q").await.expect(200);
    let held = &page["leases"][0];
    assert_eq!(held["id"], message["id"], "{page}");
    assert_eq!(held["deadLetter"], true, "{page}");
    assert_eq!(held["holder"], "open", "{page}");
    assert!(held["leasedAt"].as_i64().unwrap() <= held["leasedUntil"].as_i64().unwrap());
    // A nack offers it again later; the receipt it held is spent.
    no_content(
        &forq
            .answer("q-dlq", &dead, "nack", dead["receipt"].as_str())
            .await,
    );
    let page = app.get("/admin/leases").await.expect(200);
    assert_eq!(
        page["leases"],
        json!([]),
        "a hidden letter is not held: {page}"
    );
    forq_error(&forq.ack("q-dlq", &dead).await, 404, "not_found.message");
    let job = app.get_job("q", id).await.expect(200);
    assert_eq!(job["deadLetter"]["state"], "pending", "{job}");

    // Acknowledged without a receipt (an older client), idempotently.
    no_content(&forq.answer("q-dlq", &dead, "ack", None).await);
    no_content(&forq.answer("q-dlq", &dead, "ack", None).await);
    let job = app.get_job("q", id).await.expect(200);
    assert_eq!(job["deadLetter"]["state"], "acknowledged", "{job}");
}

/// What Forq's published OpenAPI document (`openapi.yaml` of n0rdy/forq at v1.0.0) declares
/// for each route: the statuses it lists (besides `429 too_many_requests` and `500
/// internal`, which its enum has and every route may answer), transcribed here.
const DOCUMENTED_STATUSES: &[(&str, &str, &[u16])] = &[
    ("GET", "/healthcheck", &[204]),
    (
        "POST",
        "/api/v1/queues/{queue}/messages",
        &[204, 400, 401, 413],
    ),
    (
        "GET",
        "/api/v1/queues/{queue}/messages",
        &[200, 204, 400, 401],
    ),
    (
        "POST",
        "/api/v1/queues/{queue}/messages/{messageId}/ack",
        &[204, 400, 401, 404],
    ),
    (
        "POST",
        "/api/v1/queues/{queue}/messages/{messageId}/nack",
        &[204, 400, 401, 404],
    ),
];

/// The document's `ErrorResponse.code` enum.
const DOCUMENTED_CODES: &[&str] = &[
    "bad_request.body.content.exceeds_limit",
    "bad_request.body.processAfter.in_past",
    "bad_request.body.processAfter.too_far",
    "bad_request.body.invalid",
    "bad_request.queue.invalid_name",
    "bad_request.messageId.invalid",
    "bad_request.queue.produce_to_dlq",
    "bad_request.dlq_only_operation",
    "bad_request.receipt.missing",
    "bad_request.receipt.invalid",
    "unauthorized",
    "too_many_requests",
    "not_found.message",
    "internal",
];

/// Check one answer of `route` against the document: a listed status, an error body
/// exactly `{"code"}` with a code of its enum, a message exactly its `MessageResponse`.
#[track_caller]
fn as_documented(method: &str, route: &str, response: &ApiResponse) {
    let (_, _, statuses) = DOCUMENTED_STATUSES
        .iter()
        .find(|(m, r, _)| *m == method && *r == route)
        .expect("a documented route");
    assert!(
        statuses.contains(&response.status) || matches!(response.status, 429 | 500),
        "{method} {route} answered {} ({}), not one of {statuses:?}",
        response.status,
        response.text()
    );
    match response.status {
        200 => {
            let body = response.json();
            let object = body.as_object().expect("a MessageResponse object");
            assert_eq!(object.len(), 3, "{body}");
            for field in ["id", "content", "receipt"] {
                assert!(object[field].is_string(), "{field} is a string: {body}");
            }
            let id = object["id"].as_str().unwrap();
            assert!(hookq::model::JobId::parse(id).is_ok(), "id is a UUID: {id}");
        }
        204 => assert!(response.body.is_empty()),
        _ => {
            let body = response.json();
            let object = body.as_object().expect("an ErrorResponse object");
            assert_eq!(object.len(), 1, "{body}");
            let code = object["code"].as_str().expect("a code");
            assert!(DOCUMENTED_CODES.contains(&code), "{code} is in the enum");
        }
    }
}

#[tokio::test]
async fn every_forq_route_answers_as_forqs_openapi_document_declares() {
    let app = spawn_app(|c| {
        c.api_key = Some(hookq::config::ApiKey::new(SECRET.into()));
    })
    .await;
    let forq = ForqClient::of(&app, Some(SECRET));
    let anonymous = ForqClient::of(&app, None);
    const PRODUCE: &str = "/api/v1/queues/{queue}/messages";
    const ACK: &str = "/api/v1/queues/{queue}/messages/{messageId}/ack";
    const NACK: &str = "/api/v1/queues/{queue}/messages/{messageId}/nack";

    as_documented(
        "GET",
        "/healthcheck",
        &anonymous
            .send(Method::GET, "/healthcheck", None, None)
            .await,
    );
    for (client, body) in [
        (&forq, json!({"content": "a"})),
        (&forq, json!({"content": 1})),
        (&forq, json!({"content": "a", "processAfter": 1})),
        (&anonymous, json!({"content": "a"})),
    ] {
        as_documented("POST", PRODUCE, &client.produce("q", body).await);
    }
    as_documented(
        "POST",
        PRODUCE,
        &forq
            .send(
                Method::POST,
                "/api/v1/queues/q/messages",
                Some(vec![b' '; 3 * 1024 * 1024]),
                None,
            )
            .await,
    );
    for client in [&forq, &anonymous] {
        as_documented("GET", PRODUCE, &client.consume("q").await);
    }
    as_documented("GET", PRODUCE, &forq.consume("a.b").await);
    forq.produce("q", json!({"content": "b"})).await;
    let message = forq.consume("q").await.json();
    let unknown = json!({"id": "0190a0a0-0000-7000-8000-000000000000"});
    for verb in ["nack", "ack"] {
        let route = if verb == "ack" { ACK } else { NACK };
        for (target, receipt) in [
            (&unknown, Some("1")),
            (&json!({"id": "x"}), Some("1")),
            (&message, Some("not a number")),
            (&message, message["receipt"].as_str()),
        ] {
            as_documented(
                "POST",
                route,
                &forq.answer("q", target, verb, receipt).await,
            );
        }
        as_documented(
            "POST",
            route,
            &anonymous.answer("q", &message, verb, None).await,
        );
    }
}

#[tokio::test]
async fn a_push_queues_deliveries_are_not_forqs_to_answer() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("pushed", "http://127.0.0.1:9/", None)
        .await;
    let id = app.enqueue_ok("pushed", &json!({"n": 1})).await;
    // In flight, as a push delivery would hold it.
    let now = hookq::model::now_millis();
    let queue = hookq::model::QueueName::parse("pushed").unwrap();
    let claimed = app
        .store()
        .claim(queue, now, now + 60_000, 1)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let forq = ForqClient::of(&app, None);
    let job = json!({ "id": id });
    for verb in ["ack", "nack"] {
        forq_error(
            &forq.answer("pushed", &job, verb, None).await,
            404,
            "not_found.message",
        );
    }
    app.get_job("pushed", &id).await.expect(200);
}

/// A scoped key made through the API with the configured key: the key itself.
async fn scoped_key(app: &TestApp, role: &str, queues: &[&str]) -> String {
    let name = format!("{role}-{}", queues.join("-"));
    crate::helpers::create_key(app, &name, role, Some(queues))
        .await
        .1
}

/// Queue `name`'s one message dead-lettered (one attempt, nacked).
async fn dead_letter_in(app: &TestApp, forq: &ForqClient, name: &str) -> Value {
    no_content(
        &forq
            .produce(name, json!({"content": "secret payload"}))
            .await,
    );
    app.patch_queue(name, &json!({"maxAttempts": 1}))
        .await
        .expect(200);
    let message = forq.consume_one(name).await;
    no_content(
        &forq
            .answer(name, &message, "nack", message["receipt"].as_str())
            .await,
    );
    message
}

#[tokio::test]
async fn a_dlq_consumer_is_judged_on_the_queue_whose_dead_letters_it_reads() {
    let app = spawn_app(|c| {
        c.api_key = Some(hookq::config::ApiKey::new(SECRET.into()));
    })
    .await;
    let admin = ForqClient::of(&app, Some(SECRET));
    let message = dead_letter_in(&app, &admin, "billing").await;
    // `billing-*` covers the path's `billing-dlq`, not `billing`, whose dead letters it is.
    let outside = ForqClient::of(
        &app,
        Some(&scoped_key(&app, "consumer", &["billing-*"]).await),
    );
    forq_error(&outside.consume("billing-dlq").await, 401, "unauthorized");
    for verb in ["ack", "nack"] {
        forq_error(
            &outside.answer("billing-dlq", &message, verb, None).await,
            401,
            "unauthorized",
        );
    }
    let id = message["id"].as_str().unwrap();
    let job = app.get_job("billing", id).await.expect(200);
    assert_eq!(job["deadLetter"]["state"], "pending", "untouched: {job}");

    // A key covering `billing` reads and acknowledges them.
    let inside = ForqClient::of(
        &app,
        Some(&scoped_key(&app, "consumer", &["billing"]).await),
    );
    let dead = inside.consume_one("billing-dlq").await;
    assert_eq!(dead["id"], message["id"]);
    no_content(&inside.ack("billing-dlq", &dead).await);
    // A queue that is itself named `billing-dlq` is that queue, not `billing`'s dead letters.
    no_content(&admin.produce("ops", json!({"content": "x"})).await);
    app.put_queue("ops-dlq", &json!({})).await.expect(201);
    app.enqueue_ok("ops-dlq", &json!({"n": 1})).await;
    let ops = ForqClient::of(&app, Some(&scoped_key(&app, "consumer", &["ops"]).await));
    forq_error(&ops.consume("ops-dlq").await, 401, "unauthorized");
}

#[tokio::test]
async fn only_admins_and_the_configured_key_create_queues_by_producing() {
    let app = spawn_app(|c| {
        c.api_key = Some(hookq::config::ApiKey::new(SECRET.into()));
        c.caps.queues = 2;
    })
    .await;
    let producer = ForqClient::of(&app, Some(&scoped_key(&app, "producer", &["a*"]).await));
    forq_error(
        &producer.produce("a-new1", json!({"content": "x"})).await,
        401,
        "unauthorized",
    );
    app.call(Method::GET, "/queue/a-new1/_settings", None)
        .await
        .expect(404);
    // An existing queue in its scope takes its messages.
    let configured = ForqClient::of(&app, Some(SECRET));
    no_content(&configured.produce("a-made", json!({"content": "x"})).await);
    no_content(&producer.produce("a-made", json!({"content": "y"})).await);
    // An admin key creates; past HOOKQ_MAX_QUEUES, Forq's 429, and the queue is not there.
    let admin = ForqClient::of(&app, Some(&scoped_key(&app, "admin", &["*"]).await));
    no_content(&admin.produce("a-admin", json!({"content": "x"})).await);
    forq_error(
        &configured.produce("a-over", json!({"content": "x"})).await,
        429,
        "too_many_requests",
    );
    app.call(Method::GET, "/queue/a-over/_settings", None)
        .await
        .expect(404);
}

#[tokio::test]
async fn scoped_producers_create_queues_where_the_operator_allows_it() {
    let app = spawn_app(|c| {
        c.api_key = Some(hookq::config::ApiKey::new(SECRET.into()));
        c.forq_producers_create_queues = true;
    })
    .await;
    let producer = ForqClient::of(&app, Some(&scoped_key(&app, "producer", &["a*"]).await));
    no_content(&producer.produce("a-new1", json!({"content": "x"})).await);
    app.call(Method::GET, "/queue/a-new1/_settings", None)
        .await
        .expect(200);
    // Still only within its scope.
    forq_error(
        &producer.produce("b-new", json!({"content": "x"})).await,
        401,
        "unauthorized",
    );
}

#[tokio::test]
async fn every_waiting_consume_holds_a_lease_waiters_seat() {
    let app = spawn_app(|c| c.max_lease_waiters = 1).await;
    let forq = ForqClient::of(&app, None);
    app.put_queue("pulled", &json!({})).await.expect(201);
    dead_letter_in(&app, &forq, "q").await;
    forq.consume_one("q-dlq").await; // the one dead letter, leased: the next consume waits
    // The one seat, taken by a native lease waiting on an empty queue.
    let waiting = tokio::spawn({
        let app_api = app.api.clone();
        async move {
            app_api
                .call(
                    Method::POST,
                    "/queue/pulled/_lease",
                    Some(br#"{"wait":"30s"}"#),
                )
                .await
        }
    });
    eventually("the native lease waits", || async {
        let stats = app.get("/queue/pulled/_stats").await.expect(200);
        (stats["leaseRequestsWaiting"] == 1).then_some(())
    })
    .await;
    // A consume of a queue nobody produced to, and one of dead letters, would wait: each
    // needs a seat, and there is none. Answered at once, not after Forq's 30 s.
    for queue in ["nobody-yet", "q-dlq"] {
        let refused = tokio::time::timeout(std::time::Duration::from_secs(10), forq.consume(queue))
            .await
            .unwrap_or_else(|_| panic!("a consume of {queue} waited without a seat"));
        forq_error(&refused, 429, "too_many_requests");
    }
    app.enqueue_ok("pulled", &json!({"n": 1})).await;
    assert_eq!(
        waiting.await.unwrap().expect(200)["jobs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn a_receipt_not_handed_out_answers_nothing() {
    let app = spawn_app(|_| {}).await;
    let forq = ForqClient::of(&app, None);
    let message = dead_letter_in(&app, &forq, "q").await;
    forq.produce("q", json!({"content": "live"})).await;
    let live = forq.consume_one("q").await;
    let dead = forq.consume_one("q-dlq").await;
    for (queue, held) in [("q", &live), ("q-dlq", &dead)] {
        // The receipt's lease, with another signature: what another consumer could write.
        let receipt = held["receipt"].as_str().unwrap();
        let (lease, _) = receipt.rsplit_once('-').unwrap();
        let forged = format!("{lease}-{}", "0".repeat(32));
        for verb in ["ack", "nack"] {
            forq_error(
                &forq.answer(queue, held, verb, Some(&forged)).await,
                404,
                "not_found.message",
            );
        }
    }
    let job = app
        .get_job("q", message["id"].as_str().unwrap())
        .await
        .expect(200);
    assert_eq!(job["deadLetter"]["state"], "pending", "{job}");
    let job = app
        .get_job("q", live["id"].as_str().unwrap())
        .await
        .expect(200);
    assert_eq!(job["inFlight"], true, "{job}");
    no_content(&forq.ack("q", &live).await);
    no_content(&forq.ack("q-dlq", &dead).await);
}
