//! Request ids: every response carries `x-request-id` (the caller's own, or a new UUID), and
//! the request is served inside a `debug` span with the same id, so log lines match answers.
//!
//! A plain service around the whole app ([`RequestIds`]), outside the origin guard, so the
//! UI's pages and the guard's refusals carry an id too. It does what tower-http's
//! `SetRequestId`, `Trace` and `PropagateRequestId` layers did together, in one future that
//! is not boxed and with no extension map written per request: on the enqueue path those
//! three cost more than the routing (see docs/benchmarks.md).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::http::{HeaderName, HeaderValue, Request, Response};
use tracing::Instrument;
use tracing::instrument::Instrumented;

pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// `inner` with a request id on every request and response.
#[derive(Clone)]
pub struct RequestIds<S> {
    inner: S,
}

impl<S> RequestIds<S> {
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S, B, R> tower::Service<Request<B>> for RequestIds<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = WithRequestId<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let id = match request.headers().get(X_REQUEST_ID) {
            Some(id) => id.clone(),
            None => {
                let id = new_id();
                request.headers_mut().insert(X_REQUEST_ID, id.clone());
                id
            }
        };
        // Field values are only evaluated when the span is enabled.
        let span = tracing::debug_span!(
            "request",
            method = %request.method(),
            path = %request.uri().path(),
            request_id = id.to_str().unwrap_or("-"),
        );
        let started = (!span.is_disabled()).then(Instant::now);
        let future = {
            let _entered = span.enter();
            self.inner.call(request)
        };
        WithRequestId {
            inner: future.instrument(span),
            id: Some(id),
            started,
        }
    }
}

/// A new id: a random (v4) UUID, from uuid's userspace generator.
fn new_id() -> HeaderValue {
    let mut buffer = uuid::Uuid::encode_buffer();
    let text = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buffer);
    HeaderValue::from_str(text).unwrap_or(HeaderValue::from_static("-"))
}

pin_project_lite::pin_project! {
    /// The inner response, with the request's id added unless the handler set its own.
    pub struct WithRequestId<F> {
        #[pin]
        inner: Instrumented<F>,
        id: Option<HeaderValue>,
        // When the request came in, kept only while the span is recorded.
        started: Option<Instant>,
    }
}

impl<F, R, E> Future for WithRequestId<F>
where
    F: Future<Output = Result<Response<R>, E>>,
{
    type Output = Result<Response<R>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let mut result = std::task::ready!(this.inner.as_mut().poll(cx));
        if let Ok(response) = &mut result {
            if let Some(id) = this.id.take() {
                response.headers_mut().entry(X_REQUEST_ID).or_insert(id);
            }
            if let Some(started) = this.started.take() {
                tracing::debug!(
                    parent: this.inner.span(),
                    status = response.status().as_u16(),
                    latency_us = started.elapsed().as_micros() as u64,
                    "answered"
                );
            }
        }
        Poll::Ready(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use tower::ServiceExt;

    async fn echo(request: Request<()>) -> Result<Response<String>, Infallible> {
        let seen = request
            .headers()
            .get(X_REQUEST_ID)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        Ok(Response::new(seen))
    }

    #[tokio::test]
    async fn a_request_without_an_id_gets_a_uuid_seen_by_the_handler_and_the_caller() {
        let service = RequestIds::new(tower::service_fn(echo));
        let response = service.oneshot(Request::new(())).await.unwrap();
        let id = response.headers()[X_REQUEST_ID]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
        assert_eq!(response.body(), &id, "the handler saw the same id");
    }

    #[tokio::test]
    async fn a_callers_id_is_kept_and_a_handlers_own_wins() {
        let service = RequestIds::new(tower::service_fn(echo));
        let request = Request::builder()
            .header(X_REQUEST_ID, "trace-me-42")
            .body(())
            .unwrap();
        let response = service.oneshot(request).await.unwrap();
        assert_eq!(response.headers()[X_REQUEST_ID], "trace-me-42");

        let own = tower::service_fn(|_: Request<()>| async {
            let mut response = Response::new(String::new());
            response
                .headers_mut()
                .insert(X_REQUEST_ID, HeaderValue::from_static("handler-set"));
            Ok::<_, Infallible>(response)
        });
        let response = RequestIds::new(own)
            .oneshot(Request::new(()))
            .await
            .unwrap();
        assert_eq!(response.headers()[X_REQUEST_ID], "handler-set");
    }
}
