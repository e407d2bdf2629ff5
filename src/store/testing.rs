//! Test support: look into (and, for fault tests, tamper with) a store's database from the
//! outside, as a test needs to, without the tests knowing how the backend lays out its
//! data. Not used by the server.

use std::path::{Path, PathBuf};

use crate::model::{JobId, QueueName, UnixMillis};

/// While held, the store commits nothing: writes wait (and enqueues past the bound are
/// refused). Dropping it lets them through.
pub struct WriteHold {
    _release: std::sync::mpsc::Sender<()>,
}

impl WriteHold {
    pub(in crate::store) fn new(release: std::sync::mpsc::Sender<()>) -> Self {
        Self { _release: release }
    }

    /// Hold `store`'s writes; returns once they are held.
    pub async fn start(store: &super::Store) -> super::StoreResult<Self> {
        store.hold_writes().await
    }
}

/// What a test can count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    Queues,
    /// Live jobs (READY or in flight).
    Jobs,
    /// Dead letters, whatever their state.
    DeadLetters,
    /// Failed attempts kept in the jobs' histories.
    AttemptHistory,
    /// Idempotency keys, expired or not.
    IdempotencyKeys,
    /// Delivered jobs kept in the delivery log.
    DeliveryLog,
}

/// A database file, opened beside (or after) a server for tests.
pub struct Inspector {
    conn: rusqlite::Connection,
}

impl Inspector {
    /// Open the store at `path` read-write (reads and writes wait for the server's writer).
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let conn = rusqlite::Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(Self { conn })
    }

    /// How many of `what` are stored.
    pub fn count(&self, what: Stored) -> anyhow::Result<u64> {
        let table = match what {
            Stored::Queues => "queues",
            Stored::Jobs => "jobs",
            Stored::DeadLetters => "dead_letters",
            Stored::AttemptHistory => "job_attempts",
            Stored::IdempotencyKeys => "idempotency_keys",
            Stored::DeliveryLog => "delivered",
        };
        let count: i64 =
            self.conn
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
                    row.get(0)
                })?;
        Ok(count.max(0) as u64)
    }

    /// How many of `what` belong to `queue` (for [`Stored::Queues`]: the queue itself).
    pub fn count_in_queue(&self, what: Stored, queue: &str) -> anyhow::Result<u64> {
        let (table, column) = match what {
            Stored::Queues => ("queues", "name"),
            Stored::Jobs => ("jobs", "queue"),
            Stored::DeadLetters => ("dead_letters", "queue"),
            Stored::AttemptHistory => ("job_attempts", "queue"),
            Stored::IdempotencyKeys => ("idempotency_keys", "queue"),
            Stored::DeliveryLog => ("delivered", "queue"),
        };
        let count: i64 = self.conn.query_row(
            &format!("SELECT count(*) FROM {table} WHERE {column} = ?1"),
            [queue],
            |row| row.get(0),
        )?;
        Ok(count.max(0) as u64)
    }

    /// How many dead letters are in `state` (`pending`, `replaying`, …).
    pub fn count_dead_letters_in(&self, state: &str) -> anyhow::Result<u64> {
        let count: i64 = self.conn.query_row(
            "SELECT count(*) FROM dead_letters WHERE state = ?1",
            [state],
            |row| row.get(0),
        )?;
        Ok(count.max(0) as u64)
    }

    /// A queue's secret exactly as stored (sealed or not); `None` without a secret.
    pub fn stored_secret(&self, queue: &str) -> anyhow::Result<Option<String>> {
        Ok(self.conn.query_row(
            "SELECT secret FROM queues WHERE name = ?1",
            [queue],
            |row| row.get(0),
        )?)
    }

    /// Tampering: give queue `to` the secret stored for queue `from`, as is.
    pub fn copy_stored_secret(&self, from: &str, to: &str) -> anyhow::Result<()> {
        self.conn.execute(
            "UPDATE queues SET secret = (SELECT secret FROM queues WHERE name = ?1)
             WHERE name = ?2",
            [from, to],
        )?;
        Ok(())
    }

    /// Behind the server's back: a live READY job `id` in `queue`, scheduled for `run_at`
    /// (a time in the future).
    pub fn insert_scheduled_job(
        &self,
        queue: &QueueName,
        id: JobId,
        run_at: UnixMillis,
    ) -> anyhow::Result<()> {
        self.conn.execute(
            "INSERT INTO jobs(id, queue, status, payload, attempts, run_at, created_at)
             VALUES (?1, ?2, 3, '{}', 0, ?3, ?3)",
            rusqlite::params![&id.as_bytes()[..], queue.as_str(), run_at],
        )?;
        Ok(())
    }
}

/// A file the store must refuse to open, and leave untouched.
#[derive(Debug, Clone, Copy)]
pub enum ForeignDatabase {
    /// Some other program's SQLite database.
    OtherProgram,
    /// A hookq database from a newer release (a schema version this one does not know).
    NewerSchema,
}

impl ForeignDatabase {
    /// Create it at `path`.
    pub fn create(self, path: &Path) -> anyhow::Result<PathBuf> {
        let sql = match self {
            Self::OtherProgram => {
                "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT);
                 INSERT INTO users(name) VALUES ('ada'), ('grace');"
            }
            Self::NewerSchema => {
                "CREATE TABLE queues(name TEXT PRIMARY KEY);
                 CREATE TABLE jobs(id BLOB PRIMARY KEY);
                 PRAGMA user_version = 99;"
            }
        };
        rusqlite::Connection::open(path)?.execute_batch(sql)?;
        Ok(path.to_owned())
    }
}
