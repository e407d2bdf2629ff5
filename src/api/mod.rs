//! The HTTP API: one router per resource, merged here, behind the API-key check.
//! Responses are always JSON; failures use [`error::ApiError`]'s `{ok:false,status,msg}`.
//! Each resource router carries its part of the OpenAPI document ([`openapi`]), so the
//! document served at `GET /openapi.json` is assembled from the routes themselves.

pub mod audit;
pub mod auth;
pub mod batch;
pub mod body;
pub mod bulk_jobs;
pub mod cursor;
pub mod dlq;
pub mod error;
pub mod extract;
pub mod find;
pub mod forq;
pub mod health;
pub mod job_life;
pub mod jobs;
pub mod keys;
pub mod leases;
pub mod openapi;
pub mod permissions;
pub mod pull;
pub mod query_check;
pub mod queue_stats;
pub mod queues;
pub mod schedules;
pub mod search;
pub mod series;
pub mod settings;
pub mod system;
pub mod topic_messages;
pub mod topics;

use std::sync::Arc;

use axum::{Extension, Router};
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
    /// Wakes the events sender when a request's transaction stored an event (a publish
    /// that skipped a full subscriber).
    pub events: crate::events::Events,
    /// Fires when the server starts shutting down (`/readyz` turns 503).
    pub shutdown: CancellationToken,
    /// When this node last recorded each scoped key's use (at most once a minute).
    pub key_use: auth::KeyUse,
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
        .merge(bulk_jobs::router())
        .merge(pull::router())
        .merge(topics::router())
        .merge(topic_messages::router())
        .route_layer(auth::Authorize::queues(state.clone()));
    let admin = dlq::router()
        .merge(queue_stats::admin_router())
        .merge(health::admin_router())
        .merge(series::admin_router())
        .merge(find::admin_router())
        .merge(search::admin_router())
        .merge(keys::router())
        .merge(audit::admin_router())
        .merge(leases::admin_router())
        .route_layer(auth::Authorize::admin(state.clone()));
    let (routes, document) = OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(system::public_router())
        .merge(protected)
        .merge(admin)
        .split_for_parts();
    // Request ids and the request's span are set around the whole app, UI included
    // (`crate::request_id`).
    routes
        .route_layer(query_check::KnownParameters::of(&document))
        .merge(forq::router(state.clone()))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(Extension(openapi::Document::new(&document)))
        .with_state(state)
}
