//! WAL checkpoints off the write path. SQLite's automatic checkpoint runs inside the commit
//! that crosses the threshold, stalling that batch (and every caller waiting on it) while
//! pages are copied and the database file is fsynced. The writer turns it off; this thread
//! runs `PRAGMA wal_checkpoint(PASSIVE)` on its own connection instead, which proceeds beside
//! the writer and the readers.
//!
//! Under continuous writes a passive checkpoint racing the writer never catches up with the
//! last frame, and SQLite only rewinds the WAL after one that does: the file would grow
//! without bound. So once the WAL passes [`WAL_REWIND_FRAMES`], this thread raises a flag and
//! the writer, between two batches (when no write can race it), runs one more passive
//! checkpoint itself: it copies only the few frames left, completes, and the next write starts
//! the WAL over.
//!
//! A checkpoint that fails on an I/O error (its fsync of the WAL or of the database file)
//! may have left the WAL with pages the disk never got: it is not just retried, the writer
//! is told to rewrite the committed state before its next batch ([`super::resync`]).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use anyhow::Context;
use rusqlite::Connection;

use super::Synchronous;
use super::connection::open_checkpointer;
use super::resync::{DiskHealth, is_io_error};

/// How often the WAL is checkpointed.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(500);

/// WAL frames (pages; 4 KiB by default) beyond which the WAL is rewound: 16 MiB.
pub const WAL_REWIND_FRAMES: i64 = 4096;

/// Set by the checkpoint thread when the WAL should be rewound; cleared by the writer.
#[derive(Clone, Default)]
pub struct RewindFlag(Arc<AtomicBool>);

impl RewindFlag {
    fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Called by the writer between batches: completes a checkpoint if one was asked for.
    /// If it could not complete (the checkpoint thread's own checkpoint, or a reader, was in
    /// the way), the flag stays raised and the writer tries again after its next batch:
    /// clearing it would leave the WAL growing until the checkpoint thread raised it again.
    pub fn rewind_if_raised(&self, writer: &Connection, health: &DiskHealth) {
        if !self.0.swap(false, Ordering::Relaxed) {
            return;
        }
        // Columns: busy flag, frames in the WAL, frames checkpointed.
        let outcome = writer.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
            ))
        });
        match outcome {
            Ok((0, frames, checkpointed)) if checkpointed >= frames => {}
            Ok(_) => self.raise(),
            Err(err) => {
                tracing::warn!(error = %err, "WAL rewind checkpoint failed; will retry");
                if is_io_error(&err) {
                    health.owe_resync();
                }
                self.raise();
            }
        }
    }
}

/// Keeps the checkpoint thread running; it stops when this (every clone of the `Store`
/// holding it) is dropped.
pub struct Checkpointer {
    _stop: mpsc::Sender<()>,
}

impl Checkpointer {
    pub fn spawn(
        path: &Path,
        synchronous: Synchronous,
        rewind: RewindFlag,
        health: DiskHealth,
    ) -> anyhow::Result<Self> {
        let conn = open_checkpointer(path, synchronous)?;
        let (stop, stopped) = mpsc::channel::<()>();
        thread::Builder::new()
            .name("hookq-checkpoint".into())
            .spawn(move || {
                // Wakes every interval; ends when the store (the sender) is dropped.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_INTERVAL)
                {
                    match checkpoint(&conn) {
                        Ok(frames) if frames > WAL_REWIND_FRAMES => rewind.raise(),
                        Ok(_) => {}
                        Err(err) if is_io_error(&err) => {
                            tracing::error!(
                                error = %err,
                                "WAL checkpoint failed on an I/O error; the writer will \
                                 rewrite the committed state"
                            );
                            health.owe_resync();
                        }
                        Err(err) => {
                            tracing::warn!(error = %err, "WAL checkpoint failed; will retry")
                        }
                    }
                }
            })
            .context("cannot start the checkpoint thread")?;
        Ok(Self { _stop: stop })
    }
}

/// One passive checkpoint; returns the number of frames in the WAL.
fn checkpoint(conn: &Connection) -> rusqlite::Result<i64> {
    // Columns: busy flag, frames in the WAL, frames checkpointed.
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| row.get(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::connection::{migrate, open_writer};

    /// Passive checkpoints racing a busy writer never complete, so without the rewind the WAL
    /// file would hold every frame written (~80 MB here).
    #[test]
    fn the_wal_stays_bounded_under_continuous_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let mut writer = open_writer(&path, Synchronous::Normal).unwrap();
        migrate(&mut writer).unwrap();
        writer.execute_batch("CREATE TABLE filler(x BLOB)").unwrap();
        let checkpointer = open_checkpointer(&path, Synchronous::Normal).unwrap();
        let rewind = RewindFlag::default();
        // Every 100 rows the writer hands the checkpointer a turn and keeps writing while
        // that checkpoint runs: the race that keeps passive checkpoints from completing. The
        // hand-over is a rendezvous the writer waits for (a busy machine cannot starve the
        // checkpointer: a turn offered while its thread is not yet back at `recv` is not
        // lost), and the writer offers none while the previous checkpoint still runs, as
        // the server's checkpoint thread rests between checkpoints: otherwise, on a slow
        // disk, each checkpoint would start as the last one ended and every rewind would
        // collide with one.
        let (turn, turns) = mpsc::sync_channel::<()>(0);
        let checkpointing = Arc::new(AtomicBool::new(false));
        let writing = {
            let (rewind, checkpointing) = (rewind.clone(), checkpointing.clone());
            std::thread::spawn(move || {
                for row in 0..20_000 {
                    writer
                        .execute("INSERT INTO filler VALUES (zeroblob(4000))", [])
                        .unwrap();
                    rewind.rewind_if_raised(&writer, &DiskHealth::default());
                    // Set here, cleared by the checkpointer once its checkpoint is done.
                    if row % 100 == 0
                        && !checkpointing.swap(true, Ordering::AcqRel)
                        && turn.send(()).is_err()
                    {
                        break;
                    }
                }
            })
        };
        while turns.recv().is_ok() {
            if checkpoint(&checkpointer).unwrap() > WAL_REWIND_FRAMES {
                rewind.raise();
            }
            checkpointing.store(false, Ordering::Release);
        }
        writing.join().unwrap();
        let largest_wal = std::fs::metadata(dir.path().join("c.db-wal")).map_or(0, |m| m.len());
        let bound = (WAL_REWIND_FRAMES as u64) * 4096;
        // A few thresholds' worth of slack for the frames written between two turns; without
        // the rewind the file reaches ~250 MB.
        assert!(
            largest_wal < 4 * bound,
            "the WAL grew to {largest_wal} bytes (bound {bound})"
        );
    }
}
