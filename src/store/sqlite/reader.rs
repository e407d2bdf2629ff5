//! A small pool of read-only connections. WAL lets them read beside the writer; blocking
//! SQLite calls run on tokio's blocking threads, never on the async executor.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::Semaphore;

use super::connection::open_reader;
use crate::store::error::{StoreError, StoreResult};

#[derive(Clone)]
pub struct ReadPool {
    inner: Arc<Inner>,
}

struct Inner {
    idle: Mutex<Vec<Connection>>,
    available: Semaphore,
}

impl ReadPool {
    pub fn open(path: &Path, size: usize) -> anyhow::Result<Self> {
        let conns = (0..size)
            .map(|_| open_reader(path))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self {
            inner: Arc::new(Inner {
                available: Semaphore::new(conns.len()),
                idle: Mutex::new(conns),
            }),
        })
    }

    /// Run `query` on an idle connection, waiting for one if all are busy.
    pub async fn read<T, F>(&self, query: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let permit = self
            .inner
            .available
            .acquire()
            .await
            .map_err(|_| StoreError::Closed)?;
        let inner = self.inner.clone();
        let result = tokio::task::spawn_blocking(move || {
            let conn = inner
                .idle
                .lock()
                .map_err(|_| StoreError::Closed)?
                .pop()
                .ok_or(StoreError::Closed)?;
            let result = query(&conn);
            if let Ok(mut idle) = inner.idle.lock() {
                idle.push(conn);
            }
            result
        })
        .await
        .map_err(|e| StoreError::from(anyhow::anyhow!("read task failed: {e}")))?;
        drop(permit);
        result
    }

    /// Run `query` in one read transaction: every statement sees the same snapshot, so a
    /// row moving between tables meanwhile (a replay, a delivery) is seen in one of them.
    pub async fn read_in_snapshot<T, F>(&self, query: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        self.read(move |conn| {
            conn.execute_batch("BEGIN")?;
            let result = query(conn);
            let end = conn.execute_batch(if result.is_ok() { "COMMIT" } else { "ROLLBACK" });
            let value = result?;
            end?;
            Ok(value)
        })
        .await
    }
}
