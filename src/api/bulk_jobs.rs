//! `POST /queue/{name}/_jobs/bulk`: one action (run now, cancel, change priority) on many
//! of a queue's waiting jobs, named by id (at most [`MAX_IDS`](super::extract::MAX_IDS))
//! or found by the READY listing's search, however many; a job in flight is left alone and
//! said so. Admin, like a single job's cancel; audited with the count of jobs changed.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::audit::Actor;
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::{ApiJson, KnownQueue, check_priority, job_ids, search_text};
use crate::model::now_millis;
use crate::store::{BulkReport, JobAction, LiveFilter, LiveSelection};

/// Most skipped jobs an answer names one by one (all are counted).
pub const MAX_SKIPPED_LISTED: usize = 100;

/// Ids are 36 characters; a request naming [`MAX_IDS`](super::extract::MAX_IDS) of them
/// fits with room to spare.
const MAX_BODY: usize = 64 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(bulk))
}

/// What to do to each selected job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BulkActionName {
    /// A job waiting for its delay or a retry's backoff becomes due now. One behind its
    /// ordering key's head drops its wait but keeps its place in the key.
    RunNow,
    /// Delete the job (never one in flight); its ordering key's next job goes next.
    Cancel,
    /// Give the job `priority` (−100…100; among a queue's due jobs, higher first).
    SetPriority,
}

/// Which waiting jobs a filter selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum BulkStatus {
    /// Every job the READY listing shows (due, delayed, waiting for a retry or behind its
    /// key, in flight: those are skipped).
    #[serde(rename = "READY")]
    Ready,
    /// Only the jobs not due yet (a delay, or a retry's backoff).
    #[serde(rename = "DELAYED")]
    Delayed,
}

/// `{"action":…, "ids":[…]}` or `{"action":…, "all":true, "search":…, "status":…}`;
/// `priority` with `set_priority` only.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"action": "set_priority", "priority": 10, "all": true, "search": "invoice"}))]
pub struct BulkJobsBody {
    action: BulkActionName,
    /// With `set_priority` (and only with it): the new priority, −100…100.
    #[serde(default)]
    #[schema(minimum = -100, maximum = 100)]
    priority: Option<i64>,
    /// 1–1000 job ids of this queue.
    #[serde(default)]
    #[schema(min_items = 1, max_items = 1000)]
    ids: Option<Vec<String>>,
    /// Instead of `ids`: every waiting job of the queue that `search` and `status` find,
    /// of every page (only those created before the request).
    #[serde(default)]
    all: bool,
    /// With `"all": true`: only the jobs whose payload or last error contains this text,
    /// as `GET /queue/{name}?status=READY&search=` finds them; at most 200 characters.
    #[serde(default)]
    #[schema(max_length = 200)]
    search: Option<String>,
    /// With `"all": true`: `READY` (the default: every job the READY listing shows) or
    /// `DELAYED` (only those not due yet).
    #[serde(default)]
    status: Option<BulkStatus>,
}

impl BulkJobsBody {
    /// The action and the selection, or 422 naming what is wrong.
    fn parse(&self) -> ApiResult<(JobAction, LiveSelection)> {
        let action = match (self.action, self.priority) {
            (BulkActionName::SetPriority, Some(priority)) => {
                let priority = i32::try_from(priority).map_err(|_| {
                    ApiError::Unprocessable(format!(
                        "priority: `{priority}` is not an integer from -100 to 100"
                    ))
                })?;
                JobAction::SetPriority(check_priority(priority)?)
            }
            (BulkActionName::SetPriority, None) => {
                return Err(ApiError::Unprocessable(
                    "set_priority needs a priority: an integer from -100 to 100".into(),
                ));
            }
            (_, Some(_)) => {
                return Err(ApiError::Unprocessable(
                    "priority goes with the action set_priority only".into(),
                ));
            }
            (BulkActionName::RunNow, None) => JobAction::RunNow,
            (BulkActionName::Cancel, None) => JobAction::Cancel,
        };
        let filtered = self.search.is_some() || self.status.is_some();
        let selection = match (&self.ids, self.all) {
            (Some(ids), false) if !filtered => LiveSelection::Ids(job_ids(ids, "job ids")?),
            (None, true) => {
                let text = search_text(self.search.as_deref())?;
                if self.search.is_some() && text.is_none() {
                    return Err(ApiError::Unprocessable(
                        "search must not be empty: to act on every waiting job, leave it out"
                            .into(),
                    ));
                }
                LiveSelection::Matching(LiveFilter {
                    text,
                    delayed_only: self.status == Some(BulkStatus::Delayed),
                })
            }
            _ => {
                return Err(ApiError::Unprocessable(
                    "give either \"ids\": [...], or \"all\": true with an optional \"search\" \
                     and \"status\""
                        .into(),
                ));
            }
        };
        Ok((action, selection))
    }
}

