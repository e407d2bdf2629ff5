//! Scoped API keys (`/admin/keys`): create one (the key is answered once, then only its
//! SHA-256 is kept; optionally expiring), list them (never a key nor its hash; with their
//! last use), revoke one. Admin only; creating and revoking are audited.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::audit::Actor;
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::ApiJson;
use super::openapi::OkBody;
use crate::access::{Role, Scope, key_hash, new_key};
use crate::model::{UnixMillis, now_millis};
use crate::store::api_keys::{ApiKeyRecord, NewApiKey};

const MAX_KEY_BODY: usize = 16 * 1024;
/// The longest key name.
pub const MAX_NAME: usize = 100;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_key, list_keys))
        .routes(routes!(revoke_key))
}

/// A key to create.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"name": "billing producer", "role": "producer", "queues": ["billing-*"]}))]
pub struct CreateKey {
    /// For people: 1–100 characters.
    pub name: String,
    /// `producer`, `consumer`, `reader` or `admin`.
    #[schema(value_type = Role)]
    pub role: String,
    /// Queue names and `prefix*` patterns (`*`: every queue); 1–100 entries. Optional for
    /// `admin` (which has every queue), required for the other roles.
    #[serde(default)]
    pub queues: Option<Vec<String>>,
    /// When the key stops working (it answers 401 from then on): an RFC 3339 time, unix
    /// milliseconds, or a duration from now (`"90d"`); in the future, at most 10 years
    /// ahead. Absent: the key never expires.
    #[serde(default, rename = "expiresAt")]
    #[schema(value_type = Option<String>, example = "90d")]
    pub expires_at: Option<serde_json::Value>,
}

/// The latest a key may expire: 10 years from its creation.
const MAX_KEY_LIFETIME_MS: UnixMillis = 10 * 366 * 24 * 3600 * 1000;

/// A key's `expiresAt`, checked: in the future and at most [`MAX_KEY_LIFETIME_MS`] ahead.
fn expiry(value: &serde_json::Value, now: UnixMillis) -> ApiResult<UnixMillis> {
    let invalid = |why: &str| {
        ApiError::Unprocessable(format!(
            "expiresAt: {why}; give an RFC 3339 time, unix milliseconds or a duration from              now (such as \"90d\")"
        ))
    };
    let at = match value {
        serde_json::Value::Number(n) => n.as_i64().ok_or_else(|| invalid("not a time"))?,
        serde_json::Value::String(text) => {
            let text = text.trim();
            if let Ok(ms) = text.parse::<i64>() {
                ms
            } else if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
                at.timestamp_millis()
            } else {
                let ahead =
                    crate::policy::read_duration(text).map_err(|_| invalid("not a time"))?;
                now.saturating_add(i64::try_from(ahead.as_millis()).unwrap_or(i64::MAX))
            }
        }
        _ => return Err(invalid("not a time")),
    };
    if at <= now {
        return Err(invalid("it is not in the future"));
    }
    if at > now.saturating_add(MAX_KEY_LIFETIME_MS) {
        return Err(invalid("it is more than 10 years ahead"));
    }
    Ok(at)
}

/// A created key. `key` is shown this once: only its hash is stored.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct CreatedKey {
    pub ok: bool,
    /// The key's id (a UUIDv7), for `DELETE /admin/keys/{id}`.
    #[schema(format = "uuid")]
    pub id: String,
    /// The key: `hq_` and 64 hex digits. Send it as `Authorization: Bearer <key>` or
    /// `X-API-Key: <key>`.
    pub key: String,
    /// Unix ms: when the key stops working; absent: never.
    #[serde(default, rename = "expiresAt", skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    pub expires_at: Option<i64>,
    /// Present when the key does nothing yet: the server has no API key, so it is open and
    /// every request is allowed, with or without a scoped key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// Why a scoped key made on an open server does nothing (the API key opens the queue API
/// zone; without one the zone is open).
pub const OPEN_SERVER_WARNING: &str = "this server has no API key (HOOKQ_API_KEY), so it is open: every request is allowed and scoped keys are not enforced until one is set";

/// A key as listed: never the key nor its hash.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyView {
    #[schema(format = "uuid")]
    pub id: String,
    pub name: String,
    pub role: Role,
    pub queues: Vec<String>,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms; absent while the key is live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    pub revoked_at: Option<i64>,
    /// Unix ms: the last request the key authenticated, to within a minute (written at most
    /// once a minute); absent: never used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    pub last_used_at: Option<i64>,
    /// Unix ms: when the key stops working (401 from then on); absent: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    pub expires_at: Option<i64>,
}

impl From<ApiKeyRecord> for KeyView {
    fn from(key: ApiKeyRecord) -> Self {
        Self {
            id: key.id,
            name: key.name,
            role: key.role,
            queues: key.scope.patterns().to_vec(),
            created_at: key.created_at,
            revoked_at: key.revoked_at,
            last_used_at: key.last_used_at,
            expires_at: key.expires_at,
        }
    }
}

