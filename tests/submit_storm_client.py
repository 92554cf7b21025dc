#!/usr/bin/env python3
"""Submit storm: CLIENTS threads submit REQUESTS jobs in all to a gpufleet controller.

Each submission has its own request id (PREFIX-<client>-<n>). A submission that gets no answer
(connection refused or reset, the controller killed, a 5xx) is retried with the same request id
until it is answered, for up to --deadline seconds in all. Each client appends one line per
answered submission to LOG_DIR/client-<c>.log:

    <request id> <http status> <job id> <created true|false> <attempts>

and the run ends with a JSON summary on stdout. Exit status 0 when every submission got a 2xx.

--url may list several controllers (URL1,URL2,...): a client that gets no answer or a 5xx from
one goes to the leader a 503 names (X-Gpufleet-Leader) when it is in the list, else to the next.
"""
import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--prefix", default="storm")
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--deadline", type=float, default=240.0)
    ap.add_argument("--job", default='{"name": "storm", "resources": {"gpus": 1}, "run": "true"}')
    args = ap.parse_args()

    urls = [urllib.parse.urlparse(x) for x in args.url.split(",")]
    token = open(args.token_file).read().strip()
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    job = json.loads(args.job)
    end = time.monotonic() + args.deadline
    lock = threading.Lock()
    totals = {"answered": 0, "retried": 0, "no_answer_attempts": 0, "created_false": 0, "rejected": 0,
              "gave_up": 0}
    rejected = []

    def client(c):
        conn = None
        at = 0  # index in urls of the controller this client talks to
        log = open(os.path.join(args.log_dir, "client-%d.log" % c), "a", buffering=1)
        mine = range(c, args.requests, args.clients)
        for n, _ in enumerate(mine):
            rid = "%s-%d-%d" % (args.prefix, c, n)
            body = json.dumps({"request_id": rid, "job": dict(job, name="%s-%d-%d" % (job["name"], c, n))})
            attempts = 0
            while True:
                attempts += 1
                status, reply = 0, None
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection(urls[at].hostname, urls[at].port, timeout=30)
                    conn.request("POST", "/v1/jobs", body=body, headers=headers)
                    r = conn.getresponse()
                    data = r.read()
                    status = r.status
                    leader = r.getheader("X-Gpufleet-Leader", "")
                    reply = json.loads(data) if data else None
                except (OSError, http.client.HTTPException, ValueError):
                    if conn is not None:
                        conn.close()
                    conn = None
                    leader = ""
                if status == 0 or status >= 500:
                    named = [i for i, x in enumerate(urls) if leader and x.geturl() == leader]
                    nxt = named[0] if named else (at + 1) % len(urls)
                    if nxt != at:
                        at = nxt
                        if conn is not None:
                            conn.close()
                        conn = None
                if 200 <= status < 300:
                    created = bool(reply.get("created"))
                    job_id = reply["jobs"][0]["id"]
                    log.write("%s %d %d %s %d\n" % (rid, status, job_id, "true" if created else "false", attempts))
                    with lock:
                        totals["answered"] += 1
                        totals["retried"] += attempts > 1
                        totals["created_false"] += not created
                    break
                if 400 <= status < 500:
                    with lock:
                        totals["rejected"] += 1
                        rejected.append("%s: %d %s" % (rid, status, reply))
                    break
                # No answer, or the server could not do it now (5xx): the same request again.
                with lock:
                    totals["no_answer_attempts"] += 1
                if time.monotonic() > end:
                    with lock:
                        totals["gave_up"] += 1
                    log.close()
                    return
                time.sleep(0.02)
        log.close()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    totals["rejected_examples"] = rejected[:5]
    print(json.dumps(totals))
    ok = totals["answered"] == args.requests
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
