//! Recurring jobs: a queue's cron schedules (`/queue/{name}/_schedules…`). Create or replace
//! one, list them, read, delete, pause and resume one. The [`scheduler`](crate::scheduler)
//! fires them; every change wakes it.

use axum::Json;
use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::body::{parse_json, read_limited};
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::{
    KnownQueue, NewSchedulePath, SchedulePath, check_ordering_key, check_priority,
};
use super::openapi::{IdBody, OkBody};
use crate::cron::{CronSpec, DEFAULT_TIMEZONE};
use crate::json::{self, CanonicalJson};
use crate::model::now_millis;
use crate::store::{NewSchedule, Saved, Schedule};
use crate::telemetry;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_schedules))
        .routes(routes!(put_schedule, get_schedule, delete_schedule))
        .routes(routes!(pause_schedule))
        .routes(routes!(resume_schedule))
        .routes(routes!(run_schedule))
}

/// Room for a schedule's own fields beside its job in a request body.
const SCHEDULE_FIELDS_BYTES: usize = 16 * 1024;

/// A schedule to create or replace.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleIn {
    /// 5 fields (minute hour day-of-month month day-of-week), 6 with a leading seconds field,
    /// or `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`.
    #[schema(example = "0 3 * * *")]
    pub cron: String,
    /// The job each tick enqueues: a JSON object (at most `HOOKQ_MAX_JOB_BYTES`).
    #[schema(value_type = Object)]
    pub job: Box<RawValue>,
    /// The IANA time zone the fields are read in; `UTC` by default.
    #[schema(example = "Europe/Paris")]
    pub timezone: Option<String>,
    /// A paused schedule enqueues nothing; `false` by default.
    pub paused: Option<bool>,
    /// The priority of the jobs it enqueues (−100…100, 0 by default).
    pub priority: Option<i32>,
    /// The ordering key of the jobs it enqueues: with one, a tick's job waits for the previous
    /// tick's to finish (runs never overlap).
    pub ordering_key: Option<String>,
}

/// A schedule as the API shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleView {
    pub name: String,
    pub cron: String,
    pub timezone: String,
    pub paused: bool,
    /// Unix ms of the next tick; `null` while paused (or if the expression never fires again).
    pub next_run_at: Option<i64>,
    /// Unix ms of the last tick fired (a tick's time, not the time it was enqueued).
    pub last_run_at: Option<i64>,
    /// The job the last tick enqueued.
    #[schema(format = "uuid")]
    pub last_job_id: Option<String>,
    /// The job each tick enqueues.
    #[schema(value_type = Object)]
    pub job: Box<RawValue>,
    pub priority: i32,
    pub ordering_key: Option<String>,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms.
    pub updated_at: i64,
}

impl TryFrom<Schedule> for ScheduleView {
    type Error = ApiError;

    fn try_from(schedule: Schedule) -> ApiResult<Self> {
        let job = RawValue::from_string(schedule.payload.into_string()).map_err(|e| {
            ApiError::Internal(anyhow::anyhow!(
                "stored job of schedule {}/{} is not JSON: {e}",
                schedule.queue,
                schedule.name
            ))
        })?;
        Ok(Self {
            name: schedule.name.to_string(),
            cron: schedule.cron,
            timezone: schedule.timezone,
            paused: schedule.paused,
            next_run_at: schedule.next_run_at,
            last_run_at: schedule.last_run_at,
            last_job_id: schedule.last_job_id.map(|id| id.to_string()),
            job,
            priority: schedule.priority,
            ordering_key: schedule.ordering_key,
            created_at: schedule.created_at,
            updated_at: schedule.updated_at,
        })
    }
}

/// A queue's schedules.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ScheduleList {
    pub ok: bool,
    pub schedules: Vec<ScheduleView>,
}

/// A schedule's body, checked: 413 when larger than the job limit allows, 400 when
/// malformed, 422 for an invalid expression, time zone, job or option.
struct ScheduleBody(ScheduleIn, CanonicalJson);

