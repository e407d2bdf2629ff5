//! Scoped API keys in the store: the records of the `api_keys` table and the port's
//! operations on it (create, list, revoke, find by hash), dispatched to each backend.
//! Only a key's SHA-256 is stored (see `access::key_hash`); the key itself never is.

use super::error::StoreResult;
use super::{Backend, Store};
use crate::access::{Role, Scope};
use crate::model::UnixMillis;

/// A key to store.
#[derive(Debug, Clone)]
pub struct NewApiKey {
    /// A UUIDv7, as text.
    pub id: String,
    pub name: String,
    pub role: Role,
    pub scope: Scope,
    /// SHA-256 of the key.
    pub hash: [u8; 32],
    pub created_at: UnixMillis,
    /// From then on the key answers 401; `None`: never.
    pub expires_at: Option<UnixMillis>,
}

/// A stored key, as listed (never its hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyRecord {
    pub id: String,
    pub name: String,
    pub role: Role,
    pub scope: Scope,
    pub created_at: UnixMillis,
    pub revoked_at: Option<UnixMillis>,
    /// The last request it authenticated, to the minute (written at most once a minute).
    pub last_used_at: Option<UnixMillis>,
    pub expires_at: Option<UnixMillis>,
}

impl ApiKeyRecord {
    /// Whether the key has expired at `now`.
    pub fn expired_at(&self, now: UnixMillis) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

/// How long a key's `last_used_at` may lag: it is written at most once per this span.
pub const KEY_USE_EVERY_MS: UnixMillis = 60_000;

/// A stored role back to a [`Role`]; a role this binary does not know (a newer hookq wrote
/// it) grants nothing but reading, the least a key of any role may do.
pub(crate) fn stored_role(raw: &str) -> Role {
    Role::parse(raw).unwrap_or(Role::Reader)
}

/// A stored queue list (JSON array of patterns) back to a [`Scope`]; an unreadable one
/// covers no queue.
pub(crate) fn stored_scope(raw: &str) -> Scope {
    Scope::from_stored(serde_json::from_str(raw).unwrap_or_default())
}

/// The queue list as stored: a JSON array of patterns.
pub(crate) fn scope_text(scope: &Scope) -> String {
    serde_json::Value::from(scope.patterns().to_vec()).to_string()
}

impl Store {
    /// Store a new key (and an [`audited`](Store::audited) store's entry with it).
    pub async fn create_api_key(&self, key: NewApiKey) -> StoreResult<()> {
        let audit = self.audit_entry();
        match &self.backend {
            Backend::Sqlite(db) => db.create_api_key(key, audit).await,
            Backend::Postgres(db) => db.create_api_key(key, audit).await,
        }
    }

    /// Record that key `id` was used at `now`, unless its last use on record is less than
    /// [`KEY_USE_EVERY_MS`] old (so however many nodes and requests, a key's row is written
    /// at most about once a minute). Called off the request's path.
    pub async fn touch_api_key(&self, id: String, now: UnixMillis) -> StoreResult<()> {
        match &self.backend {
            Backend::Sqlite(db) => db.touch_api_key(id, now).await,
            Backend::Postgres(db) => db.touch_api_key(id, now).await,
        }
    }

    /// Every key, revoked ones included, oldest first.
    pub async fn list_api_keys(&self) -> StoreResult<Vec<ApiKeyRecord>> {
        match &self.backend {
            Backend::Sqlite(db) => db.list_api_keys().await,
            Backend::Postgres(db) => db.list_api_keys().await,
        }
    }

    /// Revoke key `id` at `now`. Returns false when there is no such live key.
    pub async fn revoke_api_key(&self, id: String, now: UnixMillis) -> StoreResult<bool> {
        let audit = self.audit_entry();
        match &self.backend {
            Backend::Sqlite(db) => db.revoke_api_key(id, now, audit).await,
            Backend::Postgres(db) => db.revoke_api_key(id, now, audit).await,
        }
    }

    /// The not revoked key (expired or not: the caller tells) whose SHA-256 is `hash`. Read from the database on every
    /// call, so a revocation committed by any node is seen by the next request.
    pub async fn find_api_key(&self, hash: [u8; 32]) -> StoreResult<Option<ApiKeyRecord>> {
        match &self.backend {
            Backend::Sqlite(db) => db.find_api_key(hash).await,
            Backend::Postgres(db) => db.find_api_key(hash).await,
        }
    }
}
