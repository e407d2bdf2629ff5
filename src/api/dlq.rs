//! Dead-letter administration (`/admin/dlq…`): list with cursor pagination, stats, replay,
//! acknowledge, delete. Dead letters are identified by their job id.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::audit::Actor;

use super::cursor::Cursor;
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::{
    ApiJson, ApiQuery, DeadLetterId, ListOrder, flag, job_ids, newest_first, page_size, queue_name,
    required, search_text,
};
use crate::maintenance::REPEAT_FAILURE_REPLAYS;
use crate::model::{QueueName, now_millis};
use crate::store::{
    DeadLetter, DeadLetterPage, DlqState, DlqStats, ErrorGroup, ErrorGroupCount, FailureReason,
    Filter, PageRequest, Selection, TextMatch,
};

pub const DEFAULT_PAGE: usize = 50;
pub const MAX_PAGE: usize = 100;
/// The longest a replay may be delayed.
pub const MAX_DELAY_SECONDS: u64 = 7 * 24 * 3600;

const MAX_ADMIN_BODY: usize = 256 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, delete_for_queue))
        .routes(routes!(stats))
        .routes(routes!(groups))
        .routes(routes!(replay))
        .routes(routes!(replayed))
        .routes(routes!(acknowledge))
        .routes(routes!(delete_one))
}

/// A dead letter's state in its admin lifecycle (`all`: any of them).
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum DlqStatusFilter {
    Pending,
    Replaying,
    Replayed,
    Acknowledged,
    All,
}

impl DlqStatusFilter {
    /// 422 for anything but a state or `all`.
    fn parse(raw: &str) -> ApiResult<Self> {
        match DlqState::parse(raw) {
            Some(DlqState::Pending) => Ok(Self::Pending),
            Some(DlqState::Replaying) => Ok(Self::Replaying),
            Some(DlqState::Replayed) => Ok(Self::Replayed),
            Some(DlqState::Acknowledged) => Ok(Self::Acknowledged),
            None if raw == "all" => Ok(Self::All),
            None => Err(ApiError::Unprocessable(
                "status must be pending, replaying, replayed, acknowledged or all".into(),
            )),
        }
    }

    /// The state a listing filters on; `None`: every state.
    fn state(self) -> Option<DlqState> {
        match self {
            Self::Pending => Some(DlqState::Pending),
            Self::Replaying => Some(DlqState::Replaying),
            Self::Replayed => Some(DlqState::Replayed),
            Self::Acknowledged => Some(DlqState::Acknowledged),
            Self::All => None,
        }
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListParams {
    /// Only this queue's dead letters.
    queue: Option<String>,
    /// Default `pending`.
    #[param(inline, value_type = Option<DlqStatusFilter>)]
    status: Option<String>,
    /// Page size: default 50, larger values are capped at 100.
    #[param(value_type = Option<u64>, minimum = 1)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page (opaque).
    cursor: Option<String>,
    /// Include each job's payload (`true`/`false`, default `false`).
    #[param(value_type = Option<bool>)]
    include_payload: Option<String>,
    /// Only the letters whose payload or last error contains this text (letters compared
    /// without case; on SQLite, ASCII letters only); at most 200 characters.
    search: Option<String>,
    /// `newest` (the default: the latest failure first) or `oldest`.
    #[param(inline, value_type = Option<ListOrder>)]
    order: Option<String>,
}

/// A dead letter, as the admin API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterMessage {
    /// The job id.
    #[schema(format = "uuid")]
    pub id: String,
    pub queue: String,
    /// The queue's target when the job failed.
    pub target: String,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds.
    pub failed_at: i64,
    pub attempts: u32,
    pub failure_reason: FailureReasonName,
    pub last_error: Option<String>,
    /// The worker's last HTTP status; `null` for transport errors.
    pub last_status: Option<u16>,
    pub status: DlqStateName,
    pub replay_count: u32,
    pub replayed_at: Option<i64>,
    pub acknowledged_at: Option<i64>,
    /// The job, only with `include_payload=true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Box<RawValue>>,
    /// The topic whose publish stored the job, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// The published message the job delivered (the same in every subscriber's job of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uuid")]
    pub message_id: Option<String>,
}

impl TryFrom<DeadLetter> for DeadLetterMessage {
    type Error = ApiError;

