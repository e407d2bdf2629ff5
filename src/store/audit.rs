//! The audit log in the store: its records (who did what to what, when) and the port's
//! operations on it (write one, list a page newest first, prune past the retention), each
//! in one transaction of the backend (SQL in `sqlite/audit.rs` and `postgres/audit.rs`).
//! An action that writes its entry in its own transaction goes through [`Store::audited`].

use std::sync::Arc;

use super::dialect::{AuditRows as _, Durability};
use super::error::StoreResult;
use super::{Backend, Store, dialect, sqlite};
use crate::model::UnixMillis;

/// One entry to write: who (`actor`, stable: `key:<id>`, `ui:<session>`, `master`, `open`;
/// `actor_name` for people), what (`action`), to what (`queue` when one is concerned,
/// `target`), when, a short `detail`, and how many records it touched when it acts on many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub at: UnixMillis,
    pub actor: String,
    pub actor_name: String,
    pub action: String,
    pub queue: Option<String>,
    pub target: String,
    pub detail: String,
    pub count: Option<i64>,
}

impl AuditEntry {
    /// The entry with the count of records the action touched.
    pub fn counting(&self, count: usize) -> Self {
        Self {
            count: Some(i64::try_from(count).unwrap_or(i64::MAX)),
            ..self.clone()
        }
    }
}

/// A stored entry, with its id (the listing's order and cursor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    pub id: i64,
    pub entry: AuditEntry,
}

/// Which entries a listing shows: each field given narrows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// An actor as stored (`key:<id>`, `ui:<session>`, `master`, `open`) or a key's name.
    pub actor: Option<String>,
    pub action: Option<String>,
    pub queue: Option<String>,
}

/// Entries pruned per statement, so a large backlog never holds the writer long.
const PRUNE_CHUNK: usize = 5_000;

impl Store {
    /// This store, writing `entry` in the transaction of the one action called on it next
    /// (create, change or delete a queue; acknowledge, delete or resend dead letters; cancel
    /// a job; create or revoke a key; create or delete a topic; subscribe or unsubscribe),
    /// and only if that action succeeds. Actions that span transactions (a replay) write theirs with
    /// [`Store::record_audit`] once done.
    pub fn audited(&self, entry: AuditEntry) -> Store {
        Store {
            audit: Some(Arc::new(entry)),
            ..self.clone()
        }
    }

    /// The entry an [`audited`](Store::audited) store writes with its action.
    pub(crate) fn audit_entry(&self) -> Option<AuditEntry> {
        self.audit.as_deref().cloned()
    }

    /// Write `entry` in a transaction of its own: for an action done over several (a
    /// replay), once it is done.
    pub async fn record_audit(&self, entry: AuditEntry) -> StoreResult<()> {
        in_write!(self, Durability::Durable, |tx| tx
            .insert_audit(&entry)
            .await)
    }

    /// Up to `limit` entries matching `filter`, newest first, older than entry `before`
    /// when given (the previous page's last id).
    pub async fn audit_log(
        &self,
        filter: AuditFilter,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<AuditRecord>> {
        in_snapshot!(self, |tx| tx.audit_entries(&filter, before, limit).await)
    }

    /// Delete the entries written before `before`, a chunk per transaction; how many went.
    pub async fn prune_audit(&self, before: UnixMillis) -> StoreResult<usize> {
        let mut pruned = 0;
        loop {
            let gone = in_write!(self, Durability::Relaxed, |tx| {
                tx.purge_audit_before(before, PRUNE_CHUNK).await
            })?;
            pruned += gone;
            if gone < PRUNE_CHUNK {
                return Ok(pruned);
            }
        }
    }
}

/// Writes the store's pending audit entry (with `count`, when the action touched many
/// records) in the action's transaction: call once the action has succeeded in it.
pub(crate) async fn write_pending(
    tx: &impl dialect::AuditRows,
    entry: Option<&AuditEntry>,
    count: Option<usize>,
) -> StoreResult<()> {
    match (entry, count) {
        (Some(entry), Some(count)) => tx.insert_audit(&entry.counting(count)).await,
        (Some(entry), None) => tx.insert_audit(entry).await,
        (None, _) => Ok(()),
    }
}
