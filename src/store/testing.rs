//! Test support: look into (and, for fault tests, tamper with) a store's database from the
//! outside, as a test needs to, without the tests knowing how the backend lays out its
//! data. Not used by the server.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::model::{JobId, QueueName, UnixMillis};

/// While held, the store commits nothing: writes wait (and enqueues past the bound are
/// refused). Dropping it lets them through. On SQLite it holds the single writer; on
/// PostgreSQL, a transaction of its own holds `jobs` in SHARE mode, which every write to a
/// job (an insert, a claim, a delete) waits for.
pub struct WriteHold {
    /// Dropped with the hold: its receiver, wherever the hold is kept, then lets go.
    _release: Box<dyn Send + Sync>,
}

impl WriteHold {
    pub(in crate::store) fn new(release: impl Send + Sync + 'static) -> Self {
        Self {
            _release: Box::new(release),
        }
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
    /// Batches' idempotency keys, expired or not.
    BatchKeys,
    /// Delivered jobs kept in the delivery log.
    DeliveryLog,
    /// Topics' messages (kept for their jobs, or for replays), counted by topic.
    Messages,
}

/// A store's database, opened beside (or after) a server for tests: the SQLite file, or a
/// connection of its own to the PostgreSQL database.
pub enum Inspector {
    Sqlite(rusqlite::Connection),
    Postgres(super::postgres::PgPool),
}

/// A table a test looks into, by what it holds.
fn table_of(what: Stored) -> (&'static str, &'static str) {
    match what {
        Stored::Queues => ("queues", "name"),
        Stored::Jobs => ("jobs", "queue"),
        Stored::DeadLetters => ("dead_letters", "queue"),
        Stored::AttemptHistory => ("job_attempts", "queue"),
        Stored::IdempotencyKeys => ("idempotency_keys", "queue"),
        Stored::BatchKeys => ("batch_keys", "queue"),
        Stored::DeliveryLog => ("delivered", "queue"),
        Stored::Messages => ("topic_messages", "topic"),
    }
}

impl Inspector {
    /// Open the SQLite file at `path` read-write (reads and writes wait for the server's
    /// writer).
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let conn = rusqlite::Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(Self::Sqlite(conn))
    }

    /// Open the SQLite file at `path` read-only: looking leaves the files exactly as they
    /// were (a read-write connection checkpoints the WAL when it closes), as a harness that
    /// inspects a disk before restarting the server on it needs.
    pub fn open_read_only(path: &Path) -> anyhow::Result<Self> {
        let conn = rusqlite::Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        Ok(Self::Sqlite(conn))
    }

    /// Open the database `options` name, whichever the backend.
    pub async fn connect(options: &super::StoreOptions) -> anyhow::Result<Self> {
        match options {
            super::StoreOptions::Sqlite { path, .. } => Self::open(path),
            super::StoreOptions::Postgres { url, .. } => {
                Ok(Self::Postgres(super::postgres::connect(url, 1).await?))
            }
        }
    }

    /// `sql` (with `$1`-style parameters) as one count.
    async fn count_of(&self, sql: &str, text_params: &[&str]) -> anyhow::Result<u64> {
        let count: i64 = match self {
            Self::Sqlite(conn) => conn.query_row(
                &sql.replace('$', "?"),
                rusqlite::params_from_iter(text_params),
                |row| row.get(0),
            )?,
            Self::Postgres(pool) => {
                let client = pool.get().await?;
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = text_params
                    .iter()
                    .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
                    .collect();
                client.query_one(sql, &params).await?.get(0)
            }
        };
        Ok(count.max(0) as u64)
    }

    /// `sql` (with `$1`-style parameters) as one write.
    async fn execute(&self, sql: &str, text_params: &[&str]) -> anyhow::Result<()> {
        match self {
            Self::Sqlite(conn) => {
                conn.execute(
                    &sql.replace('$', "?"),
                    rusqlite::params_from_iter(text_params),
                )?;
            }
            Self::Postgres(pool) => {
                let client = pool.get().await?;
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = text_params
                    .iter()
                    .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
                    .collect();
                client.execute(sql, &params).await?;
            }
        }
        Ok(())
    }

    /// Delete every topic message row, whatever still refers to it: a message whose row is
    /// gone while jobs of it remain, which the sweep itself never leaves.
    pub async fn delete_messages(&self) -> anyhow::Result<()> {
        self.execute("DELETE FROM topic_messages", &[]).await
    }

    /// The bytes of payload stored: in live jobs, dead letters, the delivery log and the
    /// topics' messages together.
    pub async fn payload_bytes(&self) -> anyhow::Result<u64> {
        self.count_of(
            "SELECT (SELECT coalesce(sum(length(payload)), 0) FROM jobs)
                  + (SELECT coalesce(sum(length(payload)), 0) FROM dead_letters)
                  + (SELECT coalesce(sum(length(payload)), 0) FROM delivered)
                  + (SELECT coalesce(sum(length(payload)), 0) FROM topic_messages)",
            &[],
        )
        .await
    }