    fn try_from(letter: DeadLetter) -> ApiResult<Self> {
        let payload = letter
            .payload
            .map(|json| RawValue::from_string(json.into_string()))
            .transpose()
            .map_err(|e| ApiError::Internal(e.into()))?;
        Ok(Self {
            id: letter.id.to_string(),
            queue: letter.queue.to_string(),
            target: letter.target,
            created_at: letter.created_at,
            failed_at: letter.failed_at,
            attempts: letter.attempts,
            failure_reason: letter.failure_reason.into(),
            last_error: letter.last_error,
            last_status: letter.last_status,
            status: letter.status.into(),
            replay_count: letter.replay_count,
            replayed_at: letter.replayed_at,
            acknowledged_at: letter.acknowledged_at,
            payload,
            topic: letter.message.as_ref().map(|m| m.topic.to_string()),
            message_id: letter.message.as_ref().map(|m| m.id.to_string()),
        })
    }
}

/// Why a job was dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureReasonName {
    MaxAttemptsReached,
    /// Not delivered within `HOOKQ_JOB_TTL`.
    Expired,
}

impl FailureReasonName {
    pub fn as_str(self) -> &'static str {
        FailureReason::from(self).as_str()
    }
}

impl From<FailureReasonName> for FailureReason {
    fn from(reason: FailureReasonName) -> Self {
        match reason {
            FailureReasonName::MaxAttemptsReached => Self::MaxAttemptsReached,
            FailureReasonName::Expired => Self::Expired,
        }
    }
}

impl From<FailureReason> for FailureReasonName {
    fn from(reason: FailureReason) -> Self {
        match reason {
            FailureReason::MaxAttemptsReached => Self::MaxAttemptsReached,
            FailureReason::Expired => Self::Expired,
        }
    }
}

/// A dead letter's state in its admin lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DlqStateName {
    /// Awaiting action.
    Pending,
    /// Claimed by a replay in progress.
    Replaying,
    /// Put back on its queue (kept for audit).
    Replayed,
    /// Dismissed by an operator (kept for audit).
    Acknowledged,
}

impl DlqStateName {
    pub fn as_str(self) -> &'static str {
        DlqState::from(self).as_str()
    }
}

impl From<DlqStateName> for DlqState {
    fn from(state: DlqStateName) -> Self {
        match state {
            DlqStateName::Pending => Self::Pending,
            DlqStateName::Replaying => Self::Replaying,
            DlqStateName::Replayed => Self::Replayed,
            DlqStateName::Acknowledged => Self::Acknowledged,
        }
    }
}

impl From<DlqState> for DlqStateName {
    fn from(state: DlqState) -> Self {
        match state {
            DlqState::Pending => Self::Pending,
            DlqState::Replaying => Self::Replaying,
            DlqState::Replayed => Self::Replayed,
            DlqState::Acknowledged => Self::Acknowledged,
        }
    }
}

/// A page of dead letters, newest failure first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DlqPage {
    pub ok: bool,
    pub messages: Vec<DeadLetterMessage>,
    /// How many dead letters match the filter, all pages together.
    pub total_count: u64,
    pub limit: usize,
    /// The cursor of the next page; `null` on the last page.
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

