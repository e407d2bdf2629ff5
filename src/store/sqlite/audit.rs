//! SQL for the `audit_log` table on SQLite: entries written in their action's transaction
//! (on the writer thread), listed newest first by id, pruned by age.

use rusqlite::{Connection, Row, params};

use super::tx::SqliteTx;
use crate::model::UnixMillis;
use crate::store::audit::{AuditEntry, AuditFilter, AuditRecord};
use crate::store::dialect::AuditRows;
use crate::store::error::StoreResult;

fn from_row(row: &Row<'_>) -> rusqlite::Result<AuditRecord> {
    Ok(AuditRecord {
        id: row.get(0)?,
        entry: AuditEntry {
            at: row.get(1)?,
            actor: row.get(2)?,
            actor_name: row.get(3)?,
            action: row.get(4)?,
            queue: row.get(5)?,
            target: row.get(6)?,
            detail: row.get(7)?,
            count: row.get(8)?,
        },
    })
}

/// Write `entry`, if any, on the writer's connection (an action's own closure).
pub fn insert_pending(conn: &Connection, entry: Option<&AuditEntry>) -> StoreResult<()> {
    match entry {
        Some(entry) => insert(conn, entry),
        None => Ok(()),
    }
}

fn insert(conn: &Connection, entry: &AuditEntry) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO audit_log(at, actor, actor_name, action, queue, target, detail, count)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        entry.at,
        entry.actor,
        entry.actor_name,
        entry.action,
        entry.queue,
        entry.target,
        entry.detail,
        entry.count
    ])?;
    Ok(())
}

impl AuditRows for SqliteTx<'_> {
    async fn insert_audit(&self, entry: &AuditEntry) -> StoreResult<()> {
        insert(self.0, entry)
    }

    /// Each filter is `(? IS NULL OR column = ?)`: one statement whatever is given.
    async fn audit_entries(
        &self,
        filter: &AuditFilter,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<AuditRecord>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT id, at, actor, actor_name, action, queue, target, detail, count
             FROM audit_log
             WHERE (?1 IS NULL OR id < ?1)
               AND (?2 IS NULL OR actor = ?2 OR actor_name = ?2)
               AND (?3 IS NULL OR action = ?3)
               AND (?4 IS NULL OR queue = ?4)
             ORDER BY id DESC LIMIT ?5",
        )?;
        let rows = stmt.query_map(
            params![
                before,
                filter.actor,
                filter.action,
                filter.queue,
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
            from_row,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    async fn purge_audit_before(&self, before: UnixMillis, limit: usize) -> StoreResult<usize> {
        Ok(self
            .0
            .prepare_cached(
                "DELETE FROM audit_log WHERE id IN (
                     SELECT id FROM audit_log WHERE at < ?1 LIMIT ?2)",
            )?
            .execute(params![before, i64::try_from(limit).unwrap_or(i64::MAX)])?)
    }
}
