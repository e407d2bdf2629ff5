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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{JobId, QueueName};
    use crate::store::records::NewJob;

    fn live_jobs(conn: &Connection) -> StoreResult<i64> {
        Ok(conn.query_row("SELECT count(*) FROM jobs", [], |row| row.get(0))?)
    }

    /// A read of several statements sees one state of the database, whatever commits
    /// between its statements: `get_job` looking in `jobs`, then in `dead_letters`, cannot
    /// miss a job a replay moves from one to the other meanwhile.
    #[tokio::test]
    async fn a_read_in_a_snapshot_does_not_see_a_commit_made_between_its_statements() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("snapshot.db");
        let (writer, queue) =
            super::super::ceiling::open_with_queue(&path, "http://127.0.0.1:9/hook").unwrap();
        drop(writer);
        let pool = ReadPool::open(&path, 1).unwrap();
        // Counts the live jobs, commits one more through a connection of its own, counts
        // again.
        let commit_between = |path: std::path::PathBuf, queue: QueueName| {
            move |conn: &Connection| -> StoreResult<(i64, i64)> {
                let before = live_jobs(conn)?;
                let writer = Connection::open(&path)?;
                let payload = crate::json::canonicalize(b"{}").expect("JSON");
                let job = NewJob::now(JobId::new(), payload, crate::model::now_millis());
                super::super::jobs::insert(&writer, &queue, &job)?;
                Ok((before, live_jobs(conn)?))
            }
        };

        let (before, after) = pool
            .read_in_snapshot(commit_between(path.clone(), queue.clone()))
            .await
            .unwrap();
        assert_eq!((before, after), (0, 0), "one snapshot");
        // The same two statements without it see the commit: the snapshot is what holds.
        let (before, after) = pool
            .read(commit_between(path.clone(), queue))
            .await
            .unwrap();
        assert_eq!((before, after), (1, 2));
    }
}
