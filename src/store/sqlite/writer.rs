//! The single writer: one thread owns the read-write connection and applies every write.
//!
//! Callers send operations over a channel. The thread takes every operation waiting (up to
//! [`MAX_BATCH`]) into one transaction, each inside its own savepoint so one failing
//! operation cannot undo its neighbours, commits once, and only then answers each caller.
//! An operation made of a single SQL statement needs no savepoint: SQLite already undoes a
//! failed statement as a whole ([`Writer::write_one_statement`]).
//! This is group commit: the fsync is paid once per batch, not once per job, and a reply
//! still means "on disk". With one writer there is never an `SQLITE_BUSY` between writes.
//!
//! Some writes need not survive a power loss: a lost claim is released at the next start,
//! a lost outcome means the job is delivered again, both allowed by at-least-once. Those
//! are sent as [`Durability::Relaxed`]; a batch made only of them commits without the
//! fsync (`synchronous=NORMAL`), and the next durable commit's fsync covers them anyway.
//!
//! A commit that fails on an I/O error (a failed fsync, above all) is never retried: before
//! answering anyone else, the writer rewrites the committed state ([`resync`]), and if that
//! fails too it stops writing for good (see [`super::resync`] for why).

use std::sync::mpsc as std_mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::Synchronous;
use super::checkpointer::RewindFlag;
use super::resync::{DiskHealth, is_io_failure, resync};
use crate::store::BatchStats;
use crate::store::error::{StoreError, StoreResult};

/// Most operations committed in one transaction; bounds how long one commit holds callers.
pub const MAX_BATCH: usize = 1024;

/// How long a batch that will pay an fsync waits for more operations, when callers are
/// arriving concurrently. Callers answered by the previous commit are typically sending their
/// next write right now; letting them join turns two half-full fsyncs into one full one.
pub const LINGER: Duration = Duration::from_micros(400);

pub use crate::store::dialect::Durability;

/// One write, type-erased so the channel can carry every kind.
trait WriteOp: Send {
    fn durability(&self) -> Durability;
    /// Whether the operation runs inside its own savepoint (it may run several statements).
    fn needs_savepoint(&self) -> bool;
    /// Run the operation's statements. Returns its error if it failed (its savepoint, if any,
    /// is then rolled back).
    fn apply(&mut self, conn: &Connection) -> Option<StoreError>;
    /// Deliver the result once the batch's fate is known.
    fn finish(self: Box<Self>, commit: Result<(), StoreError>);
}

/// Runs on the writer thread right after the commit of the operation that produced `T`.
pub type OnCommit<T> = Box<dyn FnOnce(&T) + Send>;

struct Op<T, F> {
    durability: Durability,
    savepoint: bool,
    run: Option<F>,
    on_commit: Option<OnCommit<T>>,
    result: Option<StoreResult<T>>,
    reply: oneshot::Sender<StoreResult<T>>,
}

impl<T, F> WriteOp for Op<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> StoreResult<T> + Send,
{
    fn durability(&self) -> Durability {
        self.durability
    }

    fn needs_savepoint(&self) -> bool {
        self.savepoint
    }

    fn apply(&mut self, conn: &Connection) -> Option<StoreError> {
        let Some(run) = self.run.take() else {
            return Some(StoreError::Closed);
        };
        let result = run(conn);
        let error = result.as_ref().err().cloned();
        self.result = Some(result);
        error
    }

    fn finish(self: Box<Self>, commit: Result<(), StoreError>) {
        let this = *self;
        let outcome = match (commit, this.result) {
            (Ok(()), Some(Ok(value))) => {
                if let Some(hook) = this.on_commit {
                    hook(&value);
                }
                Ok(value)
            }
            (Ok(()), Some(Err(err))) => Err(err),
            (Ok(()), None) => Err(StoreError::Closed),
            (Err(err), _) => Err(err),
        };
        // The caller may have gone away (request cancelled); the write stands regardless.
        let _ = this.reply.send(outcome);
    }
}

