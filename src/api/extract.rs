//! Extractors: each turns one part of a request (path, query string, body) into the API's
//! own parsed values, and rejects with the one error shape ([`ApiError`]). Handlers take
//! these and never parse or `map_err` by hand. The status each rejection gets follows the
//! rule written in docs/api.md ("400 or 422"):
//!
//! - **404**: a name or id in the path that cannot exist (invalid, or no such queue);
//! - **400**: the request cannot be read: malformed JSON, an undecodable query string, a
//!   cursor that is not one of ours, a body that breaks off;
//! - **413** / **408**: a body larger than the route's limit / not received in time;
//! - **422**: the request was read, but a value in it is invalid or missing.

use crate::trace_context::{TRACEPARENT, TRACESTATE, TraceContext};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use utoipa::ToSchema;

use super::AppState;
use super::body::{parse_json, read_limited};
use super::error::{ApiError, ApiResult};
use crate::json::{self, CanonicalJson};
use crate::model::{JobId, QueueName, ScheduleName, UnixMillis, now_millis};
use crate::policy;
use crate::store::{IdempotencyKey, Queue};

/// `{name}`: a queue that exists. 404 when the name cannot be valid or there is no such
/// queue, before any body is read.
pub struct KnownQueue(pub Arc<Queue>);

impl FromRequestParts<AppState> for KnownQueue {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::queue_not_found())?;
        known_queue(state, &raw).await.map(Self)
    }
}

/// `{name}` of a queue to create: 422 when the name is invalid. Names are lower-cased; the
/// name as given is kept so answers can say what it became.
pub struct NewQueueName {
    pub name: QueueName,
    pub given: String,
}

impl FromRequestParts<AppState> for NewQueueName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Path(given) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest(e.body_text()))?;
        let name = QueueName::parse(&given).map_err(|e| ApiError::Unprocessable(e.0))?;
        Ok(Self { name, given })
    }
}

/// `{name}/{id}`: a job id in a queue that exists. 404 for an unknown queue or an id that
/// is not a UUID (whether the job exists is the handler's question).
pub struct JobPath {
    pub queue: Arc<Queue>,
    pub id: JobId,
}

impl FromRequestParts<AppState> for JobPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Path((queue, id)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::job_not_found())?;
        let queue = known_queue(state, &queue).await?;
        let id = JobId::parse(&id).map_err(|_| ApiError::job_not_found())?;
        Ok(Self { queue, id })
    }
}

/// `{name}/_schedules/{schedule}`: a schedule name in a queue that exists. 404 for an unknown
/// queue or a name no schedule can have (whether the schedule exists is the store's
/// question).
pub struct SchedulePath {
    pub queue: Arc<Queue>,
    pub name: ScheduleName,
}

impl FromRequestParts<AppState> for SchedulePath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let not_found = || ApiError::NotFound("schedule not found".into());
        let Path((queue, name)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|_| not_found())?;
        let queue = known_queue(state, &queue).await?;
        let name = ScheduleName::parse(&name).map_err(|_| not_found())?;
        Ok(Self { queue, name })
    }
}

/// `{name}/_schedules/{schedule}` of a schedule to create or replace: 404 for an unknown
/// queue, 422 for an invalid schedule name.
pub struct NewSchedulePath {
    pub queue: Arc<Queue>,
    pub name: ScheduleName,
}

impl FromRequestParts<AppState> for NewSchedulePath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Path((queue, name)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest(e.body_text()))?;
        let queue = known_queue(state, &queue).await?;
        let name = ScheduleName::parse(&name).map_err(|e| ApiError::Unprocessable(e.0))?;
        Ok(Self { queue, name })
    }
}

/// `{id}` of a dead letter: 404 when it is not a UUID.
pub struct DeadLetterId(pub JobId);

impl FromRequestParts<AppState> for DeadLetterId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let not_found = || ApiError::NotFound("dead letter not found".into());
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| not_found())?;
        JobId::parse(&raw).map(Self).map_err(|_| not_found())
    }
}

/// The query string decoded into `T`: 400 when it cannot be decoded. Values are checked by
/// the parsers below (422). A parameter the route does not take never gets here: the
/// router refuses it first, by the OpenAPI document (`super::query_check`).
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequestParts<AppState> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Query(value) = Query::<T>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest(e.body_text()))?;
        Ok(Self(value))
    }
}

