//! `GET /topic/{name}/messages/{id}`: what became of one published message in every
//! subscriber queue: the message (while its row is kept) and each subscriber's job, live,
//! delivered and kept, or dead-lettered, by queue then id.

use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::dlq::DlqStateName;
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::find::JobPlaceName;
use crate::model::{MessageId, TopicName, UnixMillis};
use crate::store::{MessageJob, MessageJobState, StoredMessage};

/// The most jobs one answer lists.
pub const MOST_MESSAGE_JOBS: usize = 200;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(message_fate))
}

/// `{name}/messages/{id}`: 404 when no topic can have the name or the id is not a message
/// id (a UUID), as a job's path answers for an id that is not one.
pub struct MessagePath {
    pub topic: TopicName,
    pub id: MessageId,
}

impl FromRequestParts<AppState> for MessagePath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Path((topic, id)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|_| message_not_found())?;
        let topic = TopicName::parse(&topic).map_err(|_| message_not_found())?;
        let id = MessageId::parse(&id).map_err(|_| message_not_found())?;
        Ok(Self { topic, id })
    }
}

fn message_not_found() -> ApiError {
    ApiError::NotFound("message not found".into())
}

// ---------------------------------------------------------------------------------------
// Wire types
// ---------------------------------------------------------------------------------------

/// A published message. Its row is kept while a job refers to it and until its retention
/// ends; without it (`kept: false`) only `id` and `topic` are known, and `topic` is the
/// one asked for: a job does not record its message's topic.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageView {
    #[schema(format = "uuid")]
    pub id: String,
    pub topic: String,
    /// Whether the message row is still kept: the fields below are absent when it is not.
    pub kept: bool,
    /// Unix ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_at: Option<UnixMillis>,
    /// Unix ms until which the topic keeps it for replays; `null` when it was kept for none
    /// (a topic retaining `0s`), or the row is gone.
    pub retain_until: Option<UnixMillis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
    /// The message as published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Box<RawValue>>,
}

impl MessageView {
    /// A message whose row is kept.
    fn kept(message: StoredMessage) -> ApiResult<Self> {
        let payload = RawValue::from_string(message.payload.into_string()).map_err(|e| {
            ApiError::Internal(anyhow::anyhow!(
                "stored payload of message {} is not JSON: {e}",
                message.id
            ))
        })?;
        Ok(Self {
            id: message.id.to_string(),
            topic: message.topic.to_string(),
            kept: true,
            published_at: Some(message.published_at),
            retain_until: (message.retain_until > message.published_at)
                .then_some(message.retain_until),
            priority: Some(message.priority),
            ordering_key: message.ordering_key,
            payload: Some(payload),
        })
    }

    /// A message whose row is gone, known by its jobs.
    fn gone(id: MessageId, topic: &TopicName) -> Self {
        Self {
            id: id.to_string(),
            topic: topic.to_string(),
            kept: false,
            published_at: None,
            retain_until: None,
            priority: None,
            ordering_key: None,
            payload: None,
        }
    }
}

/// Where a subscriber's job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MessageJobStatus {
    /// Waiting: due, scheduled (a delay, a retry's backoff) or behind its ordering key.
    Ready,
    /// An attempt is running.
    InFlight,
    /// Delivered, kept in the delivery log.
    Delivered,
    /// A dead letter (whatever became of it since: see `deadLetterState`).
    Error,
}

/// One subscriber's job of the message.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageJobView {
    #[schema(format = "uuid")]
    pub id: String,
    pub queue: String,
    pub place: JobPlaceName,
    pub status: MessageJobStatus,
    pub attempts: u32,
    /// The worker's last HTTP status (the 2xx of a delivered job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    /// The start of the last error, at most 200 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Unix ms.
    pub created_at: UnixMillis,
    /// Unix ms, for a delivered job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<UnixMillis>,
    /// A dead letter's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_state: Option<DlqStateName>,
}

impl From<MessageJob> for MessageJobView {
    fn from(job: MessageJob) -> Self {
        let (place, status, delivered_at, dead_letter_state) = match job.state {
            MessageJobState::Waiting => (JobPlaceName::Live, MessageJobStatus::Ready, None, None),
            MessageJobState::InFlight => {
                (JobPlaceName::Live, MessageJobStatus::InFlight, None, None)
            }
            MessageJobState::Delivered { at } => (
                JobPlaceName::Delivered,
                MessageJobStatus::Delivered,
                Some(at),
                None,
            ),
            MessageJobState::DeadLetter(state) => (
                JobPlaceName::DeadLetter,
                MessageJobStatus::Error,
                None,
                Some(state.into()),
            ),
        };
        Self {
            id: job.id.to_string(),
            queue: job.queue.to_string(),
            place,
            status,
            attempts: job.attempts,
            last_status: job.last_status,
            last_error: job.last_error,
            created_at: job.created_at,
            delivered_at,
            dead_letter_state,
        }
    }
}

/// What became of one message: it, and its subscribers' jobs by queue then id (a job
/// replayed from a dead letter is listed twice: its `replayed` record and the job again).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MessageFateBody {
    pub ok: bool,
    pub message: MessageView,
    /// At most 200.
    pub jobs: Vec<MessageJobView>,
    /// More jobs than listed.
    pub has_more: bool,
}

// ---------------------------------------------------------------------------------------
// Handler
// ---------------------------------------------------------------------------------------

/// What became of one published message in every subscriber queue: the message and each
/// subscriber's job (live, delivered and kept by `keepDelivered`, or a dead letter), by
/// queue then id. A delivered job of a queue that keeps no deliveries is gone, and not
/// listed. Answers for a deleted topic's messages too, while their jobs remain.
#[utoipa::path(
    get,
    path = "/topic/{name}/messages/{id}",
    tag = "topics",
    params(
        ("name" = String, Path, description = "Topic name"),
        ("id" = String, Path, description = "The message id a publish answered"),
    ),
    responses(
        (status = 200, description = "The message and its jobs (at most 200)", body = MessageFateBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 403, description = "A key without the reader role on this topic", body = ApiErrorBody),
        (status = 404, description = "No message of this topic with this id, nor any job of it", body = ApiErrorBody),
        (status = 503, description = "Shutting down, or the database cannot be reached", body = ApiErrorBody),
    ),
)]
async fn message_fate(
    State(state): State<AppState>,
    MessagePath { topic, id }: MessagePath,
) -> ApiResult<Json<MessageFateBody>> {
    let mut fate = state.store.message_fate(id, MOST_MESSAGE_JOBS + 1).await?;
    let has_more = fate.jobs.len() > MOST_MESSAGE_JOBS;
    fate.jobs.truncate(MOST_MESSAGE_JOBS);
    let message = match fate.message {
        // Another topic's message is not this topic's to show.
        Some(message) if message.topic != topic => return Err(message_not_found()),
        Some(message) => MessageView::kept(message)?,
        None if fate.jobs.is_empty() => return Err(message_not_found()),
        None => MessageView::gone(id, &topic),
    };
    Ok(Json(MessageFateBody {
        ok: true,
        message,
        jobs: fate.jobs.into_iter().map(Into::into).collect(),
        has_more,
    }))
}
