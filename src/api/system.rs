//! `GET /` (service description) and `GET /healthz` (liveness and database ping).

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::{ApiError, ApiResult};
use crate::telemetry;

/// Routes that need no API key.
pub fn public_router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(root))
        .route("/metrics", get(metrics))
}

async fn root() -> Json<Value> {
    Json(json!({
        "name": "hookq",
        "version": env!("CARGO_PKG_VERSION"),
        "services": ["queue"],
    }))
}

/// Ready to take traffic: the database answers and the server is not shutting down.
async fn readyz(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    if state.shutdown.is_cancelled() {
        return Err(ApiError::Unavailable("shutting down".into()));
    }
    healthz(State(state)).await
}

/// Prometheus text format. Queue depths are counted at scrape time.
async fn metrics(State(state): State<AppState>) -> ApiResult<Response> {
    let (ready, dead) = state.store.queue_depths().await?;
    telemetry::queue_depths(&ready, &dead);
    let body = telemetry::handle().render();
    Ok((
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        body,
    )
        .into_response())
}

async fn healthz(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    state
        .store
        .ping()
        .await
        .map_err(|e| ApiError::Unavailable(format!("database unreachable: {e}")))?;
    Ok(Json(json!({ "ok": true })))
}
