//! What one `cargo test` run skipped, told once at its end. A test that skips for a missing
//! prerequisite (Chromium, PostgreSQL, the compatibility packages, python3, FUSE) records
//! what it needed here ([`record`]); the `what_was_skipped` target, which cargo runs after
//! this package's other test binaries, prints one line naming them and how to enable them,
//! so "415 passed" is not read as "all of them". Under `CI=true` nothing skips: those tests
//! fail instead.
//!
//! A run is the `cargo test` process: every test binary it starts has it as parent (the
//! suite's second run on PostgreSQL passes it on in `HOOKQ_TEST_RUN`), so records of
//! different runs, or of a run that stopped early, never mix.
#![allow(dead_code, reason = "each test binary uses a part of this module")]

use std::io::Write;
use std::path::PathBuf;

/// The variable through which a runner that starts a test binary itself names the run.
pub const RUN_VARIABLE: &str = "HOOKQ_TEST_RUN";

/// This run's id: the `cargo test` process's.
pub fn run_id() -> String {
    std::env::var(RUN_VARIABLE).unwrap_or_else(|_| std::os::unix::process::parent_id().to_string())
}

/// Where every run's records are, one directory per run.
pub fn runs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("skipped")
}

/// Record that a test was skipped for want of `needs` (what it is and how to get it, e.g.
/// `PostgreSQL (eval "$(bash tests/postgres/cluster.sh start)")`). Best effort: a record
/// that cannot be written only leaves the summary short.
pub fn record(needs: &str) {
    let dir = runs_dir().join(run_id());
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("records"))?;
        // One write of one line: appends of concurrent tests do not interleave.
        file.write_all(format!("{}\n", needs.replace('\n', " ")).as_bytes())
    });
    if let Err(err) = written {
        eprintln!("cannot record a skipped test: {err}");
    }
}