/// A JSON body of at most `LIMIT` bytes, parsed into `T`: 413 when larger, 408 when not
/// received within `HOOKQ_BODY_TIMEOUT`, 400 when malformed, 422 when well-formed but not a
/// `T` (a missing field, a wrong type, an unknown field where `T` refuses them).
pub struct ApiJson<T, const LIMIT: usize>(pub T);

impl<T: DeserializeOwned, const LIMIT: usize> FromRequest<AppState> for ApiJson<T, LIMIT> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> ApiResult<Self> {
        let bytes = read_limited(request.into_body(), LIMIT, state.config.body_timeout).await?;
        parse_json(&bytes).map(Self)
    }
}

/// A job: a JSON object of at most `HOOKQ_MAX_JOB_BYTES`, in canonical form (the bytes the
/// worker receives and the signature covers). 400 when malformed, 422 when not an object.
pub struct JobBody(pub CanonicalJson);

impl FromRequest<AppState> for JobBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> ApiResult<Self> {
        let config = &state.config;
        let bytes = read_limited(
            request.into_body(),
            config.max_job_bytes,
            config.body_timeout,
        )
        .await?;
        let job = json::canonicalize(&bytes)
            .map_err(|e| ApiError::BadRequest(format!("malformed JSON: {e}")))?;
        if !job.is_object() {
            return Err(ApiError::Unprocessable(
                "a job must be a JSON object".into(),
            ));
        }
        Ok(Self(job))
    }
}

/// How far ahead a job may be scheduled.
pub const MAX_SCHEDULE_AHEAD: Duration = Duration::from_secs(366 * 24 * 3600);

/// When an enqueued job may first be delivered: `delay` (`?delay=30s` or `X-Hookq-Delay`)
/// or `runAt` (`?runAt=<unix ms>` or `X-Hookq-Run-At`), from the query string or a header,
/// so the body stays the job (hyper clients send neither). 422 for an invalid value, both
/// options at once, the same option given differently as a parameter and a header, a past
/// `runAt`, or a start more than 366 days ahead.
///
/// And the `Idempotency-Key` header (1–200 characters): the same key on the same queue
/// within `HOOKQ_IDEMPOTENCY_TTL` stores one job.
pub struct EnqueueOptions {
    /// The request's time: the job's creation.
    pub now: UnixMillis,
    /// Not delivered before this time; `None`: at once.
    pub not_before: Option<UnixMillis>,
    pub idempotency: Option<IdempotencyKey>,
    /// −100…100: among a queue's due jobs, higher first.
    pub priority: i32,
    pub ordering_key: Option<String>,
    /// The producer's W3C `traceparent` / `tracestate`, when valid (an invalid one is
    /// ignored, as the Trace Context specification asks).
    pub trace: Option<TraceContext>,
}

/// The longest `Idempotency-Key` accepted, in characters.
pub const MAX_IDEMPOTENCY_KEY: usize = 200;
/// The longest `orderingKey` accepted, in characters.
pub const MAX_ORDERING_KEY: usize = 200;
/// The priorities a job may have.
pub const PRIORITIES: std::ops::RangeInclusive<i32> = -100..=100;

/// A job's priority: 422 outside [`PRIORITIES`].
pub fn check_priority(priority: i32) -> ApiResult<i32> {
    if PRIORITIES.contains(&priority) {
        Ok(priority)
    } else {
        Err(ApiError::Unprocessable(format!(
            "priority: `{priority}` is not an integer from -100 to 100"
        )))
    }
}

