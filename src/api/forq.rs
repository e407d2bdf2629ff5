//! Forq's producer and consumer API on hookq's engine, so Forq's producers, consumers and
//! SDKs (Go, Java, TypeScript) work unchanged: produce (`POST …/messages`), long-poll consume
//! (`GET …/messages`), `ack` and `nack` fenced by the `X-Forq-Receipt` header, and
//! `GET /healthcheck`. Routes, status codes, headers and error codes are Forq's (its
//! `openapi.yaml` and server at v1.0.0); errors are exactly `{"code": …}`.
//!
//! Forq's queues are virtual: the first message creates a pull queue of that name, with
//! Forq's retry schedule (1 s, 5 s, 15 s, 30 s, 60 s; 5 attempts). A message is a job whose
//! payload is the JSON string of its content, so it can be listed, replayed and inspected
//! through hookq's API; a native job (a JSON object) is consumed with its JSON text as
//! `content`. A consumed message is leased for 5 minutes; its `receipt` is its lease id,
//! signed as the native API's are (`pull::LeaseId`), so a receipt cannot be forged.
//!
//! A queue's dead letters are consumed as the queue `{queue}-dlq` (when no queue of that
//! very name exists): a consume leases the oldest pending dead letter, an ack acknowledges
//! it (hookq's dismissal: kept for audit until retention), a nack hides it for a while. A
//! scoped key is judged on the queue whose data is served: `{queue}-dlq` needs `queue`.
//!
//! Who may create a queue by producing to it: the configured key (or an open server) and
//! admin keys; a scoped producer key only when the operator allows it
//! (`HOOKQ_FORQ_PRODUCERS_CREATE_QUEUES`). Every consume that waits holds a seat among the
//! waiting lease requests (`HOOKQ_MAX_LEASE_WAITERS`), whether its queue exists yet or not.

use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::audit::Actor;
use super::auth::Principal;
use super::body::read_limited;
use super::error::ApiError;
use crate::access::{Need, Role};
use crate::json::canonicalize;
use crate::model::{JobId, QueueName, now_millis};
use crate::pull::{LeaseId, LeaseRequest, PullError};
use crate::store::{Lease, LeaseHolder, NewJob, Queue, StoreError};
use crate::telemetry;

/// The largest request body (Forq's `MaxBytesReader`).
const MAX_BODY: usize = 2 * 1024 * 1024;
/// The largest message content, in bytes.
const MAX_CONTENT: usize = 256 * 1024;
/// A `processAfter` this far in the past still counts as now (clock skew).
const PAST_TOLERANCE_MS: i64 = 10_000;
/// The furthest a message may be scheduled ahead.
const MAX_DELAY_MS: i64 = 366 * 24 * 3600 * 1000;
/// How long a consume waits for a message.
const CONSUME_WAIT: Duration = Duration::from_secs(30);
/// How long a consumed message stays leased.
const VISIBILITY: Duration = Duration::from_secs(5 * 60);
/// Forq's retry schedule, for the queues its producers create.
const FORQ_ATTEMPTS: u32 = 5;
const FORQ_BACKOFF_SECS: [u64; 5] = [1, 5, 15, 30, 60];
/// The request header that names the delivery an ack or nack answers.
const RECEIPT_HEADER: &str = "x-forq-receipt";
/// A queue name Forq accepts: `^[a-zA-Z0-9._-]{1,64}$`.
const MAX_NAME: usize = 64;
/// Forq's dead-letter queues: `{queue}-dlq`.
const DLQ_SUFFIX: &str = "-dlq";
/// A nacked dead letter is offered again after this long.
const DLQ_NACK_HIDE: Duration = Duration::from_secs(5);
/// A consumer of dead letters waiting for one looks again at least this often: most moves
/// to the dead letters also wake their queue's waiters, a push delivery's last failure not.
const DLQ_RECHECK: Duration = Duration::from_secs(1);

/// Forq's routes, with Forq's authentication (`X-API-Key`, or `Authorization: Bearer`)
/// answered in Forq's shape. Scoped keys work as on hookq's routes: producers produce,
/// consumers consume, ack and nack, on their queues.
pub fn router(state: AppState) -> Router<AppState> {
    let protected = Router::new()
        .route("/api/v1/queues/{name}/messages", post(produce).get(consume))
        .route("/api/v1/queues/{name}/messages/{id}/ack", post(ack))
        .route("/api/v1/queues/{name}/messages/{id}/nack", post(nack))
        .route_layer(super::auth::Authorize::queues(state).answering(refusal));
    Router::new()
        .route("/healthcheck", get(healthcheck))
        .merge(protected)
}