    /// The database's size in bytes (SQLite: its pages; PostgreSQL: the database's).
    pub async fn database_bytes(&self) -> anyhow::Result<u64> {
        match self {
            Self::Sqlite(_) => {
                self.count_of(
                    "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
                    &[],
                )
                .await
            }
            Self::Postgres(_) => {
                self.count_of("SELECT pg_database_size(current_database())", &[])
                    .await
            }
        }
    }

    /// How many of `what` are stored.
    pub async fn count(&self, what: Stored) -> anyhow::Result<u64> {
        let (table, _) = table_of(what);
        self.count_of(&format!("SELECT count(*) FROM {table}"), &[])
            .await
    }

    /// How many of `what` belong to `queue` (for [`Stored::Queues`]: the queue itself).
    pub async fn count_in_queue(&self, what: Stored, queue: &str) -> anyhow::Result<u64> {
        let (table, column) = table_of(what);
        self.count_of(
            &format!("SELECT count(*) FROM {table} WHERE {column} = $1"),
            &[queue],
        )
        .await
    }

    /// The id of every live job (waiting, in flight, or dead-lettered and not yet removed).
    pub async fn job_ids(&self) -> anyhow::Result<std::collections::HashSet<JobId>> {
        const SQL: &str = "SELECT id FROM jobs";
        Ok(match self {
            Self::Sqlite(conn) => conn
                .prepare(SQL)?
                .query_map([], |row| row.get::<_, Vec<u8>>(0))?
                .map(|id| JobId::from_slice(&id?).context("a job id is not 16 bytes"))
                .collect::<anyhow::Result<_>>()?,
            Self::Postgres(pool) => pool
                .get()
                .await?
                .query(SQL, &[])
                .await?
                .iter()
                .map(|row| JobId::from_bytes(row.get::<_, uuid::Uuid>(0).into_bytes()))
                .collect(),
        })
    }

    /// How many dead letters are in `state` (`pending`, `replaying`, …).
    pub async fn count_dead_letters_in(&self, state: &str) -> anyhow::Result<u64> {
        self.count_of(
            "SELECT count(*) FROM dead_letters WHERE state = $1",
            &[state],
        )
        .await
    }

    /// A queue's secret exactly as stored (sealed or not); `None` without a secret.
    pub async fn stored_secret(&self, queue: &str) -> anyhow::Result<Option<String>> {
        const SQL: &str = "SELECT secret FROM queues WHERE name = $1";
        Ok(match self {
            Self::Sqlite(conn) => {
                conn.query_row(&SQL.replace('$', "?"), [queue], |row| row.get(0))?
            }
            Self::Postgres(pool) => pool.get().await?.query_one(SQL, &[&queue]).await?.get(0),
        })
    }

    /// The secret a rotation keeps (`previous_secret`) exactly as stored; `None` without one.
    pub async fn stored_previous_secret(&self, queue: &str) -> anyhow::Result<Option<String>> {
        const SQL: &str = "SELECT previous_secret FROM queues WHERE name = $1";
        Ok(match self {
            Self::Sqlite(conn) => {
                conn.query_row(&SQL.replace('$', "?"), [queue], |row| row.get(0))?
            }
            Self::Postgres(pool) => pool.get().await?.query_one(SQL, &[&queue]).await?.get(0),
        })
    }

    /// Tampering: give queue `to` the secret stored for queue `from`, as is.
    pub async fn copy_stored_secret(&self, from: &str, to: &str) -> anyhow::Result<()> {
        self.execute(
            "UPDATE queues SET secret = (SELECT secret FROM queues WHERE name = $1)
             WHERE name = $2",
            &[from, to],
        )
        .await
    }

    /// Behind the server's back: a live scheduled job `id` in `queue`, due at `run_at` (a
    /// time in the future).
    pub async fn insert_scheduled_job(
        &self,
        queue: &QueueName,
        id: JobId,
        run_at: UnixMillis,
    ) -> anyhow::Result<()> {
        match self {
            Self::Sqlite(conn) => {
                conn.execute(
                    "INSERT INTO jobs(id, queue, status, payload, attempts, run_at, created_at)
                     VALUES (?1, ?2, 3, '{}', 0, ?3, ?3)",
                    rusqlite::params![&id.as_bytes()[..], queue.as_str(), run_at],
                )?;
            }
            Self::Postgres(pool) => {
                pool.get()
                    .await?
                    .execute(
                        "INSERT INTO jobs(id, queue, status, payload, attempts, run_at, created_at)
                         VALUES ($1, $2, 3, '{}', 0, $3, $3)",
                        &[
                            &uuid::Uuid::from_bytes(*id.as_bytes()),
                            &queue.as_str(),
                            &run_at,
                        ],
                    )
                    .await?;
            }
        }
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
