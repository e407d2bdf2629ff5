//! Queue routes of the hyper Queue API: list, create (`PUT`), delete, and enqueue (`POST`).

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::body::{parse_json, read_limited};
use super::error::{ApiError, ApiResult};
use crate::dispatch::guard::AddressPolicy;
use crate::json;
use crate::model::{JobId, QueueName, Secret, Target, now_millis};
use crate::store::Queue;
use crate::telemetry;

/// Queue definitions are small; this bounds what a client can make us read.
const MAX_QUEUE_BODY: usize = 16 * 1024;

pub fn router() -> Router<AppState> {
    Router::new().route("/queue", get(list_queues)).route(
        "/queue/{name}",
        put(create_queue)
            .delete(delete_queue)
            .post(enqueue)
            .get(super::jobs::list_jobs),
    )
}

/// A queue named in the path: a name that cannot be valid cannot exist either.
pub(super) fn existing_queue_name(
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<QueueName> {
    let Path(raw) = path.map_err(|_| ApiError::queue_not_found())?;
    QueueName::parse(&raw).map_err(|_| ApiError::queue_not_found())
}

async fn list_queues(State(state): State<AppState>) -> Json<Value> {
    let names: Vec<String> = state
        .store
        .registry()
        .all()
        .iter()
        .map(|q| q.name.to_string())
        .collect();
    Json(json!({ "ok": true, "name": "queue", "queues": names }))
}

/// Unknown fields are ignored, as hyper does, so clients that send extra fields still work.
#[derive(Deserialize)]
struct CreateQueue {
    target: String,
    #[serde(default)]
    secret: Option<String>,
}

async fn create_queue(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    body: Body,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let Path(raw_name) = path.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let bytes = read_limited(body, MAX_QUEUE_BODY).await?;
    let request: CreateQueue = parse_json(&bytes)?;
    let name = QueueName::parse(&raw_name).map_err(|e| ApiError::Unprocessable(e.0))?;
    let target = Target::parse(&request.target).map_err(|e| ApiError::Unprocessable(e.0))?;
    check_target_allowed(&state, &target)?;
    let secret = request
        .secret
        .as_deref()
        .map(Secret::parse)
        .transpose()
        .map_err(|e| ApiError::Unprocessable(e.0))?;
    state
        .store
        .create_queue(Queue {
            name: name.clone(),
            target,
            secret,
            created_at: now_millis(),
        })
        .await?;
    tracing::info!(queue = %name, "queue created");
    Ok((StatusCode::CREATED, Json(json!({ "ok": true }))))
}

/// Refuse at creation what delivery would refuse anyway: plain http under HOOKQ_HTTPS_ONLY,
/// and a literal IP address the SSRF guard blocks. (Names are checked at connect time.)
fn check_target_allowed(state: &AppState, target: &Target) -> ApiResult<()> {
    if state.config.https_only && target.url().scheme() != "https" {
        return Err(ApiError::Unprocessable(
            "target must use https (HOOKQ_HTTPS_ONLY is on)".into(),
        ));
    }
    if let Some(ip) = target.ip() {
        if !state.config.address_policy().allows(ip) {
            return Err(ApiError::Unprocessable(AddressPolicy::refusal(ip)));
        }
    }
    Ok(())
}

async fn delete_queue(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Value>> {
    let name = existing_queue_name(path)?;
    state.store.delete_queue(name.clone()).await?;
    state.wakeups.forget(&name);
    tracing::info!(queue = %name, "queue deleted with all its jobs");
    Ok(Json(json!({ "ok": true })))
}

#[tracing::instrument(level = "debug", skip_all, fields(queue))]
async fn enqueue(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    body: Body,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let name = existing_queue_name(path)?;
    tracing::Span::current().record("queue", name.as_str());
    if !state.store.registry().contains(&name) {
        return Err(ApiError::queue_not_found());
    }
    let bytes = read_limited(body, state.config.max_job_bytes).await?;
    let payload = json::canonicalize(&bytes)
        .map_err(|e| ApiError::BadRequest(format!("malformed JSON: {e}")))?;
    if !payload.is_object() {
        return Err(ApiError::Unprocessable(
            "a job must be a JSON object".into(),
        ));
    }
    let id = JobId::new();
    let now = now_millis();
    state
        .store
        .enqueue(name.clone(), id, payload.into_string(), now)
        .await?;
    telemetry::job_enqueued(&name);
    if state.config.dispatch {
        state.wakeups.mark_due(&name, now);
    }
    Ok((
        StatusCode::CREATED,
        Json(json!({ "ok": true, "id": id.to_string() })),
    ))
}
