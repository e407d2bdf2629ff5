//! The errors a store operation can end in, typed so the API can map each to a status code.

use rusqlite::ErrorCode;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("queue not found")]
    QueueNotFound,
    #[error("queue already exists")]
    QueueExists,
    #[error("job not found")]
    JobNotFound,
    /// The job exists but is in a state that forbids the operation; the text says which.
    #[error("{0}")]
    JobConflict(&'static str),
    /// The disk (or the database's size limit) is full: nothing was written.
    #[error("storage is full")]
    StorageFull,
    /// The writer has stopped (shutting down, or it failed and gave up).
    #[error("the store is shutting down")]
    Closed,
    #[error("database error: {0}")]
    Sqlite(rusqlite::Error),
    #[error("{0:#}")]
    Other(anyhow::Error),
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        match err.sqlite_error_code() {
            Some(ErrorCode::DiskFull) => Self::StorageFull,
            _ => Self::Sqlite(err),
        }
    }
}

impl From<anyhow::Error> for StoreError {
    fn from(err: anyhow::Error) -> Self {
        Self::Other(err)
    }
}

/// A failure that happened to a whole batch (its commit), shared by every operation in it.
impl Clone for StoreError {
    fn clone(&self) -> Self {
        match self {
            Self::QueueNotFound => Self::QueueNotFound,
            Self::QueueExists => Self::QueueExists,
            Self::JobNotFound => Self::JobNotFound,
            Self::JobConflict(m) => Self::JobConflict(m),
            Self::StorageFull => Self::StorageFull,
            Self::Closed => Self::Closed,
            Self::Sqlite(e) => Self::Other(anyhow::anyhow!("database error: {e}")),
            Self::Other(e) => Self::Other(anyhow::anyhow!("{e:#}")),
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;
