//! SQLite on a forgetfs mount, the way hookq uses it: WAL mode (a shared-memory `-shm`
//! file mapped by every connection, POSIX locks the kernel keeps), `synchronous=FULL`;
//! committed transactions survive a power cut, and a cut at any moment of a write loop
//! leaves a database that passes `PRAGMA integrity_check`.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use forgetfs::Tear;
use rusqlite::Connection;

/// Set in the child process that runs the write loop (see `writer_loop_for_the_cut_test`).
const WRITER_DB: &str = "FORGETFS_TEST_WRITER_DB";

fn open(path: &Path) -> Connection {
    let db = Connection::open(path).expect("open the database");
    let mode: String = db
        .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
        .expect("WAL mode");
    assert_eq!(mode, "wal");
    db.pragma_update(None, "synchronous", "FULL")
        .expect("synchronous=FULL");
    // Checkpoint often, so cuts also land in checkpoints and WAL restarts.
    db.pragma_update(None, "wal_autocheckpoint", 8)
        .expect("wal_autocheckpoint");
    db.busy_timeout(std::time::Duration::from_secs(5))
        .expect("busy timeout");
    db.execute_batch(
        "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, body BLOB NOT NULL);",
    )
    .expect("the table");
    db
}

fn count(db: &Connection) -> i64 {
    db.query_row("SELECT count(*) FROM jobs", [], |row| row.get(0))
        .expect("count")
}

fn integrity(db: &Connection) -> String {
    db.query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity_check")
}

fn insert(db: &Connection, id: i64) {
    let body: Vec<u8> = (0..700).map(|i| (id as u8).wrapping_add(i as u8)).collect();
    db.execute("INSERT INTO jobs (id, body) VALUES (?1, ?2)", (id, body))
        .expect("insert");
}

#[test]
fn wal_mode_works_on_the_mount_with_two_connections() {
    let Some(m) = common::mount() else { return };
    let path = m.at("wal.db");
    let writer = open(&path);
    let reader = open(&path);
    insert(&writer, 1);
    assert_eq!(count(&reader), 1, "the second connection sees the commit");
    writer.execute_batch("BEGIN IMMEDIATE").expect("begin");
    insert(&writer, 2);
    assert_eq!(
        count(&reader),
        1,
        "a reader beside an open write transaction"
    );
    writer.execute_batch("COMMIT").expect("commit");
    assert_eq!(count(&reader), 2);
    assert!(m.at("wal.db-shm").exists() && m.at("wal.db-wal").exists());
}

#[test]
fn committed_transactions_survive_a_cut() {
    let Some(m) = common::mount() else { return };
    let path = m.at("jobs.db");
    let db = open(&path);
    // SQLite syncs the directory after creating a journal or WAL, not after creating
    // the database itself; a careful program does.
    common::sync_dir(m.point());
    for id in 1..=100 {
        insert(&db, id);
    }
    // A clean close checkpoints and deletes the WAL; the cut undoes the unsynced unlink.
    drop(db);
    m.power_cut(Tear::None).expect("cut");
    let db = open(&path);
    assert_eq!(integrity(&db), "ok");
    assert_eq!(count(&db), 100);
}

#[test]
fn a_cut_at_any_moment_of_a_write_loop_leaves_a_sound_database() {
    let Some(m) = common::mount() else { return };
    let path = m.at("loop.db");
    drop(open(&path));
    common::sync_dir(m.point());
    let exe = std::env::current_exe().expect("the test binary");
    let mut acknowledged = 0;
    for round in 0..16_u64 {
        let mut child = Command::new(&exe)
            .args(["writer_loop_for_the_cut_test", "--exact", "--nocapture"])
            .env(WRITER_DB, &path)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the writer process");
        let stdout = child.stdout.take().expect("its stdout");
        let wanted = 3 + round * 11;
        let mut seen = 0;
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("a line");
            if let Some(id) = line.strip_prefix("committed ") {
                acknowledged = id.parse().expect("an id");
                seen += 1;
                if seen == wanted {
                    break;
                }
            }
        }
        // The harness's order: kill, then cut, then restart.
        child.kill().expect("kill -9");
        child.wait().expect("reaped");
        let tear = if round % 2 == 0 {
            Tear::None
        } else {
            Tear::Random { seed: round }
        };
        m.power_cut(tear).expect("cut");
        let db = open(&path);
        assert_eq!(integrity(&db), "ok", "round {round}");
        let last: i64 = db
            .query_row("SELECT coalesce(max(id), 0) FROM jobs", [], |row| {
                row.get(0)
            })
            .expect("max id");
        assert!(
            last >= acknowledged,
            "round {round}: acknowledged {acknowledged}, found {last}"
        );
        assert_eq!(count(&db), last, "round {round}: ids are dense");
    }
}

#[test]
fn a_commit_whose_fsync_fails_is_refused_and_gone_after_a_cut() {
    let Some(m) = common::mount() else { return };
    let path = m.at("fsyncgate.db");
    let db = open(&path);
    common::sync_dir(m.point());
    insert(&db, 1);
    m.fail_next_fsync();
    let refused = db.execute("INSERT INTO jobs (id, body) VALUES (2, x'00')", []);
    assert!(
        refused.is_err(),
        "SQLite must report the failed fsync: {refused:?}"
    );
    drop(db);
    m.power_cut(Tear::None).expect("cut");
    let db = open(&path);
    assert_eq!(integrity(&db), "ok");
    let ids: Vec<i64> = db
        .prepare("SELECT id FROM jobs ORDER BY id")
        .and_then(|mut rows| rows.query_map([], |row| row.get(0))?.collect())
        .expect("ids");
    assert_eq!(ids, vec![1], "the refused commit is not on disk");
}

#[test]
fn commits_acknowledged_after_a_failed_fsync_survive_a_cut() {
    let Some(m) = common::mount() else { return };
    let path = m.at("after.db");
    let db = open(&path);
    common::sync_dir(m.point());
    insert(&db, 1);
    m.fail_next_fsync();
    // A large transaction fails; the smaller ones after it rewrite part of its WAL frames.
    let refused = db.execute_batch(
        "WITH RECURSIVE n(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM n WHERE v < 40) \
         INSERT INTO jobs (id, body) SELECT v + 1000, randomblob(3000) FROM n",
    );
    assert!(
        matches!(&refused, Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::SystemIoFailure),
        "the failed fsync is reported: {refused:?}"
    );
    assert!(m.status().lost_pages > 0);
    for id in 2..=10 {
        insert(&db, id);
    }
    m.power_cut(Tear::None).expect("cut");
    drop(db);
    let db = open(&path);
    assert_eq!(integrity(&db), "ok");
    let ids: Vec<i64> = db
        .prepare("SELECT id FROM jobs ORDER BY id")
        .and_then(|mut rows| rows.query_map([], |row| row.get(0))?.collect())
        .expect("ids");
    assert_eq!(ids, (1..=10).collect::<Vec<i64>>());
}

/// The write loop the cut test kills: a no-op unless run as that test's child.
#[test]
fn writer_loop_for_the_cut_test() {
    let Some(path) = std::env::var_os(WRITER_DB) else {
        return;
    };
    let db = open(Path::new(&path));
    let first: i64 = db
        .query_row("SELECT coalesce(max(id), 0) + 1 FROM jobs", [], |row| {
            row.get(0)
        })
        .expect("next id");
    for id in first..first + 100_000 {
        insert(&db, id);
        println!("committed {id}");
    }
}
