//! Job routes of the hyper Queue API: list a queue's READY, ERROR or (when kept) DELIVERED
//! jobs (paginated), get one job with its whole life, cancel a READY job, retry an ERROR
//! job, or resend it edited as a new job.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::audit::Actor;
use super::cursor::Cursor;
use super::dlq::{DlqStateName, FailureReasonName};
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::{
    ApiQuery, JobBody, JobPath, KnownQueue, ListOrder, newest_first, page_size, required,
    search_text,
};
use super::job_life::{self, LifeEventView};
use super::openapi::IdBody;
use crate::dispatch::answer;
use crate::dispatch::webhook::{Outgoing, delivery_headers};
use crate::model::{JobId, JobStatus, now_millis};
use crate::signing::Signatures;
use crate::store::{
    AttemptRecord, DeadLetter, DlqState, Filter, JobLife, JobRecord, JobState, JobsPage, NewJob,
    PageRequest, Position, Queue, Selection,
};
use crate::telemetry;

pub const DEFAULT_PAGE: usize = 100;
pub const MAX_PAGE: usize = 1000;

/// `GET /queue/{name}` (list jobs) is routed with the queue routes of the same path.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_job))
        .routes(routes!(cancel_job))
        .routes(routes!(retry_job))
        .routes(routes!(resend_job))
}

/// A job's status in the hyper Queue API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum JobStatusName {
    /// Waiting, scheduled for a retry, or in flight.
    Ready,
    /// A dead letter: its attempts are spent, or it expired. Listings show pending ones;
    /// the single-job route shows every dead letter but a replayed one.
    Error,
    /// Delivered, and kept in the delivery log while its queue's `keepDelivered` lasts.
    Delivered,
}

impl JobStatusName {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "READY",
            Self::Error => "ERROR",
            Self::Delivered => "DELIVERED",
        }
    }
}

impl From<JobStatus> for JobStatusName {
    fn from(status: JobStatus) -> Self {
        match status {
            JobStatus::Ready => Self::Ready,
            JobStatus::Error => Self::Error,
            JobStatus::Delivered => Self::Delivered,
        }
    }
}

/// A job as the API shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    #[schema(format = "uuid")]
    pub id: String,
    pub status: JobStatusName,
    /// The job, as stored (canonical JSON).
    #[schema(value_type = Object)]
    pub job: Box<RawValue>,
    pub queue: String,
    /// Delivery attempts made so far.
    pub attempts: u32,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds: when a READY job waiting for its turn is next tried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<i64>,
    /// Unix milliseconds: the start the producer asked for (`delay` / `runAt`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at: Option<i64>,
    /// −100…100, when not 0: among a queue's due jobs, higher first.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schema(required = false)]
    pub priority: i32,
    /// The job's ordering key, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
    /// The schedule tick that enqueued the job, if a schedule did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduledByView>,
    /// The topic whose publish stored the job, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// The published message it delivers: the same id in every subscriber's job of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uuid")]
    pub message_id: Option<String>,
    /// Present (and `true`) while the job is being delivered (pushed, or leased by a pull
    /// worker).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schema(required = false)]
    pub in_flight: bool,
    /// Unix milliseconds: when the lease of a job in flight runs out (a pull worker's, or a
    /// push delivery's, which a hung attempt would outlive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<i64>,
    /// The worker's last response body (up to 64 KiB) or the transport error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The worker's last HTTP status, absent for transport errors. For a DELIVERED job, the
    /// 2xx status that acknowledged it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    /// Unix milliseconds: when a DELIVERED job was acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<i64>,
    /// How long the acknowledging answer took, for a DELIVERED job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// For an ERROR job (a dead letter): when and why it failed for good, and what became
    /// of it since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetterFactsView>,
    /// Failed attempts, oldest first (only on the single-job route). A DELIVERED job's
    /// successful attempt is the last of its `attempts`, described by `deliveredAt`,
    /// `lastStatus` and `latencyMs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<AttemptView>>,
    /// The request headers of its latest attempt, signatures masked (only on the single-job
    /// route, for a job of a push queue that was attempted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_headers: Option<RequestHeadersView>,
    /// What the delivering answer said, for a DELIVERED job a push queue kept (only on the
    /// single-job route).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<AnswerView>,
    /// The dead letter an edit-and-resend stored this job from (only on the single-job
    /// route).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uuid")]
    pub resent_from: Option<String>,
    /// For an ERROR job acknowledged by an edit-and-resend: the job it was resent as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uuid")]
    pub resent_as: Option<String>,
    /// Its life as events, oldest first (only on the single-job route): see
    /// [`LifeEventView`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub life: Option<Vec<LifeEventView>>,
}

