//! `GET /admin/search`: find jobs across every queue and state — live, dead-lettered or
//! delivered and kept — by text in their payload or last error, id prefix, ordering key,
//! queue, status and creation time, newest first, a page at a time.
//!
//! An id prefix, a time range, a key or a queue is a range of an index; text and status are
//! tested on each row read, so a search with them reads rows one by one. Each answer reads
//! for at most [`WALK_BUDGET`] (and pages on from where it stopped), so it answers in bounded
//! time however large the tables, and says how many rows it read and whether it walked.

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::cursor::Cursor;
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::{ApiQuery, time_or_back};
use crate::model::{JobId, JobIdPrefix, QueueName, UnixMillis, now_millis};
use crate::store::search::{HitState, SearchHit, SearchQuery, SearchStatus, SearchWalk};

/// How long one answer reads before it stops and pages on.
pub const WALK_BUDGET: Duration = Duration::from_millis(100);
/// The rows one statement reads while a search walks.
const ROWS_PER_READ: usize = 2_000;
/// The default and the largest page.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 200;
/// The longest text searched for.
const MAX_TEXT_CHARS: usize = 200;
/// The latest time a UUIDv7 id can carry (48 bits of milliseconds).
const LAST_ID_MILLIS: UnixMillis = (1 << 48) - 1;

pub fn admin_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(search))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SearchParams {
    /// Jobs whose payload or last error contains this text (letters compared without case;
    /// on SQLite, ASCII letters only); at most 200 characters.
    text: Option<String>,
    /// A job id, or its first hex digits (at least 8); dashes, case and spaces ignored.
    id: Option<String>,
    /// Jobs with exactly this ordering key.
    key: Option<String>,
    /// One queue's jobs only.
    queue: Option<String>,
    /// `READY` (waiting: due, scheduled or behind its key), `IN_FLIGHT`, `ERROR` (a
    /// dead-letter record, in any state) or `DELIVERED` (kept in the delivery log).
    #[param(inline, value_type = Option<SearchStatusName>)]
    status: Option<String>,
    /// Created at or after: an RFC 3339 time, unix milliseconds or a duration back from now
    /// (`1h`).
    since: Option<String>,
    /// Created at or before, as `since`.
    until: Option<String>,
    /// Page size: default 50, at most 200.
    #[param(value_type = Option<u64>, minimum = 1, maximum = 200)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page (opaque; pass the same filters).
    cursor: Option<String>,
}

/// Where a found job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SearchStatusName {
    Ready,
    InFlight,
    Error,
    Delivered,
}

impl SearchStatusName {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "READY",
            Self::InFlight => "IN_FLIGHT",
            Self::Error => "ERROR",
            Self::Delivered => "DELIVERED",
        }
    }
}

/// One job found.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchHitView {
    #[schema(format = "uuid")]
    pub id: String,
    pub queue: String,
    pub status: SearchStatusName,
    /// Finer: `ready`, `scheduled`, `blocked` or `in_flight` for a live job; the dead-letter
    /// record's `pending`, `replaying`, `replayed` or `acknowledged`; `delivered`.
    pub state: String,
    /// Unix milliseconds.
    pub created_at: i64,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
    /// The worker's last HTTP status (a delivered job's: the 2xx that acknowledged it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    /// The last error's first 300 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The payload's first 200 characters.
    pub preview: String,
}

/// A page of jobs found, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SearchResults {
    pub ok: bool,
    pub jobs: Vec<SearchHitView>,
    /// The cursor of the next page; `null` once everything in range was searched.
    pub next_cursor: Option<String>,
    /// Rows read for this page.
    pub read: u64,
    /// Whether this search reads rows one by one (text, a status, or a queue among the dead
    /// letters and the delivery log) rather than only a range of an index: such a page
    /// stops after 100 ms of reading, perhaps short of `limit`, and `next_cursor` goes on.
    pub walked: bool,
    /// With `next_cursor`: every job created after this time (unix ms) was searched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub searched_back_to: Option<i64>,
}

fn status_of(raw: &str) -> ApiResult<SearchStatus> {
    Ok(match raw.trim().to_ascii_uppercase().as_str() {
        "READY" => SearchStatus::Ready,
        "IN_FLIGHT" => SearchStatus::InFlight,
        "ERROR" => SearchStatus::Error,
        "DELIVERED" => SearchStatus::Delivered,
        _ => {
            return Err(ApiError::Unprocessable(format!(
                "status: {raw:?} is not one of READY, IN_FLIGHT, ERROR, DELIVERED"
            )));
        }
    })
}

fn time_param(field: &str, raw: Option<&str>, now: UnixMillis) -> ApiResult<Option<UnixMillis>> {
    raw.map(|raw| {
        let at = time_or_back(field, &serde_json::Value::String(raw.to_owned()), now)?;
        Ok(at.clamp(0, LAST_ID_MILLIS))
    })
    .transpose()
}