/// Every scoped key, oldest first, revoked ones included.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct KeyList {
    pub ok: bool,
    pub keys: Vec<KeyView>,
}

/// Create a scoped key. The answer holds the key itself, this once.
#[utoipa::path(
    post,
    path = "/admin/keys",
    tag = "api keys",
    request_body = CreateKey,
    responses(
        (status = 201, description = "Created; `key` is shown only now", body = CreatedKey),
        (status = 401, description = "Missing or wrong admin credentials", body = ApiErrorBody),
        (status = 403, description = "A scoped key without the admin role", body = ApiErrorBody),
        (status = 422, description = "Bad name, role, queues or expiresAt", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
    ),
)]
async fn create_key(
    State(state): State<AppState>,
    actor: Actor,
    ApiJson(body): ApiJson<CreateKey, MAX_KEY_BODY>,
) -> ApiResult<(StatusCode, Json<CreatedKey>)> {
    let name = body.name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(ApiError::Unprocessable(format!(
            "name must be 1 to {MAX_NAME} characters, without control characters"
        )));
    }
    let role = Role::parse(&body.role).ok_or_else(|| {
        ApiError::Unprocessable(format!(
            "role must be one of producer, consumer, reader, admin (got {:?})",
            body.role
        ))
    })?;
    let scope = match (role, body.queues) {
        (Role::Admin, None) => Scope::everything(),
        (Role::Admin, Some(queues)) if queues == ["*"] => Scope::everything(),
        (Role::Admin, Some(_)) => {
            return Err(ApiError::Unprocessable(
                "an admin key has every queue: leave queues out (or [\"*\"])".into(),
            ));
        }
        (_, None) => {
            return Err(ApiError::Unprocessable(
                "queues is required: the queue names and prefix* patterns the key may use".into(),
            ));
        }
        (_, Some(queues)) => Scope::parse(&queues).map_err(ApiError::Unprocessable)?,
    };
    let now = now_millis();
    let expires_at = body
        .expires_at
        .as_ref()
        .map(|value| expiry(value, now))
        .transpose()?;
    let key = new_key();
    let id = uuid::Uuid::now_v7().to_string();
    let detail = format!(
        "{name:?}, {role} of {}{}",
        scope.patterns().join(", "),
        expires_at.map_or_else(String::new, |at| format!(
            ", expires {}",
            crate::humanize::time(at)
        ))
    );
    let entry = actor.entry("key.create", None, &id, detail);
    state
        .store
        .audited(entry)
        .create_api_key(NewApiKey {
            id: id.clone(),
            name: name.to_owned(),
            role,
            scope,
            hash: key_hash(&key),
            created_at: now,
            expires_at,
        })
        .await?;
    tracing::info!(key_id = %id, role = %role, "api key created");
    let warning = state.config.api_key.is_none().then(|| {
        tracing::warn!(key_id = %id, "{OPEN_SERVER_WARNING}");
        OPEN_SERVER_WARNING.to_owned()
    });
    Ok((
        StatusCode::CREATED,
        Json(CreatedKey {
            ok: true,
            id,
            key,
            expires_at,
            warning,
        }),
    ))
}

/// List the scoped keys (never a key nor its hash).
#[utoipa::path(
    get,
    path = "/admin/keys",
    tag = "api keys",
    responses(
        (status = 200, description = "The keys", body = KeyList),
        (status = 401, description = "Missing or wrong admin credentials", body = ApiErrorBody),
        (status = 403, description = "A scoped key without the admin role", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
    ),
)]
async fn list_keys(State(state): State<AppState>) -> ApiResult<Json<KeyList>> {
    let keys = state.store.list_api_keys().await?;
    Ok(Json(KeyList {
        ok: true,
        keys: keys.into_iter().map(KeyView::from).collect(),
    }))
}

/// Revoke a key: refused from now on, by every node.
#[utoipa::path(
    delete,
    path = "/admin/keys/{id}",
    tag = "api keys",
    params(("id" = String, Path, description = "The key's id", format = "uuid")),
    responses(
        (status = 200, description = "Revoked", body = OkBody),
        (status = 401, description = "Missing or wrong admin credentials", body = ApiErrorBody),
        (status = 403, description = "A scoped key without the admin role", body = ApiErrorBody),
        (status = 404, description = "No such live key", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
    ),
)]
async fn revoke_key(
    State(state): State<AppState>,
    actor: Actor,
    Path(id): Path<String>,
) -> ApiResult<Json<OkBody>> {
    // The key's name, for people reading the log (the id alone says little).
    let name = state
        .store
        .list_api_keys()
        .await?
        .into_iter()
        .find(|key| key.id == id)
        .map(|key| format!("{:?}", key.name))
        .unwrap_or_default();
    let entry = actor.entry("key.revoke", None, &id, name);
    if !state
        .store
        .audited(entry)
        .revoke_api_key(id.clone(), now_millis())
        .await?
    {
        return Err(ApiError::NotFound(
            "api key not found (or already revoked)".into(),
        ));
    }
    tracing::info!(key_id = %id, "api key revoked");
    Ok(Json(OkBody::OK))
}
