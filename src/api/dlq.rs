//! Dead-letter administration (`/admin/dlq…`): list with cursor pagination, stats, replay,
//! acknowledge, delete. Dead letters are identified by their job id.

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::AppState;
use super::body::{parse_json, read_limited};
use super::cursor::Cursor;
use super::error::{ApiError, ApiResult};
use crate::model::{JobId, QueueName, now_millis};
use crate::store::{DlqState, Filter, Selection};

pub const DEFAULT_PAGE: usize = 50;
pub const MAX_PAGE: usize = 100;
/// Most ids one replay or acknowledge request may name.
pub const MAX_IDS: usize = 1000;
/// The longest a replay may be delayed.
pub const MAX_DELAY_SECONDS: u64 = 7 * 24 * 3600;

const MAX_ADMIN_BODY: usize = 256 * 1024;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/admin/dlq", get(list).delete(delete_for_queue))
        .route("/admin/dlq/stats", get(stats))
        .route("/admin/dlq/replay", post(replay))
        .route("/admin/dlq/acknowledge", post(acknowledge))
        .route("/admin/dlq/{id}", delete(delete_one))
}

#[derive(Deserialize)]
struct ListParams {
    queue: Option<String>,
    status: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
    include_payload: Option<String>,
}

fn parse_queue(raw: &str) -> ApiResult<QueueName> {
    QueueName::parse(raw).map_err(|_| ApiError::queue_not_found())
}

fn parse_bool(name: &str, raw: Option<&str>) -> ApiResult<bool> {
    match raw.map(str::to_ascii_lowercase).as_deref() {
        None | Some("false" | "0" | "no") => Ok(false),
        Some("true" | "1" | "yes" | "") => Ok(true),
        Some(other) => Err(ApiError::BadRequest(format!(
            "{name} must be true or false, not `{other}`"
        ))),
    }
}

async fn list(
    State(state): State<AppState>,
    query: Result<Query<ListParams>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Query(params) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let queue = params.queue.as_deref().map(parse_queue).transpose()?;
    let status = match params.status.as_deref().unwrap_or("pending") {
        "all" => None,
        raw => Some(DlqState::parse(raw).ok_or_else(|| {
            ApiError::BadRequest(
                "status must be pending, replaying, replayed, acknowledged or all".into(),
            )
        })?),
    };
    let limit = match params.limit.as_deref() {
        None => DEFAULT_PAGE,
        Some(raw) => match raw.trim().parse::<u64>() {
            Ok(n) if n >= 1 => (n as usize).min(MAX_PAGE),
            _ => {
                return Err(ApiError::BadRequest(
                    "limit must be a whole number of at least 1".into(),
                ));
            }
        },
    };
    let after = params
        .cursor
        .as_deref()
        .map(|raw| Cursor::decode(raw)?.into_position())
        .transpose()?;
    let include_payload = parse_bool("include_payload", params.include_payload.as_deref())?;
    let filter = Filter {
        queue,
        state: status,
    };
    let (mut letters, total) = state
        .store
        .list_dead_letters(filter, after, limit + 1, true, include_payload)
        .await?;
    let has_more = letters.len() > limit;
    letters.truncate(limit);
    let next_cursor = has_more.then(|| letters.last()).flatten().map(|l| {
        Cursor::Error(crate::store::Position {
            failed_at: l.failed_at,
            id: l.id,
        })
        .encode()
    });
    let messages = letters
        .into_iter()
        .map(|letter| {
            let payload = letter.payload.clone();
            let mut message =
                serde_json::to_value(&letter).map_err(|e| ApiError::Internal(e.into()))?;
            if let Some(payload) = payload {
                let raw =
                    RawValue::from_string(payload).map_err(|e| ApiError::Internal(e.into()))?;
                message["payload"] =
                    serde_json::to_value(raw).map_err(|e| ApiError::Internal(e.into()))?;
            }
            Ok(message)
        })
        .collect::<ApiResult<Vec<_>>>()?;
    Ok(Json(json!({
        "ok": true,
        "messages": messages,
        "total_count": total,
        "limit": limit,
        "next_cursor": next_cursor,
        "has_more": has_more,
    })))
}

async fn stats(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let stats = state.store.dlq_stats(now_millis()).await?;
    let mut body = serde_json::to_value(stats).map_err(|e| ApiError::Internal(e.into()))?;
    body["ok"] = Value::Bool(true);
    Ok(Json(body))
}

/// `{"ids":[…]}` or `{"queue":"…","all":true}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SelectionBody {
    #[serde(default)]
    ids: Option<Vec<String>>,
    #[serde(default)]
    queue: Option<String>,
    #[serde(default)]
    all: bool,
    #[serde(default)]
    delay_seconds: Option<u64>,
}

