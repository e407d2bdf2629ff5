#!/usr/bin/env bash
# A curl walkthrough of hookq's API: create a queue, enqueue jobs, list them.
#
#   examples/enqueue.sh
#
# Settings (environment):
#   HOOKQ_URL      hookq's address               (default http://127.0.0.1:6363)
#   HOOKQ_API_KEY  the server's API key, if any  (sent as Authorization: Bearer)
#   QUEUE          queue name                    (default orders)
#   WORKER_URL     where jobs are delivered      (default http://127.0.0.1:8080/jobs)
#   QUEUE_SECRET   signing secret for the queue  (default s3cret)
set -euo pipefail

HOOKQ_URL="${HOOKQ_URL:-http://127.0.0.1:6363}"
QUEUE="${QUEUE:-orders}"
WORKER_URL="${WORKER_URL:-http://127.0.0.1:8080/jobs}"
QUEUE_SECRET="${QUEUE_SECRET:-s3cret}"

auth=()
[ -n "${HOOKQ_API_KEY:-}" ] && auth=(-H "Authorization: Bearer $HOOKQ_API_KEY")

# hq METHOD PATH [JSON]: one API call; prints the response and its status.
hq() {
  local method="$1" path="$2" data="${3:-}"
  echo "\$ curl -X $method $HOOKQ_URL$path ${data:+-d '$data'}"
  curl -sS --max-time 10 -X "$method" "${auth[@]}" \
    -H 'Content-Type: application/json' ${data:+--data-binary "$data"} \
    -w '  (HTTP %{http_code})\n' "$HOOKQ_URL$path"
  echo
}

echo "# 1. Create the queue: hookq POSTs its jobs to the target, signed with the secret."
echo "#    (201 Created; 409 if it already exists.)"
hq PUT "/queue/$QUEUE" "{\"target\":\"$WORKER_URL\",\"secret\":\"$QUEUE_SECRET\"}"

echo "# 2. Enqueue jobs: any JSON object. 201 {ok, id} once it is safely on disk."
hq POST "/queue/$QUEUE" '{"orderId":42,"items":[{"sku":"A-1","qty":2}],"total":19.99}'
hq POST "/queue/$QUEUE" '{"orderId":43,"note":"héllo ✓","total":0.1}'

echo "# 3. Jobs not yet delivered (waiting, in flight, or scheduled for a retry)."
hq GET "/queue/$QUEUE?status=READY"

sleep 1
echo "# 4. Jobs whose attempts are spent, with the worker's last answer as \"error\"."
hq GET "/queue/$QUEUE?status=ERROR"

echo "# 5. All queues. (Delete one, and all its jobs: curl -X DELETE $HOOKQ_URL/queue/$QUEUE)"
hq GET "/queue"