/// A Forq error: its status and `{"code": …}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForqError {
    status: StatusCode,
    code: &'static str,
}

impl ForqError {
    const fn new(status: StatusCode, code: &'static str) -> Self {
        Self { status, code }
    }

    const INVALID_BODY: Self = Self::new(StatusCode::BAD_REQUEST, "bad_request.body.invalid");
    const TOO_LARGE: Self = Self::new(
        StatusCode::BAD_REQUEST,
        "bad_request.body.content.exceeds_limit",
    );
    const BODY_TOO_LARGE: Self = Self::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "bad_request.body.content.exceeds_limit",
    );
    const IN_PAST: Self = Self::new(
        StatusCode::BAD_REQUEST,
        "bad_request.body.processAfter.in_past",
    );
    const TOO_FAR: Self = Self::new(
        StatusCode::BAD_REQUEST,
        "bad_request.body.processAfter.too_far",
    );
    const INVALID_NAME: Self = Self::new(StatusCode::BAD_REQUEST, "bad_request.queue.invalid_name");
    const PRODUCE_TO_DLQ: Self =
        Self::new(StatusCode::BAD_REQUEST, "bad_request.queue.produce_to_dlq");
    const INVALID_ID: Self = Self::new(StatusCode::BAD_REQUEST, "bad_request.messageId.invalid");
    const INVALID_RECEIPT: Self = Self::new(StatusCode::BAD_REQUEST, "bad_request.receipt.invalid");
    const NOT_FOUND: Self = Self::new(StatusCode::NOT_FOUND, "not_found.message");
    const UNAUTHORIZED: Self = Self::new(StatusCode::UNAUTHORIZED, "unauthorized");
    const TOO_MANY: Self = Self::new(StatusCode::TOO_MANY_REQUESTS, "too_many_requests");
    const UNHEALTHY: Self = Self::new(StatusCode::SERVICE_UNAVAILABLE, "forq.unhealthy");
    const INTERNAL: Self = Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal");
}

#[derive(Serialize)]
struct ErrorBody {
    code: &'static str,
}

impl IntoResponse for ForqError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(ErrorBody { code: self.code })).into_response();
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(1u32),
            );
        }
        response
    }
}

impl From<StoreError> for ForqError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Overloaded | StoreError::QueueFull => Self::TOO_MANY,
            // `HOOKQ_MAX_QUEUES` reached by a producer creating a queue.
            StoreError::LimitReached { .. } => Self::TOO_MANY,
            StoreError::JobNotFound => Self::NOT_FOUND,
            other => {
                tracing::error!(error = %other, "a Forq request failed");
                Self::INTERNAL
            }
        }
    }
}

impl From<PullError> for ForqError {
    fn from(err: PullError) -> Self {
        match err {
            PullError::TooManyWaiting => Self::TOO_MANY,
            // A lease lost (taken over by another consumer), a message gone, or a queue
            // hookq pushes: there is no such message to answer.
            PullError::LeaseLost
            | PullError::NotHandedOut
            | PullError::JobNotFound
            | PullError::NotPull => Self::NOT_FOUND,
            PullError::Store(err) => err.into(),
        }
    }
}

type ForqResult<T> = Result<T, ForqError>;

/// hookq's own authentication (configured keys, scoped keys and their permissions),
/// its refusals answered in Forq's shape.
fn refusal(err: ApiError) -> Response {
    match err {
        ApiError::Unauthorized | ApiError::Forbidden(_) => ForqError::UNAUTHORIZED.into_response(),
        ApiError::Unavailable(_) | ApiError::Internal(_) => ForqError::INTERNAL.into_response(),
        other => other.into_response(),
    }
}

/// The caller's scoped key, if it came with one (none: a configured key or an open server,
/// which may do everything the route offers).
type Caller = Option<Extension<Principal>>;

/// A scoped key judged on the queue whose data is served: the auth layer judged the path's
/// name, or for `{queue}-dlq` either name ([`super::permissions::forq_dead_letters_base`]),
/// before anyone knew which queue the request reaches.
fn allowed_on(caller: &Caller, need: Need, queue: &QueueName) -> ForqResult<()> {
    match caller {
        Some(Extension(Principal(grant))) if !grant.allows(need, Some(queue.as_str())) => {
            tracing::info!(key = %grant.name, queue = %queue, "Forq request refused: the key does not cover the queue served");
            Err(ForqError::UNAUTHORIZED)
        }
        _ => Ok(()),
    }
}