/// A delivering answer as kept: its headers (at most 32, values cut at 512 bytes,
/// credentials masked) and its body (cut at 16 KiB).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AnswerView {
    /// `[name, value]` pairs, in the order received.
    pub headers: Vec<[String; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// The headers an attempt was sent with, rebuilt by the webhook client's own rule from the
/// job and its queue's current settings: a signature reads `(signature, masked)`, and the
/// time in a Standard Webhooks `webhook-timestamp` is when the attempt ended.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RequestHeadersView {
    /// The attempt they belong to.
    pub attempt: u32,
    /// `[name, value]` pairs, in the order sent.
    pub headers: Vec<[String; 2]>,
}

/// The headers `record`'s latest attempt was sent with (see [`RequestHeadersView`]); `None`
/// for a pull queue's job or one not attempted yet.
fn request_headers(
    queue: &Queue,
    record: &JobRecord,
    history: &[AttemptRecord],
) -> Option<RequestHeadersView> {
    if queue.is_pull() || record.attempts == 0 {
        return None;
    }
    let at = match (&record.state, &record.delivery, history.last()) {
        (JobState::Delivered, Some(delivery), _) => delivery.at,
        (JobState::InFlight, ..) => now_millis(),
        (_, _, Some(last)) => last.at,
        _ => now_millis(),
    };
    let job = Outgoing {
        id: record.id,
        attempt: record.attempts,
        payload: record.payload.clone(),
        schedule: record.schedule.as_ref(),
        trace: record.trace.as_ref(),
        message: record.message.as_ref(),
    };
    let headers = delivery_headers(queue, &job, at, Signatures::Masked)
        .into_iter()
        .map(|(name, value)| [name.to_owned(), value.into_owned()])
        .collect();
    Some(RequestHeadersView {
        attempt: record.attempts,
        headers,
    })
}

/// Which schedule tick enqueued a job (what its `X-Hookq-Schedule` and
/// `X-Hookq-Schedule-Tick` headers say).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ScheduledByView {
    /// The schedule's name.
    pub name: String,
    /// Unix ms of the tick.
    pub tick: i64,
}

/// One failed delivery attempt.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttemptView {
    pub attempt: u32,
    /// Unix milliseconds.
    pub at: i64,
    /// The worker's HTTP status, absent for transport errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    pub latency_ms: u64,
    pub error: String,
    /// The headers of the worker's answer (as [`AnswerView::headers`]); absent for a
    /// transport failure, a pull worker's nack, or an attempt made before hookq kept them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_headers: Option<Vec<[String; 2]>>,
}

impl From<AttemptRecord> for AttemptView {
    fn from(record: AttemptRecord) -> Self {
        Self {
            attempt: record.attempt,
            at: record.at,
            status: record.status,
            latency_ms: record.latency_ms,
            error: record.error,
            response_headers: record.headers.as_deref().map(answer::headers_from_json),
        }
    }
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

impl TryFrom<JobRecord> for JobView {
    type Error = ApiError;

