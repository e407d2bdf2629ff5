//! Queue routes of the hyper Queue API: list, create (`PUT`), delete, and enqueue (`POST`).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::audit::Actor;
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::{ApiJson, EnqueueOptions, JobBody, KnownQueue, NewQueueName};
use super::jobs::{__path_list_jobs, list_jobs};
use super::openapi::{IdBody, OkBody};
use super::settings::{
    PolicyInput, SignatureSchemeName, check_burst_has_a_rate, check_signing, policy_change,
};
use crate::dispatch::guard::AddressPolicy;
use crate::model::{JobId, Secret, SignatureScheme, Target, now_millis};
use crate::store::{Enqueued, NewJob, Queue, StoreError};
use crate::{otel, telemetry};

/// Queue definitions are small; this bounds what a client can make us read.
pub(super) const MAX_QUEUE_BODY: usize = 16 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_queues))
        .routes(routes!(create_queue, delete_queue, enqueue, list_jobs))
}

/// The queues, by name.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"ok": true, "name": "queue", "queues": ["emails", "invoices"]}))]
pub struct QueueList {
    pub ok: bool,
    /// Always `"queue"` (the hyper service name).
    pub name: String,
    pub queues: Vec<String>,
}

/// List queues (for a scoped key: the queues in its scope).
#[utoipa::path(
    get,
    path = "/queue",
    tag = "queues",
    responses(
        (status = 200, description = "The queues' names", body = QueueList),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
    ),
)]
async fn list_queues(
    State(state): State<AppState>,
    principal: Option<axum::Extension<super::auth::Principal>>,
) -> Json<QueueList> {
    // A scoped key sees only its queues.
    let sees = |name: &str| principal.as_ref().is_none_or(|p| p.sees(name));
    let queues = state
        .store
        .registry()
        .all()
        .iter()
        .map(|q| q.name.to_string())
        .filter(|name| sees(name))
        .collect();
    Json(QueueList {
        ok: true,
        name: "queue".into(),
        queues,
    })
}

/// A new queue: its target, an optional secret, and optionally its own delivery policy
/// (what it leaves out follows the server's settings). An unknown field is refused (422,
/// naming it), as `PATCH` does: a mistyped `secrett` must not make an unsigned queue. The
/// official hyper-connect client sends `target` and `secret` only.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"target": "https://worker.example.com/jobs", "secret": "s3cret", "maxAttempts": 10, "concurrency": 8}))]
pub struct CreateQueue {
    /// Where jobs are pushed: an absolute http(s) URL with a host and no credentials.
    /// Without one (absent or `null`) the queue is a pull queue: workers lease its jobs
    /// (`POST /queue/{name}/_lease`).
    #[serde(default)]
    #[schema(format = "uri")]
    target: Option<String>,
    /// 1–100 characters. With a secret every delivery is signed (`signatureScheme`).
    /// Never returned nor logged.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 100)]
    secret: Option<String>,
    /// Attempts before a job is dead-lettered, 1–100.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    max_attempts: Option<u32>,
    /// Delays before retry n (`"500ms"`, `"5s"`, …), 1–20 entries; the last repeats.
    #[serde(default)]
    backoff: Option<Vec<String>>,
    /// One attempt's time limit, 100ms–15m.
    #[serde(default)]
    timeout: Option<String>,
    /// Deliveries in flight at once, 1–10 000.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10000)]
    concurrency: Option<u32>,
    /// Deliveries started per second (> 0, fractions allowed).
    #[serde(default)]
    rate_per_second: Option<f64>,
    /// Deliveries that may start at once (≥ 1; needs `ratePerSecond`).
    #[serde(default)]
    #[schema(minimum = 1)]
    burst: Option<u32>,
    /// A cap on READY jobs (≥ 1): enqueues beyond it get 429.
    #[serde(default)]
    #[schema(minimum = 1)]
    max_queued: Option<u64>,
    /// How long delivered jobs stay in the delivery log (`"7d"`; `"0s"`: not kept), up to
    /// 365d.
    #[serde(default)]
    keep_delivered: Option<String>,
    /// Accept jobs but deliver none (default false).
    #[serde(default)]
    paused: Option<bool>,
    /// How deliveries are signed (default `hyper`). `standard` and `both` need a secret of
    /// the form `whsec_` + base64 of 24–64 bytes.
    #[serde(default)]
    signature_scheme: Option<SignatureSchemeName>,
}

