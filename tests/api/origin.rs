//! A web page in an operator's browser cannot drive the server: a foreign `Origin` is
//! refused on every server, and an open server (no API key) answers only to loopback
//! `Host` names (DNS rebinding). `curl` and server-side clients are not affected.

use axum::http::Method;
use hookq::config::ApiKey;
use reqwest::header::{CONTENT_TYPE, HOST, ORIGIN, SET_COOKIE};

use crate::helpers::{ApiResponse, TestApp, spawn_app};

const KEY: &str = "origin-test-api-key-0123456789";

/// The server's own authority, as a browser on it would send it in `Host` and `Origin`.
fn authority(app: &TestApp) -> String {
    app.base.trim_start_matches("http://").to_owned()
}

/// A cross-site "simple" request, as a foreign page's form or `fetch(…, {mode:"no-cors"})`
/// sends it: `text/plain`, no credentials of hookq's.
async fn enqueue_from(app: &TestApp, origin: Option<&str>, host: Option<&str>) -> ApiResponse {
    let mut request = app
        .request(Method::POST, "/queue/q")
        .header(CONTENT_TYPE, "text/plain")
        .body(r#"{"from":"a page"}"#);
    if let Some(origin) = origin {
        request = request.header(ORIGIN, origin);
    }
    if let Some(host) = host {
        request = request.header(HOST, host);
    }
    app.send(request).await
}

async fn ready_count(app: &TestApp) -> usize {
    app.list("q", "READY").await.len()
}

#[tokio::test]
async fn a_foreign_origin_is_refused_on_an_open_server_and_nothing_is_stored() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    for origin in ["https://evil.example", "null", "http://localhost:3000"] {
        let msg = enqueue_from(&app, Some(origin), None)
            .await
            .expect_error(403);
        assert!(msg.contains("cross-origin"), "{origin}: {msg}");
    }
    let put = app
        .request(Method::PUT, "/queue/other")
        .header(ORIGIN, "https://evil.example")
        .body(r#"{"target":"http://127.0.0.1:9/"}"#);
    app.send(put).await.expect_error(403);
    assert_eq!(ready_count(&app).await, 0, "nothing stored");
    assert_eq!(app.queues().await, ["q"]);
    // The server's own pages (same origin) and curl (no Origin) work as before.
    let own = format!("http://{}", authority(&app));
    enqueue_from(&app, Some(&own), None).await.expect(201);
    enqueue_from(&app, None, None).await.expect(201);
    assert_eq!(ready_count(&app).await, 2);
}

#[tokio::test]
async fn an_open_server_answers_only_to_loopback_host_names() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let port = authority(&app).rsplit(':').next().unwrap().to_owned();
    // A page that rebound its own name to 127.0.0.1 sends that name as Host: refused, on
    // the API and the UI alike, reads included.
    let rebound = format!("evil.example:{port}");
    let msg = enqueue_from(&app, None, Some(&rebound))
        .await
        .expect_error(403);
    assert!(msg.contains("not this server's name"), "{msg}");
    for path in ["/queue", "/queue/q?status=READY", "/ui", "/metrics"] {
        let request = app.request(Method::GET, path).header(HOST, &rebound);
        let response = app.send(request).await;
        assert_eq!(response.status, 403, "{path}: {}", response.text());
    }
    assert_eq!(ready_count(&app).await, 0);
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        enqueue_from(&app, None, Some(&host)).await.expect(201);
        let ui = app.request(Method::GET, "/ui").header(HOST, &host);
        assert_eq!(app.send(ui).await.status, 200, "{host}");
    }
}

#[tokio::test]
async fn allowed_hosts_and_the_public_url_name_the_server_too() {
    let app = spawn_app(|c| {
        c.dispatch = false;
        c.allowed_hosts = vec!["hookq.lan".into()];
        c.public_url = Some("https://hookq.example.com/".parse().unwrap());
    })
    .await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    enqueue_from(&app, None, Some("hookq.lan:6363"))
        .await
        .expect(201);
    // Behind a TLS proxy that keeps the public Host, a page of the public URL.
    enqueue_from(
        &app,
        Some("https://hookq.example.com"),
        Some("hookq.example.com"),
    )
    .await
    .expect(201);
    enqueue_from(&app, None, Some("other.example"))
        .await
        .expect_error(403);
    // The public URL is https: the UI's session cookie is Secure, though the server
    // itself listens on plain-HTTP loopback.
    let ui = app.send(app.request(Method::GET, "/ui")).await;
    let cookie = ui
        .header(SET_COOKIE.as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(cookie.contains("Secure"), "{cookie}");
}

#[tokio::test]
async fn a_keyed_server_answers_any_host_but_still_refuses_a_foreign_origin() {
    let app = spawn_app(|c| {
        c.dispatch = false;
        c.api_key = Some(ApiKey::new(KEY.into()));
    })
    .await;
    app.create_queue_ok("q", "https://hooks.example/in", None)
        .await;
    // Reached through a load balancer by any name: fine, the key is what counts.
    enqueue_from(&app, None, Some("hookq.internal:443"))
        .await
        .expect(201);
    let msg = enqueue_from(&app, Some("https://evil.example"), None)
        .await
        .expect_error(403);
    assert!(msg.contains("cross-origin"), "{msg}");
    assert_eq!(ready_count(&app).await, 1);
}
