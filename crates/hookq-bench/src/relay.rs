//! The relay ceiling: "a queue that stores nothing and does nothing but forward", built on
//! hookq's HTTP stacks (axum in, one shared reqwest client out). It runs as a child process
//! (`hookq-bench --relay-to <URL>`) so that, like the server, it has its own 2 runtime workers
//! and its CPU can be read from `/proc`; it shows what the two HTTP hops alone cost.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use reqwest::header::HeaderValue;
use tokio::signal::unix::{SignalKind, signal};

use crate::sink::JOB_ID_HEADER;

/// What the relay prints (to stderr) before its address; `ServerProcess` waits for it.
pub const LISTENING: &str = "hookq-bench relay listening";
/// The JSON answer to a forwarded job.
const CREATED_BODY: &str = r#"{"ok":true}"#;

/// The relay's shared state: a cheap clone of handles.
#[derive(Clone)]
struct Relay {
    client: reqwest::Client,
    target: Arc<reqwest::Url>,
    /// Job ids are `id_base + n`: unique per request, with no randomness to pay for.
    id_base: u128,
    next_id: Arc<AtomicU64>,
}

/// Serve `POST /queue/{name}` on an ephemeral loopback port, forwarding each body to
/// `target`, until SIGTERM.
pub async fn run(target: &str) -> anyhow::Result<()> {
    let target = reqwest::Url::parse(target)
        .with_context(|| format!("the relay target {target:?} is not a URL"))?;
    // Built like hookq's delivery client (src/dispatch/deliver.rs).
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(30))
        .build()
        .context("cannot build the relay's HTTP client")?;
    // Start time in ns in the high 64 bits: a relay started later never reuses an id.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let relay = Relay {
        client,
        target: Arc::new(target),
        id_base: nanos << 64,
        next_id: Arc::default(),
    };
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot bind the relay")?;
    let addr = listener
        .local_addr()
        .context("cannot read the relay's address")?;
    let app = Router::new()
        .route("/queue/{name}", post(forward))
        .with_state(relay);
    eprintln!("{LISTENING} addr={addr}");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            terminate.recv().await;
        })
        .await
        .context("the relay's server failed")
}

/// Forward one body; 201 once the target answered 2xx, else 502.
async fn forward(State(relay): State<Relay>, body: Bytes) -> Response {
    let n = relay.next_id.fetch_add(1, Ordering::Relaxed);
    let id = uuid::Uuid::from_u128(relay.id_base + u128::from(n));
    let sent = relay
        .client
        .post(relay.target.as_ref().clone())
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .header(JOB_ID_HEADER, id.to_string())
        .body(body)
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(err) => return bad_gateway(&format!("forwarding failed: {err}")),
    };
    let status = response.status();
    // Read the answer so the connection goes back to the pool.
    if let Err(err) = response.bytes().await {
        return bad_gateway(&format!("reading the target's answer failed: {err}"));
    }
    if !status.is_success() {
        return bad_gateway(&format!("the target answered {status}"));
    }
    (
        StatusCode::CREATED,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        CREATED_BODY,
    )
        .into_response()
}

fn bad_gateway(msg: &str) -> Response {
    let body = serde_json::json!({ "ok": false, "status": 502, "msg": msg });
    (StatusCode::BAD_GATEWAY, axum::Json(body)).into_response()
}