/// A cheap, cloneable handle to the writer thread.
#[derive(Clone)]
pub struct Writer {
    tx: std_mpsc::Sender<Box<dyn WriteOp>>,
}

impl Writer {
    /// Start the writer thread on `conn`. The thread ends when every handle is dropped,
    /// after committing what it was sent; `done` is signalled then.
    /// `synchronous` is the level durable batches commit with.
    pub fn spawn(
        conn: Connection,
        synchronous: Synchronous,
        rewind: RewindFlag,
        health: DiskHealth,
        on_batch: impl Fn(BatchStats) + Send + 'static,
    ) -> std::io::Result<(Self, std_mpsc::Receiver<()>)> {
        let (tx, rx) = std_mpsc::channel();
        let (done_tx, done_rx) = std_mpsc::channel();
        thread::Builder::new()
            .name("hookq-writer".into())
            .spawn(move || {
                run(conn, synchronous, rewind, health, rx, on_batch);
                let _ = done_tx.send(());
            })?;
        Ok((Self { tx }, done_rx))
    }

    /// Run `op` in the next batch and return its result once the batch is committed.
    pub async fn write<T, F>(&self, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        self.send(Durability::Durable, true, op, None).await
    }

    /// Like [`write`](Self::write) for a write that may be lost on power loss (see
    /// [`Durability::Relaxed`]).
    pub async fn write_relaxed<T, F>(&self, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        self.send(Durability::Relaxed, true, op, None).await
    }

    /// For an `op` that runs exactly one SQL statement (the hot path: an enqueue's insert, a
    /// claim). A statement that fails leaves no change behind (SQLite's own statement
    /// rollback), so no savepoint is opened around it: two statements fewer per operation,
    /// and no page copies into a savepoint journal.
    /// `on_commit` as in [`write_then`](Self::write_then).
    pub async fn write_one_statement<T, F>(
        &self,
        durability: Durability,
        op: F,
        on_commit: Option<OnCommit<T>>,
    ) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        self.send(durability, false, op, on_commit).await
    }

    /// Like [`write`](Self::write), running `on_commit` on the writer thread right after the
    /// commit and before any later batch: in-memory state that mirrors the database is
    /// updated in exactly commit order.
    pub async fn write_then<T, F>(&self, op: F, on_commit: Option<OnCommit<T>>) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        self.send(Durability::Durable, true, op, on_commit).await
    }

    async fn send<T, F>(
        &self,
        durability: Durability,
        savepoint: bool,
        op: F,
        on_commit: Option<OnCommit<T>>,
    ) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let op = Op {
            durability,
            savepoint,
            run: Some(op),
            on_commit,
            result: None,
            reply,
        };
        self.tx.send(Box::new(op)).map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

fn run(
    conn: Connection,
    synchronous: Synchronous,
    rewind: RewindFlag,
    health: DiskHealth,
    rx: std_mpsc::Receiver<Box<dyn WriteOp>>,
    on_batch: impl Fn(BatchStats),
) {
    let mut batch: Vec<Box<dyn WriteOp>> = Vec::with_capacity(MAX_BATCH);
    let mut current = synchronous;
    let mut last_synced_batch = 0;
    while let Ok(first) = rx.recv() {
        batch.push(first);
        take_waiting(&rx, &mut batch);
        let durable = batch
            .iter()
            .any(|op| op.durability() == Durability::Durable);
        let wanted = if durable {
            synchronous
        } else {
            Synchronous::Normal
        };
        if wanted == Synchronous::Full && last_synced_batch > 1 {
            linger(&rx, &mut batch);
        }
        if wanted == Synchronous::Full {
            last_synced_batch = batch.len();
        }
        let started = Instant::now();
        if health.take_resync() {
            resync_or_fail(&conn, &health);
        }
        let commit = health
            .check()
            .and_then(|()| set_synchronous(&conn, &mut current, wanted))
            .and_then(|()| apply_batch(&conn, &mut batch));
        match &commit {
            Err(err) if is_io_failure(err) => {
                tracing::error!(
                    error = %err,
                    ops = batch.len(),
                    "write batch failed on an I/O error; rolled back; rewriting the committed \
                     state before the next write"
                );
                resync_or_fail(&conn, &health);
            }
            Err(StoreError::DiskFailed(_)) => {}
            Err(err) => {
                tracing::error!(error = %err, ops = batch.len(), "write batch failed; rolled back")
            }
            Ok(()) => {}
        }
        on_batch(BatchStats::since(batch.len(), started));
        for op in batch.drain(..) {
            op.finish(commit.clone());
        }
        // Between batches: nothing can race this checkpoint, so it completes.
        if health.check().is_ok() {
            rewind.rewind_if_raised(&conn, &health);
        }
    }
    if let Err(err) = conn.execute_batch("PRAGMA optimize") {
        tracing::warn!(error = %err, "PRAGMA optimize at shutdown failed");
    }
    tracing::debug!("writer stopped");
}

