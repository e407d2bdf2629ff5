//! `GET /admin/jobs?id=…`: find jobs by their id, or its first hex digits, whichever queue
//! holds them: live, delivered and kept, or a dead-letter record (in any state, so a job
//! replayed and delivered since still shows where and why it failed).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::dlq::DeadLetterMessage;
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::{ApiQuery, required};
use crate::model::JobIdPrefix;
use crate::store::{FoundJob, JobPlace};

/// The most places one answer lists.
const MOST_FOUND: usize = 20;

pub fn admin_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(find_jobs))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct FindParams {
    /// A job id, or its first hex digits (at least 8); dashes, case and surrounding spaces
    /// are ignored.
    id: Option<String>,
}

/// Where a job is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobPlaceName {
    /// Waiting, scheduled, blocked or in flight.
    Live,
    /// Delivered, kept by a queue's `keepDelivered`.
    Delivered,
    /// A dead-letter record (any state).
    DeadLetter,
}

/// One place a job was found.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FoundJobView {
    #[schema(format = "uuid")]
    pub id: String,
    pub queue: String,
    pub place: JobPlaceName,
    /// The dead-letter record, when `place` is `dead_letter` (without its payload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetterMessage>,
}

/// The places of the jobs whose ids start as asked, by id (a job may have two: a replayed
/// dead-letter record and the job live again).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FoundJobs {
    pub ok: bool,
    /// At most 20.
    pub jobs: Vec<FoundJobView>,
    /// More places match than listed.
    pub has_more: bool,
}

impl TryFrom<FoundJob> for FoundJobView {
    type Error = ApiError;

    fn try_from(found: FoundJob) -> ApiResult<Self> {
        Ok(Self {
            id: found.id.to_string(),
            queue: found.queue.to_string(),
            place: match found.place {
                JobPlace::Live => JobPlaceName::Live,
                JobPlace::Delivered => JobPlaceName::Delivered,
                JobPlace::DeadLetter => JobPlaceName::DeadLetter,
            },
            dead_letter: found
                .letter
                .map(|mut letter| {
                    letter.payload = None;
                    DeadLetterMessage::try_from(letter)
                })
                .transpose()?,
        })
    }
}

/// Find jobs by id, or by its first hex digits, across every queue.
#[utoipa::path(
    get,
    path = "/admin/jobs",
    tag = "jobs",
    params(FindParams),
    responses(
        (status = 200, description = "The places found, by id (none: an empty list)", body = FoundJobs),
        (status = 401, description = "Missing or wrong admin credentials", body = ApiErrorBody),
        (status = 422, description = "No `id`, or not a job id nor 8 or more of its first hex digits", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn find_jobs(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<FindParams>,
) -> ApiResult<Json<FoundJobs>> {
    let raw = required("id", params.id.as_deref(), "?id=0190a0b0")?;
    let prefix = JobIdPrefix::parse(raw).map_err(|e| ApiError::Unprocessable(e.0))?;
    let mut found = state.store.find_jobs(prefix, MOST_FOUND + 1).await?;
    let has_more = found.len() > MOST_FOUND;
    found.truncate(MOST_FOUND);
    let jobs = found
        .into_iter()
        .map(FoundJobView::try_from)
        .collect::<ApiResult<Vec<_>>>()?;
    Ok(Json(FoundJobs {
        ok: true,
        jobs,
        has_more,
    }))
}
