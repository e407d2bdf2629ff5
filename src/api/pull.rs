//! Pull consumer routes of the native API: lease a pull queue's jobs (`_lease`, optionally
//! waiting for one), then ack, nack or extend each lease. The engine is [`crate::pull`];
//! this edge parses, checks bounds and shapes the answers.

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::audit::Actor;
use super::body::{parse_json, read_limited};
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::{ApiJson, JobPath, KnownQueue};
use super::jobs::ScheduledByView;
use super::openapi::OkBody;
use crate::model::UnixMillis;
use crate::policy;
use crate::pull::{
    LeaseId, LeaseRequest, LeaseSigner, MAX_LEASE_BATCH, MAX_NACK_ERROR, MAX_VISIBILITY, MAX_WAIT,
    MIN_VISIBILITY, PullError,
};
use crate::store::{ClaimedJob, LeaseHolder};

/// Lease, ack, nack and extend bodies are small.
const MAX_PULL_BODY: usize = 8 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(lease))
        .routes(routes!(ack))
        .routes(routes!(nack))
        .routes(routes!(extend))
}

impl From<PullError> for ApiError {
    fn from(err: PullError) -> Self {
        match err {
            PullError::NotPull => Self::Conflict(err.to_string()),
            PullError::TooManyWaiting => Self::TooManyRequests {
                msg: err.to_string(),
                retry_after_secs: 1,
            },
            PullError::LeaseLost | PullError::NotHandedOut => Self::Conflict(err.to_string()),
            PullError::JobNotFound => Self::job_not_found(),
            PullError::Store(err) => err.into(),
        }
    }
}

/// What a lease asks for; every field optional (so is the body).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"max": 10, "wait": "20s", "visibility": "2m"}))]
pub struct LeaseBody {
    /// Jobs to lease at most, 1–100 (default 1).
    #[schema(minimum = 1, maximum = 100)]
    max: Option<u32>,
    /// How long to wait for a job when none is due, `0s`–`30s` (default `0s`: answer at
    /// once).
    wait: Option<String>,
    /// How long the lease lasts, `1s`–`12h` (default the queue's `timeout`). Past it
    /// without an ack, the attempt counts as failed and the job is offered again.
    visibility: Option<String>,
}

/// The jobs leased: `[]` when none was due (within the wait).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeasedJobs {
    pub ok: bool,
    pub jobs: Vec<LeasedJob>,
}

/// One leased job.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeasedJob {
    #[schema(format = "uuid")]
    pub id: String,
    /// The job, as enqueued (canonical JSON).
    #[schema(value_type = Object)]
    pub job: Box<RawValue>,
    /// This attempt's number (1 for the first).
    pub attempt: u32,
    /// Names this lease in the job's `_ack`, `_nack` and `_extend`.
    pub lease_id: String,
    /// Unix ms: past it without an ack, the attempt failed and the job is offered again.
    pub lease_expires_at: UnixMillis,
    /// The job's priority, when it has one (not 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// The job's ordering key, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
    /// The schedule tick that enqueued it, if a schedule did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduledByView>,
    /// The topic whose publish stored it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// The published message it delivers: the same id in every subscriber's job of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uuid")]
    pub message_id: Option<String>,
}

impl LeasedJob {
    fn of(job: ClaimedJob, leased_at: UnixMillis, signer: &LeaseSigner) -> ApiResult<Self> {
        let lease_id = signer.issue(job.id, job.lease(), leased_at);
        Ok(Self {
            id: job.id.to_string(),
            job: RawValue::from_string(job.payload.into_string())
                .map_err(|e| ApiError::Internal(e.into()))?,
            attempt: job.attempt,
            lease_id: lease_id.to_string(),
            lease_expires_at: job.leased_until,
            priority: (job.priority != 0).then_some(job.priority),
            ordering_key: job.ordering_key,
            schedule: job.schedule.map(|tick| ScheduledByView {
                name: tick.schedule.to_string(),
                tick: tick.tick,
            }),
            topic: job.message.as_ref().map(|m| m.topic.to_string()),
            message_id: job.message.as_ref().map(|m| m.id.to_string()),
        })
    }
}