fn limit_of(raw: Option<&str>) -> ApiResult<usize> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_LIMIT);
    };
    match raw.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        _ => Err(ApiError::Unprocessable(format!(
            "limit: give a whole number from 1 to {MAX_LIMIT}"
        ))),
    }
}

/// The query the parameters ask for, and the id its first page starts from.
fn query_of(params: &SearchParams, now: UnixMillis) -> ApiResult<SearchQuery> {
    let text = params
        .text
        .as_deref()
        .filter(|text| !text.is_empty())
        .map(str::to_owned);
    if text
        .as_ref()
        .is_some_and(|text| text.chars().count() > MAX_TEXT_CHARS)
    {
        return Err(ApiError::Unprocessable(format!(
            "text: at most {MAX_TEXT_CHARS} characters"
        )));
    }
    let queue = params
        .queue
        .as_deref()
        .filter(|queue| !queue.is_empty())
        .map(|raw| QueueName::parse(raw).map_err(|_| ApiError::queue_not_found()))
        .transpose()?;
    let key = params
        .key
        .as_deref()
        .filter(|key| !key.is_empty())
        .map(str::to_owned);
    let status = params
        .status
        .as_deref()
        .filter(|status| !status.is_empty())
        .map(status_of)
        .transpose()?;
    let since = time_param("since", params.since.as_deref(), now)?;
    let until = time_param("until", params.until.as_deref(), now)?;
    if let (Some(since), Some(until)) = (since, until)
        && until < since
    {
        return Err(ApiError::Unprocessable("until is before since".into()));
    }
    let mut from = since.map(JobId::first_of_millis);
    let mut to = until.map(JobId::last_of_millis);
    if let Some(raw) = params.id.as_deref().filter(|id| !id.trim().is_empty()) {
        let prefix = JobIdPrefix::parse(raw).map_err(|e| ApiError::Unprocessable(e.0))?;
        from = Some(from.map_or(prefix.first(), |from| from.max(prefix.first())));
        to = Some(to.map_or(prefix.last(), |to| to.min(prefix.last())));
    }
    Ok(SearchQuery {
        text,
        key,
        queue,
        status,
        from,
        to,
    })
}

impl From<SearchHit> for SearchHitView {
    fn from(hit: SearchHit) -> Self {
        let (status, state) = match hit.state {
            HitState::Ready => (SearchStatusName::Ready, "ready"),
            HitState::Scheduled => (SearchStatusName::Ready, "scheduled"),
            HitState::Blocked => (SearchStatusName::Ready, "blocked"),
            HitState::InFlight => (SearchStatusName::InFlight, "in_flight"),
            HitState::DeadLetter(state) => (SearchStatusName::Error, state.as_str()),
            HitState::Delivered => (SearchStatusName::Delivered, "delivered"),
        };
        Self {
            id: hit.id.to_string(),
            queue: hit.queue.to_string(),
            status,
            state: state.to_owned(),
            created_at: hit.created_at,
            attempts: hit.attempts,
            ordering_key: hit.ordering_key,
            last_status: hit.last_status,
            last_error: hit.last_error,
            preview: hit.preview,
        }
    }
}

/// Search jobs across every queue and state, newest first.
#[utoipa::path(
    get,
    path = "/admin/search",
    tag = "jobs",
    params(SearchParams),
    responses(
        (status = 200, description = "A page of the jobs found, newest first", body = SearchResults),
        (status = 400, description = "A `cursor` that is not a search's, or an undecodable query string", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 403, description = "A key without the reader role on every queue (or on `queue`)", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 422, description = "An invalid `text`, `id`, `status`, `since`, `until` or `limit`", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn search(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<SearchParams>,
) -> ApiResult<Json<SearchResults>> {
    let started = Instant::now();
    let query = query_of(&params, now_millis())?;
    let limit = limit_of(params.limit.as_deref())?;
    let top = query.to.unwrap_or(JobId::MAX);
    let upper = match params.cursor.as_deref() {
        Some(raw) => Cursor::decode(raw)?.into_search()?.min(top),
        None => top,
    };
    let walk = SearchWalk {
        rows_per_read: ROWS_PER_READ,
        deadline: started + WALK_BUDGET,
    };
    let page = state.store.search(query, upper, limit, walk).await?;
    Ok(Json(SearchResults {
        ok: true,
        jobs: page.hits.into_iter().map(SearchHitView::from).collect(),
        searched_back_to: page.next_upper.map(|id| id.created_at()),
        next_cursor: page.next_upper.map(|id| Cursor::Search(id).encode()),
        read: u64::try_from(page.read).unwrap_or(u64::MAX),
        walked: page.walked,
    }))
}