/// A consumer's need, on the queue whose messages it reads or answers.
const CONSUMING: Need = Need::Queue(super::permissions::CONSUMER);

/// `GET /healthcheck`: 204 when the database answers, 503 otherwise. No key needed.
async fn healthcheck(State(state): State<AppState>) -> Response {
    match state.store.ping().await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(err) => {
            tracing::warn!(error = %err, "health check: the database does not answer");
            ForqError::UNHEALTHY.into_response()
        }
    }
}

/// A queue name as Forq accepts it and hookq can hold: Forq's `^[a-zA-Z0-9._-]{1,64}$`,
/// lower-cased as hookq's names are; a `.` (which hookq's names do not allow) is refused.
fn queue_name(raw: Result<Path<String>, PathRejection>) -> ForqResult<QueueName> {
    let Path(raw) = raw.map_err(|_| ForqError::INVALID_NAME)?;
    forq_queue_name(&raw)
}

fn forq_queue_name(raw: &str) -> ForqResult<QueueName> {
    let forq_valid = (1..=MAX_NAME).contains(&raw.len())
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !forq_valid {
        return Err(ForqError::INVALID_NAME);
    }
    QueueName::parse(raw).map_err(|_| ForqError::INVALID_NAME)
}

/// A queue and message id from the path: the name checked first, as Forq does.
fn message_path(
    raw: Result<Path<(String, String)>, PathRejection>,
) -> ForqResult<(QueueName, JobId)> {
    let Path((queue, id)) = raw.map_err(|_| ForqError::INVALID_NAME)?;
    let queue = forq_queue_name(&queue)?;
    let id = JobId::parse(&id).map_err(|_| ForqError::INVALID_ID)?;
    Ok((queue, id))
}

/// What a producer sends. Keys as Forq's Go decoder matches them, for the casings its SDKs
/// send; unknown fields are ignored, `null` is absent.
#[derive(Debug, Default, Deserialize)]
struct NewMessage {
    #[serde(default, alias = "Content")]
    content: Option<String>,
    #[serde(
        default,
        rename = "processAfter",
        alias = "ProcessAfter",
        alias = "processafter"
    )]
    process_after: Option<i64>,
}

/// `POST /api/v1/queues/{queue}/messages` → 204: the message is durably stored.
async fn produce(
    State(state): State<AppState>,
    caller: Caller,
    name: Result<Path<String>, PathRejection>,
    body: Body,
) -> ForqResult<StatusCode> {
    let name = queue_name(name)?;
    let bytes = read_limited(body, MAX_BODY, state.config.body_timeout)
        .await
        .map_err(|err| match err {
            ApiError::PayloadTooLarge(_) => ForqError::BODY_TOO_LARGE,
            _ => ForqError::INVALID_BODY,
        })?;
    // Only the first JSON value counts, as with Go's decoder.
    let message: Option<NewMessage> = serde_json::Deserializer::from_slice(&bytes)
        .into_iter()
        .next()
        .ok_or(ForqError::INVALID_BODY)?
        .map_err(|_| ForqError::INVALID_BODY)?;
    let message = message.unwrap_or_default();
    if name.as_str().ends_with(DLQ_SUFFIX) {
        return Err(ForqError::PRODUCE_TO_DLQ);
    }
    let content = message.content.unwrap_or_default();
    if content.len() > MAX_CONTENT {
        return Err(ForqError::TOO_LARGE);
    }
    let now = now_millis();
    let not_before = match message.process_after {
        None | Some(0) => None,
        Some(at) if at + PAST_TOLERANCE_MS < now => return Err(ForqError::IN_PAST),
        Some(at) if at > now + MAX_DELAY_MS => return Err(ForqError::TOO_FAR),
        Some(at) => Some(at).filter(|at| *at > now),
    };
    let payload = serde_json::to_vec(&content)
        .ok()
        .and_then(|json| canonicalize(&json).ok())
        .ok_or(ForqError::INTERNAL)?;
    ensure_queue(&state, &caller, &name, now).await?;
    let mut job = NewJob::now(JobId::new(), payload, now);
    job.not_before = not_before;
    let due_at = job.due_at();
    state.store.enqueue(name.clone(), job).await?;
    telemetry::job_enqueued(&name);
    state.wakeups.mark_due(&name, due_at);
    Ok(StatusCode::NO_CONTENT)
}

