#!/usr/bin/env python3
"""A hookq worker in Python, standard library only.

    python3 examples/python_worker.py --listen 127.0.0.1:8080 --secret s3cret
    WORKER_SECRET=s3cret python3 examples/python_worker.py

Verifies X-HYPER-SIGNATURE: t=<unix ms>,sig=<hex HMAC-SHA256(secret, t + "." + body)>
over the raw request body, within a 5 minute tolerance, and answers 200 or 401.
"""
import argparse
import hashlib
import hmac
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOLERANCE_MS = 5 * 60 * 1000
MAX_BODY = 1024 * 1024


def verify(secret: bytes, header: str, body: bytes, now_ms: int) -> bool:
    """True if `header` is a valid signature of `body` made within the tolerance."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    t, sig = parts.get("t", ""), parts.get("sig", "")
    if not (t.isascii() and t.isdigit()) or abs(now_ms - int(t)) > TOLERANCE_MS:
        return False
    expected = hmac.new(secret, t.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), sig.encode("utf-8", "replace"))  # constant time


class Worker(BaseHTTPRequestHandler):
    secret: bytes = b""
    done: set = set()  # job ids already processed (at-least-once delivery)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self.answer(413, {"ok": False, "msg": "too large"})
        body = self.rfile.read(length)  # verify these exact bytes, before parsing
        header = self.headers.get("X-HYPER-SIGNATURE", "")
        if not verify(self.secret, header, body, int(time.time() * 1000)):
            return self.answer(401, {"ok": False, "msg": "bad or stale signature"})

        job_id = self.headers.get("X-Hookq-Job-Id")
        if job_id in self.done:
            return self.answer(200, {"ok": True, "duplicate": True})
        job = json.loads(body)
        attempt = self.headers.get("X-Hookq-Attempt")
        print(f"job {job_id} attempt {attempt} (signature verified {header}): {job}", flush=True)
        # ... do the work; answer non-2xx (or raise) to have hookq retry it.
        self.done.add(job_id)
        self.answer(200, {"ok": True})

    def answer(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:8080", help="HOST:PORT (port 0: any)")
    parser.add_argument(
        "--secret",
        default=os.environ.get("WORKER_SECRET"),
        help="the queue's secret [default: $WORKER_SECRET]",
    )
    args = parser.parse_args()
    if not args.secret:
        sys.exit("a secret is required (--secret or WORKER_SECRET): the queue's secret")
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        sys.exit(f"--listen takes HOST:PORT, not {args.listen!r}")
    Worker.secret = args.secret.encode()
    server = ThreadingHTTPServer((host.strip("[]"), int(port)), Worker)
    bound_host, bound_port = server.server_address[:2]
    print(f"worker listening on http://{bound_host}:{bound_port}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