/// Why a selected job was left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Being delivered (pushed, or leased by a pull worker): never touched.
    InFlight,
    /// Not a waiting job of this queue (any more): delivered, cancelled, dead-lettered,
    /// or never one.
    Gone,
}

/// A job left alone, and why.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SkippedJob {
    #[schema(format = "uuid")]
    pub id: String,
    pub reason: SkipReason,
}

/// The jobs left alone: counted, and the first 100 named.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkSkipped {
    pub in_flight: usize,
    pub gone: usize,
    /// The first 100 of them, in flight first, each by id.
    pub jobs: Vec<SkippedJob>,
}

/// What a bulk action did: `matched` = `changed` + `unchanged` + the skipped.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"ok": true, "action": "cancel", "matched": 3, "changed": 2,
    "unchanged": 0, "skipped": {"inFlight": 1, "gone": 0,
    "jobs": [{"id": "0190a0b0-1e2f-7000-8000-000000000001", "reason": "in_flight"}]}}))]
pub struct BulkResult {
    pub ok: bool,
    pub action: BulkActionName,
    /// Jobs selected: the ids named (without repeats), or the waiting jobs found.
    pub matched: usize,
    /// Jobs the action changed (made due, cancelled, re-prioritised).
    pub changed: usize,
    /// Jobs already as asked: due already (`run_now`), of that priority already
    /// (`set_priority`).
    pub unchanged: usize,
    pub skipped: BulkSkipped,
}

impl BulkResult {
    fn of(action: BulkActionName, report: BulkReport) -> Self {
        let named = report
            .in_flight
            .iter()
            .map(|id| (id, SkipReason::InFlight))
            .chain(report.gone.iter().map(|id| (id, SkipReason::Gone)))
            .take(MAX_SKIPPED_LISTED)
            .map(|(id, reason)| SkippedJob {
                id: id.to_string(),
                reason,
            })
            .collect();
        Self {
            ok: true,
            action,
            matched: report.matched,
            changed: report.changed,
            unchanged: report.unchanged,
            skipped: BulkSkipped {
                in_flight: report.in_flight.len(),
                gone: report.gone.len(),
                jobs: named,
            },
        }
    }
}

/// What the audit log says a selection was.
fn selection_said(selection: &LiveSelection) -> String {
    match selection {
        LiveSelection::Ids(ids) if ids.len() == 1 => format!("job {}", ids[0]),
        LiveSelection::Ids(ids) => format!("{} jobs by id", ids.len()),
        LiveSelection::Matching(filter) => {
            let which = if filter.delayed_only {
                "every delayed job"
            } else {
                "every waiting job"
            };
            match &filter.text {
                Some(text) => {
                    let text: String = text.chars().take(120).collect();
                    format!("{which} containing {text:?}")
                }
                None => which.to_owned(),
            }
        }
    }
}

/// Run now, cancel or re-prioritise many waiting jobs of a queue at once.
#[utoipa::path(
    post,
    path = "/queue/{name}/_jobs/bulk",
    tag = "jobs",
    params(("name" = String, Path, description = "Queue name")),
    request_body = BulkJobsBody,
    responses(
        (status = 200, description = "Done: what changed, and what was left alone and why", body = BulkResult),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 403, description = "A scoped key without the admin role", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 408, description = "The body did not arrive within `HOOKQ_BODY_TIMEOUT` (default 30 s)", body = ApiErrorBody),
        (status = 413, description = "Body larger than 64 KiB", body = ApiErrorBody),
        (status = 422, description = "An unknown action, a priority missing or out of range, no ids or more than 1000, an id that is not a job id, or a selection that is neither ids nor `all`", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn bulk(
    State(state): State<AppState>,
    KnownQueue(queue): KnownQueue,
    actor: Actor,
    ApiJson(request): ApiJson<BulkJobsBody, MAX_BODY>,
) -> ApiResult<Json<BulkResult>> {
    let (action, selection) = request.parse()?;
    let name = queue.name.clone();
    let detail = match action {
        JobAction::SetPriority(priority) => format!("priority {priority}"),
        JobAction::RunNow => "made due now".to_owned(),
        JobAction::Cancel => "cancelled".to_owned(),
    };
    let entry = actor.entry(
        &format!("jobs.{}", action.as_str()),
        Some(name.as_str()),
        &selection_said(&selection),
        detail,
    );
    let now = now_millis();
    let report = state
        .store
        .audited(entry)
        .act_on_jobs(name.clone(), selection, action, now)
        .await?;
    // Jobs made due, or a cancelled head's next job: the claim loop looks at once.
    if report.changed > 0 && !matches!(action, JobAction::SetPriority(_)) {
        state.wakeups.mark_due(&name, now);
    }
    Ok(Json(BulkResult::of(request.action, report)))
}
