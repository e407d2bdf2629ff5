//! `cargo test`'s second run of the integration suite: the `api` test binary again, with
//! `HOOKQ_TEST_BACKEND=postgres`, so every server and store fixture in it runs on a fresh
//! PostgreSQL database of the cluster `HOOKQ_TEST_POSTGRES_URL` names. One suite, two
//! backends: they cannot drift apart.
//!
//! Cargo builds every test target before it runs any, and runs test binaries one after the
//! other, so the `api` binary found here is the one this `cargo test` built, and the two
//! runs never compete for the cores. Arguments (a filter, `--nocapture`, …) are passed on.
//! Without the variable it says "skipped" (and fails under `CI=true`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::SystemTime;

fn main() -> ExitCode {
    if std::env::var_os("HOOKQ_TEST_POSTGRES_URL").is_none() {
        if std::env::var("CI").as_deref() == Ok("true") {
            eprintln!(
                "the suite on PostgreSQL needs HOOKQ_TEST_POSTGRES_URL and CI=true, so it may \
                 not skip (.ci/run starts a cluster)"
            );
            return ExitCode::FAILURE;
        }
        eprintln!(
            "skipped: the suite on PostgreSQL needs a cluster: eval \"$(bash \
             tests/postgres/cluster.sh start)\" first"
        );
        return ExitCode::SUCCESS;
    }
    let suite = match api_test_binary() {
        Ok(path) => path,
        Err(e) => {
            eprintln!("the suite on PostgreSQL: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("the integration suite on PostgreSQL: {}", suite.display());
    let status = Command::new(&suite)
        .args(std::env::args_os().skip(1))
        // The PostgreSQL-only tests already ran, on PostgreSQL, in the first run.
        .args(["--skip", "postgres"])
        .env("HOOKQ_TEST_BACKEND", "postgres")
        .status();
    match status {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => {
            eprintln!("the integration suite failed on PostgreSQL ({status})");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("cannot run {}: {e}", suite.display());
            ExitCode::FAILURE
        }
    }
}

/// The newest `api-<hash>` executable beside this one (cargo's `deps` directory).
fn api_test_binary() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("where am I: {e}"))?;
    let deps = me.parent().ok_or("this binary has no directory")?;
    let entries = std::fs::read_dir(deps).map_err(|e| format!("{}: {e}", deps.display()))?;
    entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| is_api_test_binary(path))
        .filter_map(|path| Some((modified(&path)?, path)))
        .max()
        .map(|(_, path)| path)
        .ok_or_else(|| {
            format!(
                "no `api` test binary in {}: run `cargo test` (it builds both)",
                deps.display()
            )
        })
}

/// `api-<16 hex digits>`, with no extension (not the `.d` file cargo writes beside it).
fn is_api_test_binary(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let name = name.strip_suffix(".exe").unwrap_or(name);
    name.strip_prefix("api-")
        .is_some_and(|hash| hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
        && path.is_file()
}

fn modified(path: &Path) -> Option<SystemTime> {
    path.metadata().and_then(|m| m.modified()).ok()
}
