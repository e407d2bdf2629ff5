//! `GET /` (service description), `GET /healthz` (liveness and database ping), `GET /readyz`,
//! `GET /metrics`, and the public `GET /openapi.json`.

use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::openapi::{__path_openapi_json, OkBody, openapi_json};
use crate::model::QueueName;
use crate::store::StoreError;
use crate::telemetry;

/// Routes that need no API key.
pub fn public_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(openapi_json))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(root))
        .routes(routes!(metrics))
}

/// What this server is.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"name": "hookq", "version": "0.1.0", "services": ["queue"]}))]
pub struct ServiceInfo {
    pub name: &'static str,
    pub version: &'static str,
    /// The hyper services this server provides.
    pub services: Vec<&'static str>,
}

/// Describe the service.
#[utoipa::path(
    get,
    path = "/",
    tag = "service",
    responses(
        (status = 200, description = "Name, version and services", body = ServiceInfo),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
    ),
)]
async fn root() -> Json<ServiceInfo> {
    Json(ServiceInfo {
        name: "hookq",
        version: env!("CARGO_PKG_VERSION"),
        services: vec!["queue"],
    })
}

/// Ready to take traffic: the database answers and the server is not shutting down.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "service",
    security(()),
    responses(
        (status = 200, description = "Ready", body = OkBody),
        (status = 503, description = "Shutting down, or the database is unreachable", body = ApiErrorBody),
    ),
)]
async fn readyz(State(state): State<AppState>) -> ApiResult<Json<OkBody>> {
    if state.shutdown.is_cancelled() {
        return Err(ApiError::Unavailable("shutting down".into()));
    }
    healthz(State(state)).await
}

/// Prometheus text format. Queue depths are counted at scrape time.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "service",
    responses(
        (status = 200, description = "Metrics in the Prometheus text format",
            body = String, content_type = "text/plain; version=0.0.4; charset=utf-8"),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn metrics(State(state): State<AppState>) -> ApiResult<Response> {
    super::queue_stats::record_metrics(&state).await?;
    let registry = state.store.registry();
    let body = telemetry::render(|name| {
        QueueName::parse(name).is_ok_and(|queue| registry.contains(&queue))
    });
    Ok((
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        body,
    )
        .into_response())
}

/// Alive: the database answers.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "service",
    security(()),
    responses(
        (status = 200, description = "The database answers", body = OkBody),
        (status = 503, description = "The database is unreachable", body = ApiErrorBody),
    ),
)]
async fn healthz(State(state): State<AppState>) -> ApiResult<Json<OkBody>> {
    // Anyone may call this route: the cause (a host, a database name, a driver's words) is
    // for the logs only.
    match state.store.ping().await {
        Ok(()) => {}
        // Says nothing about the host: safe for anyone to read, and the operator's cue.
        Err(failed @ StoreError::DiskFailed(_)) => return Err(failed.into()),
        Err(err) => {
            tracing::warn!(error = ?err, "health check: the database does not answer");
            return Err(ApiError::Unavailable("database unreachable".into()));
        }
    }
    Ok(Json(OkBody::OK))
}
