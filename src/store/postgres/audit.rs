//! SQL for the `audit_log` table on PostgreSQL: entries written in their action's
//! transaction, listed newest first by id, pruned by age (rows another transaction holds
//! are left for the next sweep).

use tokio_postgres::Row;

use super::tx::PgTx;
use crate::model::UnixMillis;
use crate::store::audit::{AuditEntry, AuditFilter, AuditRecord};
use crate::store::dialect::AuditRows;
use crate::store::error::StoreResult;

fn from_row(row: &Row) -> AuditRecord {
    AuditRecord {
        id: row.get(0),
        entry: AuditEntry {
            at: row.get(1),
            actor: row.get(2),
            actor_name: row.get(3),
            action: row.get(4),
            queue: row.get(5),
            target: row.get(6),
            detail: row.get(7),
            count: row.get(8),
        },
    }
}

impl AuditRows for PgTx<'_> {
    async fn insert_audit(&self, entry: &AuditEntry) -> StoreResult<()> {
        self.tx
            .execute(
                "INSERT INTO audit_log (at, actor, actor_name, action, queue, target, detail, count)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[
                    &entry.at,
                    &entry.actor,
                    &entry.actor_name,
                    &entry.action,
                    &entry.queue,
                    &entry.target,
                    &entry.detail,
                    &entry.count,
                ],
            )
            .await?;
        Ok(())
    }

    async fn audit_entries(
        &self,
        filter: &AuditFilter,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<AuditRecord>> {
        let rows = self
            .tx
            .query(
                "SELECT id, at, actor, actor_name, action, queue, target, detail, count
                 FROM audit_log
                 WHERE ($1::bigint IS NULL OR id < $1)
                   AND ($2::text IS NULL OR actor = $2 OR actor_name = $2)
                   AND ($3::text IS NULL OR action = $3)
                   AND ($4::text IS NULL OR queue = $4)
                 ORDER BY id DESC LIMIT $5",
                &[
                    &before,
                    &filter.actor,
                    &filter.action,
                    &filter.queue,
                    &i64::try_from(limit).unwrap_or(i64::MAX),
                ],
            )
            .await?;
        Ok(rows.iter().map(from_row).collect())
    }

    async fn purge_audit_before(&self, before: UnixMillis, limit: usize) -> StoreResult<usize> {
        let gone = self
            .tx
            .execute(
                "DELETE FROM audit_log WHERE id IN (
                     SELECT id FROM audit_log WHERE at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)",
                &[&before, &i64::try_from(limit).unwrap_or(i64::MAX)],
            )
            .await?;
        Ok(usize::try_from(gone).unwrap_or(usize::MAX))
    }
}