/// Rewrite the committed state after an I/O error ([`resync`]); if that fails too, the
/// disk has failed for good and the writer refuses every later batch.
fn resync_or_fail(conn: &Connection, health: &DiskHealth) {
    match resync(conn) {
        Ok(()) => tracing::warn!("the committed state was rewritten and synced; writing again"),
        Err(err) => health.fail(format!("{err:#}")),
    }
}

/// Add every operation already waiting, up to the batch bound.
fn take_waiting(rx: &std_mpsc::Receiver<Box<dyn WriteOp>>, batch: &mut Vec<Box<dyn WriteOp>>) {
    while batch.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(op) => batch.push(op),
            Err(_) => break,
        }
    }
}

/// Let [`LINGER`] pass, then add the operations that arrived meanwhile.
///
/// Asleep rather than waiting on the channel: a sender whose receiver waits on it wakes
/// the receiver (a system call for the sender, a context switch for this thread) for every
/// operation, where one whose receiver sleeps only queues its operation.
fn linger(rx: &std_mpsc::Receiver<Box<dyn WriteOp>>, batch: &mut Vec<Box<dyn WriteOp>>) {
    thread::sleep(LINGER);
    take_waiting(rx, batch);
}

/// Switch the connection's `synchronous` level between transactions, when it changes.
fn set_synchronous(
    conn: &Connection,
    current: &mut Synchronous,
    wanted: Synchronous,
) -> Result<(), StoreError> {
    if *current != wanted {
        conn.pragma_update(None, "synchronous", wanted.pragma_value())?;
        *current = wanted;
    }
    Ok(())
}

/// Apply every operation inside one transaction, each in its own savepoint unless it is a
/// single statement, and commit.
///
/// A failed operation normally leaves the transaction open: its statement (or savepoint) is
/// undone and its neighbours go on. But on some errors (`SQLITE_FULL`, `IOERR`, `NOMEM`,
/// `BUSY`, `INTERRUPT`) SQLite may roll back the *whole* transaction by itself. Going on then
/// would run the rest of the batch in autocommit mode, each statement committing on its own,
/// while every caller is told that the batch failed: a stored job answered with a 5xx, and
/// duplicated by the producer's retry. So after every operation the writer checks that the
/// transaction is still open, and fails the whole batch (nothing of it is stored) if not.
fn apply_batch(conn: &Connection, batch: &mut [Box<dyn WriteOp>]) -> Result<(), StoreError> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = (|| {
        // Cached statements: these run once or twice per operation, on the hot path.
        for op in batch.iter_mut() {
            if !op.needs_savepoint() {
                // A failed statement has undone itself; its error goes to its caller.
                let failed = op.apply(conn);
                check_still_in_transaction(conn, failed)?;
                continue;
            }
            conn.prepare_cached("SAVEPOINT op")?.execute([])?;
            let failed = op.apply(conn);
            check_still_in_transaction(conn, failed.clone())?;
            if failed.is_some() {
                conn.prepare_cached("ROLLBACK TO op")?.execute([])?;
            }
            conn.prepare_cached("RELEASE op")?.execute([])?;
        }
        conn.execute_batch("COMMIT")?;
        Ok::<_, StoreError>(())
    })();
    if result.is_err()
        && !conn.is_autocommit()
        && let Err(err) = conn.execute_batch("ROLLBACK")
    {
        tracing::error!(error = %err, "rollback after a failed batch failed");
    }
    result
}