/// A job's ordering key: 422 unless 1 to [`MAX_ORDERING_KEY`] characters.
pub fn check_ordering_key(key: &str) -> ApiResult<()> {
    if key.is_empty() || key.chars().count() > MAX_ORDERING_KEY {
        return Err(ApiError::Unprocessable(format!(
            "orderingKey must be 1 to {MAX_ORDERING_KEY} characters"
        )));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnqueueQuery {
    delay: Option<String>,
    run_at: Option<String>,
    priority: Option<String>,
    ordering_key: Option<String>,
}

impl FromRequestParts<AppState> for EnqueueOptions {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let ApiQuery(query) = ApiQuery::<EnqueueQuery>::from_request_parts(parts, state).await?;
        let now = now_millis();
        let delay = option_value("delay", query.delay, parts, "x-hookq-delay")?;
        let run_at = option_value("runAt", query.run_at, parts, "x-hookq-run-at")?;
        let ahead = i64::try_from(MAX_SCHEDULE_AHEAD.as_millis()).unwrap_or(i64::MAX);
        let not_before = match (delay, run_at) {
            (Some(_), Some(_)) => {
                return Err(ApiError::Unprocessable(
                    "give either delay or runAt, not both".into(),
                ));
            }
            (Some(raw), None) => {
                let delay = crate::policy::parse_duration("delay", &raw)
                    .map_err(|e| ApiError::Unprocessable(e.0))?;
                let delay = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
                if delay > ahead {
                    return Err(ApiError::Unprocessable(
                        "delay must be at most 366 days".into(),
                    ));
                }
                Some(now + delay)
            }
            (None, Some(raw)) => {
                let at: UnixMillis = raw.trim().parse().map_err(|_| {
                    ApiError::Unprocessable(format!(
                        "runAt: `{raw}` is not a time in unix milliseconds"
                    ))
                })?;
                if at < now {
                    return Err(ApiError::Unprocessable(format!(
                        "runAt {at} is in the past (now {now})"
                    )));
                }
                if at - now > ahead {
                    return Err(ApiError::Unprocessable(
                        "runAt must be at most 366 days ahead".into(),
                    ));
                }
                Some(at)
            }
            (None, None) => None,
        };
        let idempotency = match parts.headers.get("idempotency-key") {
            None => None,
            Some(value) => {
                let key = value.to_str().map_err(|_| {
                    ApiError::Unprocessable("the Idempotency-Key header is not text".into())
                })?;
                let length = key.chars().count();
                if key.trim().is_empty() || length > MAX_IDEMPOTENCY_KEY {
                    return Err(ApiError::Unprocessable(format!(
                        "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} characters"
                    )));
                }
                let ttl = i64::try_from(state.config.maintenance.idempotency_ttl.as_millis())
                    .unwrap_or(i64::MAX);
                Some(IdempotencyKey {
                    key: key.to_owned(),
                    valid_since: now.saturating_sub(ttl),
                })
            }
        };
        let priority = match option_value("priority", query.priority, parts, "x-hookq-priority")? {
            None => 0,
            Some(raw) => raw
                .trim()
                .parse::<i32>()
                .map_err(|_| {
                    ApiError::Unprocessable(format!(
                        "priority: `{raw}` is not an integer from -100 to 100"
                    ))
                })
                .and_then(check_priority)?,
        };
        let ordering_key = option_value(
            "orderingKey",
            query.ordering_key,
            parts,
            "x-hookq-ordering-key",
        )?;
        if let Some(key) = &ordering_key {
            check_ordering_key(key)?;
        }
        let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
        let trace = header(TRACEPARENT).and_then(|tp| TraceContext::parse(tp, header(TRACESTATE)));
        Ok(Self {
            now,
            not_before,
            idempotency,
            priority,
            ordering_key,
            trace,
        })
    }
}

/// An enqueue option given as query parameter `name` or as header `header`.
fn option_value(
    name: &str,
    query: Option<String>,
    parts: &Parts,
    header: &str,
) -> ApiResult<Option<String>> {
    let header = parts
        .headers
        .get(header)
        .map(|value| {
            value
                .to_str()
                .map(str::to_owned)
                .map_err(|_| ApiError::Unprocessable(format!("the {header} header is not text")))
        })
        .transpose()?;
    match (query, header) {
        (Some(query), Some(header)) if query.trim() != header.trim() => {
            Err(ApiError::Unprocessable(format!(
                "{name} is given twice, differently, as a query parameter and a header"
            )))
        }
        (query, header) => Ok(query.or(header)),
    }
}

/// The queue a path names: 404 when the name cannot be valid or the store knows no such
/// queue (it asks the database when another node may have just created it).
async fn known_queue(state: &AppState, raw: &str) -> ApiResult<Arc<Queue>> {
    let name = QueueName::parse(raw).map_err(|_| ApiError::queue_not_found())?;
    Ok(state.store.queue(&name).await?)
}

// ---------------------------------------------------------------------------------------
// Query values: each refuses a bad value with 422.
// ---------------------------------------------------------------------------------------

/// A page size: `default` when absent, capped at `max`; 422 unless a whole number ≥ 1.
pub fn page_size(raw: Option<&str>, default: usize, max: usize) -> ApiResult<usize> {
    let Some(raw) = raw else {
        return Ok(default);
    };
    match raw.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(usize::MAX).min(max)),
        _ => Err(ApiError::Unprocessable(
            "limit must be a whole number of at least 1".into(),
        )),
    }
}

/// The order of a listing by its time (creation, failure or delivery): the newest or the
/// oldest first.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum ListOrder {
    Newest,
    Oldest,
}

