//! What the store does when the disk fails an fsync, and what every start does first.
//!
//! After a failed fsync, Linux marks the pages it covered clean without their having
//! reached the disk: reads still see them, a retried fsync succeeds without writing them,
//! and a power loss takes them ("fsyncgate"; PostgreSQL's answer is to crash and replay).
//! For this store that is worse than losing the batch whose commit failed: the WAL pages of
//! earlier relaxed commits (claims and outcomes, never fsynced on their own) may be among
//! them, and a WAL with a hole in it is replayed only up to the hole, so every later commit,
//! acknowledged ones included, would be lost with it at the next power cut.
//!
//! So a failed fsync is never retried. [`resync`] rewrites the committed state instead: a
//! `TRUNCATE` checkpoint copies every committed page from the WAL (as the page cache shows
//! it) into the database file and syncs that file, then empties the WAL, whose emptiness
//! (and the directory) is synced in turn. Only then is the state on disk what the writer
//! believes it is, and only then does it answer another write. If that fails too, the
//! store stops writing for good ([`DiskHealth::fail`]): every write answers
//! [`StoreError::DiskFailed`], `/healthz` and `/readyz` turn 503, and a restart (which runs
//! [`resync`] again before serving) is the way back.
//!
//! Every start runs [`resync`] once before serving for the same reason (the previous
//! process may have stopped after a failed fsync, its pages still in the page cache) and
//! because it also makes a newly created database file's directory entry durable, which
//! SQLite does not do for the main file.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use anyhow::{Context, bail};
use rusqlite::{Connection, ErrorCode};

use crate::store::error::StoreError;

/// Shared by the writer, the checkpoint thread and the store: whether a resync is owed,
/// and whether the disk has failed for good.
#[derive(Clone, Default)]
pub struct DiskHealth(Arc<Health>);

#[derive(Default)]
struct Health {
    resync_owed: AtomicBool,
    failed: OnceLock<Arc<str>>,
}

impl DiskHealth {
    /// A checkpoint met an I/O error: the writer resyncs before its next batch.
    pub fn owe_resync(&self) {
        self.0.resync_owed.store(true, Ordering::SeqCst);
    }

    /// Whether a resync is owed, clearing the debt (the caller pays it).
    pub fn take_resync(&self) -> bool {
        self.0.resync_owed.swap(false, Ordering::SeqCst)
    }

    /// The disk failed and could not be resynced: no more writes until a restart.
    pub fn fail(&self, reason: String) {
        if self.0.failed.set(reason.as_str().into()).is_ok() {
            tracing::error!(
                reason,
                "the disk failed a sync and the committed state could not be rewritten: \
                 hookq accepts no more writes; fix the disk, then restart hookq"
            );
        }
    }

    /// `Err(DiskFailed)` once the disk has failed for good.
    pub fn check(&self) -> Result<(), StoreError> {
        match self.0.failed.get() {
            Some(reason) => Err(StoreError::DiskFailed(reason.clone())),
            None => Ok(()),
        }
    }
}

/// Whether `err` is SQLite's report of a failed read, write or sync of a file.
pub fn is_io_error(err: &rusqlite::Error) -> bool {
    err.sqlite_error_code() == Some(ErrorCode::SystemIoFailure)
}

/// Whether the store error carries SQLite's report of a failed read, write or sync.
pub fn is_io_failure(err: &StoreError) -> bool {
    match err {
        StoreError::Database(cause) => cause
            .downcast_ref::<rusqlite::Error>()
            .is_some_and(is_io_error),
        _ => false,
    }
}

/// How many times [`resync`] tries before the disk counts as failed. More than one: Linux
/// reports a write-back error once to every descriptor open on the file, so the writer's
/// own descriptors may answer `EIO` once for a failure another connection already met.
/// Trying again is sound here, unlike retrying a commit's fsync: each attempt rewrites
/// every committed page from the page cache and syncs it anew, relying on nothing an
/// earlier sync claimed to have written.
const RESYNC_ATTEMPTS: usize = 3;

/// Make the database file hold every committed transaction, synced, with an empty WAL
/// and a synced directory. Run by the writer's connection, between batches.
pub fn resync(conn: &Connection) -> anyhow::Result<()> {
    let mut attempt = 1;
    loop {
        match resync_once(conn) {
            Ok(()) => return Ok(()),
            Err(err) if attempt < RESYNC_ATTEMPTS => {
                tracing::warn!(error = %format!("{err:#}"), attempt, "resync failed; trying again");
                attempt += 1;
            }
            Err(err) => return Err(err),
        }
    }
}

fn resync_once(conn: &Connection) -> anyhow::Result<()> {
    let path = conn
        .path()
        .filter(|path| !path.is_empty())
        .map(PathBuf::from)
        .context("the writer's connection has no file")?;
    // Columns: busy flag, frames in the WAL, frames checkpointed.
    let busy: i64 = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))
        .context("the checkpoint that rewrites the database file failed")?;
    if busy != 0 {
        bail!("readers kept the checkpoint that rewrites the database file from completing");
    }
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    sync_file(Path::new(&wal)).context("cannot sync the emptied WAL")?;
    sync_directory_of(&path)
}

/// fsync the directory holding `path`, so that a file created (or removed) there stays so
/// after a power loss.
pub fn sync_directory_of(path: &Path) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .with_context(|| format!("cannot sync the directory {}", dir.display()))
}

/// fsync `path` if it exists.
fn sync_file(path: &Path) -> anyhow::Result<()> {
    match File::open(path) {
        Ok(file) => file
            .sync_all()
            .with_context(|| format!("cannot sync {}", path.display())),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err).with_context(|| format!("cannot open {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::Synchronous;
    use crate::store::sqlite::connection::{migrate, open_writer};

    #[test]
    fn resync_leaves_every_commit_in_the_database_file_and_an_empty_wal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let mut conn = open_writer(&path, Synchronous::Normal).unwrap();
        migrate(&mut conn).unwrap();
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2)")
            .unwrap();
        let wal = dir.path().join("r.db-wal");
        assert!(std::fs::metadata(&wal).unwrap().len() > 0);
        resync(&conn).unwrap();
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0);
        // The database file alone, copied while the connection is still open (closing it
        // would checkpoint too): what a resync promises is there without any WAL.
        let alone = dir.path().join("alone.db");
        std::fs::copy(&path, &alone).unwrap();
        let reopened = Connection::open(&alone).unwrap();
        let rows: i64 = reopened
            .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 2);
    }

    #[test]
    fn a_failed_disk_stays_failed_and_says_why() {
        let health = DiskHealth::default();
        assert!(health.check().is_ok());
        health.fail("first".into());
        health.fail("second".into());
        match health.check() {
            Err(StoreError::DiskFailed(reason)) => assert_eq!(&*reason, "first"),
            other => panic!("expected DiskFailed, got {other:?}"),
        }
    }
}