/// Create a queue.
#[utoipa::path(
    put,
    path = "/queue/{name}",
    tag = "queues",
    params(("name" = String, Path,
        description = "Queue name: lower-cased, then `^[a-z0-9~_-]+$`, 1–100 characters")),
    request_body(content = CreateQueue, description = "The queue's target and optional secret"),
    responses(
        (status = 201, description = "Created", body = OkBody),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 408, description = "The body did not arrive within `HOOKQ_BODY_TIMEOUT` (default 30 s)", body = ApiErrorBody),
        (status = 409, description = "The queue already exists", body = ApiErrorBody),
        (status = 413, description = "Body larger than 16 KiB", body = ApiErrorBody),
        (status = 422, description = "Invalid name, target, secret or policy value, an unknown field, or a `standard`/`both` queue whose secret is not `whsec_` + base64 of 24–64 bytes", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn create_queue(
    State(state): State<AppState>,
    actor: Actor,
    NewQueueName { name, given }: NewQueueName,
    ApiJson(request): ApiJson<CreateQueue, MAX_QUEUE_BODY>,
) -> ApiResult<(StatusCode, Json<OkBody>)> {
    let target = match &request.target {
        Some(raw) => {
            let target = Target::parse(raw).map_err(|e| ApiError::Unprocessable(e.0))?;
            check_target_allowed(&state, &target)?;
            Some(target)
        }
        None => None,
    };
    let secret = request
        .secret
        .as_deref()
        .map(Secret::parse)
        .transpose()
        .map_err(|e| ApiError::Unprocessable(e.0))?;
    let mut policy = policy_change(PolicyInput {
        max_attempts: request.max_attempts.map(Some),
        backoff: request.backoff.map(Some),
        timeout: request.timeout.map(Some),
        concurrency: request.concurrency.map(Some),
        rate_per_second: request.rate_per_second.map(Some),
        burst: request.burst.map(Some),
        max_queued: request.max_queued.map(Some),
        keep_delivered: request.keep_delivered.map(Some),
        paused: request.paused.map(Some),
    })?;
    policy.signature_scheme = request.signature_scheme.map(SignatureScheme::from);
    let mut queue = Queue::new(name.clone(), target, secret, now_millis());
    check_burst_has_a_rate(&queue, &policy)?;
    check_signing(&queue, &policy)?;
    queue.apply(&policy);
    let detail = match &queue.target {
        Some(target) => format!("target {}", crate::redact::endpoint(target.url())),
        None => "a pull queue (no target)".to_owned(),
    };
    let entry = actor.entry("queue.create", Some(name.as_str()), name.as_str(), detail);
    match state.store.audited(entry).create_queue(queue).await {
        // `Emails` is `emails`: say which queue exists, not just that one does.
        Err(StoreError::QueueExists) if given != name.as_str() => {
            return Err(ApiError::Conflict(format!(
                "queue already exists: `{given}` names queue `{name}` (queue names are \
                 lower-cased)"
            )));
        }
        created => created?,
    }
    tracing::info!(queue = %name, given = %given, "queue created");
    Ok((StatusCode::CREATED, Json(OkBody::OK)))
}

/// Refuse at creation what delivery would refuse anyway: plain http under HOOKQ_HTTPS_ONLY,
/// and a literal IP address the SSRF guard blocks. (Names are checked at connect time.)
pub(super) fn check_target_allowed(state: &AppState, target: &Target) -> ApiResult<()> {
    if state.config.https_only && target.url().scheme() != "https" {
        return Err(ApiError::Unprocessable(
            "target must use https (HOOKQ_HTTPS_ONLY is on)".into(),
        ));
    }
    if let Some(ip) = target.ip()
        && !state.config.address_policy().allows(ip)
    {
        return Err(ApiError::Unprocessable(AddressPolicy::refusal(ip)));
    }
    Ok(())
}

/// Delete a queue and all its jobs: READY, in flight and dead letters.
#[utoipa::path(
    delete,
    path = "/queue/{name}",
    tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    responses(
        (status = 200, description = "Deleted", body = OkBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn delete_queue(
    State(state): State<AppState>,
    actor: Actor,
    KnownQueue(queue): KnownQueue,
) -> ApiResult<Json<OkBody>> {
    let name = queue.name.clone();
    let entry = actor.entry(
        "queue.delete",
        Some(name.as_str()),
        name.as_str(),
        "with its jobs and dead letters",
    );
    state
        .store
        .audited(entry)
        .delete_queue(name.clone())
        .await?;
    state.wakeups.forget(&name);
    if let Some(pool) = &state.pool {
        pool.forget(&name);
    }
    crate::telemetry::queue_deleted(&name);
    tracing::info!(queue = %name, "queue deleted with all its jobs");
    Ok(Json(OkBody::OK))
}

/// Enqueue a job.
///
/// Any JSON object, stored as its canonical JSON (the bytes the worker receives and the
/// signature covers). `201` is sent only once the job is committed to disk.
#[utoipa::path(
    post,
    path = "/queue/{name}",
    tag = "queues",
    params(
        ("name" = String, Path, description = "Queue name"),
        ("delay" = Option<String>, Query,
            description = "Deliver no sooner than this from now: `500ms`, `30s`, `2h` (at most 366 days)"),
        ("runAt" = Option<i64>, Query,
            description = "Deliver no sooner than this time, unix milliseconds (not past, at most 366 days ahead)"),
        ("priority" = Option<i32>, Query,
            description = "−100…100, default 0: among the queue's due jobs, higher first; equal priorities keep enqueue order"),
        ("orderingKey" = Option<String>, Query,
            description = "1–200 characters: the queue's jobs with this key are delivered one at a time, in enqueue order"),
        ("X-Hookq-Delay" = Option<String>, Header, description = "`delay`, as a header"),
        ("X-Hookq-Run-At" = Option<i64>, Header, description = "`runAt`, as a header"),
        ("X-Hookq-Priority" = Option<i32>, Header, description = "`priority`, as a header"),
        ("X-Hookq-Ordering-Key" = Option<String>, Header, description = "`orderingKey`, as a header (visible ASCII only; use the query parameter for other characters)"),
        ("Idempotency-Key" = Option<String>, Header,
            description = "1–200 characters: the same key on this queue within `HOOKQ_IDEMPOTENCY_TTL` stores one job; reused for a different job, it is refused (409)"),
    ),
    request_body(content = Object, description = "The job: any JSON object, at most \
        `HOOKQ_MAX_JOB_BYTES` bytes (default 262 144)"),
    responses(
        (status = 201, description = "Stored; the id is a UUIDv7", body = IdBody),
        (status = 200, description = "A duplicate: this `Idempotency-Key` was used on this queue within `HOOKQ_IDEMPOTENCY_TTL` for the same job (payload, priority, ordering key); nothing stored; `id` is the first job's, `duplicate` is true", body = IdBody),
        (status = 400, description = "Malformed JSON (or a lone UTF-16 surrogate)", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 408, description = "The body did not arrive within `HOOKQ_BODY_TIMEOUT` (default 30 s)", body = ApiErrorBody),
        (status = 409, description = "The `Idempotency-Key` stands for a different job (another payload, priority or ordering key): nothing stored", body = ApiErrorBody),
        (status = 413, description = "Larger than `HOOKQ_MAX_JOB_BYTES`", body = ApiErrorBody),
        (status = 422, description = "Not a JSON object, or an invalid `delay` / `runAt` / `priority` / `orderingKey` / `Idempotency-Key`", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 429, description = "Too many enqueues waiting for the disk (`HOOKQ_MAX_PENDING_WRITES`), or the queue holds its `maxQueued` jobs (\"queue full\"): not stored; retry after `Retry-After` seconds", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
        (status = 507, description = "The disk is full: the job was not stored", body = ApiErrorBody),
    ),
)]
#[tracing::instrument(level = "debug", skip_all, fields(queue))]
async fn enqueue(
    State(state): State<AppState>,
    KnownQueue(queue): KnownQueue,
    options: EnqueueOptions,
    JobBody(payload): JobBody,
) -> ApiResult<(StatusCode, Json<IdBody>)> {
    let name = queue.name.clone();
    tracing::Span::current().record("queue", name.as_str());
    let id = JobId::new();
    // Held to the end of the request: the span's duration is the enqueue's.
    let (_span, trace) = otel::enqueue(&name, &[id], options.trace);
    let job = NewJob {
        id,
        payload,
        created_at: options.now,
        not_before: options.not_before,
        idempotency: options.idempotency,
        priority: options.priority,
        ordering_key: options.ordering_key,
        trace,
        message: None,
    };
    let id = job.id;
    let due_at = job.due_at();
    // While no job waits to be claimed, a job due now is delivered straight after the
    // commit; otherwise the claim loop claims it in turn, when it is due. A job with an
    // idempotency key takes the normal path (it may turn out to be a duplicate), and so does
    // a job with an ordering key (it may have to wait for an earlier one).
    let handoff = match &state.pool {
        Some(pool)
            if due_at <= options.now && job.idempotency.is_none() && job.ordering_key.is_none() =>
        {
            pool.try_handoff(&queue, &job, options.now)
        }
        _ => None,
    };
    match handoff {
        Some(handoff) => {
            state
                .store
                .enqueue_leased(
                    name.clone(),
                    job,
                    handoff.leased_until,
                    handoff.after_commit,
                )
                .await?
        }
        None => match state.store.enqueue(name.clone(), job).await? {
            Enqueued::Stored => {
                state.wakeups.mark_due(&name, due_at);
            }
            Enqueued::Duplicate(first) => {
                return Ok((StatusCode::OK, Json(IdBody::duplicate(first))));
            }
        },
    }
    telemetry::job_enqueued(&name);
    Ok((StatusCode::CREATED, Json(IdBody::new(id))))
}
