//! The UI's way to the data: the JSON API itself, called in process. Each read and each
//! action is an HTTP request through the API's own router, middleware and validation, with
//! the key the route asks for (the session proved the admin key), so the UI can neither
//! skip a check nor drift from what the API answers. Each request names the session it
//! acts for (`api::audit::UiSession`, a request extension no HTTP client can set), so the
//! audit log tells UI sessions apart.

use axum::Router;
use axum::body::Body;
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, Request, StatusCode};
use serde::de::DeserializeOwned;
use tower::ServiceExt;

use crate::api::error::ApiErrorBody;
use crate::config::ApiKey;

/// The largest API answer the UI reads (a page of jobs with their payloads).
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// A client of the in-process API.
#[derive(Clone)]
pub struct ApiClient {
    router: Router,
    /// Sent on the queue routes.
    api_key: Option<ApiKey>,
    /// Sent on the `/admin` routes.
    admin_key: Option<ApiKey>,
    /// The session this client acts for (its public id), once [`ApiClient::for_session`].
    session: Option<String>,
}

/// An API answer other than success: its status and its `msg`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFailure {
    pub status: StatusCode,
    pub message: String,
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

pub type ApiAnswer<T> = Result<T, ApiFailure>;

impl ApiClient {
    pub fn new(router: Router, api_key: Option<ApiKey>, admin_key: Option<ApiKey>) -> Self {
        Self {
            router,
            api_key,
            admin_key,
            session: None,
        }
    }

    /// This client, naming `session` (a session's public id) on every request.
    pub fn for_session(&self, session: String) -> Self {
        Self {
            session: Some(session),
            ..self.clone()
        }
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> ApiAnswer<T> {
        self.call(Method::GET, path, None).await
    }

    /// `body`: JSON bytes, or `None` for an empty body.
    pub async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> ApiAnswer<T> {
        self.call(Method::POST, path, body).await
    }

    pub async fn put<T: DeserializeOwned>(&self, path: &str, body: Vec<u8>) -> ApiAnswer<T> {
        self.call(Method::PUT, path, Some(body)).await
    }

    pub async fn patch<T: DeserializeOwned>(&self, path: &str, body: Vec<u8>) -> ApiAnswer<T> {
        self.call(Method::PATCH, path, Some(body)).await
    }

    pub async fn delete<T: DeserializeOwned>(&self, path: &str) -> ApiAnswer<T> {
        self.call(Method::DELETE, path, None).await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> ApiAnswer<T> {
        let mut request = Request::builder().method(method).uri(path);
        let key = if path.starts_with("/admin") {
            self.admin_key.as_ref()
        } else {
            self.api_key.as_ref()
        };
        if let Some(key) = key {
            request = request.header("x-api-key", key.expose());
        }
        let body = match body {
            Some(json) => {
                request = request.header(CONTENT_TYPE, "application/json");
                Body::from(json)
            }
            None => Body::empty(),
        };
        let mut request = request.body(body).map_err(|e| internal(e.to_string()))?;
        if let Some(session) = &self.session {
            request
                .extensions_mut()
                .insert(crate::api::audit::UiSession(session.clone()));
        }
        let response = match self.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES)
            .await
            .map_err(|e| internal(format!("reading the API's answer: {e}")))?;
        if !status.is_success() {
            let message = serde_json::from_slice::<ApiErrorBody>(&bytes)
                .map(|error| error.msg)
                .unwrap_or_else(|_| status.canonical_reason().unwrap_or("error").to_owned());
            return Err(ApiFailure { status, message });
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| internal(format!("the API's answer to {path} did not parse: {e}")))
    }
}

fn internal(message: String) -> ApiFailure {
    ApiFailure {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message,
    }
}
