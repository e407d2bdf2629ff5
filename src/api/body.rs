//! Reading request bodies under a size limit and a time limit, and parsing JSON bodies into the API's error
//! shape (malformed → 400, well-formed but wrong → 422, too large → 413).

use std::time::Duration;

use axum::body::Body;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;

use super::error::{ApiError, ApiResult};

/// Read the whole body, refusing more than `limit` bytes without reading the excess, and
/// giving up after `timeout` (`HOOKQ_BODY_TIMEOUT`: slow-loris producers).
pub async fn read_limited(body: Body, limit: usize, timeout: Duration) -> ApiResult<Vec<u8>> {
    tokio::time::timeout(timeout, read_to_limit(body, limit))
        .await
        .map_err(|_| {
            ApiError::RequestTimeout(format!(
                "the request body was not received within {}",
                humantime::format_duration(timeout)
            ))
        })?
}

async fn read_to_limit(body: Body, limit: usize) -> ApiResult<Vec<u8>> {
    let too_large = || ApiError::PayloadTooLarge(format!("body is larger than {limit} bytes"));
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::BadRequest(format!("cannot read the request body: {e}")))?;
        if bytes.len() + chunk.len() > limit {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Parse a JSON request body into `T`.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(bytes).map_err(|err| {
        use serde_json::error::Category;
        match err.classify() {
            Category::Data => ApiError::Unprocessable(err.to_string()),
            Category::Syntax | Category::Eof | Category::Io => {
                ApiError::BadRequest(format!("malformed JSON: {err}"))
            }
        }
    })
}
