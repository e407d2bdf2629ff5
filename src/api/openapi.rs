//! The OpenAPI 3 document of the whole API. Routes and their documentation come from the
//! same source: each resource's router is a `utoipa_axum` `OpenApiRouter` built with
//! `routes!(handler, …)` over handlers carrying `#[utoipa::path]`, so a route cannot be
//! served without being documented. This module holds what the routes share (the document's
//! header, the security schemes, the small `{ok…}` bodies) and serves `GET /openapi.json`.

use axum::Extension;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Serialize;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use super::error::ApiErrorBody;

/// Security scheme names, as the operations' `security(...)` lists name them.
pub const BEARER: &str = "bearer";
pub const API_KEY: &str = "apiKey";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "hookq",
        description = "A webhook-dispatching job queue on one SQLite file, speaking the hyper \
            Queue API (`/queue/…`) plus an admin API for dead letters (`/admin/dlq…`). \
            Every failure has the shape `{\"ok\":false,\"status\",\"msg\"}` (`ApiErrorBody`). \
            Without `HOOKQ_API_KEY` the server is open; with it, every operation but the public \
            ones needs the key. `/admin/…` operations take `HOOKQ_ADMIN_KEY` when it is set. \
            A scoped key (`hq_…`, see `/admin/keys`) is let in only where its role and queues \
            allow: `403` beyond them, `401` once revoked.",
        license(name = "MIT", identifier = "MIT"),
    ),
    components(schemas(ApiErrorBody)),
    modifiers(&SecuritySchemes),
    // Every operation needs the key unless it says otherwise (`security(())`).
    security(("bearer" = []), ("apiKey" = [])),
    tags(
        (name = "service", description = "Service description, health, metrics, this document"),
        (name = "queues", description = "hyper Queue API: queues and enqueueing"),
        (name = "jobs", description = "hyper Queue API: jobs of a queue"),
        (name = "pull", description = "Pull queues: workers lease jobs, then ack, nack or extend each lease"),
        (name = "schedules", description = "Recurring jobs: a queue's cron schedules"),
        (name = "topics", description = "Topics: publish once, a job in every subscribed queue whose filter matches"),
        (name = "dead letters", description = "Dead-letter administration (admin key)"),
        (name = "api keys", description = "Scoped API keys: roles and queues (admin only)"),
        (name = "audit", description = "The audit log: who did what, when (admin only)"),
    ),
)]
pub struct ApiDoc;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("API key, or a JWT signed HS256 with the key and carrying exp")
                    .description(Some(
                        "`Authorization: Bearer <key>` or `Authorization: Bearer <jwt>`. \
                         On `/admin/…` the key is `HOOKQ_ADMIN_KEY` when set.",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            API_KEY,
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-API-Key",
                "The API key (on `/admin/…`: `HOOKQ_ADMIN_KEY` when set).",
            ))),
        );
    }
}

/// `{"ok":true}`.
#[derive(Debug, Serialize, serde::Deserialize, ToSchema)]
pub struct OkBody {
    /// Always `true`.
    pub ok: bool,
}

impl OkBody {
    pub const OK: Self = Self { ok: true };
}

/// `{"ok":true,"id":…}`: the job a request created or acted on.
#[derive(Debug, Serialize, serde::Deserialize, ToSchema)]
pub struct IdBody {
    /// Always `true`.
    pub ok: bool,
    /// The job id (a UUIDv7).
    #[schema(format = "uuid")]
    pub id: String,
    /// Present (and `true`) when an enqueue was a duplicate of an earlier one with the same
    /// `Idempotency-Key`: nothing was stored, `id` is the first job's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schema(required = false)]
    pub duplicate: bool,
}

impl IdBody {
    pub fn new(id: impl ToString) -> Self {
        Self {
            ok: true,
            id: id.to_string(),
            duplicate: false,
        }
    }

    /// The answer to a duplicate enqueue: the first job's id.
    pub fn duplicate(first: impl ToString) -> Self {
        Self {
            duplicate: true,
            ..Self::new(first)
        }
    }
}

/// Every operation of `document`: its method, its path (the route template, as axum's
/// `MatchedPath` gives it) and the operation. The one walk of the document's routes, for
/// what is decided per route from it (the query parameters a route takes, the permission
/// table's check).
pub fn operations(
    document: &utoipa::openapi::OpenApi,
) -> impl Iterator<Item = (axum::http::Method, &str, &utoipa::openapi::path::Operation)> {
    use axum::http::Method;
    document.paths.paths.iter().flat_map(|(path, item)| {
        [
            (Method::GET, &item.get),
            (Method::PUT, &item.put),
            (Method::POST, &item.post),
            (Method::DELETE, &item.delete),
            (Method::PATCH, &item.patch),
        ]
        .into_iter()
        .filter_map(move |(method, operation)| {
            operation.as_ref().map(|op| (method, path.as_str(), op))
        })
    })
}

/// The document as served, serialized once when the router is built.
#[derive(Clone)]
pub struct Document(Bytes);

impl Document {
    pub fn new(openapi: &utoipa::openapi::OpenApi) -> Self {
        let json = serde_json::to_vec(openapi).expect("an OpenAPI document serializes to JSON");
        Self(Bytes::from(json))
    }
}

/// This document. Public: it describes the API and holds no secret.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "service",
    security(()),
    responses((status = 200, description = "The OpenAPI document of this API", body = Object)),
)]
pub async fn openapi_json(Extension(document): Extension<Document>) -> Response {
    ([(CONTENT_TYPE, "application/json")], document.0).into_response()
}
