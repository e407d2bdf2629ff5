//! `cargo test`'s second run of the integration suite: the `api` test binary again, with
//! `HOOKQ_TEST_BACKEND=postgres`, so every server and store fixture in it runs on a fresh
//! PostgreSQL database of the cluster `HOOKQ_TEST_POSTGRES_URL` names. One suite, two
//! backends: they cannot drift apart.
//!
//! Cargo builds every test target before it runs any, and runs test binaries one after the
//! other, so the two runs never compete for the cores. The `api` binary is the one of this
//! build: each candidate says which build it belongs to ([`build_identity`]), never guessed
//! from file times. Arguments (a filter, `--nocapture`, …) are passed on.
//! Without the variable it says "skipped" (and fails under `CI=true`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

#[path = "build_identity.rs"]
mod build_identity;
#[path = "skipped.rs"]
mod skipped;

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
        skipped::record(
            "PostgreSQL, for the whole suite's second run (apt-get install postgresql; eval \
             \"$(bash tests/postgres/cluster.sh start)\")",
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
        // Its skips are this run's.
        .env(skipped::RUN_VARIABLE, skipped::run_id())
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

/// The `api-<hash>` executable of this build, beside this one (cargo's `deps` directory).
/// Each candidate is asked for its build (its `build_identity` test prints it): the
/// checkout, version, profile and features it was compiled with. Cargo names a test binary
/// after its configuration, so one build leaves one `api` binary there; the others (another
/// configuration's, another checkout's sharing the target directory, an old one without
/// the test) answer something else or nothing. Two of this build (left by a change of
/// dependencies or toolchain) are refused rather than guessed between.
fn api_test_binary() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("where am I: {e}"))?;
    let deps = me.parent().ok_or("this binary has no directory")?;
    let entries = std::fs::read_dir(deps).map_err(|e| format!("{}: {e}", deps.display()))?;
    let candidates: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| is_api_test_binary(path))
        .collect();
    let wanted = build_identity::identity();
    let mut ours: Vec<PathBuf> = candidates
        .iter()
        .filter(|path| identity_of(path).as_deref() == Some(wanted.as_str()))
        .cloned()
        .collect();
    match ours.len() {
        1 => Ok(ours.remove(0)),
        0 => Err(format!(
            "no `api` test binary of this build ({wanted}) among the {} in {}: run `cargo \
             test`, which builds both",
            candidates.len(),
            deps.display()
        )),
        _ => Err(format!(
            "{} `api` test binaries of this build ({wanted}) in {}: {ours:?}; `cargo clean` \
             removes the stale one",
            ours.len(),
            deps.display()
        )),
    }
}

/// The build `api` test binary `path` says it belongs to.
fn identity_of(path: &Path) -> Option<String> {
    let output = Command::new(path)
        .args([
            "build_identity",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        // libtest may print `test build_identity ... ` before it on the same line.
        .find_map(|line| line.split_once(build_identity::MARKER))
        .map(|(_, identity)| identity.trim().to_owned())
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
