//! Query parameters a route does not take are refused on every route of the API, as the
//! OpenAPI document declares them: `POST /queue/emails?dealy=30s` is a 422 naming `dealy`,
//! not an enqueue without its delay, and `PUT /queue/emails?secrett=x` is one too. The
//! document is the contract, so a route's parameters are declared once, where its
//! handler's documentation is. Forq's routes are not in it: its SDKs may send their own.
//!
//! A plain service, like [`super::auth::Authorize`]: a request without a query string (an
//! enqueue from the hyper clients) goes straight to its route.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use futures_util::future::{Either, Ready, ready};
use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::{OpenApi, RefOr};

use super::error::ApiError;

/// Each documented route's query parameters, by method and route template.
#[derive(Clone)]
pub struct KnownParameters {
    routes: Arc<HashMap<(Method, String), Vec<String>>>,
}

impl KnownParameters {
    /// The query parameters every operation of `document` declares.
    pub fn of(document: &OpenApi) -> Self {
        let mut routes = HashMap::new();
        for (method, path, operation) in super::openapi::operations(document) {
            let names = operation
                .parameters
                .iter()
                .flatten()
                .filter_map(|p| match p {
                    RefOr::T(p) if matches!(p.parameter_in, ParameterIn::Query) => {
                        Some(p.name.clone())
                    }
                    _ => None,
                })
                .collect();
            routes.insert((method, path.to_owned()), names);
        }
        Self {
            routes: Arc::new(routes),
        }
    }

    /// The first parameter of `query` that route `route` does not take, as the 422's text.
    fn refusal(&self, method: &Method, route: &str, query: &str) -> Option<String> {
        let takes = self.routes.get(&(method.clone(), route.to_owned()))?;
        let unknown = url::form_urlencoded::parse(query.as_bytes())
            .map(|(name, _)| name)
            .find(|name| !takes.iter().any(|known| known == name))?;
        Some(if takes.is_empty() {
            format!("unknown query parameter `{unknown}`: this route takes none")
        } else {
            let takes: Vec<String> = takes.iter().map(|name| format!("`{name}`")).collect();
            format!(
                "unknown query parameter `{unknown}`: this route takes {}",
                takes.join(", ")
            )
        })
    }
}

impl<S> tower::Layer<S> for KnownParameters {
    type Service = Checked<S>;

    fn layer(&self, inner: S) -> Checked<S> {
        Checked {
            inner,
            known: self.clone(),
        }
    }
}

/// A route behind [`KnownParameters`].
#[derive(Clone)]
pub struct Checked<S> {
    inner: S,
    known: KnownParameters,
}

impl<S> tower::Service<Request> for Checked<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, Ready<Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let refusal = match (
            request.uri().query().filter(|q| !q.is_empty()),
            request.extensions().get::<MatchedPath>(),
        ) {
            (Some(query), Some(route)) => {
                self.known.refusal(request.method(), route.as_str(), query)
            }
            _ => None,
        };
        match refusal {
            None => Either::Left(self.inner.call(request)),
            Some(msg) => Either::Right(ready(Ok(ApiError::Unprocessable(msg).into_response()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::OpenApi;

    fn known() -> KnownParameters {
        let (_, document) =
            utoipa_axum::router::OpenApiRouter::<super::super::AppState>::with_openapi(
                super::super::openapi::ApiDoc::openapi(),
            )
            .merge(super::super::queues::router())
            .merge(super::super::jobs::router())
            .split_for_parts();
        KnownParameters::of(&document)
    }

    #[test]
    fn a_route_refuses_the_parameters_its_document_does_not_declare() {
        let known = known();
        assert_eq!(
            known
                .refusal(&Method::POST, "/queue/{name}", "dealy=30s")
                .as_deref(),
            Some(
                "unknown query parameter `dealy`: this route takes `delay`, `runAt`, \
                 `priority`, `orderingKey`"
            )
        );
        assert_eq!(
            known.refusal(&Method::POST, "/queue/{name}", "delay=30s&priority=2"),
            None
        );
        assert_eq!(
            known
                .refusal(&Method::PUT, "/queue/{name}", "secrett=x")
                .as_deref(),
            Some("unknown query parameter `secrett`: this route takes none")
        );
        assert_eq!(
            known.refusal(&Method::GET, "/queue/{name}", "status=READY"),
            None
        );
        // A route the document does not hold (Forq's) is not judged.
        assert_eq!(
            known.refusal(&Method::GET, "/api/v1/queues/{name}/messages", "x=1"),
            None
        );
    }
}