/// Queue `name`, created as a pull queue with Forq's retry schedule if it does not exist
/// (Forq's queues are virtual: a producer names one and it is there) and the caller may
/// create queues ([`may_create_queues`]).
async fn ensure_queue(
    state: &AppState,
    caller: &Caller,
    name: &QueueName,
    now: i64,
) -> ForqResult<()> {
    match state.store.queue(name).await {
        Ok(_) => return Ok(()),
        Err(StoreError::QueueNotFound) => {}
        Err(err) => return Err(err.into()),
    }
    if !may_create_queues(state, caller) {
        // As every refusal of a scoped key on Forq's routes: the one code its document has.
        tracing::info!(queue = %name, "Forq produce refused: the key may not create queues");
        return Err(ForqError::UNAUTHORIZED);
    }
    let mut queue = Queue::new(name.clone(), None, None, now);
    queue.policy.max_attempts = Some(FORQ_ATTEMPTS);
    queue.policy.backoff = Some(
        FORQ_BACKOFF_SECS
            .iter()
            .copied()
            .map(Duration::from_secs)
            .collect(),
    );
    match state.store.create_queue(queue).await {
        // Another producer created it meanwhile: the same queue.
        Ok(()) | Err(StoreError::QueueExists) => {
            tracing::info!(queue = %name, "pull queue created by a Forq producer");
            Ok(())
        }
        Err(err) => Err(err.into()),
    }
}

/// Whether a producer may create the queue it names: the configured key (or an open
/// server) and admin keys always; a scoped producer key only where the operator allows it
/// (`HOOKQ_FORQ_PRODUCERS_CREATE_QUEUES`), as creating a queue is admin-only on hookq's own
/// API and uses up `HOOKQ_MAX_QUEUES`.
fn may_create_queues(state: &AppState, caller: &Caller) -> bool {
    match caller {
        None => true,
        Some(Extension(Principal(grant))) => {
            grant.role == Role::Admin || state.config.forq_producers_create_queues
        }
    }
}

/// A consumed message, exactly Forq's fields (its Java SDK refuses unknown ones).
#[derive(Debug, Serialize)]
struct MessageBody {
    id: String,
    content: String,
    receipt: String,
}

/// `GET /api/v1/queues/{queue}/messages`: a message as soon as one is due (leased for 5
/// minutes), or 204 after 30 s without one. A queue nobody produced to yet waits like an
/// empty one (as Forq's own consume polls whether or not anything was produced), holding a
/// seat among the waiting lease requests like every wait.
async fn consume(
    State(state): State<AppState>,
    caller: Caller,
    actor: Actor,
    name: Result<Path<String>, PathRejection>,
) -> ForqResult<Response> {
    let name = queue_name(name)?;
    let holder = LeaseHolder::from(actor);
    let deadline = tokio::time::Instant::now() + CONSUME_WAIT;
    if let Some(queue) = dead_letters_of(&state, &name).await? {
        allowed_on(&caller, CONSUMING, &queue)?;
        return consume_dead_letter(&state, &queue, deadline, holder).await;
    }
    // The auth layer let a key covering `x` pass for `x-dlq`: this is that very queue.
    allowed_on(&caller, CONSUMING, &name)?;
    // Held only while the queue does not exist: once it does, the lease's own wait holds one.
    let mut seat = None;
    let leased = loop {
        let wait = deadline.saturating_duration_since(tokio::time::Instant::now());
        let request = LeaseRequest {
            max: 1,
            wait,
            visibility: Some(VISIBILITY),
            holder: holder.clone(),
        };
        // Listen before looking: the first message creates the queue and wakes us.
        let waiters = state.wakeups.lease_waiters(&name);
        let created = waiters.notified();
        tokio::pin!(created);
        created.as_mut().enable();
        drop(seat.take());
        match state.leases.lease(&name, request).await {
            Ok(leased) => break leased,
            Err(PullError::Store(StoreError::QueueNotFound)) => {
                seat = Some(state.leases.take_seat(&name)?);
                if tokio::time::timeout_at(deadline, created).await.is_err() {
                    return Ok(StatusCode::NO_CONTENT.into_response());
                }
            }
            Err(err) => return Err(err.into()),
        }
    };
    let Some(job) = leased.jobs.first() else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let body = MessageBody {
        id: job.id.to_string(),
        content: content_of(job.payload.as_str()),
        receipt: state
            .leases
            .signer()
            .issue(job.id, job.lease(), leased.leased_at)
            .to_string(),
    };
    leased.handed();
    Ok(Json(body).into_response())
}

