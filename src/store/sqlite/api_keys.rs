//! SQL for the `api_keys` table on SQLite: scoped keys, stored as their SHA-256.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::SqliteStore;
use crate::model::UnixMillis;
use crate::store::api_keys::KEY_USE_EVERY_MS;
use crate::store::api_keys::{ApiKeyRecord, NewApiKey, scope_text, stored_role, stored_scope};
use crate::store::audit::AuditEntry;
use crate::store::error::StoreResult;

use super::audit::insert_pending;

const COLUMNS: &str = "id, name, role, queues, created_at, revoked_at, last_used_at, expires_at";

fn from_row(row: &Row) -> rusqlite::Result<ApiKeyRecord> {
    Ok(ApiKeyRecord {
        id: row.get(0)?,
        name: row.get(1)?,
        role: stored_role(&row.get::<_, String>(2)?),
        scope: stored_scope(&row.get::<_, String>(3)?),
        created_at: row.get(4)?,
        revoked_at: row.get(5)?,
        last_used_at: row.get(6)?,
        expires_at: row.get(7)?,
    })
}

fn insert(conn: &Connection, key: &NewApiKey) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO api_keys(id, hash, name, role, queues, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        key.id,
        &key.hash[..],
        key.name,
        key.role.as_str(),
        scope_text(&key.scope),
        key.created_at,
        key.expires_at
    ])?;
    Ok(())
}

fn list(conn: &Connection) -> StoreResult<Vec<ApiKeyRecord>> {
    let mut statement =
        conn.prepare_cached(&format!("SELECT {COLUMNS} FROM api_keys ORDER BY id"))?;
    let rows = statement.query_map([], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn revoke(conn: &Connection, id: &str, now: UnixMillis) -> StoreResult<bool> {
    Ok(conn
        .prepare_cached("UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL")?
        .execute(params![id, now])?
        == 1)
}

fn find(conn: &Connection, hash: &[u8; 32]) -> StoreResult<Option<ApiKeyRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM api_keys WHERE hash = ?1 AND revoked_at IS NULL"
        ))?
        .query_row(params![&hash[..]], from_row)
        .optional()?)
}

fn touch(conn: &Connection, id: &str, now: UnixMillis) -> StoreResult<()> {
    conn.prepare_cached(
        "UPDATE api_keys SET last_used_at = ?2
         WHERE id = ?1 AND (last_used_at IS NULL OR last_used_at <= ?2 - ?3)",
    )?
    .execute(params![id, now, KEY_USE_EVERY_MS])?;
    Ok(())
}

impl SqliteStore {
    pub async fn create_api_key(
        &self,
        key: NewApiKey,
        audit: Option<AuditEntry>,
    ) -> StoreResult<()> {
        self.writer
            .write(move |conn| {
                insert(conn, &key)?;
                insert_pending(conn, audit.as_ref())
            })
            .await
    }

    pub async fn touch_api_key(&self, id: String, now: UnixMillis) -> StoreResult<()> {
        self.writer.write(move |conn| touch(conn, &id, now)).await
    }

    pub async fn list_api_keys(&self) -> StoreResult<Vec<ApiKeyRecord>> {
        self.reader.read(list).await
    }

    pub async fn revoke_api_key(
        &self,
        id: String,
        now: UnixMillis,
        audit: Option<AuditEntry>,
    ) -> StoreResult<bool> {
        self.writer
            .write(move |conn| {
                let revoked = revoke(conn, &id, now)?;
                if revoked {
                    insert_pending(conn, audit.as_ref())?;
                }
                Ok(revoked)
            })
            .await
    }

    pub async fn find_api_key(&self, hash: [u8; 32]) -> StoreResult<Option<ApiKeyRecord>> {
        self.reader.read(move |conn| find(conn, &hash)).await
    }
}
