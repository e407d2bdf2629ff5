#!/usr/bin/env bash
# Crash test: under continuous load, kill -9 hookq at random moments, restart it on the
# same database, and check that every job that got a 201 was delivered at least once.
# Everything stays on 127.0.0.1; it takes 20-40 s.
# The program is examples/chaos/; arguments pass through, e.g.
#   tests/chaos/run.sh --kills 10 --producers 8 --seed 42
#   tests/chaos/run.sh --db postgres://hookq@127.0.0.1:5432/postgres --nodes 3   # a cluster
#   tests/chaos/run.sh --power-loss 100 --fsync-fail 20   # power cuts (root, /dev/fuse)
#   tests/chaos/run.sh --kills 10 --pull 8   # 8 pull consumers lease and ack instead
#   tests/chaos/run.sh --kills 10 --topic 4  # publish to a topic of 4 subscriber queues
#   eval "$(bash tests/postgres/cluster.sh start)"   # a cluster the run may stop and start:
#   tests/chaos/run.sh --db "$HOOKQ_TEST_POSTGRES_URL" --pg-dir "$HOOKQ_TEST_POSTGRES_DIR" \
#       --nodes 3 --kills 6 --pg-restarts 4 --failover   # (the failover kills that cluster)
# Exit status 0 = no acknowledged job lost and duplicates within the in-flight bound.
# A short power-loss run is part of `cargo test` (tests/power_loss.rs); the rest is not.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --quiet --bin hookq --example chaos
exec cargo run --quiet --example chaos -- "$@"
