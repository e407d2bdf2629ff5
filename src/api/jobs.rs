//! Job routes of the hyper Queue API: list a queue's READY or ERROR jobs (paginated),
//! get one job, cancel a READY job, retry an ERROR job.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::AppState;
use super::cursor::{Cursor, invalid_cursor};
use super::error::{ApiError, ApiResult};
use super::queues::existing_queue_name;
use crate::model::{JobId, JobStatus, QueueName, now_millis};
use crate::store::{
    AttemptRecord, DeadLetter, DlqState, Filter, JobRecord, JobState, Position, Selection,
};

pub const DEFAULT_PAGE: usize = 100;
pub const MAX_PAGE: usize = 1000;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/queue/{name}/{id}", get(get_job))
        .route("/queue/{name}/{id}/_cancel", post(cancel_job))
        .route("/queue/{name}/{id}/_retry", post(retry_job))
}

/// A job as the API shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    id: String,
    status: &'static str,
    job: Box<RawValue>,
    queue: String,
    attempts: u32,
    created_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_attempt_at: Option<i64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    in_flight: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_status: Option<u16>,
    /// Failed attempts, oldest first (only on the single-job route).
    #[serde(skip_serializing_if = "Option::is_none")]
    history: Option<Vec<AttemptRecord>>,
}

impl TryFrom<JobRecord> for JobView {
    type Error = ApiError;

    fn try_from(record: JobRecord) -> ApiResult<Self> {
        let job = RawValue::from_string(record.payload).map_err(|e| {
            ApiError::Internal(anyhow::anyhow!(
                "stored payload of job {} is not JSON: {e}",
                record.id
            ))
        })?;
        let status = match record.state {
            JobState::Dead => JobStatus::Error,
            JobState::Ready | JobState::InFlight => JobStatus::Ready,
        };
        Ok(Self {
            id: record.id.to_string(),
            status: status.as_str(),
            job,
            queue: record.queue.to_string(),
            attempts: record.attempts,
            created_at: record.created_at,
            next_attempt_at: (record.state == JobState::Ready).then_some(record.run_at),
            in_flight: record.state == JobState::InFlight,
            error: record.last_error,
            last_status: record.last_status,
            history: None,
        })
    }
}

#[derive(Deserialize)]
pub struct ListParams {
    status: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

pub async fn list_jobs(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<ListParams>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let name = existing_queue_name(path)?;
    let Query(params) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let status = params
        .status
        .as_deref()
        .ok_or_else(|| ApiError::Unprocessable("status is required: READY or ERROR".into()))
        .and_then(|s| JobStatus::parse(s).map_err(|e| ApiError::Unprocessable(e.0)))?;
    let limit = parse_limit(params.limit.as_deref())?;
    let cursor = params.cursor.as_deref().map(Cursor::decode).transpose()?;
    let (mut records, position_of): (Vec<JobRecord>, fn(&JobRecord) -> Cursor) = match status {
        JobStatus::Ready => {
            let after = match cursor {
                None => None,
                Some(Cursor::Ready(id)) => Some(id),
                Some(Cursor::Error(_)) => return Err(invalid_cursor()),
            };
            let records = state.store.list_ready(name, after, limit + 1).await?;
            (records, |r| Cursor::Ready(r.id))
        }
        JobStatus::Error => {
            let after = match cursor {
                None => None,
                Some(Cursor::Error(position)) => Some(position),
                Some(Cursor::Ready(_)) => return Err(invalid_cursor()),
            };
            let filter = Filter {
                queue: Some(name),
                state: Some(DlqState::Pending),
            };
            let (letters, _) = state
                .store
                .list_dead_letters(filter, after, limit + 1, false, true)
                .await?;
            let records = letters
                .into_iter()
                .map(DeadLetter::into_job_record)
                .collect();
            (records, |r| {
                Cursor::Error(Position {
                    failed_at: r.run_at,
                    id: r.id,
                })
            })
        }
    };
    let next = if records.len() > limit {
        records.truncate(limit);
        records.last().map(|r| position_of(r).encode())
    } else {
        None
    };
    let jobs = records
        .into_iter()
        .map(JobView::try_from)
        .collect::<ApiResult<Vec<_>>>()?;
    let mut body = json!({ "ok": true, "jobs": jobs });
    if let Some(next) = next {
        body["next"] = Value::String(next);
    }
    Ok(Json(body))
}

fn parse_limit(raw: Option<&str>) -> ApiResult<usize> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_PAGE);
    };
    match raw.trim().parse::<u64>() {
        Ok(0) | Err(_) => Err(ApiError::Unprocessable(
            "limit must be a whole number of at least 1".into(),
        )),
        Ok(n) => Ok((n.min(MAX_PAGE as u64)) as usize),
    }
}

/// The queue and job named in the path. Ids that cannot be valid cannot exist either.
fn job_path(path: Result<Path<(String, String)>, PathRejection>) -> ApiResult<(QueueName, JobId)> {
    let Path((queue, id)) = path.map_err(|_| ApiError::job_not_found())?;
    let queue = QueueName::parse(&queue).map_err(|_| ApiError::queue_not_found())?;
    let id = JobId::parse(&id).map_err(|_| ApiError::job_not_found())?;
    Ok((queue, id))
}

fn require_queue(state: &AppState, queue: &QueueName) -> ApiResult<()> {
    if state.store.registry().contains(queue) {
        Ok(())
    } else {
        Err(ApiError::queue_not_found())
    }
}

async fn get_job(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> ApiResult<Json<JobView>> {
    let (queue, id) = job_path(path)?;
    require_queue(&state, &queue)?;
    let (record, history) = state.store.get_job(queue, id).await?;
    let mut view = JobView::try_from(record)?;
    view.history = Some(history);
    Ok(Json(view))
}

async fn cancel_job(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let (queue, id) = job_path(path)?;
    require_queue(&state, &queue)?;
    state.store.cancel(queue, id).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "ok": true, "id": id.to_string() })),
    ))
}

async fn retry_job(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let (queue, id) = job_path(path)?;
    require_queue(&state, &queue)?;
    let (record, _) = state.store.get_job(queue.clone(), id).await?;
    if record.state != JobState::Dead {
        return Err(ApiError::Conflict(
            "job is not in ERROR: only dead-lettered jobs can be retried".into(),
        ));
    }
    let now = now_millis();
    let (claimed, report) = state
        .store
        .replay(Selection::Ids(vec![id]), now, now)
        .await?;
    if claimed == 0 {
        return Err(ApiError::Conflict(
            "dead letter is not pending (already replayed or acknowledged)".into(),
        ));
    }
    if report.replayed.is_empty() {
        return Err(ApiError::Conflict(
            "the job could not be put back on its queue; the dead letter stays pending".into(),
        ));
    }
    if state.config.dispatch {
        state.wakeups.mark_due(&queue, now);
    }
    Ok((
        StatusCode::CREATED,
        Json(json!({ "ok": true, "id": id.to_string() })),
    ))
}
