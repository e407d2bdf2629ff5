//! The audit log's edge: who is acting ([`Actor`], from what the auth layer let in), the
//! entry an action writes ([`Actor::entry`]), and `GET /admin/audit`, the log newest first,
//! cursor-paged, filtered by actor, action and queue. Admin only.

use std::convert::Infallible;

use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::Principal;
use super::cursor::Cursor;
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::{ApiQuery, page_size};
use crate::model::now_millis;
use crate::store::LeaseHolder;
use crate::store::audit::{AuditEntry, AuditFilter, AuditRecord};

/// Entries per page: by default, and at most.
const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 200;
/// The longest filter value taken.
const MAX_FILTER: usize = 200;

/// Set by the UI on each request it makes through the API in process (a request extension,
/// which no client over HTTP can set): the session it acts for, as a short public id.
#[derive(Debug, Clone)]
pub struct UiSession(pub String);

/// Who is acting, as the audit log names them: a scoped key (`key:<id>`, its name), a UI
/// session (`ui:<session>`), a configured key (`master`), or anyone on a keyless server
/// (`open`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub id: String,
    pub name: String,
}

impl Actor {
    /// The entry for `action` on `target` (of `queue`, when one is concerned), now.
    pub fn entry(
        &self,
        action: &str,
        queue: Option<&str>,
        target: &str,
        detail: impl Into<String>,
    ) -> AuditEntry {
        AuditEntry {
            at: now_millis(),
            actor: self.id.clone(),
            actor_name: self.name.clone(),
            action: action.to_owned(),
            queue: queue.map(str::to_owned),
            target: target.to_owned(),
            detail: detail.into(),
            count: None,
        }
    }
}

/// A pull worker leasing jobs holds them under the name the audit log would give it.
impl From<Actor> for LeaseHolder {
    fn from(actor: Actor) -> Self {
        Self {
            id: actor.id,
            name: actor.name,
        }
    }
}

impl FromRequestParts<AppState> for Actor {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Infallible> {
        if let Some(Principal(grant)) = parts.extensions.get::<Principal>() {
            return Ok(Self {
                id: format!("key:{}", grant.id),
                name: grant.name.clone(),
            });
        }
        if let Some(UiSession(session)) = parts.extensions.get::<UiSession>() {
            return Ok(Self {
                id: format!("ui:{session}"),
                name: format!("UI session {session}"),
            });
        }
        let config = &state.config;
        let keyed = config.api_key.is_some() || config.admin_key.is_some();
        Ok(if !keyed {
            Self {
                id: "open".into(),
                name: "open server (no key)".into(),
            }
        } else if parts.uri.path().starts_with("/admin") && config.admin_key.is_some() {
            Self {
                id: "master".into(),
                name: "admin key".into(),
            }
        } else {
            Self {
                id: "master".into(),
                name: "API key".into(),
            }
        })
    }
}

pub fn admin_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(audit_log))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct AuditParams {
    /// The `next_cursor` of the previous page (opaque).
    cursor: Option<String>,
    /// Page size: default 50, larger values are capped at 200.
    #[param(value_type = Option<u64>, minimum = 1)]
    limit: Option<String>,
    /// Only this actor's entries: `key:<id>`, a key's name, `ui:<session>`, `master` or
    /// `open`.
    actor: Option<String>,
    /// Only this action (`dlq.replay`, `queue.pause`, …).
    action: Option<String>,
    /// Only the entries about this queue.
    queue: Option<String>,
}

/// One entry of the audit log.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntryView {
    pub id: i64,
    /// Unix ms.
    pub at: i64,
    /// `key:<id>`, `ui:<session>`, `master` (a configured key) or `open` (no key).
    pub actor: String,
    /// The actor for people: a key's name, "UI session …", "admin key", "API key".
    pub actor_name: String,
    pub action: String,
    /// The queue concerned, if one is.
    pub queue: Option<String>,
    /// What was acted on: a queue, a key's id, a topic, a subscription (`topic → queue`),
    /// a selection of dead letters.
    pub target: String,
    pub detail: String,
    /// How many records the action touched, for actions on many.
    pub count: Option<i64>,
}

impl From<AuditRecord> for AuditEntryView {
    fn from(record: AuditRecord) -> Self {
        let entry = record.entry;
        Self {
            id: record.id,
            at: entry.at,
            actor: entry.actor,
            actor_name: entry.actor_name,
            action: entry.action,
            queue: entry.queue,
            target: entry.target,
            detail: entry.detail,
            count: entry.count,
        }
    }
}

/// A page of the audit log, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AuditPage {
    pub ok: bool,
    pub entries: Vec<AuditEntryView>,
    pub limit: usize,
    /// The cursor of the next (older) page; `null` on the last page.
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

/// A filter value: trimmed, `None` when empty; 422 past [`MAX_FILTER`] characters.
fn filter_value(name: &str, raw: Option<&str>) -> ApiResult<Option<String>> {
    let Some(value) = raw.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if value.chars().count() > MAX_FILTER || value.chars().any(char::is_control) {
        return Err(ApiError::Unprocessable(format!(
            "{name} must be at most {MAX_FILTER} characters, without control characters"
        )));
    }
    Ok(Some(value.to_owned()))
}

/// The audit log, newest first: who replayed, acknowledged or deleted dead letters, paused
/// or resumed a queue, changed its settings, closed its breaker, created or deleted a queue,
/// a topic or a subscription, created or revoked a key; when, and what it touched.
#[utoipa::path(
    get,
    path = "/admin/audit",
    tag = "audit",
    params(AuditParams),
    responses(
        (status = 200, description = "A page of the log", body = AuditPage),
        (status = 400, description = "A `cursor` that is not one of this listing's, or an undecodable query string", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong admin credentials", body = ApiErrorBody),
        (status = 403, description = "A scoped key without the admin role", body = ApiErrorBody),
        (status = 422, description = "A bad `limit`, or a filter too long", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn audit_log(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<AuditParams>,
) -> ApiResult<Json<AuditPage>> {
    let limit = page_size(params.limit.as_deref(), DEFAULT_PAGE, MAX_PAGE)?;
    let before = params
        .cursor
        .as_deref()
        .map(|raw| Cursor::decode(raw)?.into_audit())
        .transpose()?;
    let filter = AuditFilter {
        actor: filter_value("actor", params.actor.as_deref())?,
        action: filter_value("action", params.action.as_deref())?,
        queue: filter_value("queue", params.queue.as_deref())?,
    };
    let mut records = state.store.audit_log(filter, before, limit + 1).await?;
    let has_more = records.len() > limit;
    records.truncate(limit);
    let next_cursor = has_more
        .then(|| records.last())
        .flatten()
        .map(|record| Cursor::Audit(record.id).encode());
    Ok(Json(AuditPage {
        ok: true,
        entries: records.into_iter().map(AuditEntryView::from).collect(),
        limit,
        next_cursor,
        has_more,
    }))
}
