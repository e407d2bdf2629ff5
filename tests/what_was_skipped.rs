//! The last word of this package's `cargo test`: which tests were skipped for a missing
//! prerequisite, and how to run them (see `skipped.rs`). Cargo runs test binaries in name
//! order, so this one comes after `api`, `power_loss` and `suite_on_postgres`.

use std::collections::BTreeMap;
use std::time::Duration;

#[path = "skipped.rs"]
mod skipped;

fn main() {
    let runs = skipped::runs_dir();
    let this_run = runs.join(skipped::run_id());
    let records = std::fs::read_to_string(this_run.join("records")).unwrap_or_default();
    let mut needs: BTreeMap<&str, usize> = BTreeMap::new();
    for line in records.lines().filter(|line| !line.is_empty()) {
        *needs.entry(line).or_default() += 1;
    }
    if needs.is_empty() {
        eprintln!("\nskipped tests: none (every prerequisite was here)\n");
    } else {
        let total: usize = needs.values().sum();
        let each: Vec<String> = needs
            .iter()
            .map(|(needs, count)| format!("{count} needing {needs}"))
            .collect();
        eprintln!(
            "\nskipped tests: {total} did not run, so the counts above are not all of them: {}\n",
            each.join("; ")
        );
    }
    let _ = std::fs::remove_dir_all(&this_run);
    forget_old_runs(&runs);
}

/// Runs that never reached this target (a filtered or failed `cargo test`) leave their
/// records: gone after a day.
fn forget_old_runs(runs: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return;
    };
    let day = Duration::from_secs(24 * 3600);
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|at| at.elapsed().ok())
            .is_some_and(|age| age > day);
        if old {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
