#!/usr/bin/env python3
"""Checks a controller's store for consistency through its API, after chaos or a soak run.

For every job (all pages of GET /v1/jobs, then GET /v1/jobs/ID for its record and history):
  - its state is a known one, and exactly the state its last transition went to;
  - its history is a chain: the first transition starts at pending, each one starts where the one
    before ended, times never go back, and nothing leaves a terminal state (succeeded, failed,
    cancelled);
  - its record says the same state as the job, and a job listed in a terminal state is still in it;
  - a request id names at most the jobs of one submission (one job, or one array's tasks with
    distinct array indices): no submission was stored twice.
With --logs DIR (tests/submit_storm_client.py's client logs), every answered submission exists,
with the job id its answer named.

Usage: store_consistency.py URL TOKEN_FILE [--logs DIR] [--json] [--workers N]

The jobs are read by N threads (default 8), each on one kept-alive connection: a soak run leaves
about 100,000 jobs, which one request at a time takes half an hour to read.
Exit status 0 when every check holds; 1 with the first problems listed otherwise.
"""
import argparse
import concurrent.futures
import glob
import http.client
import json
import os
import sys
import threading
import urllib.parse

STATES = {"pending", "starting", "running", "stopping", "succeeded", "failed", "cancelled", "preempted"}
TERMINAL = {"succeeded", "failed", "cancelled"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url")
    ap.add_argument("token_file")
    ap.add_argument("--logs", help="the storm clients' log directory: answered submissions to find")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--workers", type=int, default=8, help="threads reading jobs, each with its own connection")
    args = ap.parse_args()
    u = urllib.parse.urlparse(args.url)
    hdr = {"Authorization": "Bearer " + open(args.token_file).read().strip()}
    local = threading.local()

    class Failed(Exception):
        pass

    def get(path):
        # One kept-alive connection per thread; a connection the server closed is opened again once.
        for attempt in range(2):
            if getattr(local, "conn", None) is None:
                local.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            try:
                local.conn.request("GET", path, headers=hdr)
                r = local.conn.getresponse()
                body = r.read()
            except (http.client.HTTPException, ConnectionError):
                local.conn.close()
                local.conn = None
                if attempt == 1:
                    raise
                continue
            if r.getheader("Connection", "").lower() == "close":
                local.conn.close()
                local.conn = None
            if r.status != 200:
                raise Failed("FAIL: GET %s: HTTP %d %s" % (path, r.status, body[:300]))
            return json.loads(body)

    def get_or_exit(path):
        try:
            return get(path)
        except Failed as e:
            sys.exit(str(e))

    listed, cursor = [], None
    while True:
        page = get_or_exit("/v1/jobs?limit=1000" + ("&cursor=%d" % cursor if cursor else ""))
        listed += page["jobs"]
        cursor = page.get("next_cursor")
        if not cursor:
            break

    problems = []
    by_request = {}
    states = {}
    ids = set()
    unique = []
    for j in listed:
        if j["id"] in ids:
            problems.append("job %d is listed twice" % j["id"])
            continue
        ids.add(j["id"])
        unique.append(j)
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
            fulls = list(pool.map(lambda j: get("/v1/jobs/%d" % j["id"]), unique))
    except Failed as e:
        sys.exit(str(e))
    def check(j, full):
        """The problems of one job as read; (problems, state, record)."""
        jid = j["id"]
        found = []
        state = full["state"]
        if state not in STATES:
            found.append("job %d: unknown state %r" % (jid, state))
        # (The listing came earlier: a job may have moved on since; only a terminal state stays.)
        if j["state"] in TERMINAL and state != j["state"]:
            found.append("job %d: listed as %s, read as %s" % (jid, j["state"], state))
        rec = full.get("record")
        if rec is not None and rec["state"] != state:
            found.append("job %d: record says %s, the job %s" % (jid, rec["state"], state))
        hist = full.get("history", [])
        if not hist:
            return found + ["job %d: no history" % jid], state, rec
        if hist[0]["from"] != "pending":
            found.append("job %d: its history starts from %s, not pending" % (jid, hist[0]["from"]))
        for a, b in zip(hist, hist[1:]):
            if b["from"] != a["to"]:
                found.append("job %d: %s -> %s is followed by %s -> %s" % (jid, a["from"], a["to"], b["from"], b["to"]))
            if b["at_ms"] < a["at_ms"]:
                found.append("job %d: a transition at %d follows one at %d" % (jid, b["at_ms"], a["at_ms"]))
            if a["to"] in TERMINAL:
                found.append("job %d: leaves terminal state %s (%s)" % (jid, a["to"], b["reason"]))
        if hist[-1]["to"] != state:
            found.append("job %d: state %s but its last transition went to %s" % (jid, state, hist[-1]["to"]))
        return found, state, rec

    for j, full in zip(unique, fulls):
        found, state, rec = check(j, full)
        # A job of a live cluster may move between the two reads of one GET (its record, then its
        # history): read an unfinished one again before calling it inconsistent. What the store
        # holds wrongly stays wrong however often it is read.
        for _ in range(3):
            if not found or state in TERMINAL:
                break
            found, state, rec = check(j, get_or_exit("/v1/jobs/%d" % j["id"]))
        problems += found
        states[state] = states.get(state, 0) + 1
        if rec is not None:
            by_request.setdefault(rec["request_id"], []).append((j["id"], rec.get("array_index", 0)))

    for key, jobs in by_request.items():
        indices = [i for _, i in jobs]
        if len(set(indices)) != len(indices):
            problems.append("request %s was stored more than once: jobs %s" % (key, sorted(j for j, _ in jobs)))

    answered = 0
    if args.logs:
        stored = {}
        for key, jobs in by_request.items():
            stored.setdefault(key.split("/", 2)[-1], set()).update(j for j, _ in jobs)
        for f in glob.glob(os.path.join(args.logs, "client-*.log")):
            for line in open(f):
                parts = line.split()
                if len(parts) != 5:
                    continue
                rid, status, job = parts[0], int(parts[1]), int(parts[2])
                if not 200 <= status < 300:
                    continue
                answered += 1
                if job not in stored.get(rid, set()):
                    problems.append("submission %s was answered with job %d, which the store does not hold under it" % (rid, job))

    summary = {"jobs": len(ids), "states": states, "requests": len(by_request), "answered_checked": answered,
               "problems": len(problems)}
    if args.json:
        print(json.dumps(summary))
    else:
        print("%d jobs (%s), %d requests, %d answered submissions checked: %s" % (
            len(ids), ", ".join("%d %s" % (n, s) for s, n in sorted(states.items())), len(by_request), answered,
            "consistent" if not problems else "%d problems" % len(problems)))
    if problems:
        for p in problems[:20]:
            print("FAIL: " + p, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