/// `{queue}-dlq` when it names the dead letters of an existing queue `queue` (and no queue
/// of that very name exists): `queue`.
async fn dead_letters_of(state: &AppState, name: &QueueName) -> ForqResult<Option<QueueName>> {
    let Some(base) = name.as_str().strip_suffix(DLQ_SUFFIX) else {
        return Ok(None);
    };
    let Ok(base) = QueueName::parse(base) else {
        return Ok(None);
    };
    let exists = async |queue: &QueueName| match state.store.queue(queue).await {
        Ok(_) => Ok(true),
        Err(StoreError::QueueNotFound) => Ok(false),
        Err(err) => Err(ForqError::from(err)),
    };
    if exists(name).await? || !exists(&base).await? {
        return Ok(None);
    }
    Ok(Some(base))
}

/// Lease the oldest pending dead letter of `queue`, waiting until `deadline` for one.
async fn consume_dead_letter(
    state: &AppState,
    queue: &QueueName,
    deadline: tokio::time::Instant,
    holder: LeaseHolder,
) -> ForqResult<Response> {
    let waiters = state.wakeups.lease_waiters(queue);
    let mut seat = None;
    loop {
        let woken = waiters.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let now = now_millis();
        let until = now + VISIBILITY.as_millis() as i64;
        if let Some((id, payload)) = state
            .store
            .lease_dead_letter(queue.clone(), now, until, holder.clone())
            .await?
        {
            let lease = Lease { attempt: 0, until };
            let body = MessageBody {
                id: id.to_string(),
                content: content_of(payload.as_str()),
                receipt: state.leases.signer().issue(id, lease, now).to_string(),
            };
            return Ok(Json(body).into_response());
        }
        let look_again = (tokio::time::Instant::now() + DLQ_RECHECK).min(deadline);
        if tokio::time::Instant::now() >= deadline {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        if seat.is_none() {
            seat = Some(state.leases.take_seat(queue)?);
        }
        let _ = tokio::time::timeout_at(look_again, woken).await;
    }
}

/// Answer a dead letter of `queue` a consumer of `{queue}-dlq` leased: acknowledge it, or
/// (`nack`) offer it again a little later. Fenced by the receipt; without one, an ack is
/// idempotent and a nack needs a pending record.
async fn answer_dead_letter(
    state: &AppState,
    queue: &QueueName,
    id: JobId,
    receipt: Option<LeaseId>,
    verb: Verb,
) -> ForqResult<StatusCode> {
    if receipt.is_some_and(|r| !state.leases.signer().check(id, &r)) {
        return Err(ForqError::NOT_FOUND);
    }
    let now = now_millis();
    let hide_until = (verb == Verb::Nack).then(|| now + DLQ_NACK_HIDE.as_millis() as i64);
    let lease = receipt.map(|r| r.lease.until);
    let changed = state
        .store
        .answer_dead_letter(queue.clone(), id, lease, hide_until, now)
        .await?;
    if changed || (receipt.is_none() && verb == Verb::Ack) {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ForqError::NOT_FOUND)
    }
}

/// A message's content: the string a Forq producer sent, or a native job's JSON text.
fn content_of(payload: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(payload) {
        Ok(serde_json::Value::String(content)) => content,
        _ => payload.to_owned(),
    }
}

/// The lease a receipt names; `None` when no receipt was sent (an older client); an error
/// when it is not one this server hands out. Its signature is checked where it is used.
fn receipt(headers: &HeaderMap) -> ForqResult<Option<LeaseId>> {
    let Some(raw) = headers.get(RECEIPT_HEADER) else {
        return Ok(None);
    };
    let raw = raw.to_str().map_err(|_| ForqError::INVALID_RECEIPT)?.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    LeaseId::parse(raw)
        .map(Some)
        .map_err(|_| ForqError::INVALID_RECEIPT)
}

/// The lease an answer without a receipt answers: the message's current one.
async fn current_lease(
    state: &AppState,
    queue: &QueueName,
    id: JobId,
) -> ForqResult<Option<LeaseId>> {
    // The server's own record, so signed here; taken `VISIBILITY` before it ends.
    Ok(state
        .store
        .current_lease(queue.clone(), id)
        .await?
        .map(|lease| {
            let leased_at = lease.until - VISIBILITY.as_millis() as i64;
            state.leases.signer().issue(id, lease, leased_at)
        }))
}

