//! The one error type of the HTTP API. Every failure becomes `{"ok":false,"status","msg"}`
//! with its status code; internal causes are logged, never sent.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("not authorized")]
    Unauthorized,
    /// A scoped key past its `expiresAt`: 401, saying so (the key is known, so nothing is
    /// told that its holder does not know).
    #[error("{0}")]
    KeyExpired(String),
    /// Not allowed: a scoped key outside its role or queues, a foreign `Origin` or `Host`;
    /// the text says which.
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("{0}")]
    RequestTimeout(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    Unprocessable(String),
    /// Overloaded: try again after `retry_after_secs` (sent as `Retry-After`).
    #[error("{msg}")]
    TooManyRequests { msg: String, retry_after_secs: u32 },
    #[error("storage is full: the job was not stored; retry later")]
    InsufficientStorage,
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized | Self::KeyExpired(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::InsufficientStorage => StatusCode::INSUFFICIENT_STORAGE,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn queue_not_found() -> Self {
        Self::NotFound("queue not found".into())
    }

    pub fn job_not_found() -> Self {
        Self::NotFound("job not found".into())
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::QueueNotFound => Self::queue_not_found(),
            StoreError::QueueExists => Self::Conflict("queue already exists".into()),
            StoreError::JobNotFound => Self::job_not_found(),
            StoreError::ScheduleNotFound => Self::NotFound("schedule not found".into()),
            StoreError::TopicNotFound => Self::NotFound("topic not found".into()),
            StoreError::TopicExists => Self::Conflict("topic already exists".into()),
            missing @ StoreError::SubscriptionNotFound => Self::NotFound(missing.to_string()),
            StoreError::JobConflict(msg) => Self::Conflict(msg.into()),
            reused @ (StoreError::BatchKeyReused | StoreError::IdempotencyKeyReused) => {
                Self::Conflict(reused.to_string())
            }
            limit @ StoreError::LimitReached { .. } => Self::Unprocessable(limit.to_string()),
            StoreError::StorageFull => Self::InsufficientStorage,
            StoreError::Overloaded => Self::TooManyRequests {
                msg: StoreError::Overloaded.to_string(),
                retry_after_secs: 1,
            },
            StoreError::QueueFull => Self::TooManyRequests {
                msg: StoreError::QueueFull.to_string(),
                retry_after_secs: 1,
            },
            StoreError::Closed => Self::Unavailable("the server is shutting down".into()),
            failed @ StoreError::DiskFailed(_) => Self::Unavailable(failed.to_string()),
            StoreError::Contended(cause) => {
                tracing::warn!(error = %cause, "a write lost a lock conflict in the database");
                Self::Unavailable(StoreError::Contended(cause).to_string())
            }
            StoreError::Unavailable(cause) => {
                tracing::warn!(error = %cause, "the database cannot be reached");
                Self::Unavailable(
                    "the database cannot be reached; retry shortly (an idempotency key makes \
                     the retry safe)"
                        .into(),
                )
            }
            other => Self::Internal(other.into()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if let Self::Internal(cause) = &self {
            tracing::error!(error = format!("{cause:#}"), "request failed");
        }
        let body = ApiErrorBody {
            ok: false,
            status: status.as_u16(),
            msg: self.to_string(),
        };
        let mut response = (status, Json(body)).into_response();
        let retry_after = match self {
            Self::TooManyRequests {
                retry_after_secs, ..
            } => Some(retry_after_secs),
            // The database away, or the server stopping: another node (or this one, once
            // back) can take the request shortly.
            Self::Unavailable(_) => Some(1),
            _ => None,
        };
        if let Some(secs) = retry_after {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(secs),
            );
        }
        response
    }
}

/// The JSON body of every failure, whatever the route.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"ok": false, "status": 404, "msg": "queue not found"}))]
pub struct ApiErrorBody {
    /// Always `false`.
    pub ok: bool,
    /// The HTTP status code, repeated.
    pub status: u16,
    /// What went wrong, for humans. Internal causes are logged, never sent.
    pub msg: String,
}

pub type ApiResult<T> = Result<T, ApiError>;