impl SelectionBody {
    fn selection(&self) -> ApiResult<Selection> {
        match (&self.ids, &self.queue, self.all) {
            (Some(ids), None, false) => {
                if ids.is_empty() || ids.len() > MAX_IDS {
                    return Err(ApiError::Unprocessable(format!(
                        "ids must list 1 to {MAX_IDS} dead-letter ids"
                    )));
                }
                let mut parsed = ids
                    .iter()
                    .map(|raw| {
                        JobId::parse(raw).map_err(|_| {
                            ApiError::Unprocessable(format!("`{raw}` is not a job id"))
                        })
                    })
                    .collect::<ApiResult<Vec<_>>>()?;
                parsed.sort();
                parsed.dedup();
                Ok(Selection::Ids(parsed))
            }
            (None, Some(queue), true) => Ok(Selection::Queue(
                QueueName::parse(queue).map_err(|e| ApiError::Unprocessable(e.0))?,
            )),
            (None, Some(_), false) => Err(ApiError::Unprocessable(
                "to act on a whole queue, say so: {\"queue\":\"…\",\"all\":true}".into(),
            )),
            _ => Err(ApiError::Unprocessable(
                "give either \"ids\": [...] or \"queue\" with \"all\": true".into(),
            )),
        }
    }
}

async fn read_selection(body: Body) -> ApiResult<SelectionBody> {
    let bytes = read_limited(body, MAX_ADMIN_BODY).await?;
    parse_json(&bytes)
}

fn require_known_queue(state: &AppState, selection: &Selection) -> ApiResult<()> {
    match selection {
        Selection::Queue(queue) if !state.store.registry().contains(queue) => {
            Err(ApiError::queue_not_found())
        }
        _ => Ok(()),
    }
}

async fn replay(State(state): State<AppState>, body: Body) -> ApiResult<Json<Value>> {
    let request = read_selection(body).await?;
    let selection = request.selection()?;
    require_known_queue(&state, &selection)?;
    let delay = request.delay_seconds.unwrap_or(0);
    if delay > MAX_DELAY_SECONDS {
        return Err(ApiError::Unprocessable(format!(
            "delay_seconds must be at most {MAX_DELAY_SECONDS}"
        )));
    }
    let requested = match &selection {
        Selection::Ids(ids) => ids.len() as u64,
        Selection::Queue(queue) => {
            let filter = Filter {
                queue: Some(queue.clone()),
                state: Some(DlqState::Pending),
            };
            state
                .store
                .list_dead_letters(filter, None, 1, true, false)
                .await?
                .1
        }
    };
    let now = now_millis();
    let run_at = now + (delay as i64) * 1000;
    let (claimed, report) = state.store.replay(selection, now, run_at).await?;
    if state.config.dispatch && !report.replayed.is_empty() {
        for queue in state.store.registry().all() {
            state.wakeups.mark_due(&queue.name, run_at);
        }
    }
    tracing::info!(
        requested,
        claimed,
        replayed = report.replayed.len(),
        failed = report.failed.len(),
        "dead letters replayed"
    );
    Ok(Json(json!({
        "ok": true,
        "requested": requested,
        "claimed": claimed,
        "replayed": report.replayed.len(),
        "failed": report.failed.len(),
    })))
}

async fn acknowledge(State(state): State<AppState>, body: Body) -> ApiResult<Json<Value>> {
    let request = read_selection(body).await?;
    if request.delay_seconds.is_some() {
        return Err(ApiError::Unprocessable(
            "delay_seconds applies to replay only".into(),
        ));
    }
    let selection = request.selection()?;
    require_known_queue(&state, &selection)?;
    let count = state.store.acknowledge(selection, now_millis()).await?;
    Ok(Json(json!({ "ok": true, "acknowledged": count })))
}

async fn delete_one(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Value>> {
    let Path(raw) = path.map_err(|_| ApiError::NotFound("dead letter not found".into()))?;
    let id = JobId::parse(&raw).map_err(|_| ApiError::NotFound("dead letter not found".into()))?;
    let deleted = state
        .store
        .delete_dead_letters(Selection::Ids(vec![id]))
        .await
        .map_err(|e| match e {
            crate::store::StoreError::JobNotFound => {
                ApiError::NotFound("dead letter not found".into())
            }
            other => other.into(),
        })?;
    Ok(Json(json!({ "ok": true, "deleted": deleted })))
}

#[derive(Deserialize)]
struct DeleteParams {
    queue: Option<String>,
}

async fn delete_for_queue(
    State(state): State<AppState>,
    query: Result<Query<DeleteParams>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Query(params) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let raw = params.queue.ok_or_else(|| {
        ApiError::BadRequest("name the queue whose dead letters to delete: ?queue=…".into())
    })?;
    let queue = parse_queue(&raw)?;
    if !state.store.registry().contains(&queue) {
        return Err(ApiError::queue_not_found());
    }
    let deleted = state
        .store
        .delete_dead_letters(Selection::Queue(queue))
        .await?;
    Ok(Json(json!({ "ok": true, "deleted": deleted })))
}
