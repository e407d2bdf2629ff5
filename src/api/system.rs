//! `GET /` (service description) and `GET /healthz` (liveness and database ping).

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiError, ApiResult};

/// Routes that need no API key.
pub fn public_router() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz))
}

pub fn router() -> Router<AppState> {
    Router::new().route("/", get(root))
}

async fn root() -> Json<Value> {
    Json(json!({
        "name": "hookq",
        "version": env!("CARGO_PKG_VERSION"),
        "services": ["queue"],
    }))
}

async fn healthz(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    state
        .store
        .ping()
        .await
        .map_err(|e| ApiError::Unavailable(format!("database unreachable: {e}")))?;
    Ok(Json(json!({ "ok": true })))
}
