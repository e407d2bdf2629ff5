#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests, from the Debian packages' binaries.
#
#   eval "$(bash tests/postgres/cluster.sh start)"   # exports HOOKQ_TEST_POSTGRES_URL and _DIR
#   cargo test                                       # the PostgreSQL tests run against it
#   bash tests/postgres/cluster.sh stop "$HOOKQ_TEST_POSTGRES_DIR"
#
#   bash tests/postgres/cluster.sh crash DIR    # kill the server (immediate stop), keep the data
#   bash tests/postgres/cluster.sh halt DIR     # stop it cleanly (fast stop: sessions are told)
#   bash tests/postgres/cluster.sh resume DIR   # start it again on the same port
#   bash tests/postgres/cluster.sh standby DIR [async]  # a synchronous (or async) standby:
#                                               # exports HOOKQ_TEST_STANDBY_URL and _DIR
#   bash tests/postgres/cluster.sh promote SDIR # the standby becomes a primary
#
# The cluster lives in a fresh temporary directory, listens on 127.0.0.1 on a free port,
# trusts local connections (user `hookq`), and skips fsync: it holds test data only. As
# root it runs as `nobody` (PostgreSQL refuses to run as root).
set -euo pipefail

bin_dir() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -x "$dir/initdb" ] || { echo "PostgreSQL is not installed (Debian package postgresql)" >&2; exit 1; }
    echo "$dir"
}

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}

start_server() {
    local dir=$1
    as_owner "$(bin_dir)/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
        -o "-p $(cat "$dir/port") -c listen_addresses=127.0.0.1 -k $dir -c fsync=off -c full_page_writes=off -c max_connections=300" \
        >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
}

case "${1:-}" in
start)
    bin=$(bin_dir)
    dir=$(mktemp -d /tmp/hookq-pg.XXXXXX)
    chmod 755 "$dir"
    [ "$(id -u)" -eq 0 ] && chown nobody "$dir"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_owner "$bin/initdb" -D "$dir/data" -U hookq --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    echo "$port" >"$dir/port"
    start_server "$dir"
    echo "export HOOKQ_TEST_POSTGRES_URL=postgres://hookq@127.0.0.1:$port/postgres"
    echo "export HOOKQ_TEST_POSTGRES_DIR=$dir"
    ;;
crash)
    dir=${2:?usage: cluster.sh crash DIR}
    as_owner "$(bin_dir)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
    ;;
halt)
    dir=${2:?usage: cluster.sh halt DIR}
    as_owner "$(bin_dir)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    ;;
resume)
    dir=${2:?usage: cluster.sh resume DIR}
    start_server "$dir"
    ;;
standby)
    # Streaming replication from DIR's server, made synchronous: a commit there returns
    # only once this standby has flushed it (synchronous_commit=on, the default), so a
    # failover to it loses no acknowledged commit.
    primary=${2:?usage: cluster.sh standby DIR [async]}
    bin=$(bin_dir)
    pport=$(cat "$primary/port")
    dir=$(mktemp -d /tmp/hookq-pg-standby.XXXXXX)
    chmod 755 "$dir"
    [ "$(id -u)" -eq 0 ] && chown nobody "$dir"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    echo "$port" >"$dir/port"
    as_owner "$bin/pg_basebackup" -D "$dir/data" -R -X stream --no-sync \
        -d "host=127.0.0.1 port=$pport user=hookq application_name=hookq_standby" \
        >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; exit 1; }
    start_server "$dir"
    # `async`: left asynchronous, as streaming replication is by default (a failover may
    # then lose what the primary committed but the standby had not received).
    wanted=sync
    if [ "${3:-}" = async ]; then
        wanted=async
    else
        as_owner "$bin/psql" -h 127.0.0.1 -p "$pport" -U hookq -d postgres -qAt \
            -c "ALTER SYSTEM SET synchronous_standby_names = 'hookq_standby'" \
            -c "SELECT pg_reload_conf()" >/dev/null
    fi
    for _ in $(seq 1 100); do
        state=$(as_owner "$bin/psql" -h 127.0.0.1 -p "$pport" -U hookq -d postgres -qAt \
            -c "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'hookq_standby'")
        [ "$state" = "$wanted" ] && break
        sleep 0.1
    done
    [ "$state" = "$wanted" ] || { echo "the standby did not stream ($wanted)" >&2; exit 1; }
    echo "export HOOKQ_TEST_STANDBY_URL=postgres://hookq@127.0.0.1:$port/postgres"
    echo "export HOOKQ_TEST_STANDBY_DIR=$dir"
    ;;
promote)
    dir=${2:?usage: cluster.sh promote SDIR}
    as_owner "$(bin_dir)/pg_ctl" -D "$dir/data" -w promote >/dev/null
    ;;
stop)
    dir=${2:?usage: cluster.sh stop DIR}
    as_owner "$(bin_dir)/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
*)
    echo "usage: cluster.sh start | stop DIR | crash DIR | halt DIR | resume DIR | standby DIR | promote SDIR" >&2
    exit 2
    ;;
esac