/// List dead letters, newest failure first, with a cursor stable under concurrent inserts.
#[utoipa::path(
    get,
    path = "/admin/dlq",
    tag = "dead letters",
    params(ListParams),
    responses(
        (status = 200, description = "A page of dead letters", body = DlqPage),
        (status = 400, description = "A `cursor` that is not one of this listing's, or an undecodable query string", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong admin credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 422, description = "Bad `status`, `limit`, `include_payload`, `search` or `order`", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn list(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<DlqPage>> {
    let queue = params.queue.as_deref().map(queue_name).transpose()?;
    let status = DlqStatusFilter::parse(params.status.as_deref().unwrap_or("pending"))?.state();
    let limit = page_size(params.limit.as_deref(), DEFAULT_PAGE, MAX_PAGE)?;
    let after = params
        .cursor
        .as_deref()
        .map(|raw| Cursor::decode(raw)?.into_position())
        .transpose()?;
    let include_payload = flag("include_payload", params.include_payload.as_deref())?;
    let filter = Filter {
        queue,
        state: status,
        text: search_text(params.search.as_deref())?,
    };
    let page = PageRequest {
        after,
        limit: limit + 1,
        newest_first: newest_first(params.order.as_deref(), true)?,
        with_payload: include_payload,
        with_total: true,
    };
    let DeadLetterPage { mut letters, total } = state.store.list_dead_letters(filter, page).await?;
    let has_more = letters.len() > limit;
    letters.truncate(limit);
    let next_cursor = has_more
        .then(|| letters.last())
        .flatten()
        .map(|letter| Cursor::Error(letter.position()).encode());
    let messages = letters
        .into_iter()
        .map(DeadLetterMessage::try_from)
        .collect::<ApiResult<Vec<_>>>()?;
    Ok(Json(DlqPage {
        ok: true,
        messages,
        total_count: total.unwrap_or_default(),
        limit,
        next_cursor,
        has_more,
    }))
}

/// Dead-letter figures.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DlqStatsView {
    /// Dead letters per state (every state is present).
    pub by_status: BTreeMap<String, u64>,
    /// Pending dead letters per queue.
    pub by_queue: BTreeMap<String, u64>,
    /// Unix milliseconds.
    pub oldest_pending_failed_at: Option<i64>,
    pub oldest_pending_age_ms: Option<i64>,
    /// Queues with the most pending dead letters, most first (at most 10).
    pub top_failing_queues: Vec<QueueCount>,
    /// Last HTTP statuses among pending dead letters, most first.
    pub top_status_codes: Vec<StatusCount>,
    /// Pending dead letters already replayed more than twice.
    pub repeat_failures: u64,
    pub last_24h: Last24hView,
    pub ok: bool,
}

impl From<DlqStats> for DlqStatsView {
    fn from(stats: DlqStats) -> Self {
        Self {
            by_status: stats
                .by_status
                .into_iter()
                .map(|(state, count)| (state.to_owned(), count))
                .collect(),
            by_queue: stats.by_queue,
            oldest_pending_failed_at: stats.oldest_pending_failed_at,
            oldest_pending_age_ms: stats.oldest_pending_age_ms,
            top_failing_queues: stats
                .top_failing_queues
                .into_iter()
                .map(|c| QueueCount {
                    key: c.key,
                    count: c.count,
                })
                .collect(),
            top_status_codes: stats
                .top_status_codes
                .into_iter()
                .map(|c| StatusCount {
                    key: c.key,
                    count: c.count,
                })
                .collect(),
            repeat_failures: stats.repeat_failures,
            last_24h: Last24hView {
                new_failures: stats.last_24h.new_failures,
                replayed: stats.last_24h.replayed,
                acknowledged: stats.last_24h.acknowledged,
            },
            ok: true,
        }
    }
}

/// A queue with its count of pending dead letters.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QueueCount {
    pub key: String,
    pub count: u64,
}

/// An HTTP status with its count among pending dead letters.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StatusCount {
    /// An HTTP status; `null` = transport errors.
    pub key: Option<u16>,
    pub count: u64,
}

/// Dead-letter activity over the last 24 hours.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Last24hView {
    pub new_failures: u64,
    pub replayed: u64,
    pub acknowledged: u64,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct StatsParams {
    /// Only this queue's dead letters (every figure); without it, every queue's.
    queue: Option<String>,
}