/// A duration field within `min`–`max`.
fn bounded(field: &str, raw: &str, min: Duration, max: Duration) -> ApiResult<Duration> {
    let value = policy::parse_duration(field, raw).map_err(|e| ApiError::Unprocessable(e.0))?;
    if value < min || value > max {
        return Err(ApiError::Unprocessable(format!(
            "{field} must be from {} to {}",
            policy::format_duration(min),
            policy::format_duration(max)
        )));
    }
    Ok(value)
}

impl LeaseBody {
    fn request(&self, holder: LeaseHolder) -> ApiResult<LeaseRequest> {
        let max = match self.max {
            None => 1,
            Some(n) if (1..=MAX_LEASE_BATCH as u32).contains(&n) => n as usize,
            Some(_) => {
                return Err(ApiError::Unprocessable(format!(
                    "max must be from 1 to {MAX_LEASE_BATCH}"
                )));
            }
        };
        let wait = match &self.wait {
            None => Duration::ZERO,
            Some(raw) => bounded("wait", raw, Duration::ZERO, MAX_WAIT)?,
        };
        let visibility = self
            .visibility
            .as_deref()
            .map(|raw| bounded("visibility", raw, MIN_VISIBILITY, MAX_VISIBILITY))
            .transpose()?;
        Ok(LeaseRequest {
            max,
            wait,
            visibility,
            holder,
        })
    }
}

/// Lease up to `max` due jobs of a pull queue, waiting up to `wait` for one when none is
/// due. Each job stays leased until `leaseExpiresAt`: ack it, nack it, or extend the lease
/// before then. Higher priorities first, then the longest due; a job with an ordering key
/// only once the key's earlier jobs are done; nothing while the queue is paused; no more in
/// flight than its `concurrency`, no faster than its `ratePerSecond`.
#[utoipa::path(
    post,
    path = "/queue/{name}/_lease",
    tag = "pull",
    params(("name" = String, Path, description = "Queue name (a pull queue: no target)")),
    request_body(content = LeaseBody, description = "Optional: how many, how long to wait, how long to hold"),
    responses(
        (status = 200, description = "The jobs leased (`[]` when none was due)", body = LeasedJobs),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 409, description = "A push queue (it has a target)", body = ApiErrorBody),
        (status = 422, description = "A value out of bounds, or an unknown field", body = ApiErrorBody),
        (status = 429, description = "Too many lease requests waiting (`HOOKQ_MAX_LEASE_WAITERS`); see `Retry-After`", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down, or the database is unreachable", body = ApiErrorBody),
    ),
)]
async fn lease(
    State(state): State<AppState>,
    KnownQueue(queue): KnownQueue,
    actor: Actor,
    body: Body,
) -> ApiResult<Json<LeasedJobs>> {
    let bytes = read_limited(body, MAX_PULL_BODY, state.config.body_timeout).await?;
    let asked: LeaseBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        LeaseBody::default()
    } else {
        parse_json(&bytes)?
    };
    let request = asked.request(actor.into())?;
    let leased = state.leases.lease(&queue.name, request).await?;
    let leased_at = leased.leased_at;
    // Shape every job before handing them over: if one cannot be shown, all go back.
    let jobs = leased
        .jobs
        .iter()
        .cloned()
        .map(|job| LeasedJob::of(job, leased_at, state.leases.signer()))
        .collect::<ApiResult<Vec<_>>>()?;
    leased.handed();
    Ok(Json(LeasedJobs { ok: true, jobs }))
}

/// Names the lease an ack, nack or extend answers.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AckBody {
    /// The `leaseId` the job was leased with.
    lease_id: String,
}

fn lease_id(raw: &str) -> ApiResult<LeaseId> {
    LeaseId::parse(raw).map_err(|e| ApiError::Unprocessable(e.0))
}

/// The job is done: removed (or kept in the delivery log when the queue keeps deliveries).
#[utoipa::path(
    post,
    path = "/queue/{name}/{id}/_ack",
    tag = "pull",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("id" = String, Path, description = "Job id", format = "uuid"),
    ),
    request_body(content = AckBody),
    responses(
        (status = 200, description = "Done", body = OkBody),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue or live job", body = ApiErrorBody),
        (status = 409, description = "`lease lost`: the lease expired and the job was offered again, or it was replayed or cancelled; nothing changed", body = ApiErrorBody),
        (status = 422, description = "Missing or malformed `leaseId`", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down, or the database is unreachable", body = ApiErrorBody),
    ),
)]
async fn ack(
    State(state): State<AppState>,
    JobPath { queue, id }: JobPath,
    ApiJson(body): ApiJson<AckBody, MAX_PULL_BODY>,
) -> ApiResult<Json<OkBody>> {
    let lease = lease_id(&body.lease_id)?;
    state.leases.ack(&queue.name, id, lease).await?;
    Ok(Json(OkBody::OK))
}

