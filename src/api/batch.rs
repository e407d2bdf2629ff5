//! `POST /queue/{name}/_batch`: enqueue up to 1 000 jobs in one commit, all or nothing.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::body::{parse_json, read_limited};
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::{EnqueueOptions, KnownQueue};
use crate::json::{self, CanonicalJson};
use crate::model::JobId;
use crate::store::{BatchEnqueued, BatchKey, NewJob};
use crate::{otel, telemetry};

/// The most jobs one batch may hold.
pub const MAX_BATCH_JOBS: usize = 1000;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(enqueue_batch))
}

/// The jobs a batch stored (or, for a repeated `Idempotency-Key`, stored before).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct IdsBody {
    pub ok: bool,
    /// The jobs' ids, in the batch's order.
    pub ids: Vec<String>,
    /// Present (and `true`) when the batch repeats an earlier one (the same jobs) with the
    /// same `Idempotency-Key`: nothing was stored, `ids` are the earlier jobs'.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schema(required = false)]
    pub duplicate: bool,
}

/// A batch's jobs, each in canonical form: 422 unless 1 to [`MAX_BATCH_JOBS`] objects (the
/// message naming the job), 413 for a job larger than `max_job_bytes`, 400 for one that is
/// not JSON.
pub(super) fn job_payloads(
    items: &[Box<RawValue>],
    max_job_bytes: usize,
) -> ApiResult<Vec<CanonicalJson>> {
    if items.is_empty() || items.len() > MAX_BATCH_JOBS {
        return Err(ApiError::Unprocessable(format!(
            "a batch holds 1 to {MAX_BATCH_JOBS} jobs, not {}",
            items.len()
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let raw = item.get().as_bytes();
            if raw.len() > max_job_bytes {
                return Err(ApiError::PayloadTooLarge(format!(
                    "job {index} is larger than {max_job_bytes} bytes"
                )));
            }
            let payload = json::canonicalize(raw)
                .map_err(|e| ApiError::BadRequest(format!("job {index}: malformed JSON: {e}")))?;
            if !payload.is_object() {
                return Err(ApiError::Unprocessable(format!(
                    "job {index} is not a JSON object"
                )));
            }
            Ok(payload)
        })
        .collect()
}

/// Enqueue a batch of jobs, in one commit: all are stored, or none.
///
/// The body is a JSON array of 1–1 000 job objects. The enqueue options (`delay`, `runAt`,
/// their headers) apply to every job. An `Idempotency-Key` names the batch as a whole, in a
/// key space of its own (unrelated to single jobs' keys): the same batch again stores
/// nothing and answers `200` with the first ids; another batch under the key is `409`.
#[utoipa::path(
    post,
    path = "/queue/{name}/_batch",
    tag = "queues",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("delay" = Option<String>, Query, description = "As for one job, for every job"),
        ("runAt" = Option<i64>, Query, description = "As for one job, for every job"),
        ("priority" = Option<i32>, Query, description = "As for one job, for every job"),
        ("orderingKey" = Option<String>, Query,
            description = "As for one job: the batch's jobs are delivered one at a time, in array order"),
        ("Idempotency-Key" = Option<String>, Header, description = "Names the batch as a whole: \
            the same jobs again store nothing (200, the first ids); other jobs are refused (409)"),
    ),
    request_body(content = Vec<Object>, description = "1–1 000 job objects, at most \
        `HOOKQ_MAX_BATCH_BYTES` bytes (default 4 MiB), each at most `HOOKQ_MAX_JOB_BYTES`"),
    responses(
        (status = 201, description = "Every job stored, in one commit", body = IdsBody),
        (status = 200, description = "A repeated batch (same `Idempotency-Key`, same jobs): nothing stored", body = IdsBody),
        (status = 400, description = "Malformed JSON (the message names the job)", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 409, description = "The `Idempotency-Key` stands for a different batch: nothing stored", body = ApiErrorBody),
        (status = 408, description = "The body did not arrive within `HOOKQ_BODY_TIMEOUT` (default 30 s)", body = ApiErrorBody),
        (status = 413, description = "Larger than `HOOKQ_MAX_BATCH_BYTES`, or a job larger than `HOOKQ_MAX_JOB_BYTES` (named)", body = ApiErrorBody),
        (status = 422, description = "Not an array of 1–1 000 job objects (the message names the job), or invalid options", body = ApiErrorBody),
        (status = 429, description = "Too many enqueues waiting for the disk, or the batch does not fit under the queue's `maxQueued` (\"queue full\"): nothing stored", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
        (status = 507, description = "The disk is full: nothing stored", body = ApiErrorBody),
    ),
)]
async fn enqueue_batch(
    State(state): State<AppState>,
    KnownQueue(queue): KnownQueue,
    options: EnqueueOptions,
    body: Body,
) -> ApiResult<(StatusCode, Json<IdsBody>)> {
    let config = &state.config;
    let bytes = read_limited(body, config.max_batch_bytes, config.body_timeout).await?;
    let items: Vec<Box<RawValue>> = parse_json(&bytes).map_err(|err| match err {
        ApiError::Unprocessable(_) => {
            ApiError::Unprocessable("a batch is a JSON array of job objects".into())
        }
        other => other,
    })?;
    let payloads = job_payloads(&items, config.max_job_bytes)?;
    let ids: Vec<JobId> = payloads.iter().map(|_| JobId::new()).collect();
    // Held to the end of the request: the span's duration is the enqueue's.
    let (_span, trace) = otel::enqueue(&queue.name, &ids, options.trace);
    let mut jobs = Vec::with_capacity(payloads.len());
    for (payload, id) in payloads.into_iter().zip(&ids) {
        jobs.push(NewJob {
            id: *id,
            payload,
            created_at: options.now,
            not_before: options.not_before,
            // The batch is keyed as a whole (below), never job by job.
            idempotency: None,
            priority: options.priority,
            ordering_key: options.ordering_key.clone(),
            trace: trace.clone(),
            message: None,
        });
    }
    let due_at = jobs.iter().map(NewJob::due_at).min().unwrap_or(options.now);
    let key = options
        .idempotency
        .map(|key| BatchKey::new(key, &jobs, options.now));
    let name = queue.name.clone();
    let ids = match state.store.enqueue_batch(name.clone(), jobs, key).await? {
        BatchEnqueued::Duplicate(first) => {
            return Ok((
                StatusCode::OK,
                Json(IdsBody {
                    ok: true,
                    ids: first.iter().map(JobId::to_string).collect(),
                    duplicate: true,
                }),
            ));
        }
        BatchEnqueued::Stored => ids,
    };
    state.wakeups.mark_due(&name, due_at);
    for _ in &ids {
        telemetry::job_enqueued(&name);
    }
    Ok((
        StatusCode::CREATED,
        Json(IdsBody {
            ok: true,
            ids: ids.iter().map(JobId::to_string).collect(),
            duplicate: false,
        }),
    ))
}