/// Dead-letter figures: by state, by queue, oldest pending, top failing queues and statuses;
/// of one queue with `queue`.
#[utoipa::path(
    get,
    path = "/admin/dlq/stats",
    tag = "dead letters",
    params(StatsParams),
    responses(
        (status = 200, description = "The figures", body = DlqStatsView),
        (status = 401, description = "Missing or wrong admin credentials", body = ApiErrorBody),
        (status = 403, description = "A scoped key that may not read this queue (or, without `queue`, every queue)", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn stats(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<StatsParams>,
) -> ApiResult<Json<DlqStatsView>> {
    let queue = params.queue.as_deref().map(queue_name).transpose()?;
    let stats = state
        .store
        .dlq_stats(queue, now_millis(), REPEAT_FAILURE_REPLAYS)
        .await?;
    Ok(Json(stats.into()))
}

/// `{"ids":[…]}`, `{"queue":"…","all":true}`, `{"queue":"…","group":{…}}` or
/// `{"all":true,"search":"…"}` (with or without `queue`); `delay_seconds` on replay only.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"queue": "emails", "all": true}))]
pub struct SelectionBody {
    /// 1–1000 dead-letter (job) ids.
    #[serde(default)]
    #[schema(min_items = 1, max_items = 1000)]
    ids: Option<Vec<String>>,
    /// With `"all": true`: every pending dead letter of this queue (that matches `search`,
    /// if given).
    #[serde(default)]
    queue: Option<String>,
    #[serde(default)]
    all: bool,
    /// With `"all": true`: only the pending dead letters whose payload or last error
    /// contains this text, as `GET /admin/dlq?search=` lists them (of `queue`, or without
    /// it of every queue).
    #[serde(default)]
    #[schema(max_length = 200)]
    search: Option<String>,
    /// The pending dead letters of this group (as `GET /admin/dlq/groups` lists it): of
    /// `queue`, or without it of every queue.
    #[serde(default)]
    group: Option<GroupKey>,
    /// Replay only: put the jobs back this many seconds from now (at most 7 days).
    #[serde(default)]
    #[schema(maximum = 604800)]
    delay_seconds: Option<u64>,
}

impl SelectionBody {
    fn selection(&self) -> ApiResult<Selection> {
        let search = search_text(self.search.as_deref())?;
        if self.search.is_some() && search.is_none() {
            return Err(ApiError::Unprocessable(
                "search must not be empty: to act on every pending letter of a queue, \
                 leave it out"
                    .into(),
            ));
        }
        let queue = self
            .queue
            .as_deref()
            .map(|queue| QueueName::parse(queue).map_err(|e| ApiError::Unprocessable(e.0)))
            .transpose()?;
        if let Some(text) = search {
            return match (&self.ids, self.all, &self.group) {
                (None, true, None) => Ok(Selection::Matching(TextMatch { queue, text })),
                _ => Err(ApiError::Unprocessable(
                    "a search selects with \"all\": true: {\"search\":\"…\",\"all\":true}, \
                     with or without \"queue\", and no ids or group"
                        .into(),
                )),
            };
        }
        match (&self.ids, queue, self.all, &self.group) {
            (Some(ids), None, false, None) => Ok(Selection::Ids(job_ids(ids, "dead-letter ids")?)),
            (None, Some(queue), true, None) => Ok(Selection::Queue(queue)),
            (None, queue, false, Some(group)) => Ok(Selection::Group(ErrorGroup {
                queue,
                status: group.status,
                line: group.error.clone(),
            })),
            (None, Some(_), false, None) => Err(ApiError::Unprocessable(
                "to act on a whole queue, say so: {\"queue\":\"…\",\"all\":true}; on one \
                 group of its errors: {\"queue\":\"…\",\"group\":{\"status\":…,\"error\":\"…\"}}"
                    .into(),
            )),
            _ => Err(ApiError::Unprocessable(
                "give either \"ids\": [...], \"queue\" with \"all\": true, a \"group\" \
                 (with or without \"queue\"), or \"all\": true with a \"search\""
                    .into(),
            )),
        }
    }
}

/// A selection as the audit log names it: the queue it is of (if one), and what it is.
fn selection_said(selection: &Selection) -> (Option<String>, String) {
    match selection {
        Selection::Ids(ids) if ids.len() == 1 => (None, format!("dead letter {}", ids[0])),
        Selection::Ids(ids) => (None, format!("{} dead letters by id", ids.len())),
        Selection::Queue(queue) => (Some(queue.to_string()), format!("every pending of {queue}")),
        Selection::Group(group) => {
            let answer = group
                .status
                .map_or_else(|| "no answer".to_owned(), |s| format!("HTTP {s}"));
            let line: String = group.line.chars().take(120).collect();
            let of = group
                .queue
                .as_ref()
                .map_or_else(|| "every queue".to_owned(), ToString::to_string);
            (
                group.queue.as_ref().map(ToString::to_string),
                format!("the group of {of} that failed with {answer} {line:?}"),
            )
        }
        Selection::Matching(matched) => {
            let of = matched
                .queue
                .as_ref()
                .map_or_else(|| "every queue".to_owned(), ToString::to_string);
            let text: String = matched.text.chars().take(120).collect();
            (
                matched.queue.as_ref().map(ToString::to_string),
                format!("every pending of {of} containing {text:?}"),
            )
        }
    }
}

/// 404 when `selection` names a queue that does not exist.
async fn require_known_queue(state: &AppState, selection: &Selection) -> ApiResult<()> {
    match selection {
        Selection::Queue(queue)
        | Selection::Group(ErrorGroup {
            queue: Some(queue), ..
        })
        | Selection::Matching(TextMatch {
            queue: Some(queue), ..
        }) => {
            state.store.queue(queue).await?;
        }
        Selection::Ids(_)
        | Selection::Group(ErrorGroup { queue: None, .. })
        | Selection::Matching(TextMatch { queue: None, .. }) => {}
    }
    Ok(())
}

/// A group of dead letters that failed the same way, as `GET /admin/dlq/groups` names it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupKey {
    /// The last HTTP status; `null` for transport errors.
    pub status: Option<u16>,
    /// The first line of the last error (at most 200 characters).
    pub error: String,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct GroupsParams {
    /// The queue whose pending dead letters are grouped; without it, those of every queue.
    queue: Option<String>,
    /// The most groups listed, largest first: default 20, larger values are capped at 100.
    #[param(value_type = Option<u64>, minimum = 1)]
    limit: Option<String>,
}

/// The groups one listing shows: by default, and at most.
const DEFAULT_GROUPS: usize = 20;
const MAX_GROUPS: usize = 100;

/// Pending dead letters (of one queue, or of every queue), grouped by how they failed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorGroups {
    pub ok: bool,
    /// The queue asked for; `null`: the groups span every queue.
    pub queue: Option<String>,
    /// Largest first, then the one failing longest.
    pub groups: Vec<ErrorGroupView>,
}

/// Pending dead letters that failed the same way: the same last HTTP status and the same
/// first line of the last error.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorGroupView {
    /// The last HTTP status; `null` for transport errors.
    pub status: Option<u16>,
    /// The first line of the last error, at most 200 characters (a trailing `\r` dropped).
    pub error: String,
    pub count: u64,
    /// Unix milliseconds.
    pub oldest_failed_at: i64,
    /// Unix milliseconds.
    pub newest_failed_at: i64,
    /// Of `count`, those that failed in the last hour.
    pub last_hour: u64,
    /// Of `count`, those that failed in the last 24 hours: `last_day / 24` is the group's
    /// rate per hour over the day.
    pub last_day: u64,
    /// The queues whose letters the group holds, with how many each, most first.
    pub queues: Vec<QueueCount>,
}