    fn try_from(record: JobRecord) -> ApiResult<Self> {
        let job = RawValue::from_string(record.payload.into_string()).map_err(|e| {
            ApiError::Internal(anyhow::anyhow!(
                "stored payload of job {} is not JSON: {e}",
                record.id
            ))
        })?;
        let status = match record.state {
            JobState::Dead => JobStatus::Error,
            JobState::Delivered => JobStatus::Delivered,
            JobState::Ready | JobState::InFlight => JobStatus::Ready,
        };
        Ok(Self {
            id: record.id.to_string(),
            status: status.into(),
            job,
            queue: record.queue.to_string(),
            attempts: record.attempts,
            created_at: record.created_at,
            next_attempt_at: (record.state == JobState::Ready).then_some(record.run_at),
            run_at: record.not_before,
            priority: record.priority,
            ordering_key: record.ordering_key,
            schedule: record.schedule.map(|by| ScheduledByView {
                name: by.schedule.to_string(),
                tick: by.tick,
            }),
            topic: record.message.as_ref().map(|m| m.topic.to_string()),
            message_id: record.message.as_ref().map(|m| m.id.to_string()),
            in_flight: record.state == JobState::InFlight,
            lease_expires_at: record
                .lease_expires_at
                .filter(|_| record.state == JobState::InFlight),
            error: record.last_error,
            last_status: record.last_status,
            delivered_at: record.delivery.as_ref().map(|d| d.at),
            latency_ms: record.delivery.as_ref().map(|d| d.latency_ms),
            dead_letter: record.dead.map(|dead| DeadLetterFactsView {
                failed_at: dead.failed_at,
                reason: dead.reason.into(),
                replay_count: dead.replay_count,
                state: dead.state.into(),
            }),
            history: None,
            request_headers: None,
            answer: None,
            resent_from: None,
            resent_as: None,
            life: None,
        })
    }
}

/// When and why a job became a dead letter, and what became of it since.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterFactsView {
    /// Unix milliseconds: when it failed for good.
    pub failed_at: i64,
    /// `max_attempts_reached` (attempts spent, or the worker answered `410 Gone`) or
    /// `expired` (not delivered within `HOOKQ_JOB_TTL`).
    pub reason: FailureReasonName,
    /// Times it was replayed before it failed this time.
    pub replay_count: u32,
    /// `pending` (awaiting action) or `acknowledged` (dismissed; kept for audit).
    pub state: DlqStateName,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Which jobs: READY (by creation, oldest first), ERROR (by failure time, oldest first)
    /// or DELIVERED (the delivery log by delivery time, newest first; empty unless the queue
    /// keeps its deliveries).
    #[param(inline, required = true, value_type = JobStatusName)]
    status: Option<String>,
    /// Page size: default 100, larger values are capped at 1000.
    #[param(value_type = Option<u64>, minimum = 1)]
    limit: Option<String>,
    /// The `next` value of the previous page (opaque; pass the same `order` and `search`).
    cursor: Option<String>,
    /// `newest` or `oldest` first; the default is the status's own order (above).
    #[param(inline, value_type = Option<ListOrder>)]
    order: Option<String>,
    /// Only the jobs whose payload or last error (a DELIVERED job: payload) contains this
    /// text, letters compared without case (on SQLite, ASCII letters only); at most 200
    /// characters.
    search: Option<String>,
}

/// A page of a queue's jobs.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobList {
    pub ok: bool,
    pub jobs: Vec<JobView>,
    /// The cursor of the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// List a queue's READY, ERROR or DELIVERED jobs, paginated.
