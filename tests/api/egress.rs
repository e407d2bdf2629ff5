//! How deliveries leave the server: never through a proxy named by the environment (a proxy
//! resolves the target itself, which would turn the SSRF guard off), and through the
//! configured egress proxy only after hookq has resolved and checked the target itself.

use hookq::config::ApiKey;
use serde_json::Value;

use crate::helpers::{BinaryApp, Reply, TestReceiver, payload, spawn_app};

const KEY: &str = "egress-test-api-key-0123456789";

/// The port a receiver listens on.
fn port_of(receiver: &TestReceiver) -> u16 {
    let url = reqwest::Url::parse(&receiver.url).expect("the receiver's URL parses");
    url.port().expect("the receiver's URL has a port")
}

fn error_of(job: &Value) -> String {
    job["error"]
        .as_str()
        .unwrap_or_else(|| panic!("a dead letter carries its last error: {job}"))
        .to_owned()
}

#[tokio::test]
async fn a_proxy_in_the_environment_is_never_used_and_the_guard_still_refuses_loopback() {
    let proxy = TestReceiver::always(Reply::ok()).await;
    let proxy_url = format!("http://127.0.0.1:{}", port_of(&proxy));
    let dir = tempfile::tempdir().unwrap();
    let mut server = BinaryApp::start(
        &dir.path().join("hookq.db"),
        &[
            ("HOOKQ_API_KEY", KEY),
            ("HOOKQ_MAX_ATTEMPTS", "1"),
            ("HTTP_PROXY", &proxy_url),
            ("http_proxy", &proxy_url),
            ("HTTPS_PROXY", &proxy_url),
            ("https_proxy", &proxy_url),
            ("ALL_PROXY", &proxy_url),
            ("all_proxy", &proxy_url),
        ],
    )
    .await;
    server.api.api_key = Some(KEY.to_owned());
    server
        .create_queue_ok("q", "http://localhost:9/hook", Some("secret"))
        .await;
    let id = server.enqueue_ok("q", &payload(1)).await;
    let job = server.wait_until_error("q", &id).await;
    let error = error_of(&job);
    assert!(
        error.contains("target localhost is not a public address"),
        "{error}"
    );
    assert!(
        proxy.received().is_empty(),
        "the environment's proxy was used: {:?}",
        proxy.received()
    );
    server.terminate();
    server.wait_for_exit().await;
}

#[tokio::test]
async fn through_the_egress_proxy_a_target_is_checked_by_hookq_before_the_proxy_sees_it() {
    let proxy = TestReceiver::always(Reply::ok()).await;
    // The proxy is named by a loopback name: its own address is the operator's choice and
    // is not judged by the guard.
    let proxy_url = format!("http://localhost:{}", port_of(&proxy));
    let app = spawn_app(|c| {
        c.api_key = Some(ApiKey::new(KEY.into()));
        c.target_allowlist = Vec::new();
        c.delivery.defaults.max_attempts = 1;
        c.egress_proxy = Some(proxy_url.parse().unwrap());
    })
    .await;

    app.create_queue_ok("internal", "http://localhost:9/hook", Some("secret"))
        .await;
    let id = app.enqueue_ok("internal", &payload(1)).await;
    let job = app.wait_until_error("internal", &id).await;
    let error = error_of(&job);
    assert!(
        error.contains("target localhost is not a public address"),
        "{error}"
    );
    assert!(
        !error.contains("127.0.0.1") && !error.contains("::1"),
        "the error does not say what the name resolved to: {error}"
    );
    assert!(proxy.received().is_empty(), "{:?}", proxy.received());

    // A public target goes to the proxy (which answers for it), signed as always.
    let public = "http://93.184.216.34/hook";
    app.create_queue_ok("public", public, Some("secret")).await;
    let id = app.enqueue_ok("public", &payload(2)).await;
    let received = proxy.wait_for(1).await;
    assert_eq!(
        received[0].uri.to_string(),
        public,
        "absolute-form, to the proxy"
    );
    assert_eq!(received[0].job_id(), id);
    crate::helpers::assert_signed(&received[0], "secret");
    app.wait_until_gone("public", &id).await;
}
