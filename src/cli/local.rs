//! The subcommands that work on the database file itself, no server needed: `migrate`
//! (the server must be stopped), `backup` and `check` (safe beside a running server). The
//! store does the work ([`crate::store::sqlite::files`]); this prints what it found.

use std::path::Path;

use super::{CliResult, Outcome};
use crate::store::sqlite::files::{self, Checked};

/// `hookq migrate`.
pub fn migrate(db: &Path) -> CliResult<Outcome> {
    let done = files::migrate(db)?;
    let what = if done.created {
        "created".to_owned()
    } else if done.version_before == done.version_after {
        "up to date".to_owned()
    } else {
        format!("migrated from version {}", done.version_before)
    };
    println!(
        "{}: schema version {} ({what})",
        db.display(),
        done.version_after
    );
    Ok(Outcome::Ok)
}

/// `hookq backup`.
/// `hookq migrate --db postgres://…`: bring a PostgreSQL database's hookq schema up to
/// date (what every node also does at start, under the same lock).
pub fn migrate_postgres(url: &str) -> CliResult<Outcome> {
    use crate::store::postgres;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)?;
    let done = runtime.block_on(async {
        let pool = postgres::connect(url, 1).await?;
        postgres::migrate(&pool).await
    })?;
    let what = match (done.from, done.to) {
        (0, _) => "created".to_owned(),
        (from, to) if from == to => "up to date".to_owned(),
        (from, _) => format!("migrated from version {from}"),
    };
    println!(
        "{}: hookq schema version {} ({what})",
        postgres::connect::redacted(url),
        done.to
    );
    Ok(Outcome::Ok)
}

pub fn backup(db: &Path, dest: &Path) -> CliResult<Outcome> {
    let copy = files::backup(db, dest)?;
    println!(
        "backed up {} to {} ({} pages, {} KiB, schema version {})",
        db.display(),
        dest.display(),
        copy.pages,
        copy.bytes.div_ceil(1024),
        copy.schema_version
    );
    Ok(Outcome::Ok)
}

/// `hookq check`: exits non-zero when problems are found.
pub fn check(db: &Path) -> CliResult<Outcome> {
    match files::check(db)? {
        Checked::Ok {
            schema_version,
            current_version,
        } => {
            println!(
                "{}: ok (integrity_check ok, no foreign key violations, schema version {schema_version})",
                db.display()
            );
            if schema_version < current_version {
                println!(
                    "note: this hookq uses schema version {current_version}; run `hookq migrate`"
                );
            }
            Ok(Outcome::Ok)
        }
        Checked::Problems(problems) => {
            println!("{}: problems found", db.display());
            for problem in &problems {
                println!("{problem}");
            }
            Ok(Outcome::Failed)
        }
    }
}
