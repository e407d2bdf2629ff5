#!/usr/bin/env bash
# Compatibility test: the official `hyper-connect` npm client against a real hookq.
#
#   compat/hyper-connect/run.sh [path/to/hookq]    (default: target/release/hookq)
#
# Builds nothing: pass a built binary. Installs the pinned Node packages (npm ci, which
# needs only the npm registry), starts two hookq servers on free loopback ports (one open,
# one with HOOKQ_API_KEY), runs `node --test`, stops the servers, and exits non-zero on any
# failure. Every step is bounded in time; all traffic stays on 127.0.0.1.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${1:-$root/target/release/hookq}"
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac

# The servers get exactly the settings below, whatever the caller's environment says.
for var in $(compgen -e); do
  case "$var" in HOOKQ_LOG|HOOKQ_LOG_FORMAT) ;; HOOKQ_*) unset "$var" ;; esac
done

log() { printf '[compat/hyper-connect] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ -x "$bin" ] || die "no hookq binary at $bin (build it first: cargo build --release)"
command -v node >/dev/null || die "node is not installed"
command -v npm >/dev/null || die "npm is not installed"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || die "node >= 20 is required (found $(node --version))"

work="$(mktemp -d "${TMPDIR:-/tmp}/hookq-compat.XXXXXX")"
pids=()
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    # Wait at most ~5 s for a graceful exit, then force it.
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ "$status" -ne 0 ]; then
    for f in "$work"/*.log; do
      [ -f "$f" ] || continue
      log "---- last lines of $(basename "$f") ----"
      tail -n 40 "$f" >&2 || true
    done
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "installing Node packages (npm ci)"
(cd "$here" && timeout 300 npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"

free_port() {
  node -e '
    const s = require("net").createServer();
    s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

# start_hookq NAME [ENV=VALUE...]: start a server on a free port, wait for /healthz, and
# set $started_port. A few tries, in case another process takes the port in between.
start_hookq() {
  local name="$1"; shift
  local try port pid
  for try in 1 2 3; do
    port="$(free_port)"
    env HOOKQ_MAX_ATTEMPTS=2 HOOKQ_BACKOFF=50ms HOOKQ_DELIVERY_TIMEOUT=10s \
        HOOKQ_SHUTDOWN_GRACE=2s HOOKQ_LOG="${HOOKQ_LOG:-info}" NO_COLOR=1 "$@" \
      "$bin" --db "$work/$name.db" --listen "127.0.0.1:$port" >>"$work/$name.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
      if ! kill -0 "$pid" 2>/dev/null; then break; fi
      if node -e '
          fetch(process.argv[1], { signal: AbortSignal.timeout(1000) })
            .then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' \
          "http://127.0.0.1:$port/healthz" 2>/dev/null; then
        pids+=("$pid")
        started_port="$port"
        return 0
      fi
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    log "hookq ($name) did not come up on port $port (try $try)"
  done
  return 1
}

key="compat-$(node -p 'require("crypto").randomBytes(16).toString("hex")')"
start_hookq open || die "could not start the open hookq"
open_port="$started_port"
# With an API key the SSRF guard blocks loopback targets; the test workers listen on loopback.
start_hookq auth HOOKQ_API_KEY="$key" HOOKQ_TARGET_ALLOWLIST="127.0.0.0/8,::1/128" \
  || die "could not start hookq with an API key"
auth_port="$started_port"
log "hookq open on 127.0.0.1:$open_port, with API key on 127.0.0.1:$auth_port"

log "running node --test"
cd "$here"
HOOKQ_OPEN_URL="http://127.0.0.1:$open_port" \
HOOKQ_AUTH_URL="http://127.0.0.1:$auth_port" \
HOOKQ_KEY="$key" \
  timeout 300 node --test --test-concurrency=1 --test-timeout=60000 test/*.test.js
