#!/usr/bin/env bash
# Crash test (not part of `cargo test`): under continuous load, kill -9 hookq at random
# moments, restart it on the same database, and check that every job that got a 201 was
# delivered at least once. Everything stays on 127.0.0.1; it takes 20-40 s.
# The program is examples/chaos.rs; arguments pass through, e.g.
#   tests/chaos/run.sh --kills 10 --producers 8 --seed 42
#   tests/chaos/run.sh --db postgres://hookq@127.0.0.1:5432/postgres --nodes 3   # a cluster
# Exit status 0 = no acknowledged job lost and duplicates within the in-flight bound.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --quiet --bin hookq --example chaos
exec cargo run --quiet --example chaos -- "$@"