impl From<ErrorGroupCount> for ErrorGroupView {
    fn from(group: ErrorGroupCount) -> Self {
        Self {
            status: group.status,
            error: group.line,
            count: group.count,
            oldest_failed_at: group.oldest_failed_at,
            newest_failed_at: group.newest_failed_at,
            last_hour: group.recent.last_hour,
            last_day: group.recent.last_day,
            queues: group
                .queues
                .into_iter()
                .map(|c| QueueCount {
                    key: c.key.to_string(),
                    count: c.count,
                })
                .collect(),
        }
    }
}

/// Pending dead letters grouped by error, of one queue or (without `queue`) across every
/// queue, each group naming its queues: each group can be replayed or acknowledged at once
/// (`{"queue":"…","group":{"status":…,"error":"…"}}`, or without `queue` across queues).
#[utoipa::path(
    get,
    path = "/admin/dlq/groups",
    tag = "dead letters",
    params(GroupsParams),
    responses(
        (status = 200, description = "The groups", body = ErrorGroups),
        (status = 401, description = "Missing or wrong admin credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 422, description = "A bad limit", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn groups(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<GroupsParams>,
) -> ApiResult<Json<ErrorGroups>> {
    let queue = params.queue.as_deref().map(queue_name).transpose()?;
    let limit = page_size(params.limit.as_deref(), DEFAULT_GROUPS, MAX_GROUPS)?;
    let groups = state
        .store
        .error_groups(queue.clone(), limit, now_millis())
        .await?;
    Ok(Json(ErrorGroups {
        ok: true,
        queue: queue.map(|q| q.to_string()),
        groups: groups.into_iter().map(ErrorGroupView::from).collect(),
    }))
}

/// How many pending dead letters `selection` names now (what a replay reports as requested).
async fn pending_in(state: &AppState, selection: &Selection) -> ApiResult<u64> {
    let filter = match selection {
        Selection::Ids(ids) => return Ok(ids.len() as u64),
        Selection::Group(group) => {
            return Ok(state
                .store
                .error_groups(group.queue.clone(), usize::MAX, now_millis())
                .await?
                .into_iter()
                .find(|counted| counted.status == group.status && counted.line == group.line)
                .map_or(0, |counted| counted.count));
        }
        Selection::Queue(queue) => Filter {
            queue: Some(queue.clone()),
            state: Some(DlqState::Pending),
            text: None,
        },
        Selection::Matching(matched) => matched.filter(),
    };
    let count_only = PageRequest {
        after: None,
        limit: 0,
        newest_first: true,
        with_payload: false,
        with_total: true,
    };
    Ok(state
        .store
        .list_dead_letters(filter, count_only)
        .await?
        .total
        .unwrap_or_default())
}

/// What a replay did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"ok": true, "requested": 2, "claimed": 2, "replayed": 2, "failed": 0,
    "replayed_ids": ["0190a0b0-1e2f-7000-8000-000000000001", "0190a0b0-1e2f-7000-8000-000000000002"]}))]