#[utoipa::path(
    get,
    path = "/queue/{name}",
    tag = "jobs",
    params(("name" = String, Path, description = "Queue name"), ListParams),
    responses(
        (status = 200, description = "A page of jobs", body = JobList),
        (status = 400, description = "Invalid cursor or query string", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 422, description = "Missing or invalid `status`, or a bad `limit`, `order` or `search`", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
pub async fn list_jobs(
    State(state): State<AppState>,
    KnownQueue(queue): KnownQueue,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<JobList>> {
    let name = queue.name.clone();
    let status = required(
        "status",
        params.status.as_deref(),
        "READY, ERROR or DELIVERED",
    )
    .and_then(|s| JobStatus::parse(s).map_err(|e| ApiError::Unprocessable(e.0)))?;
    let limit = page_size(params.limit.as_deref(), DEFAULT_PAGE, MAX_PAGE)?;
    let newest_first = newest_first(params.order.as_deref(), status == JobStatus::Delivered)?;
    let text = search_text(params.search.as_deref())?;
    let cursor = params.cursor.as_deref().map(Cursor::decode).transpose()?;
    let (mut records, position_of): (Vec<JobRecord>, fn(&JobRecord) -> Cursor) = match status {
        JobStatus::Ready => {
            let after = cursor.map(Cursor::into_ready).transpose()?;
            let page = JobsPage {
                after,
                limit: limit + 1,
                newest_first,
                text,
            };
            let records = state.store.list_ready(name, page).await?;
            (records, |r| Cursor::Ready(r.id))
        }
        JobStatus::Error => {
            let after = cursor.map(Cursor::into_position).transpose()?;
            let filter = Filter {
                queue: Some(name),
                state: Some(DlqState::Pending),
                text,
            };
            let page = PageRequest {
                after,
                limit: limit + 1,
                newest_first,
                with_payload: true,
                with_total: false,
            };
            let records = state
                .store
                .list_dead_letters(filter, page)
                .await?
                .letters
                .into_iter()
                .map(DeadLetter::into_job_record)
                .collect();
            (records, |r| {
                Cursor::Error(Position {
                    at: r.run_at,
                    id: r.id,
                })
            })
        }
        JobStatus::Delivered => {
            let after = cursor.map(Cursor::into_delivered).transpose()?;
            let page = JobsPage {
                after,
                limit: limit + 1,
                newest_first,
                text,
            };
            let records = state.store.list_delivered(name, page).await?;
            (records, |r| {
                Cursor::Delivered(Position {
                    at: r.run_at,
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
    Ok(Json(JobList {
        ok: true,
        jobs,
        next,
    }))
}

/// One job, with its history of failed attempts.
#[utoipa::path(
    get,
    path = "/queue/{name}/{id}",
    tag = "jobs",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("id" = String, Path, description = "Job id", format = "uuid"),
    ),
    responses(
        (status = 200, description = "The job", body = JobView),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue, or no such job in it", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn get_job(
    State(state): State<AppState>,
    JobPath { queue, id }: JobPath,
) -> ApiResult<Json<JobView>> {
    let life = state.store.job_life(queue.name.clone(), id).await?;
    let events = job_life::events(&life);
    let JobLife {
        record,
        history,
        letter,
        resent_from,
    } = life;
    let sent = request_headers(&queue, &record, &history);
    let answer = record.delivery.as_ref().and_then(|delivery| {
        let kept = &delivery.answer;
        (kept.headers.is_some() || kept.body.is_some()).then(|| AnswerView {
            headers: kept
                .headers
                .as_deref()
                .map(answer::headers_from_json)
                .unwrap_or_default(),
            body: kept.body.clone(),
        })
    });
    let dead = record.state == JobState::Dead;
    let mut view = JobView::try_from(record)?;
    view.history = Some(history.into_iter().map(AttemptView::from).collect());
    view.request_headers = sent;
    view.answer = answer;
    view.resent_from = resent_from.map(|id| id.to_string());
    view.resent_as = letter
        .filter(|_| dead)
        .and_then(|letter| letter.resent_as)
        .map(|id| id.to_string());
    view.life = Some(events);
    Ok(Json(view))
}

/// Cancel (remove) a READY job.
#[utoipa::path(
    post,
    path = "/queue/{name}/{id}/_cancel",
    tag = "jobs",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("id" = String, Path, description = "Job id", format = "uuid"),
    ),
    responses(
        (status = 201, description = "Cancelled", body = IdBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue or job", body = ApiErrorBody),
        (status = 409, description = "Being delivered right now, or a dead letter", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn cancel_job(
    State(state): State<AppState>,
    actor: Actor,
    JobPath { queue, id }: JobPath,
) -> ApiResult<(StatusCode, Json<IdBody>)> {
    let now = now_millis();
    let entry = actor.entry(
        "jobs.cancel",
        Some(queue.name.as_str()),
        &format!("job {id}"),
        "cancelled",
    );
    state
        .store
        .audited(entry.counting(1))
        .cancel(queue.name.clone(), id, now)
        .await?;
    // A cancelled key head lets the key's next job go.
    state.wakeups.mark_due(&queue.name, now);
    Ok((StatusCode::CREATED, Json(IdBody::new(id))))
}

/// Put an ERROR job (a pending dead letter) back on its queue with fresh attempts.
#[utoipa::path(
    post,
    path = "/queue/{name}/{id}/_retry",
    tag = "jobs",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("id" = String, Path, description = "Job id", format = "uuid"),
    ),
    responses(
        (status = 201, description = "Back on its queue as READY", body = IdBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue or job", body = ApiErrorBody),
        (status = 409, description = "Not a pending dead letter", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn retry_job(
    State(state): State<AppState>,
    actor: Actor,
    JobPath { queue, id }: JobPath,
) -> ApiResult<(StatusCode, Json<IdBody>)> {
    let (record, _) = state.store.get_job(queue.name.clone(), id).await?;
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
    // A replay commits in its own transactions: its entry follows once it is done.
    let entry = actor.entry(
        "dlq.replay",
        Some(queue.name.as_str()),
        &format!("dead letter {id}"),
        "retried from the job",
    );
    if let Err(error) = state.store.record_audit(entry.counting(1)).await {
        tracing::error!(error = %error, "a retry's audit entry could not be written");
    }
    state.wakeups.mark_due(&queue.name, now);
    Ok((StatusCode::CREATED, Json(IdBody::new(id))))
}

/// Edit and resend a dead letter: store the body as a new job of the queue, with the dead
/// job's priority and ordering key, and acknowledge the dead letter naming the new job
/// (its `resentAs`; the new job's `resentFrom`), both in one transaction or neither.
#[utoipa::path(
    post,
    path = "/queue/{name}/{id}/_resend",
    tag = "jobs",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("id" = String, Path, description = "The dead letter's job id", format = "uuid"),
    ),
    request_body(content = Object, description = "The new job: any JSON object, at most \
        `HOOKQ_MAX_JOB_BYTES` bytes (the dead letter's payload as edited)"),
    responses(
        (status = 201, description = "Stored as a new job (its id), the dead letter acknowledged", body = IdBody),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue, or no such dead letter in it", body = ApiErrorBody),
        (status = 408, description = "The body did not arrive within `HOOKQ_BODY_TIMEOUT` (default 30 s)", body = ApiErrorBody),
        (status = 409, description = "The dead letter is not pending (replayed or acknowledged already): nothing stored", body = ApiErrorBody),
        (status = 413, description = "Larger than `HOOKQ_MAX_JOB_BYTES`", body = ApiErrorBody),
        (status = 422, description = "Not a JSON object", body = ApiErrorBody),
        (status = 429, description = "Too many enqueues waiting for the disk: nothing stored; retry after `Retry-After` seconds", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
        (status = 507, description = "The disk is full: nothing stored", body = ApiErrorBody),
    ),
)]
async fn resend_job(
    State(state): State<AppState>,
    actor: Actor,
    JobPath { queue, id }: JobPath,
    JobBody(payload): JobBody,
) -> ApiResult<(StatusCode, Json<IdBody>)> {
    let (record, _) = state.store.get_job(queue.name.clone(), id).await?;
    if record.state != JobState::Dead {
        return Err(ApiError::Conflict(
            "job is not in ERROR: only dead-lettered jobs can be resent".into(),
        ));
    }
    let now = now_millis();
    let job = NewJob {
        id: JobId::new(),
        payload,
        created_at: now,
        not_before: None,
        idempotency: None,
        priority: record.priority,
        ordering_key: record.ordering_key,
        trace: None,
        message: None,
    };
    let resent_as = job.id;
    let entry = actor.entry(
        "dlq.resend",
        Some(queue.name.as_str()),
        &format!("dead letter {id}"),
        format!("resent as job {resent_as}"),
    );
    state
        .store
        .audited(entry)
        .resend(queue.name.clone(), id, job, now)
        .await?;
    state.wakeups.mark_due(&queue.name, now);
    telemetry::job_enqueued(&queue.name);
    Ok((StatusCode::CREATED, Json(IdBody::new(resent_as))))
}
