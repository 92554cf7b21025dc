#!/usr/bin/env python3
"""After a submit storm (tests/submit_storm_client.py) across a failure, checks the store.

Every answered request id exists exactly once among the controller's jobs, with the job id its
answer named; the submissions answered before the failure (LOGS_AT_CUT, copied then) are stored
as answered; nothing else was created; and each long job (--long ID PID NAME) is still running,
attempt 1, in the same process (its pid file WORK/NAME.pid unchanged, the process alive and
running sleep). --extra names request ids of jobs the test made itself besides the storm.

Usage: storm_check.py URL TOKEN_FILE LOGS LOGS_AT_CUT REQUESTS [--long ID PID NAME]... [--extra RID]...
Exits 0 and prints a summary line on stderr when all hold; else exits with "FAIL: ...".
"""
import argparse
import glob
import http.client
import json
import os
import sys
import urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("token_file")
ap.add_argument("logs")
ap.add_argument("logs_at_cut")
ap.add_argument("requests", type=int)
ap.add_argument("--long", nargs=3, action="append", default=[], metavar=("ID", "PID", "NAME"))
ap.add_argument("--extra", action="append", default=[])
args = ap.parse_args()
url, token_file, logs, logs_at_kill, requests = args.url, args.token_file, args.logs, args.logs_at_cut, args.requests
longs = [(int(i), int(p), n) for i, p, n in args.long]
u = urllib.parse.urlparse(url)
hdr = {"Authorization": "Bearer " + open(token_file).read().strip()}

def get(path):
    # A connection per request: on a reused one each answer waits for a delayed ACK (~40 ms).
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("GET", path, headers=hdr)
    r = conn.getresponse()
    body = r.read()
    conn.close()
    if r.status != 200:
        sys.exit("FAIL: GET %s: HTTP %d %s" % (path, r.status, body[:300]))
    return json.loads(body)

def read_logs(d, partial_ok=False):
    out = {}
    for f in glob.glob(os.path.join(d, "client-*.log")):
        for line in open(f):
            if partial_ok and (not line.endswith("\n") or len(line.split()) != 5):
                continue  # copied while being written
            rid, status, job, created, attempts = line.split()
            if rid in out:
                sys.exit("FAIL: %s answered twice by the clients' own account" % rid)
            out[rid] = (int(status), int(job), created == "true", int(attempts))
    return out

answered = read_logs(logs)
before = read_logs(logs_at_kill, partial_ok=True)
if len(answered) != requests:
    sys.exit("FAIL: %d of %d submissions answered" % (len(answered), requests))
bad = [r for r, a in answered.items() if not 200 <= a[0] < 300]
if bad:
    sys.exit("FAIL: non-2xx answers logged: %s" % bad[:5])

jobs, cursor = [], None
while True:  # every page (the API answers at most 1000 jobs a page)
    page = get("/v1/jobs?limit=1000" + ("&cursor=%d" % cursor if cursor else ""))
    jobs += page["jobs"]
    cursor = page.get("next_cursor")
    if not cursor:
        break
by_rid = {}
for j in jobs:
    rec = get("/v1/jobs/%d" % j["id"])["record"]
    # Stored ids are scoped to the caller: "<team>/<subject>/<request id>".
    by_rid.setdefault(rec["request_id"].split("/", 2)[2], []).append(j["id"])
dups = {r: ids for r, ids in by_rid.items() if len(ids) > 1}
if dups:
    sys.exit("FAIL: request ids with more than one job: %s" % list(dups.items())[:5])
missing = [r for r in answered if r not in by_rid]
if missing:
    sys.exit("FAIL: %d answered submissions have no job after the restart, e.g. %s" % (len(missing), missing[:5]))
wrong = [(r, a[1], by_rid[r]) for r, a in answered.items() if by_rid[r] != [a[1]]]
if wrong:
    sys.exit("FAIL: answers named other jobs than the stored ones (rid, answered id, stored ids): %s" % wrong[:5])
lost_before = [r for r in before if by_rid.get(r) != [before[r][1]]]
if lost_before:
    sys.exit("FAIL: submissions answered before the kill are not stored as answered: %s" % lost_before[:5])
own = set(args.extra) | {n for _, _, n in longs}
extra = sorted(set(by_rid) - set(answered) - own)
if extra or len(jobs) != requests + len(own):
    sys.exit("FAIL: %d jobs stored, expected %d; unexpected request ids: %s" % (len(jobs), requests + len(own), extra[:5]))

for jid, pid, name in longs:
    j = get("/v1/jobs/%d" % jid)
    if j["state"] != "running" or j["attempt"] != 1:
        sys.exit("FAIL: %s: expected running, attempt 1; got %s, attempt %s (%s)" % (name, j["state"], j["attempt"], j["reason"]))
    now = int(open(os.path.join(os.path.dirname(logs), "%s.pid" % name)).read())
    if now != pid:
        sys.exit("FAIL: %s was restarted: pid %d, was %d" % (name, now, pid))
    try:
        os.kill(pid, 0)
        cmd = open("/proc/%d/cmdline" % pid).read().replace("\0", " ")
    except OSError as e:
        sys.exit("FAIL: %s's process %d is gone: %s" % (name, pid, e))
    if "sleep" not in cmd:
        sys.exit("FAIL: %s: process %d runs '%s', not sleep" % (name, pid, cmd))

retried = sum(1 for a in answered.values() if a[3] > 1)
replayed = sum(1 for a in answered.values() if not a[2])
print("storm: %d answered (%d before the failure), %d retried after no answer, %d answered as already stored; "
      "%d jobs, no duplicates" % (len(answered), len(before), retried, replayed, len(jobs)), file=sys.stderr)
