//! Opening SQLite connections with hookq's pragmas, and the schema migrations embedded in
//! the binary (tracked by `PRAGMA user_version`).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use rusqlite::{Connection, OpenFlags};

use super::Synchronous;

/// Migrations in order; migration N (1-based) moves `user_version` from N-1 to N.
const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_init",
        include_str!("../../../migrations/0001_init.sql"),
    ),
    (
        "0002_queue_policy",
        include_str!("../../../migrations/0002_queue_policy.sql"),
    ),
    (
        "0003_job_not_before",
        include_str!("../../../migrations/0003_job_not_before.sql"),
    ),
    (
        "0004_idempotency_keys",
        include_str!("../../../migrations/0004_idempotency_keys.sql"),
    ),
    (
        "0005_priorities_and_ordering_keys",
        include_str!("../../../migrations/0005_priorities_and_ordering_keys.sql"),
    ),
    (
        "0006_schedules",
        include_str!("../../../migrations/0006_schedules.sql"),
    ),
    (
        "0007_delivery_log",
        include_str!("../../../migrations/0007_delivery_log.sql"),
    ),
    (
        "0008_event_outbox",
        include_str!("../../../migrations/0008_event_outbox.sql"),
    ),
    (
        "0009_batch_keys",
        include_str!("../../../migrations/0009_batch_keys.sql"),
    ),
    (
        "0010_api_keys",
        include_str!("../../../migrations/0010_api_keys.sql"),
    ),
    (
        "0011_signature_schemes",
        include_str!("../../../migrations/0011_signature_schemes.sql"),
    ),
    (
        "0012_idempotency_fingerprints",
        include_str!("../../../migrations/0012_idempotency_fingerprints.sql"),
    ),
    (
        "0013_trace_context",
        include_str!("../../../migrations/0013_trace_context.sql"),
    ),
    (
        "0014_activity_minutes",
        include_str!("../../../migrations/0014_activity_minutes.sql"),
    ),
    (
        "0015_pull_leases",
        include_str!("../../../migrations/0015_pull_leases.sql"),
    ),
    (
        "0016_dead_letter_leases",
        include_str!("../../../migrations/0016_dead_letter_leases.sql"),
    ),
    (
        "0017_activity_latency",
        include_str!("../../../migrations/0017_activity_latency.sql"),
    ),
    (
        "0018_server_keys",
        include_str!("../../../migrations/0018_server_keys.sql"),
    ),
    (
        "0019_topics",
        include_str!("../../../migrations/0019_topics.sql"),
    ),
    (
        "0020_audit_log",
        include_str!("../../../migrations/0020_audit_log.sql"),
    ),
    (
        "0021_key_use_and_expiry",
        include_str!("../../../migrations/0021_key_use_and_expiry.sql"),
    ),
    (
        "0022_search_by_key",
        include_str!("../../../migrations/0022_search_by_key.sql"),
    ),
    (
        "0023_activity_hours",
        include_str!("../../../migrations/0023_activity_hours.sql"),
    ),
    (
        "0024_lease_holders",
        include_str!("../../../migrations/0024_lease_holders.sql"),
    ),
    (
        "0025_worker_answers",
        include_str!("../../../migrations/0025_worker_answers.sql"),
    ),
];

/// The schema version this binary expects.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Open the read-write connection the writer thread owns, creating the file if needed.
pub fn open_writer(path: &Path, synchronous: Synchronous) -> anyhow::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("cannot open database at {}", path.display()))?;
    check_is_hookq_database(&conn, path)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .with_context(|| format!("cannot switch {} to WAL mode", path.display()))?;
    apply_common_pragmas(&conn)?;
    conn.pragma_update(None, "synchronous", synchronous.pragma_value())?;
    // Checkpoints run on their own thread (store::checkpointer), not inside a commit.
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    Ok(conn)
}

/// Open the connection the checkpoint thread uses (read-write: checkpoints write the
/// database file).
pub fn open_checkpointer(path: &Path, synchronous: Synchronous) -> anyhow::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("cannot open database at {} for checkpoints", path.display()))?;
    apply_common_pragmas(&conn)?;
    conn.pragma_update(None, "synchronous", synchronous.pragma_value())?;
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    Ok(conn)
}

/// Open one read-only connection for the reader pool.
pub fn open_reader(path: &Path) -> anyhow::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("cannot open database at {} for reading", path.display()))?;
    apply_common_pragmas(&conn)?;
    Ok(conn)
}

fn apply_common_pragmas(conn: &Connection) -> anyhow::Result<()> {
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(())
}

