//! The HTTP API: one router per resource, merged here, behind the API-key check.
//! Responses are always JSON; failures use [`error::ApiError`]'s `{ok:false,status,msg}`.
//! Each resource router carries its part of the OpenAPI document ([`openapi`]), so the
//! document served at `GET /openapi.json` is assembled from the routes themselves.

pub mod auth;
pub mod batch;
pub mod body;
pub mod cursor;
pub mod dlq;
pub mod error;
pub mod extract;
pub mod forq;
pub mod health;
pub mod jobs;
pub mod keys;
pub mod openapi;
pub mod permissions;
pub mod pull;
pub mod queue_stats;
pub mod queues;
pub mod schedules;
pub mod settings;
pub mod system;

use std::sync::Arc;

use axum::middleware;
use axum::{Extension, Router};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::config::Config;
use crate::dispatch::{DeliveryPool, Wakeups};
use crate::scheduler::ScheduleChanges;
use crate::store::Store;
use error::ApiError;
use tokio_util::sync::CancellationToken;

/// What every handler gets. Cloned several times per request (middleware, extractors), so
/// it is one shared pointer rather than a dozen reference-counted handles.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The handles behind [`AppState`].
pub struct Shared {
    pub store: Store,
    pub config: Arc<Config>,
    /// Marks a queue due when a job is enqueued, waking the dispatcher at once.
    pub wakeups: Wakeups,
    /// The delivery pool, for direct hand-offs; `None` when dispatch is off.
    pub pool: Option<DeliveryPool>,
    /// Pull queues' leases to workers.
    pub leases: crate::pull::Leases,
    /// Wakes the scheduler when a schedule changes.
    pub schedule_changes: ScheduleChanges,
    /// Fires when the server starts shutting down (`/readyz` turns 503).
    pub shutdown: CancellationToken,
}

pub fn router(state: AppState) -> Router {
    let protected = OpenApiRouter::new()
        .merge(system::router())
        .merge(queues::router())
        .merge(settings::router())
        .merge(queue_stats::router())
        .merge(batch::router())
        .merge(schedules::router())
        .merge(jobs::router())
        .merge(pull::router())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_api_key,
        ));
    let admin = dlq::router()
        .merge(queue_stats::admin_router())
        .merge(health::admin_router())
        .merge(keys::router())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_admin_key,
        ));
    let (routes, document) = OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(system::public_router())
        .merge(protected)
        .merge(admin)
        .split_for_parts();
    // Every response carries an `x-request-id`: the caller's own, or a new UUID. The
    // request's span (debug level) carries it too, so log lines match responses.
    let request_ids = tower::ServiceBuilder::new()
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .layer(PropagateRequestIdLayer::x_request_id());
    routes
        .merge(forq::router(state.clone()))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(Extension(openapi::Document::new(&document)))
        .layer(request_ids)
        .with_state(state)
}

fn request_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    let id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    tracing::debug_span!(
        "request",
        method = %request.method(),
        path = %request.uri().path(),
        request_id = %id,
    )
}
