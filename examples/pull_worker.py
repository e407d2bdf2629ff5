#!/usr/bin/env python3
"""A hookq pull worker in Python, standard library only: no inbound HTTP needed.

    python3 examples/pull_worker.py --queue thumbnails
    HOOKQ_URL=https://hookq.example.com HOOKQ_API_KEY=hq_… python3 examples/pull_worker.py --queue thumbnails

Leases up to 10 jobs at a time from a pull queue (a queue created without a target),
waiting up to 20 s for one, and acknowledges each job it handled; a job whose handling
raised is nacked with the error (retried after the queue's backoff, dead-lettered once its
attempts are spent). Delivery is at-least-once: make `handle` idempotent on the job id.
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request


def handle(job_id: str, attempt: int, job: dict) -> None:
    """The work. Raise to fail this attempt."""
    print(f"job {job_id} attempt {attempt}: {json.dumps(job)}", flush=True)


def call(base: str, key: str | None, path: str, body: dict) -> dict:
    request = urllib.request.Request(
        base.rstrip("/") + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue", required=True)
    parser.add_argument("--url", default=os.environ.get("HOOKQ_URL", "http://127.0.0.1:6363"))
    parser.add_argument("--api-key", default=os.environ.get("HOOKQ_API_KEY"))
    parser.add_argument("--wait", default="20s", help="how long one lease waits for a job")
    args = parser.parse_args()
    queue = f"/queue/{args.queue}"
    print(f"leasing from {args.url}{queue}", flush=True)
    while True:
        try:
            leased = call(args.url, args.api_key, f"{queue}/_lease", {"max": 10, "wait": args.wait})
        except urllib.error.HTTPError as e:
            print(f"lease refused: HTTP {e.code} {e.read().decode(errors='replace')}", file=sys.stderr)
            return 1
        for job in leased["jobs"]:
            answer = {"leaseId": job["leaseId"]}
            try:
                handle(job["id"], job["attempt"], job["job"])
                verb = "ack"
            except Exception as error:  # this attempt failed: say why
                verb, answer["error"] = "nack", repr(error)[:4096]
            try:
                call(args.url, args.api_key, f"{queue}/{job['id']}/_{verb}", answer)
            except urllib.error.HTTPError as e:  # 409: the lease expired meanwhile
                print(f"{verb} of {job['id']} refused: HTTP {e.code}", file=sys.stderr)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
