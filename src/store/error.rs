//! The errors a store operation can end in, typed so the API can map each to a status code.
//! No backend's own error type shows through: a database failure is carried as an opaque
//! cause, for logs.

use std::sync::Arc;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("queue not found")]
    QueueNotFound,
    #[error("queue already exists")]
    QueueExists,
    #[error("job not found")]
    JobNotFound,
    #[error("schedule not found")]
    ScheduleNotFound,
    #[error("topic not found")]
    TopicNotFound,
    #[error("topic already exists")]
    TopicExists,
    #[error("this queue does not subscribe to this topic")]
    SubscriptionNotFound,
    /// The job exists but is in a state that forbids the operation; the text says which.
    #[error("{0}")]
    JobConflict(&'static str),
    /// A batch's `Idempotency-Key` stands for another batch (other jobs, or another number
    /// of them): nothing was written.
    #[error(
        "this Idempotency-Key was used for a different batch (other jobs or another number of \
         them): nothing was stored; use a new key for a new batch"
    )]
    BatchKeyReused,
    /// A job's `Idempotency-Key` stands for another job (another payload, priority or
    /// ordering key): nothing was written. Stripe's rule: a retry must repeat its request.
    #[error(
        "this Idempotency-Key was used for a different job (another payload, priority or \
         ordering key): nothing was stored; use a new key for a new job"
    )]
    IdempotencyKeyReused,
    /// A creation past one of the server's [`Caps`](super::Caps): nothing was written.
    #[error(
        "limit reached: there are {cap} {what} already (the most {setting} allows); delete one first, or raise the setting"
    )]
    LimitReached {
        what: &'static str,
        cap: usize,
        setting: &'static str,
    },
    /// The disk (or the database's size limit) is full: nothing was written.
    #[error("storage is full")]
    StorageFull,
    /// Too many enqueues are already waiting to be committed (`HOOKQ_MAX_PENDING_WRITES`):
    /// nothing was written; the producer should retry shortly.
    #[error("too many writes waiting: the job was not stored; retry shortly")]
    Overloaded,
    /// The queue holds its `maxQueued` jobs already: nothing was written.
    #[error("queue full: it holds its maxQueued jobs already; retry later")]
    QueueFull,
    /// The store has stopped (shutting down, or its writer failed and gave up).
    #[error("the store is shutting down")]
    Closed,
    /// The disk failed to sync a write and the committed state could not be rewritten
    /// (see `store::sqlite::resync`): nothing more is written until hookq is restarted. The
    /// reason is for logs.
    #[error(
        "storage failed: the disk could not sync a write; nothing more is stored until hookq \
         is restarted"
    )]
    DiskFailed(Arc<str>),
    /// The database cannot be reached (connection lost or refused, the server restarting):
    /// the operation may or may not have committed; retrying later is safe with an
    /// idempotency key. The cause is for logs.
    #[error("the database cannot be reached; retry shortly")]
    Unavailable(Arc<dyn std::error::Error + Send + Sync>),
    /// The database aborted the transaction to resolve a lock conflict with another one (a
    /// deadlock, or a serialization failure): nothing of it was written; retrying is safe.
    #[error("the database aborted the write over a lock conflict; nothing was stored; retry")]
    Contended(Arc<dyn std::error::Error + Send + Sync>),
    /// The database failed the operation; the cause is for logs.
    #[error("database error: {0}")]
    Database(Arc<dyn std::error::Error + Send + Sync>),
    #[error("{0:#}")]
    Other(Arc<anyhow::Error>),
}

impl From<anyhow::Error> for StoreError {
    fn from(err: anyhow::Error) -> Self {
        Self::Other(Arc::new(err))
    }
}

pub type StoreResult<T> = Result<T, StoreError>;