pub struct ReplayResult {
    pub ok: bool,
    /// Ids named, or pending dead letters of the queue.
    pub requested: u64,
    /// Records claimed (`pending` → `replaying`); others were not pending.
    pub claimed: usize,
    /// Jobs put back on their queue.
    pub replayed: usize,
    /// Claimed records that could not be put back (rolled back to `pending`).
    pub failed: usize,
    /// The ids of the jobs put back (`replayed` of them), oldest failure first: what
    /// `POST /admin/dlq/replayed` tells the fate of.
    #[serde(default)]
    pub replayed_ids: Vec<String>,
}

/// Replay dead letters: claim them atomically and put each back on its queue as READY.
#[utoipa::path(
    post,
    path = "/admin/dlq/replay",
    tag = "dead letters",
    request_body = SelectionBody,
    responses(
        (status = 200, description = "Replayed", body = ReplayResult),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong admin credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 408, description = "The body did not arrive within `HOOKQ_BODY_TIMEOUT` (default 30 s)", body = ApiErrorBody),
        (status = 413, description = "Body larger than 256 KiB", body = ApiErrorBody),
        (status = 422, description = "Invalid selection or delay", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn replay(
    State(state): State<AppState>,
    actor: Actor,
    ApiJson(request): ApiJson<SelectionBody, MAX_ADMIN_BODY>,
) -> ApiResult<Json<ReplayResult>> {
    let selection = request.selection()?;
    let (queue, target) = selection_said(&selection);
    require_known_queue(&state, &selection).await?;
    let delay = request.delay_seconds.unwrap_or(0);
    if delay > MAX_DELAY_SECONDS {
        return Err(ApiError::Unprocessable(format!(
            "delay_seconds must be at most {MAX_DELAY_SECONDS}"
        )));
    }
    let requested = pending_in(&state, &selection).await?;
    let now = now_millis();
    let run_at = now + (delay as i64) * 1000;
    let (claimed, report) = state.store.replay(selection, now, run_at).await?;
    // A replay commits a chunk per transaction: its entry follows once it is done.
    let detail = match (delay, report.failed.len()) {
        (0, 0) => format!("{requested} requested"),
        (0, failed) => format!("{requested} requested, {failed} could not be put back"),
        (delay, 0) => format!("{requested} requested, after {delay} s"),
        (delay, failed) => {
            format!("{requested} requested, after {delay} s, {failed} could not be put back")
        }
    };
    let entry = actor.entry("dlq.replay", queue.as_deref(), &target, detail);
    // The replay is done whatever happens to its entry: a 500 now would invite a retry.
    if let Err(error) = state
        .store
        .record_audit(entry.counting(report.replayed.len()))
        .await
    {
        tracing::error!(error = %error, "a replay's audit entry could not be written");
    }
    // Only the queues that got jobs back (their dispatcher, or their waiting leases).
    let queues: std::collections::BTreeSet<&QueueName> =
        report.replayed.iter().map(|(_, queue)| queue).collect();
    for queue in queues {
        state.wakeups.mark_due(queue, run_at);
    }
    tracing::info!(
        requested,
        claimed,
        replayed = report.replayed.len(),
        failed = report.failed.len(),
        "dead letters replayed"
    );
    Ok(Json(ReplayResult {
        ok: true,
        requested,
        claimed,
        replayed: report.replayed.len(),
        failed: report.failed.len(),
        replayed_ids: report
            .replayed
            .iter()
            .map(|(id, _)| id.to_string())
            .collect(),
    }))
}

/// `{"ids":[…]}`: replayed jobs whose fate to tell.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayedBody {
    /// 1–1000 job ids, as a replay's `replayed_ids` lists them.
    #[schema(min_items = 1, max_items = 1000)]
    ids: Vec<String>,
}

