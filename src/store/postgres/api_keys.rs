//! SQL for the `api_keys` table on PostgreSQL: scoped keys, stored as their SHA-256. Every
//! node reads a key from the table on each request, so a revocation committed by one node is
//! refused by every node from its next request on.

use tokio_postgres::Row;

use super::PgStore;
use crate::model::UnixMillis;
use crate::store::api_keys::KEY_USE_EVERY_MS;
use crate::store::api_keys::{ApiKeyRecord, NewApiKey, scope_text, stored_role, stored_scope};
use crate::store::audit::{AuditEntry, write_pending};
use crate::store::dialect::Durability;
use crate::store::error::StoreResult;

const COLUMNS: &str = "id, name, role, queues, created_at, revoked_at, last_used_at, expires_at";

fn from_row(row: &Row) -> ApiKeyRecord {
    ApiKeyRecord {
        id: row.get(0),
        name: row.get(1),
        role: stored_role(row.get(2)),
        scope: stored_scope(row.get(3)),
        created_at: row.get(4),
        revoked_at: row.get(5),
        last_used_at: row.get(6),
        expires_at: row.get(7),
    }
}

impl PgStore {
    /// The key and the audit entry in one transaction.
    pub async fn create_api_key(
        &self,
        key: NewApiKey,
        audit: Option<AuditEntry>,
    ) -> StoreResult<()> {
        self.write(Durability::Durable, move |pg| {
            Box::pin(async move {
                pg.tx
                    .execute(
                        "INSERT INTO api_keys (id, hash, name, role, queues, created_at, expires_at)
                         VALUES ($1, $2, $3, $4, $5, $6, $7)",
                        &[
                            &key.id,
                            &&key.hash[..],
                            &key.name,
                            &key.role.as_str(),
                            &scope_text(&key.scope),
                            &key.created_at,
                            &key.expires_at,
                        ],
                    )
                    .await?;
                write_pending(&pg, audit.as_ref(), None).await
            })
        })
        .await
    }

    /// One conditional statement: a key used on several nodes within the minute is written
    /// once.
    pub async fn touch_api_key(&self, id: String, now: UnixMillis) -> StoreResult<()> {
        let client = self.runner.pool.get().await?;
        client
            .execute(
                "UPDATE api_keys SET last_used_at = $2
                 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $2 - $3::bigint)",
                &[&id, &now, &KEY_USE_EVERY_MS],
            )
            .await?;
        Ok(())
    }

    pub async fn list_api_keys(&self) -> StoreResult<Vec<ApiKeyRecord>> {
        let client = self.runner.pool.get().await?;
        let rows = client
            .query(&format!("SELECT {COLUMNS} FROM api_keys ORDER BY id"), &[])
            .await?;
        Ok(rows.iter().map(from_row).collect())
    }

    pub async fn revoke_api_key(
        &self,
        id: String,
        now: UnixMillis,
        audit: Option<AuditEntry>,
    ) -> StoreResult<bool> {
        self.write(Durability::Durable, move |pg| {
            Box::pin(async move {
                let changed = pg
                    .tx
                    .execute(
                        "UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
                        &[&id, &now],
                    )
                    .await?;
                if changed == 1 {
                    write_pending(&pg, audit.as_ref(), None).await?;
                }
                Ok(changed == 1)
            })
        })
        .await
    }

    pub async fn find_api_key(&self, hash: [u8; 32]) -> StoreResult<Option<ApiKeyRecord>> {
        let client = self.runner.pool.get().await?;
        let row = client
            .query_opt(
                &format!("SELECT {COLUMNS} FROM api_keys WHERE hash = $1 AND revoked_at IS NULL"),
                &[&&hash[..]],
            )
            .await?;
        Ok(row.as_ref().map(from_row))
    }
}
