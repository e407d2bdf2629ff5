#!/usr/bin/env bash
# Fuzz a live hookq against its own OpenAPI document with Schemathesis (PyPI).
#
# Builds the release binary, installs Schemathesis into a venv under target/, starts hookq on
# a free loopback port with a fresh database and an API key, runs every operation of
# GET /openapi.json for a bounded number of examples, stops the server, and exits non-zero on
# any failure: a 5xx, an undocumented status code or content type, or a response that does
# not match its documented schema.
#
#   tests/schemathesis/run.sh                  # 50 examples per operation
#   MAX_EXAMPLES=200 tests/schemathesis/run.sh
#
# Dispatch is off: fuzzed queues get arbitrary target URLs, and nothing should be delivered
# to them. Report files land in target/schemathesis/.
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
MAX_EXAMPLES=${MAX_EXAMPLES:-50}
TIME_LIMIT=${TIME_LIMIT:-270} # seconds for the Schemathesis run itself
SCHEMATHESIS_VERSION=${SCHEMATHESIS_VERSION:->=4.32,<5}
VENV=$ROOT/target/schemathesis-venv
OUT=$ROOT/target/schemathesis

if [[ ! -x $VENV/bin/st ]]; then
    echo "==> installing schemathesis ($SCHEMATHESIS_VERSION) into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "schemathesis$SCHEMATHESIS_VERSION"
fi
"$VENV/bin/st" --version

echo "==> cargo build --release"
cargo build --release --quiet --bin hookq
BIN=$ROOT/target/release/hookq

WORK=$(mktemp -d)
PID=
cleanup() {
    if [[ -n $PID ]] && kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID"
        wait "$PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
KEY=schemathesis-$(python3 -c 'import secrets; print(secrets.token_hex(16))')
BASE=http://127.0.0.1:$PORT

echo "==> starting hookq on $BASE"
HOOKQ_API_KEY=$KEY HOOKQ_DISPATCH=off RUST_LOG=${RUST_LOG:-warn} \
    "$BIN" --db "$WORK/hookq.db" --listen "127.0.0.1:$PORT" >"$WORK/hookq.log" 2>&1 &
PID=$!
for _ in $(seq 100); do
    if curl -sf "$BASE/healthz" >/dev/null; then break; fi
    if ! kill -0 "$PID" 2>/dev/null; then
        cat "$WORK/hookq.log"
        echo "hookq exited before answering /healthz" >&2
        exit 1
    fi
    sleep 0.1
done
curl -sf "$BASE/healthz" >/dev/null

mkdir -p "$OUT"
echo "==> schemathesis: $MAX_EXAMPLES examples per operation"
status=0
# Run from $OUT so Schemathesis's own cache (.schemathesis/) stays under target/.
cd "$OUT"
timeout --kill-after=10 "$TIME_LIMIT" "$VENV/bin/st" run "$BASE/openapi.json" \
    --header "Authorization: Bearer $KEY" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --max-examples "$MAX_EXAMPLES" \
    --seed "${SEED:-1}" \
    --workers 2 \
    --request-timeout 10 \
    --generation-database none \
    --no-color \
    --report junit,ndjson --report-dir "$OUT" || status=$?
cd "$ROOT"

# An internal error is logged even when its 500 goes unnoticed.
if grep -q "request failed" "$WORK/hookq.log"; then
    echo "hookq logged internal errors:" >&2
    grep "request failed" "$WORK/hookq.log" | head -20 >&2
    status=1
fi
cp "$WORK/hookq.log" "$OUT/hookq.log"
if [[ $status -eq 124 ]]; then
    echo "schemathesis did not finish within ${TIME_LIMIT}s" >&2
fi
exit "$status"
