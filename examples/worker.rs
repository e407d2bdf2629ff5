//! Example worker endpoint: receives hookq jobs and verifies `X-HYPER-SIGNATURE`.
//!
//! ```text
//! cargo run --example worker -- --listen 127.0.0.1:8080 --secret s3cret
//! WORKER_SECRET=s3cret cargo run --example worker
//! ```
//!
//! Accepts POST on any path. Without a secret, signatures are not checked.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Json;
use axum::routing::post;
use clap::Parser;
use hookq_signature as signature;
use serde_json::{Value, json};

/// How far the signed timestamp may be from our clock (replay window).
const TOLERANCE: Duration = Duration::from_secs(5 * 60);

#[derive(Parser)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Shared secret of the queue; when set, unsigned or badly signed jobs get 401.
    #[arg(long, env = "WORKER_SECRET")]
    secret: Option<String>,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let secret = Arc::new(args.secret);
    if secret.is_none() {
        println!("warning: no secret configured, signatures are NOT verified");
    }
    let app = Router::new()
        .route("/", post(receive))
        .route("/{*path}", post(receive))
        .with_state(secret);
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!("worker listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await
}

async fn receive(
    State(secret): State<Arc<Option<String>>>,
    headers: HeaderMap,
    // Raw bytes, not a parsed `Json`: the signature covers the exact bytes
    // hookq sent (canonical JSON), so they must be verified untouched.
    body: Bytes,
) -> (StatusCode, Json<Value>) {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let job_id = header("X-Hookq-Job-Id").unwrap_or("-");
    let attempt = header("X-Hookq-Attempt").unwrap_or("-");

    let mut verified = "not checked: no secret".to_owned();
    if let Some(secret) = secret.as_deref() {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let checked = match header(signature::HEADER) {
            Some(value) => signature::verify(secret.as_bytes(), value, &body, now_ms, TOLERANCE)
                .map_err(|e| e.to_string()),
            None => Err(format!("missing {} header", signature::HEADER)),
        };
        if let Err(error) = checked {
            println!("job {job_id} attempt {attempt}: rejected: {error}");
            return (
                StatusCode::UNAUTHORIZED,
                Json(json!({ "ok": false, "error": error })),
            );
        }
        verified = format!("verified {}", header(signature::HEADER).unwrap_or_default());
    }

    println!(
        "job {job_id} attempt {attempt} (signature {verified}): {}",
        String::from_utf8_lossy(&body)
    );
    (StatusCode::OK, Json(json!({ "ok": true })))
}