/// Refuse a file that is not SQLite, or an SQLite database some other program owns,
/// before anything writes to it.
fn check_is_hookq_database(conn: &Connection, path: &Path) -> anyhow::Result<()> {
    // Reading the schema forces SQLite to parse the header: a foreign file fails here.
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<_, _>>()
        })
        .with_context(|| {
            format!(
                "{} is not a usable SQLite database (corrupt, or another kind of file); \
                 refusing to touch it",
                path.display()
            )
        })?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    let ours = tables.iter().any(|t| t == "jobs") && tables.iter().any(|t| t == "queues");
    if !tables.is_empty() && (version == 0 || !ours) {
        bail!(
            "{} is an SQLite database that hookq did not create (tables: {}); \
             refusing to touch it: point --db at a new file",
            path.display(),
            tables.join(", ")
        );
    }
    if version > SCHEMA_VERSION {
        bail!(
            "{} has schema version {version}, newer than this hookq understands ({SCHEMA_VERSION}); \
             upgrade hookq",
            path.display()
        );
    }
    Ok(())
}

/// Apply the migrations the database has not seen yet, each in its own transaction.
pub fn migrate(conn: &mut Connection) -> anyhow::Result<()> {
    migrate_to(conn, SCHEMA_VERSION)
}

/// Apply the migrations the database has not seen yet, up to version `target`.
fn migrate_to(conn: &mut Connection, target: i64) -> anyhow::Result<()> {
    let current: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    for (index, (name, sql)) in MIGRATIONS.iter().enumerate() {
        let version = index as i64 + 1;
        if version <= current || version > target {
            continue;
        }
        let tx = conn.transaction()?;
        tx.execute_batch(sql)
            .with_context(|| format!("migration {name} failed"))?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()
            .with_context(|| format!("cannot commit migration {name}"))?;
        tracing::info!(migration = name, "applied database migration");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_bring_a_new_file_to_the_current_version_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let mut conn = open_writer(&path, Synchronous::Full).unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    /// An operator upgrading from schema 4 keeps every job: a job due later becomes
    /// scheduled (out of the ready index), a due one stays ready, and a queue that already had
    /// a `maxQueued` gets its exact count.
    #[test]
    fn migration_5_sorts_existing_jobs_into_ready_and_scheduled_and_counts_capped_queues() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open_writer(&dir.path().join("v4.db"), Synchronous::Full).unwrap();
        migrate_to(&mut conn, 4).unwrap();
        let far = 4_000_000_000_000_i64; // year 2096
        conn.execute_batch(&format!(
            "INSERT INTO queues(name, target, created_at, max_queued) VALUES ('capped', 'http://x/', 0, 10);
             INSERT INTO queues(name, target, created_at) VALUES ('free', 'http://x/', 0);
             INSERT INTO jobs(id, queue, status, payload, run_at, created_at)
                 VALUES (x'01', 'capped', 0, '{{}}', 1, 1), (x'02', 'capped', 0, '{{}}', {far}, 1),
                        (x'03', 'capped', 1, '{{}}', 1, 1), (x'04', 'free', 0, '{{}}', {far}, 1);"
        ))
        .unwrap();
        migrate(&mut conn).unwrap();
        super::super::queues::sync_counting(&conn).unwrap();
        let status = |id: &str| -> i64 {
            conn.query_row(
                &format!("SELECT status FROM jobs WHERE id = x'{id}'"),
                [],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(
            [status("01"), status("02"), status("03"), status("04")],
            [0, 3, 1, 3]
        );
        let sizes: Vec<(String, i64, i64)> = conn
            .prepare("SELECT queue, live, cap FROM queue_sizes")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(sizes, vec![("capped".to_owned(), 3, 10)]);
        // The store's triggers keep the count from now on.
        conn.execute("DELETE FROM jobs WHERE id = x'01'", [])
            .unwrap();
        let live: i64 = conn
            .query_row("SELECT live FROM queue_sizes", [], |r| r.get(0))
            .unwrap();
        assert_eq!(live, 2);
    }

    #[test]
    fn a_foreign_file_is_refused_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.db");
        let content = b"these are my notes, not a database".repeat(200);
        std::fs::write(&path, &content).unwrap();
        let err = open_writer(&path, Synchronous::Full).unwrap_err();
        assert!(
            format!("{err:#}").contains("refusing to touch it"),
            "{err:#}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), content);
    }

    #[test]
    fn another_programs_database_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE users(id INTEGER PRIMARY KEY)")
            .unwrap();
        let err = open_writer(&path, Synchronous::Full).unwrap_err();
        assert!(format!("{err:#}").contains("did not create"), "{err:#}");
    }
}
