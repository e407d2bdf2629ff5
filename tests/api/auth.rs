//! Authentication on and off, and secrets never leaving the server.

use axum::http::Method;
use hookq::config::ApiKey;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

use crate::helpers::{ApiResponse, TestApp, payload, refused_url, spawn_app};

const KEY: &str = "test-api-key-4f7c2a9e";

async fn spawn_with_key() -> TestApp {
    spawn_app(|c| {
        c.api_key = Some(ApiKey::new(KEY.to_owned()));
        c.dispatch = false;
    })
    .await
}

fn jwt(key: &str, alg: Algorithm, exp_offset_secs: i64) -> String {
    let exp = jsonwebtoken::get_current_timestamp() as i64 + exp_offset_secs;
    jsonwebtoken::encode(
        &Header::new(alg),
        &json!({ "sub": "my-app", "exp": exp }),
        &EncodingKey::from_secret(key.as_bytes()),
    )
    .expect("encode a JWT")
}

/// `GET /queue` with exactly the given headers (no default credentials).
async fn list_queues_with(app: &TestApp, headers: &[(&str, &str)]) -> ApiResponse {
    let mut request = app.http.get(app.url("/queue"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    app.send(request).await
}

#[track_caller]
fn assert_unauthorized(response: &ApiResponse) {
    assert_eq!(response.status, 401, "{}", response.text());
    assert!(
        response
            .content_type
            .as_deref()
            .is_some_and(|c| c.starts_with("application/json"))
    );
    assert_eq!(
        response.body.as_ref(),
        br#"{"ok":false,"status":401,"msg":"not authorized"}"#,
        "exactly the documented 401 body"
    );
}

#[tokio::test]
async fn every_route_refuses_a_request_without_credentials() {
    let app = spawn_with_key().await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    let anonymous = |method: Method, path: String| app.http.request(method, app.url(&path));
    let body = br#"{"target":"http://127.0.0.1:9/x"}"#.to_vec();
    let requests = [
        anonymous(Method::GET, "/".into()),
        anonymous(Method::GET, "/queue".into()),
        anonymous(Method::PUT, "/queue/new".into()).body(body),
        anonymous(Method::DELETE, "/queue/q".into()),
        anonymous(Method::POST, "/queue/q".into()).body(r#"{"a":1}"#),
        anonymous(Method::GET, "/queue/q?status=READY".into()),
        anonymous(Method::GET, format!("/queue/q/{id}")),
        anonymous(Method::POST, format!("/queue/q/{id}/_cancel")),
        anonymous(Method::POST, format!("/queue/q/{id}/_retry")),
    ];
    for request in requests {
        assert_unauthorized(&app.send(request).await);
    }
    // Nothing changed.
    assert_eq!(app.queues().await, ["q"]);
    assert_eq!(app.list("q", "READY").await.len(), 1);
}

#[tokio::test]
async fn wrong_credentials_are_refused() {
    let app = spawn_with_key().await;
    let other_key_jwt = format!("Bearer {}", jwt("some-other-key", Algorithm::HS256, 300));
    let expired_jwt = format!("Bearer {}", jwt(KEY, Algorithm::HS256, -300));
    let hs512_jwt = format!("Bearer {}", jwt(KEY, Algorithm::HS512, 300));
    let wrong_bearer = format!("Bearer {KEY}x");
    let cases: [&[(&str, &str)]; 8] = [
        &[("authorization", &wrong_bearer)],
        &[("authorization", KEY)],
        &[("authorization", &format!("Basic {KEY}"))],
        &[("x-api-key", "wrong")],
        &[("x-api-key", "")],
        &[("authorization", &other_key_jwt)],
        &[("authorization", &expired_jwt)],
        &[("authorization", &hs512_jwt)],
    ];
    for headers in cases {
        assert_unauthorized(&list_queues_with(&app, headers).await);
    }
}

#[tokio::test]
async fn the_key_is_accepted_as_bearer_x_api_key_or_an_hs256_jwt() {
    let app = spawn_with_key().await;
    let bearer = format!("Bearer {KEY}");
    let token = format!("Bearer {}", jwt(KEY, Algorithm::HS256, 300));
    // Within the 60 s clock-skew leeway.
    let just_expired = format!("Bearer {}", jwt(KEY, Algorithm::HS256, -20));
    let cases: [&[(&str, &str)]; 4] = [
        &[("authorization", &bearer)],
        &[("x-api-key", KEY)],
        &[("authorization", &token)],
        &[("authorization", &just_expired)],
    ];
    for headers in cases {
        let body = list_queues_with(&app, headers).await.expect(200);
        assert_eq!(body["ok"], true);
    }

    // A full round trip with a JWT, as hyper-connect sends it.
    let jwt_client = crate::helpers::ApiClient {
        api_key: Some(jwt(KEY, Algorithm::HS256, 300)),
        ..app.api.clone()
    };
    jwt_client
        .create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let id = jwt_client.enqueue_ok("q", &payload(1)).await;
    jwt_client.get_job("q", &id).await.expect(200);
}

#[tokio::test]
async fn healthz_needs_no_credentials() {
    let app = spawn_with_key().await;
    let response = app.send(app.http.get(app.url("/healthz"))).await;
    assert_eq!(response.expect(200)["ok"], true);
}

#[tokio::test]
async fn without_a_key_the_server_is_open() {
    let app = spawn_app(|c| c.dispatch = false).await;
    assert!(app.api_key.is_none());
    let response = app.send(app.http.get(app.url("/queue"))).await;
    response.expect(200);
    // Credentials are simply ignored.
    let response = app
        .send(app.http.get(app.url("/")).header("x-api-key", "anything"))
        .await;
    response.expect(200);
}

#[tokio::test]
async fn the_queue_secret_never_appears_in_any_response() {
    let secret = "sEcReT-never-shown-8d1b";
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("q", &refused_url(), Some(secret)).await;
    let dead = app.enqueue_ok("q", &payload(1)).await;
    app.wait_until_error("q", &dead).await;
    let app = app.restart(|c| c.dispatch = false).await;
    let ready = app.enqueue_ok("q", &payload(2)).await;

    let responses = [
        app.get("/").await,
        app.get("/queue").await,
        app.get("/healthz").await,
        app.list_raw("q", "status=READY").await,
        app.list_raw("q", "status=ERROR").await,
        app.get_job("q", &ready).await,
        app.get_job("q", &dead).await,
        app.create_queue("q", "http://127.0.0.1:9/hook", Some(secret))
            .await,
        app.create_queue(
            "q2",
            "http://127.0.0.1:9/hook",
            Some(&format!("{secret}{}", "x".repeat(100))),
        )
        .await,
        app.retry("q", &ready).await,
        app.cancel("q", &dead).await,
    ];
    for response in responses {
        assert!(
            !response.text().contains(secret),
            "a response shows the secret: {}",
            response.text()
        );
    }
}
