//! Work on a database file itself, no server needed (the operator's `migrate`, `backup` and
//! `check`): `migrate` takes the server's lock (the server must be stopped); `backup` and
//! `check` only read, safe beside a running server thanks to WAL. Each returns what it found;
//! the CLI prints it.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use super::connection::{self, SCHEMA_VERSION};
use super::resync::sync_directory_of;
use super::{Synchronous, lock_database};

/// How long `backup` keeps retrying while the source is busy (a checkpoint, say).
const BUSY_DEADLINE: Duration = Duration::from_secs(30);

/// What `migrate` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// The file did not exist before.
    pub created: bool,
    pub version_before: i64,
    pub version_after: i64,
}

/// What `backup` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackedUp {
    pub pages: i32,
    pub bytes: u64,
    pub schema_version: i64,
}

/// What `check` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    Ok {
        schema_version: i64,
        /// This binary's schema version (higher: the file wants `migrate`).
        current_version: i64,
    },
    /// Integrity or foreign-key problems, one line each.
    Problems(Vec<String>),
}

/// Create the file if needed and apply the migrations it has not seen, refusing foreign
/// files and a database a running server holds.
pub fn migrate(db: &Path) -> anyhow::Result<Migrated> {
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the directory {}", dir.display()))?;
    }
    let existed = db.exists();
    let _lock = lock_database(db).context("cannot migrate while a server uses the database")?;
    let mut conn = connection::open_writer(db, Synchronous::Full)?;
    let before = user_version(&conn)?;
    connection::migrate(&mut conn)?;
    let after = user_version(&conn)?;
    if !existed {
        // SQLite syncs the file, not the directory entry that makes it exist.
        sync_directory_of(db)?;
    }
    Ok(Migrated {
        created: !existed,
        version_before: before,
        version_after: after,
    })
}

/// Copy `db` to the new file `dest` with SQLite's online backup API, as one consistent
/// snapshot, while a server may keep writing. Never overwrites `dest`.
pub fn backup(db: &Path, dest: &Path) -> anyhow::Result<BackedUp> {
    let source = open_read_only(db)?;
    let version = check_is_hookq(&source, db)?;
    // Reserving the name with `create_new` is what makes "never overwrite" race-free.
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dest)
        .map_err(|err| match err.kind() {
            std::io::ErrorKind::AlreadyExists => anyhow::anyhow!(
                "{} already exists; refusing to overwrite it: choose a new file",
                dest.display()
            ),
            _ => anyhow::Error::new(err).context(format!("cannot create {}", dest.display())),
        })?;
    match copy(&source, dest) {
        Ok(pages) => Ok(BackedUp {
            pages,
            bytes: fs::metadata(dest).map(|m| m.len()).unwrap_or(0),
            schema_version: version,
        }),
        Err(err) => {
            for leftover in [
                dest.to_owned(),
                sidecar(dest, "-wal"),
                sidecar(dest, "-journal"),
            ] {
                let _ = fs::remove_file(leftover);
            }
            Err(err.context(format!("backup of {} failed", db.display())))
        }
    }
}

/// Copy every page in one step: one read transaction, hence one consistent snapshot. In WAL
/// mode that read does not block the server's writer.
fn copy(source: &Connection, dest: &Path) -> anyhow::Result<i32> {
    let mut target =
        Connection::open(dest).with_context(|| format!("cannot open {}", dest.display()))?;
    let pages = {
        let backup = Backup::new(source, &mut target).context("cannot start the backup")?;
        let started = Instant::now();
        loop {
            match backup.step(-1).context("backup step failed")? {
                StepResult::Done => break,
                StepResult::More => {}
                StepResult::Busy | StepResult::Locked => {
                    if started.elapsed() > BUSY_DEADLINE {
                        bail!("the database stayed busy for {BUSY_DEADLINE:?}");
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                // StepResult is non-exhaustive.
                _ => {}
            }
        }
        backup.progress().pagecount
    };
    // A self-contained file: no -wal needed beside it, and it opens read-only anywhere.
    target
        .pragma_update(None, "journal_mode", "DELETE")
        .context("cannot set the copy's journal mode")?;
    let quick: String = target
        .query_row("PRAGMA quick_check", [], |row| row.get(0))
        .context("cannot check the copy")?;
    if quick != "ok" {
        bail!("the copy fails quick_check: {quick}");
    }
    // SQLite synced the copy's pages; its name in the directory is ours to sync.
    sync_directory_of(dest)?;
    Ok(pages)
}

/// `PRAGMA integrity_check` and `PRAGMA foreign_key_check`, read-only.
pub fn check(db: &Path) -> anyhow::Result<Checked> {
    let conn = open_read_only(db)?;
    let checking = || -> anyhow::Result<(Vec<String>, Vec<String>, i64)> {
        let integrity = conn
            .prepare("PRAGMA integrity_check")?
            .query_map([], |row| row.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        let foreign_keys = conn
            .prepare("PRAGMA foreign_key_check")?
            .query_map([], |row| {
                let table: String = row.get(0)?;
                let rowid: Option<i64> = row.get(1)?;
                let parent: String = row.get(2)?;
                Ok(format!(
                    "foreign key violation: {table} row {} refers to a missing {parent} row",
                    rowid.map_or("?".into(), |r| r.to_string())
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok((integrity, foreign_keys, user_version(&conn)?))
    };
    let (integrity, foreign_keys, version) = match checking() {
        Ok(found) => found,
        // A file too damaged for the checks to run is a finding, not a failure to check.
        Err(err) if is_corruption(&err) => {
            return Ok(Checked::Problems(vec![format!("integrity: {err:#}")]));
        }
        Err(err) => return Err(err.context(format!("cannot check {}", db.display()))),
    };
    let integrity_ok = integrity.len() == 1 && integrity[0] == "ok";
    if integrity_ok && foreign_keys.is_empty() {
        return Ok(Checked::Ok {
            schema_version: version,
            current_version: SCHEMA_VERSION,
        });
    }
    let mut problems = Vec::new();
    if !integrity_ok {
        problems.extend(integrity.iter().map(|p| format!("integrity: {p}")));
    }
    problems.extend(foreign_keys);
    Ok(Checked::Problems(problems))
}

fn is_corruption(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        matches!(
            cause
                .downcast_ref::<rusqlite::Error>()
                .and_then(rusqlite::Error::sqlite_error_code),
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
        )
    })
}

fn open_read_only(db: &Path) -> anyhow::Result<Connection> {
    if !db.is_file() {
        bail!("no database at {}", db.display());
    }
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("cannot open {} read-only", db.display()))?;
    conn.busy_timeout(Duration::from_secs(5))?;
    Ok(conn)
}

/// The schema version of a hookq database; refuse anything else.
fn check_is_hookq(conn: &Connection, db: &Path) -> anyhow::Result<i64> {
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<_, _>>()
        })
        .with_context(|| format!("{} is not a usable SQLite database", db.display()))?;
    let version = user_version(conn)?;
    if version == 0 || !tables.iter().any(|t| t == "jobs") || !tables.iter().any(|t| t == "queues")
    {
        bail!("{} is not a hookq database", db.display());
    }
    Ok(version)
}

fn user_version(conn: &Connection) -> anyhow::Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
        .context("cannot read the schema version")
}

/// `path` with `suffix` appended to its file name (`db-wal`).
fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}