/// A failed attempt, as a worker reports it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"leaseId": "1-1764140000000-1764139970000", "error": "upstream said 502", "delay": "30s"}))]
pub struct NackBody {
    /// The `leaseId` the job was leased with.
    lease_id: String,
    /// Why it failed (at most 4 KiB): the job's last error, kept in its history and, once
    /// its attempts are spent, in its dead letter.
    error: Option<String>,
    /// Retry after this long (up to 1h) instead of the queue's backoff.
    delay: Option<String>,
}

/// The attempt failed: the job is retried after `delay` (or the queue's backoff), or
/// dead-lettered with `error` once its attempts are spent.
#[utoipa::path(
    post,
    path = "/queue/{name}/{id}/_nack",
    tag = "pull",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("id" = String, Path, description = "Job id", format = "uuid"),
    ),
    request_body(content = NackBody),
    responses(
        (status = 200, description = "Recorded", body = OkBody),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue or live job", body = ApiErrorBody),
        (status = 409, description = "`lease lost` (nothing changed)", body = ApiErrorBody),
        (status = 413, description = "Body larger than 8 KiB", body = ApiErrorBody),
        (status = 422, description = "Missing `leaseId`, an error over 4 KiB, or a delay out of bounds", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down, or the database is unreachable", body = ApiErrorBody),
    ),
)]
async fn nack(
    State(state): State<AppState>,
    JobPath { queue, id }: JobPath,
    ApiJson(body): ApiJson<NackBody, MAX_PULL_BODY>,
) -> ApiResult<Json<OkBody>> {
    let lease = lease_id(&body.lease_id)?;
    if body
        .error
        .as_ref()
        .is_some_and(|e| e.len() > MAX_NACK_ERROR)
    {
        return Err(ApiError::Unprocessable(format!(
            "error must be at most {MAX_NACK_ERROR} bytes"
        )));
    }
    let delay = body
        .delay
        .as_deref()
        .map(|raw| {
            bounded(
                "delay",
                raw,
                Duration::ZERO,
                crate::dispatch::retry::MAX_RETRY_AFTER,
            )
        })
        .transpose()?;
    state
        .leases
        .nack(&queue.name, id, lease, body.error, delay)
        .await?;
    Ok(Json(OkBody::OK))
}

/// A longer lease.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtendBody {
    /// The `leaseId` the job was leased with (it stays the same).
    lease_id: String,
    /// The lease now ends this long from now, `1s`–`12h`.
    visibility: String,
}

/// The new end of a lease.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Extended {
    pub ok: bool,
    /// Unix ms.
    pub lease_expires_at: UnixMillis,
}

/// Hold the job longer: the lease now ends `visibility` from now, its `leaseId` unchanged.
#[utoipa::path(
    post,
    path = "/queue/{name}/{id}/_extend",
    tag = "pull",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("id" = String, Path, description = "Job id", format = "uuid"),
    ),
    request_body(content = ExtendBody),
    responses(
        (status = 200, description = "Extended", body = Extended),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue or live job", body = ApiErrorBody),
        (status = 409, description = "`lease lost` (nothing changed)", body = ApiErrorBody),
        (status = 422, description = "Missing `leaseId`, or `visibility` out of bounds", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down, or the database is unreachable", body = ApiErrorBody),
    ),
)]
async fn extend(
    State(state): State<AppState>,
    JobPath { queue, id }: JobPath,
    ApiJson(body): ApiJson<ExtendBody, MAX_PULL_BODY>,
) -> ApiResult<Json<Extended>> {
    let lease = lease_id(&body.lease_id)?;
    let visibility = bounded(
        "visibility",
        &body.visibility,
        MIN_VISIBILITY,
        MAX_VISIBILITY,
    )?;
    let until = state
        .leases
        .extend(&queue.name, id, lease, visibility)
        .await?;
    Ok(Json(Extended {
        ok: true,
        lease_expires_at: until,
    }))
}