/// Whether `order` asks for the newest first; `newest_by_default` when absent.
pub fn newest_first(order: Option<&str>, newest_by_default: bool) -> ApiResult<bool> {
    match order {
        None => Ok(newest_by_default),
        Some("newest") => Ok(true),
        Some("oldest") => Ok(false),
        Some(_) => Err(ApiError::Unprocessable(
            "order must be newest or oldest".into(),
        )),
    }
}

/// The longest text a listing searches for.
const MAX_SEARCH_CHARS: usize = 200;

/// The most job ids one request may name (a selection of dead letters or of waiting jobs,
/// the replayed jobs whose fate to tell).
pub const MAX_IDS: usize = 1000;

/// The job ids a request names: 1 to [`MAX_IDS`] of them, each a job id, sorted without
/// repeats; 422 otherwise, naming them as `what` ("job ids", "dead-letter ids").
pub fn job_ids(raw: &[String], what: &str) -> ApiResult<Vec<JobId>> {
    if raw.is_empty() || raw.len() > MAX_IDS {
        return Err(ApiError::Unprocessable(format!(
            "ids must list 1 to {MAX_IDS} {what}"
        )));
    }
    let mut ids = raw
        .iter()
        .map(|id| {
            JobId::parse(id).map_err(|_| ApiError::Unprocessable(format!("`{id}` is not a job id")))
        })
        .collect::<ApiResult<Vec<_>>>()?;
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// The `search` of a listing or a selection: trimmed, `None` when empty; 422 when too long
/// or holding a control character (a NUL ends the pattern early in SQLite's `instr`, so it
/// would match every row, and select every dead letter for a replay).
pub fn search_text(raw: Option<&str>) -> ApiResult<Option<String>> {
    let Some(text) = raw.map(str::trim).filter(|text| !text.is_empty()) else {
        return Ok(None);
    };
    if text.chars().any(char::is_control) {
        return Err(ApiError::Unprocessable(
            "search must not hold control characters (such as NUL, tab or newline)".into(),
        ));
    }
    if text.chars().count() > MAX_SEARCH_CHARS {
        return Err(ApiError::Unprocessable(format!(
            "search must be at most {MAX_SEARCH_CHARS} characters"
        )));
    }
    Ok(Some(text.to_owned()))
}

/// A boolean flag (`true`/`false`, `1`/`0`, `yes`/`no`, or present without a value); absent
/// is false.
pub fn flag(name: &str, raw: Option<&str>) -> ApiResult<bool> {
    match raw.map(str::to_ascii_lowercase).as_deref() {
        None | Some("false" | "0" | "no") => Ok(false),
        Some("true" | "1" | "yes" | "") => Ok(true),
        Some(other) => Err(ApiError::Unprocessable(format!(
            "{name} must be true or false, not `{other}`"
        ))),
    }
}

/// A queue named in a query string filter (`?queue=`): 404 when the name cannot be valid,
/// as in a path. (A queue named in a JSON body is a field value: invalid is 422.)
pub fn queue_name(raw: &str) -> ApiResult<QueueName> {
    QueueName::parse(raw).map_err(|_| ApiError::queue_not_found())
}

/// A required query value: 422 when absent.
pub fn required<'a>(name: &str, raw: Option<&'a str>, example: &str) -> ApiResult<&'a str> {
    raw.ok_or_else(|| ApiError::Unprocessable(format!("{name} is required: {example}")))
}

/// A time as a client may give it: an RFC 3339 time, unix milliseconds (a number or its
/// digits) or a duration back from `now` (`"1h"`); 422 naming `field` otherwise.
pub fn time_or_back(
    field: &str,
    value: &serde_json::Value,
    now: UnixMillis,
) -> ApiResult<UnixMillis> {
    let invalid = || {
        ApiError::Unprocessable(format!(
            "{field}: give an RFC 3339 time, unix milliseconds or a duration back from now \
             (such as \"1h\")"
        ))
    };
    match value {
        serde_json::Value::Number(n) => n.as_i64().filter(|ms| *ms >= 0).ok_or_else(invalid),
        serde_json::Value::String(text) => {
            let text = text.trim();
            if let Ok(ms) = text.parse::<i64>() {
                return if ms >= 0 { Ok(ms) } else { Err(invalid()) };
            }
            if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
                return Ok(at.timestamp_millis());
            }
            let back = policy::read_duration(text).map_err(|_| invalid())?;
            Ok(now.saturating_sub(i64::try_from(back.as_millis()).unwrap_or(i64::MAX)))
        }
        _ => Err(invalid()),
    }
}