/// Fail the batch if SQLite rolled back its transaction (see [`apply_batch`]). `failed` is
/// the error of the operation just applied, if any: a full disk stays a full disk for every
/// caller of the batch.
fn check_still_in_transaction(
    conn: &Connection,
    failed: Option<StoreError>,
) -> Result<(), StoreError> {
    if !conn.is_autocommit() {
        return Ok(());
    }
    Err(match failed {
        Some(StoreError::StorageFull) => StoreError::StorageFull,
        // Kept as it is, so the writer knows to resync.
        Some(io) if is_io_failure(&io) => io,
        Some(cause) => StoreError::from(anyhow::anyhow!(
            "the database rolled back the whole write batch after a failed operation ({cause}); \
             nothing in it was stored"
        )),
        None => StoreError::from(anyhow::anyhow!(
            "the write batch's transaction ended early; nothing in it was stored"
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> (Writer, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("w.db")).unwrap();
        conn.execute_batch("CREATE TABLE t(v INTEGER NOT NULL UNIQUE)")
            .unwrap();
        let (writer, _done) = Writer::spawn(
            conn,
            Synchronous::Full,
            RewindFlag::default(),
            DiskHealth::default(),
            |_| {},
        )
        .unwrap();
        (writer, dir)
    }

    #[tokio::test]
    async fn a_failing_operation_does_not_undo_its_neighbours() {
        let (writer, _dir) = writer();
        let insert = |v: i64| {
            let w = writer.clone();
            async move {
                w.write(move |c| Ok(c.execute("INSERT INTO t(v) VALUES (?1)", [v])?))
                    .await
            }
        };
        let (a, b, c) = tokio::join!(insert(1), insert(1), insert(2));
        let oks = [&a, &b, &c].iter().filter(|r| r.is_ok()).count();
        assert_eq!(oks, 2, "{a:?} {b:?} {c:?}");
        let count: i64 = writer
            .write(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(count, 2);
    }

    #[tokio::test]
    async fn a_failing_single_statement_does_not_undo_its_neighbours() {
        let (writer, _dir) = writer();
        // One statement inserting two rows, the second of which collides: SQLite must undo
        // the first row too, without a savepoint, and leave the other operations alone.
        let insert = |sql: &'static str| {
            let w = writer.clone();
            async move {
                w.write_one_statement(Durability::Durable, move |c| Ok(c.execute(sql, [])?), None)
                    .await
            }
        };
        let (a, b, c) = tokio::join!(
            insert("INSERT INTO t(v) VALUES (1)"),
            insert("INSERT INTO t(v) VALUES (2), (1)"),
            insert("INSERT INTO t(v) VALUES (3)"),
        );
        assert_eq!(a.unwrap(), 1);
        assert!(b.is_err(), "{b:?}");
        assert_eq!(c.unwrap(), 1);
        let values: Vec<i64> = writer
            .write(|c| {
                let mut stmt = c.prepare("SELECT v FROM t ORDER BY v")?;
                let rows = stmt.query_map([], |r| r.get(0))?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await
            .unwrap();
        assert_eq!(values, vec![1, 3]);
    }

    /// Holds the writer thread inside an operation until the sender is dropped or sent to,
    /// so that the operations sent meanwhile are applied together, in one batch, after it.
    async fn hold_writer(writer: &Writer) -> std::sync::mpsc::Sender<()> {
        let (entered, has_entered) = oneshot::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let w = writer.clone();
        tokio::spawn(async move {
            w.write(move |_| {
                let _ = entered.send(());
                let _ = released.recv();
                Ok(())
            })
            .await
        });
        has_entered.await.unwrap();
        release
    }

    fn count_rows(conn: &Connection) -> StoreResult<i64> {
        Ok(conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?)
    }

    /// A fault after which SQLite has rolled back the whole transaction.
    #[derive(Debug, Clone, Copy)]
    enum Fault {
        /// A real `SQLITE_INTERRUPT` in the middle of an INSERT: SQLite documents that it
        /// rolls back the whole explicit transaction.
        Interrupt,
        /// The automatic rollback SQLite may do on FULL, IOERR, NOMEM or BUSY, done by hand.
        Rollback,
    }

    fn inject(fault: Fault, conn: &Connection) -> StoreResult<usize> {
        match fault {
            Fault::Interrupt => {
                // Interrupt once the INSERT has written some rows.
                conn.progress_handler(1000, Some(|| true));
                let result = conn.execute(
                    "INSERT INTO t(v) WITH RECURSIVE n(x) AS
                         (SELECT 100 UNION ALL SELECT x + 1 FROM n WHERE x < 100000)
                     SELECT x FROM n",
                    [],
                );
                conn.progress_handler(0, None::<fn() -> bool>);
                Ok(result?)
            }
            Fault::Rollback => {
                conn.execute_batch("ROLLBACK")?;
                Err(StoreError::from(anyhow::anyhow!(
                    "injected: disk I/O error"
                )))
            }
        }
    }

    /// SQLite may roll back a whole transaction by itself. The writer must then fail the
    /// whole batch; were it to go on, the operations after the fault would each commit on
    /// their own (autocommit) while their callers are told that they failed.
    #[tokio::test]
    async fn a_transaction_rolled_back_by_sqlite_fails_the_whole_batch_and_stores_nothing() {
        for fault in [Fault::Interrupt, Fault::Rollback] {
            let (writer, _dir) = writer();
            let release = hold_writer(&writer).await;
            type Pending = std::pin::Pin<Box<dyn Future<Output = StoreResult<usize>> + Send>>;
            let insert = |v: i64, single: bool| -> Pending {
                let w = writer.clone();
                let op = move |c: &Connection| Ok(c.execute("INSERT INTO t(v) VALUES (?1)", [v])?);
                Box::pin(async move {
                    if single {
                        w.write_one_statement(Durability::Durable, op, None).await
                    } else {
                        w.write(op).await
                    }
                })
            };
            let w = writer.clone();
            let mut ops: Vec<Pending> = vec![
                insert(1, true),
                insert(2, false),
                Box::pin(async move {
                    w.write_one_statement(Durability::Durable, move |c| inject(fault, c), None)
                        .await
                }),
                insert(3, true),
                insert(4, false),
            ];
            // One poll each sends every operation to the held writer, in this order.
            for op in &mut ops {
                assert!(futures_util::poll!(op.as_mut()).is_pending());
            }
            drop(release);
            for (index, op) in ops.into_iter().enumerate() {
                let result = op.await;
                assert!(result.is_err(), "{fault:?}: operation {index}: {result:?}");
            }
            let stored = writer.write(count_rows).await.unwrap();
            assert_eq!(
                stored, 0,
                "{fault:?}: callers told of a failure had rows stored"
            );
        }
    }

    #[tokio::test]
    async fn only_batches_with_a_durable_write_pay_the_full_sync() {
        let (writer, _dir) = writer();
        let level =
            |c: &Connection| Ok(c.query_row("PRAGMA synchronous", [], |r| r.get::<_, i64>(0))?);
        // 2 = FULL, 1 = NORMAL. Each write here is alone in its batch (awaited in turn).
        assert_eq!(writer.write(level).await.unwrap(), 2);
        assert_eq!(writer.write_relaxed(level).await.unwrap(), 1);
        assert_eq!(writer.write(level).await.unwrap(), 2);
    }

    #[tokio::test]
    async fn on_commit_runs_only_for_committed_operations() {
        let (writer, _dir) = writer();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        for v in [7, 7] {
            let s = seen.clone();
            let _ = writer
                .write_then(
                    move |c| Ok(c.execute("INSERT INTO t(v) VALUES (?1)", [v])?),
                    Some(Box::new(move |_: &usize| s.lock().unwrap().push(v))),
                )
                .await;
        }
        assert_eq!(*seen.lock().unwrap(), vec![7]);
    }
}