impl FromRequest<AppState> for ScheduleBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> ApiResult<Self> {
        let config = &state.config;
        let limit = config.max_job_bytes.saturating_add(SCHEDULE_FIELDS_BYTES);
        let bytes = read_limited(request.into_body(), limit, config.body_timeout).await?;
        let input: ScheduleIn = parse_json(&bytes)?;
        let job = json::canonicalize(input.job.get().as_bytes())
            .map_err(|e| ApiError::Unprocessable(format!("job: {e}")))?;
        if !job.is_object() {
            return Err(ApiError::Unprocessable("job must be a JSON object".into()));
        }
        if job.len() > config.max_job_bytes {
            return Err(ApiError::PayloadTooLarge(format!(
                "job is larger than {} bytes (HOOKQ_MAX_JOB_BYTES)",
                config.max_job_bytes
            )));
        }
        Ok(Self(input, job))
    }
}

/// Create or replace a schedule. Its next tick is the first after now; a replacement with
/// the same expression and time zone keeps the tick it was waiting for.
#[utoipa::path(
    put,
    path = "/queue/{name}/_schedules/{schedule}",
    tag = "schedules",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("schedule" = String, Path, description = "Schedule name (the queue-name rules)"),
    ),
    request_body = ScheduleIn,
    responses(
        (status = 201, description = "Created", body = OkBody),
        (status = 200, description = "Replaced", body = OkBody),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 408, description = "The body did not arrive within `HOOKQ_BODY_TIMEOUT` (default 30 s)", body = ApiErrorBody),
        (status = 413, description = "The job is larger than `HOOKQ_MAX_JOB_BYTES`", body = ApiErrorBody),
        (status = 422, description = "Invalid schedule name, expression, time zone, job (not an object) or option; an expression that never fires", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn put_schedule(
    State(state): State<AppState>,
    NewSchedulePath { queue, name }: NewSchedulePath,
    ScheduleBody(input, payload): ScheduleBody,
) -> ApiResult<(StatusCode, Json<OkBody>)> {
    let timezone = input.timezone.as_deref().unwrap_or(DEFAULT_TIMEZONE);
    let spec = CronSpec::parse(&input.cron, timezone).map_err(|e| ApiError::Unprocessable(e.0))?;
    let now = now_millis();
    if spec.next_after(now).is_none() {
        return Err(ApiError::Unprocessable(format!(
            "cron: `{}` never fires",
            spec.expression()
        )));
    }
    if let Some(key) = &input.ordering_key {
        check_ordering_key(key)?;
    }
    let schedule = NewSchedule {
        name,
        spec,
        payload,
        priority: check_priority(input.priority.unwrap_or(0))?,
        ordering_key: input.ordering_key,
        paused: input.paused.unwrap_or(false),
    };
    let saved = state
        .store
        .put_schedule(queue.name.clone(), schedule, now)
        .await?;
    state.schedule_changes.notify();
    let status = match saved {
        Saved::Created => StatusCode::CREATED,
        Saved::Replaced => StatusCode::OK,
    };
    Ok((status, Json(OkBody::OK)))
}

/// A queue's schedules, by name.
#[utoipa::path(
    get,
    path = "/queue/{name}/_schedules",
    tag = "schedules",
    params(("name" = String, Path, description = "Queue name")),
    responses(
        (status = 200, description = "The queue's schedules", body = ScheduleList),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn list_schedules(
    State(state): State<AppState>,
    KnownQueue(queue): KnownQueue,
) -> ApiResult<Json<ScheduleList>> {
    let schedules = state
        .store
        .list_schedules(queue.name.clone())
        .await?
        .into_iter()
        .map(ScheduleView::try_from)
        .collect::<ApiResult<_>>()?;
    Ok(Json(ScheduleList {
        ok: true,
        schedules,
    }))
}

/// One schedule: the same object as in the list (as `GET /queue/{name}/{id}` shows a job).
#[utoipa::path(
    get,
    path = "/queue/{name}/_schedules/{schedule}",
    tag = "schedules",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("schedule" = String, Path, description = "Schedule name"),
    ),
    responses(
        (status = 200, description = "The schedule", body = ScheduleView),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue, or no such schedule in it", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn get_schedule(
    State(state): State<AppState>,
    SchedulePath { queue, name }: SchedulePath,
) -> ApiResult<Json<ScheduleView>> {
    let schedule = state.store.get_schedule(queue.name.clone(), name).await?;
    Ok(Json(schedule.try_into()?))
}

/// Delete a schedule. The jobs it enqueued already stay.
#[utoipa::path(
    delete,
    path = "/queue/{name}/_schedules/{schedule}",
    tag = "schedules",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("schedule" = String, Path, description = "Schedule name"),
    ),
    responses(
        (status = 200, description = "Deleted", body = OkBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue, or no such schedule in it", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn delete_schedule(
    State(state): State<AppState>,
    SchedulePath { queue, name }: SchedulePath,
) -> ApiResult<Json<OkBody>> {
    state
        .store
        .delete_schedule(queue.name.clone(), name)
        .await?;
    state.schedule_changes.notify();
    Ok(Json(OkBody::OK))
}

/// Pause a schedule: it enqueues nothing until resumed.
#[utoipa::path(
    post,
    path = "/queue/{name}/_schedules/{schedule}/_pause",
    tag = "schedules",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("schedule" = String, Path, description = "Schedule name"),
    ),
    responses(
        (status = 200, description = "Paused", body = OkBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue, or no such schedule in it", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn pause_schedule(
    State(state): State<AppState>,
    path: SchedulePath,
) -> ApiResult<Json<OkBody>> {
    set_paused(&state, path, true).await
}

/// Resume a paused schedule from its next tick after now: the ticks it missed while paused
/// are not made up.
#[utoipa::path(
    post,
    path = "/queue/{name}/_schedules/{schedule}/_resume",
    tag = "schedules",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("schedule" = String, Path, description = "Schedule name"),
    ),
    responses(
        (status = 200, description = "Resumed", body = OkBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue, or no such schedule in it", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn resume_schedule(
    State(state): State<AppState>,
    path: SchedulePath,
) -> ApiResult<Json<OkBody>> {
    set_paused(&state, path, false).await
}

/// Run a schedule once now, by hand: its job is enqueued as a tick's would be (same job,
/// priority and ordering key; `X-Hookq-Schedule-Tick` is now), a paused schedule too. Its
/// next tick does not move; `lastRunAt` and `lastJobId` name this run.
#[utoipa::path(
    post,
    path = "/queue/{name}/_schedules/{schedule}/_run",
    tag = "schedules",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("schedule" = String, Path, description = "Schedule name"),
    ),
    responses(
        (status = 201, description = "Its job is stored; the id is a UUIDv7", body = IdBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue, or no such schedule in it", body = ApiErrorBody),
        (status = 429, description = "The queue holds its `maxQueued` jobs (\"queue full\"): nothing stored", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn run_schedule(
    State(state): State<AppState>,
    SchedulePath { queue, name }: SchedulePath,
) -> ApiResult<(StatusCode, Json<IdBody>)> {
    let now = now_millis();
    let id = state
        .store
        .run_schedule_now(queue.name.clone(), name, now)
        .await?;
    state.wakeups.mark_due(&queue.name, now);
    telemetry::job_enqueued(&queue.name);
    Ok((StatusCode::CREATED, Json(IdBody::new(id))))
}

async fn set_paused(
    state: &AppState,
    SchedulePath { queue, name }: SchedulePath,
    paused: bool,
) -> ApiResult<Json<OkBody>> {
    state
        .store
        .pause_schedule(queue.name.clone(), name, paused, now_millis())
        .await?;
    state.schedule_changes.notify();
    Ok(Json(OkBody::OK))
}