/// Which answer a consumer gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Ack,
    Nack,
}

/// `POST …/messages/{id}/ack` → 204: the message is done. With a receipt of an earlier
/// delivery, 404 and nothing changes. Without a receipt (older clients) an ack is
/// idempotent: 204 for an unknown or already acknowledged message.
async fn ack(
    State(state): State<AppState>,
    caller: Caller,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
) -> ForqResult<StatusCode> {
    answer(&state, &caller, path, &headers, Verb::Ack).await
}

/// `POST …/messages/{id}/nack` → 204: a failed delivery, retried on the queue's schedule
/// or dead-lettered once its attempts are spent. 404 for an unknown message or a receipt of
/// an earlier delivery.
async fn nack(
    State(state): State<AppState>,
    caller: Caller,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
) -> ForqResult<StatusCode> {
    answer(&state, &caller, path, &headers, Verb::Nack).await
}

/// An ack or a nack: of a dead letter (`{queue}-dlq`), or of a delivery, named by its
/// receipt or, without one (an older client), the current one.
async fn answer(
    state: &AppState,
    caller: &Caller,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: &HeaderMap,
    verb: Verb,
) -> ForqResult<StatusCode> {
    let (queue, id) = message_path(path)?;
    let given = receipt(headers)?;
    if let Some(dead_letters) = dead_letters_of(state, &queue).await? {
        allowed_on(caller, CONSUMING, &dead_letters)?;
        return answer_dead_letter(state, &dead_letters, id, given, verb).await;
    }
    allowed_on(caller, CONSUMING, &queue)?;
    // Forq's consumers answer pull queues only: a push queue's jobs in flight are hookq's
    // deliveries, which an older client's answer by id alone must not complete.
    match state.store.queue(&queue).await {
        Ok(found) if found.is_pull() => {}
        Ok(_) | Err(StoreError::QueueNotFound) => return Err(ForqError::NOT_FOUND),
        Err(err) => return Err(err.into()),
    }
    let lease = match given {
        Some(lease) => Some(lease),
        None => current_lease(state, &queue, id).await?,
    };
    let Some(lease) = lease else {
        // Nothing in flight: an older client's ack is idempotent; its nack finds nothing.
        return match verb {
            Verb::Ack => Ok(StatusCode::NO_CONTENT),
            Verb::Nack => Err(ForqError::NOT_FOUND),
        };
    };
    let answered = match verb {
        Verb::Ack => state.leases.ack(&queue, id, lease).await,
        Verb::Nack => state.leases.nack(&queue, id, lease, None, None).await,
    };
    match answered {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        // An older client's ack that met another answer first: idempotent still.
        Err(PullError::LeaseLost | PullError::JobNotFound)
            if given.is_none() && verb == Verb::Ack =>
        {
            Ok(StatusCode::NO_CONTENT)
        }
        Err(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_reads_back_as_the_lease_it_names() {
        let lease = Lease {
            attempt: 5,
            until: 1_764_140_300_000,
        };
        let issued = crate::pull::LeaseSigner::new([1; 32]).issue(JobId::new(), lease, 1);
        let mut headers = HeaderMap::new();
        headers.insert(RECEIPT_HEADER, issued.to_string().parse().unwrap());
        assert_eq!(receipt(&headers), Ok(Some(issued)));
        for bad in ["x", "1.5", "-3", "99999999999999999999", "1-2-3"] {
            headers.insert(RECEIPT_HEADER, bad.parse().unwrap());
            assert_eq!(receipt(&headers), Err(ForqError::INVALID_RECEIPT), "{bad}");
        }
        headers.insert(RECEIPT_HEADER, "".parse().unwrap());
        assert_eq!(receipt(&headers), Ok(None));
    }

    #[test]
    fn queue_names_follow_forq_and_fold_to_hookqs() {
        assert_eq!(forq_queue_name("Orders_1").unwrap().as_str(), "orders_1");
        for bad in ["", "a.b", "a b", "a/b", &"x".repeat(65)] {
            assert_eq!(
                forq_queue_name(bad).err(),
                Some(ForqError::INVALID_NAME),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_forq_message_shows_its_content_and_a_native_job_its_json() {
        assert_eq!(content_of(r#""hello \"you\"""#), r#"hello "you""#);
        assert_eq!(content_of(r#"{"a":1}"#), r#"{"a":1}"#);
    }
}