/// What became of replayed jobs since their replay.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"ok": true, "asked": 3, "delivered": 1, "failed_again": 1, "waiting": 1, "unknown": 0}))]
pub struct ReplayFatesView {
    pub ok: bool,
    /// Distinct ids asked about.
    pub asked: u64,
    /// Gone from their queue since the replay: delivered (or cancelled).
    pub delivered: u64,
    /// Dead-lettered again: their record pending (or acknowledged) once more.
    pub failed_again: u64,
    /// Still live: waiting, scheduled, or in flight.
    pub waiting: u64,
    /// Kept nowhere any more: their dead-letter record deleted or past its retention (or
    /// never a job).
    pub unknown: u64,
}

/// What became of replayed jobs: how many were delivered since, failed again, or still
/// wait. A read (it changes nothing), sent as a POST for its list of ids.
#[utoipa::path(
    post,
    path = "/admin/dlq/replayed",
    tag = "dead letters",
    request_body = ReplayedBody,
    responses(
        (status = 200, description = "Their fates, counted", body = ReplayFatesView),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong admin credentials", body = ApiErrorBody),
        (status = 408, description = "The body did not arrive within `HOOKQ_BODY_TIMEOUT` (default 30 s)", body = ApiErrorBody),
        (status = 413, description = "Body larger than 256 KiB", body = ApiErrorBody),
        (status = 422, description = "No ids, more than 1000, or one that is not a job id", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn replayed(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<ReplayedBody, MAX_ADMIN_BODY>,
) -> ApiResult<Json<ReplayFatesView>> {
    let ids = job_ids(&request.ids, "job ids")?;
    let asked = ids.len() as u64;
    let fates = state.store.replay_fates(ids).await?;
    Ok(Json(ReplayFatesView {
        ok: true,
        asked,
        delivered: fates.delivered,
        failed_again: fates.failed_again,
        waiting: fates.waiting,
        unknown: fates.unknown,
    }))
}

/// How many pending dead letters became `acknowledged`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
pub struct AcknowledgeResult {
    pub ok: bool,
    pub acknowledged: usize,
}

/// Acknowledge (dismiss) pending dead letters; they are kept for audit.
#[utoipa::path(
    post,
    path = "/admin/dlq/acknowledge",
    tag = "dead letters",
    request_body(content = SelectionBody, description = "The selection (no `delay_seconds`)"),
    responses(
        (status = 200, description = "Acknowledged", body = AcknowledgeResult),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong admin credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 408, description = "The body did not arrive within `HOOKQ_BODY_TIMEOUT` (default 30 s)", body = ApiErrorBody),
        (status = 413, description = "Body larger than 256 KiB", body = ApiErrorBody),
        (status = 422, description = "Invalid selection, or `delay_seconds` given", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn acknowledge(
    State(state): State<AppState>,
    actor: Actor,
    ApiJson(request): ApiJson<SelectionBody, MAX_ADMIN_BODY>,
) -> ApiResult<Json<AcknowledgeResult>> {
    if request.delay_seconds.is_some() {
        return Err(ApiError::Unprocessable(
            "delay_seconds applies to replay only".into(),
        ));
    }
    let selection = request.selection()?;
    require_known_queue(&state, &selection).await?;
    let (queue, target) = selection_said(&selection);
    let entry = actor.entry("dlq.acknowledge", queue.as_deref(), &target, "acknowledged");
    let count = state
        .store
        .audited(entry)
        .acknowledge(selection, now_millis())
        .await?;
    Ok(Json(AcknowledgeResult {
        ok: true,
        acknowledged: count,
    }))
}

/// How many dead letters were deleted.
#[derive(Serialize, ToSchema)]
pub struct DeleteResult {
    ok: bool,
    deleted: usize,
}

/// Delete one dead letter for good, whatever its state.
#[utoipa::path(
    delete,
    path = "/admin/dlq/{id}",
    tag = "dead letters",
    params(("id" = String, Path, description = "The dead letter's job id", format = "uuid")),
    responses(
        (status = 200, description = "Deleted", body = DeleteResult),
        (status = 401, description = "Missing or wrong admin credentials", body = ApiErrorBody),
        (status = 404, description = "No such dead letter", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn delete_one(
    State(state): State<AppState>,
    actor: Actor,
    DeadLetterId(id): DeadLetterId,
) -> ApiResult<Json<DeleteResult>> {
    let entry = actor.entry("dlq.delete", None, &format!("dead letter {id}"), "deleted");
    let deleted = state
        .store
        .audited(entry)
        .delete_dead_letters(Selection::Ids(vec![id]))
        .await
        .map_err(|e| match e {
            crate::store::StoreError::JobNotFound => {
                ApiError::NotFound("dead letter not found".into())
            }
            other => other.into(),
        })?;
    Ok(Json(DeleteResult { ok: true, deleted }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DeleteParams {
    /// The queue whose dead letters to delete.
    #[param(required = true)]
    queue: Option<String>,
}

/// Delete all of a queue's dead letters for good, whatever their state.
#[utoipa::path(
    delete,
    path = "/admin/dlq",
    tag = "dead letters",
    params(DeleteParams),
    responses(
        (status = 200, description = "Deleted", body = DeleteResult),
        (status = 401, description = "Missing or wrong admin credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 422, description = "No `queue` given", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn delete_for_queue(
    State(state): State<AppState>,
    actor: Actor,
    ApiQuery(params): ApiQuery<DeleteParams>,
) -> ApiResult<Json<DeleteResult>> {
    let raw = required(
        "queue",
        params.queue.as_deref(),
        "name the queue whose dead letters to delete, ?queue=…",
    )?;
    let queue = queue_name(raw)?;
    state.store.queue(&queue).await?;
    let entry = actor.entry(
        "dlq.delete",
        Some(queue.as_str()),
        &format!("every dead letter of {queue}"),
        "deleted, whatever their state",
    );
    let deleted = state
        .store
        .audited(entry)
        .delete_dead_letters(Selection::Queue(queue))
        .await?;
    Ok(Json(DeleteResult { ok: true, deleted }))
}
