//! WAL checkpoints off the write path. SQLite's automatic checkpoint runs inside the commit
//! that crosses the threshold, stalling that batch (and every caller waiting on it) while
//! pages are copied and the database file is fsynced. The writer turns it off; this thread
//! runs `PRAGMA wal_checkpoint(PASSIVE)` on its own connection instead, which proceeds beside
//! the writer and the readers.

use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use anyhow::Context;

use super::connection::open_checkpointer;
use crate::config::Synchronous;

/// How often the WAL is checkpointed.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(500);

/// Keeps the checkpoint thread running; it stops when this (every clone of the `Store`
/// holding it) is dropped.
pub struct Checkpointer {
    _stop: mpsc::Sender<()>,
}

impl Checkpointer {
    pub fn spawn(path: &Path, synchronous: Synchronous) -> anyhow::Result<Self> {
        let conn = open_checkpointer(path, synchronous)?;
        let (stop, stopped) = mpsc::channel::<()>();
        thread::Builder::new()
            .name("hookq-checkpoint".into())
            .spawn(move || {
                // Wakes every interval; ends when the store (the sender) is dropped.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_INTERVAL)
                {
                    if let Err(err) =
                        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                    {
                        tracing::warn!(error = %err, "WAL checkpoint failed; will retry");
                    }
                }
            })
            .context("cannot start the checkpoint thread")?;
        Ok(Self { _stop: stop })
    }
}
