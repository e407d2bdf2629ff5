//! SQLite's side of the contract: [`SqliteTx`], one connection in a transaction as the
//! decisions see it. Each table module implements its area of
//! [`Tx`](crate::store::dialect::Tx) for it in that table's SQL (`jobs.rs`:
//! [`JobRows`](crate::store::dialect::JobRows), …); this file holds the savepoints. Writes
//! run on the writer thread inside the writer's transaction; reads on a reader connection
//! inside one snapshot ([`super::reader`]). Nothing here waits, so
//! [`run_now`](crate::store::dialect::run_now) drives a decision at once.

use rusqlite::Connection;

use crate::store::dialect::Savepoints;
use crate::store::error::StoreResult;

/// One SQLite connection in a transaction, as the decisions see it.
#[derive(Clone, Copy)]
pub struct SqliteTx<'c>(pub &'c Connection);

impl Savepoints for SqliteTx<'_> {
    async fn savepoint(&self, name: &'static str) -> StoreResult<()> {
        Ok(self.0.execute_batch(&format!("SAVEPOINT {name}"))?)
    }

    async fn release(&self, name: &'static str) -> StoreResult<()> {
        Ok(self.0.execute_batch(&format!("RELEASE {name}"))?)
    }

    async fn roll_back_to(&self, name: &'static str) -> StoreResult<()> {
        Ok(self
            .0
            .execute_batch(&format!("ROLLBACK TO {name}; RELEASE {name}"))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::now_millis;
    use crate::model::{JobId, QueueName, UnixMillis};
    use crate::store::decisions;
    use crate::store::dialect::run_now;
    use crate::store::dialect::{DeadLetterRows, JobRows};
    use crate::store::records::Selection;
    use crate::store::records::{DlqState, Failure, Filter, PageRequest};
    use crate::store::records::{JobState, Outbox, Outcome};
    use crate::store::sealing::Sealing;
    use crate::store::sqlite::Synchronous;

    // ---------------------------------------------------------------------------------------
    // Replay rollback and interrupted replays
    // ---------------------------------------------------------------------------------------

    /// A raw writer connection on a fresh, migrated database with queue `q`.
    fn raw_database(dir: &tempfile::TempDir) -> (rusqlite::Connection, QueueName) {
        let (conn, queue) = super::super::ceiling::open_with_queue(
            &dir.path().join("raw.db"),
            "http://127.0.0.1:9/hook",
        )
        .unwrap();
        (conn, queue)
    }

    fn empty_job(id: JobId, now: UnixMillis) -> crate::store::records::NewJob {
        let payload = crate::json::canonicalize(b"{}").expect("JSON");
        crate::store::records::NewJob::now(id, payload, now)
    }

    fn failure(at: UnixMillis) -> Failure {
        Failure {
            error: "boom".into(),
            status: Some(500),
            latency_ms: 1,
            at,
            headers: None,
        }
    }

    /// Dead-letter `n` fresh jobs through the job functions, at `now`.
    fn bury_jobs(
        conn: &rusqlite::Connection,
        queue: &QueueName,
        n: usize,
        now: UnixMillis,
    ) -> Vec<JobId> {
        let mut ids: Vec<JobId> = (0..n).map(|_| JobId::new()).collect();
        ids.sort();
        for id in &ids {
            run_now(SqliteTx(conn).insert_jobs(queue, &[empty_job(*id, now)])).unwrap();
        }
        for job in run_now(SqliteTx(conn).claim(queue, now, now + 60_000, n)).unwrap() {
            let dead = Outcome::Dead {
                failure: failure(now),
            };
            let recorded = run_now(decisions::outcomes::record_outcome(
                &SqliteTx(conn),
                job.id,
                job.lease(),
                &dead,
                Outbox::default(),
            ));
            assert!(recorded.unwrap());
        }
        ids
    }

    #[test]
    fn a_replay_whose_job_cannot_be_put_back_is_rolled_back_to_pending() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, queue) = raw_database(&dir);
        let t0 = now_millis();
        let ids = bury_jobs(&conn, &queue, 3, t0);
        let claimed =
            run_now(SqliteTx(&conn).claim_for_replay(&Selection::Ids(ids.clone()), t0, 10))
                .unwrap();
        assert_eq!(claimed, ids);
        // The middle job is live again, so re-inserting it violates the unique id.
        run_now(SqliteTx(&conn).insert_jobs(&queue, &[empty_job(ids[1], t0)])).unwrap();

        let report = run_now(decisions::dead_letters::replay_claimed(
            &SqliteTx(&conn),
            &claimed,
            t0 + 5,
            t0 + 5,
        ))
        .unwrap();
        assert_eq!(report.replayed_ids(), [ids[0], ids[2]]);
        assert_eq!(report.failed, [ids[1]]);

        let rolled_back = run_now(SqliteTx(&conn).dead_letter(&queue, ids[1]))
            .unwrap()
            .unwrap();
        assert_eq!(rolled_back.status, DlqState::Pending);
        assert_eq!(rolled_back.replay_count, 0);
        assert_eq!(rolled_back.replayed_at, None);
        for id in [ids[0], ids[2]] {
            let letter = run_now(SqliteTx(&conn).dead_letter(&queue, id))
                .unwrap()
                .unwrap();
            assert_eq!(letter.status, DlqState::Replayed);
            assert_eq!(letter.replay_count, 1);
            assert_eq!(letter.replayed_at, Some(t0 + 5));
            let job = run_now(SqliteTx(&conn).live_job(&queue, id))
                .unwrap()
                .expect("the job is live again");
            assert_eq!(job.state, JobState::Ready);
            assert_eq!(job.attempts, 0, "fresh attempts");
            assert_eq!(job.run_at, t0 + 5);
        }
        // The live job that blocked the replay is the one inserted above, untouched.
        let blocker = run_now(SqliteTx(&conn).live_job(&queue, ids[1]))
            .unwrap()
            .unwrap();
        assert_eq!(blocker.run_at, t0);
        // No transaction is left open.
        assert!(conn.is_autocommit());
    }

    #[tokio::test]
    async fn records_left_replaying_by_an_interrupted_replay_are_pending_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = now_millis();
        let ids = {
            let (conn, queue) = raw_database(&dir);
            let ids = bury_jobs(&conn, &queue, 2, t0);
            // The process stops between claiming and putting back.
            let claimed =
                run_now(SqliteTx(&conn).claim_for_replay(&Selection::Queue(queue), t0, 10))
                    .unwrap();
            assert_eq!(claimed.len(), 2);
            ids
        };
        let options = crate::store::StoreOptions::Sqlite {
            path: dir.path().join("raw.db"),
            synchronous: Synchronous::Normal,
        };
        let (store, done) =
            crate::store::Store::open(options, Sealing::none(), t0, |_| {}).unwrap();
        let page = PageRequest {
            after: None,
            limit: 100,
            newest_first: true,
            with_payload: false,
            with_total: false,
        };
        let letters = store
            .list_dead_letters(Filter::default(), page)
            .await
            .unwrap()
            .letters;
        assert_eq!(letters.len(), 2);
        assert!(
            letters.iter().all(|l| l.status == DlqState::Pending),
            "{letters:?}"
        );
        // And they can be replayed now.
        let (claimed, report) = store
            .replay(Selection::Ids(ids.clone()), t0, t0)
            .await
            .unwrap();
        assert_eq!(claimed, 2);
        assert_eq!(report.replayed_ids(), ids);
        drop(store);
        tokio::task::spawn_blocking(move || done.wait())
            .await
            .unwrap();
    }
}
