#!/usr/bin/env bash
# bench_submit.sh — the live cluster's submit throughput and submit -> process-started latency,
# optionally side by side with Slurm on the same machine (docs/benchmarks.md, "Live cluster").
#
# Phases (each on a fresh data directory under $OUT_DIR; every server on 127.0.0.1):
#   T  durable submit throughput: `gpufleet server` with no agents (jobs stay pending, as Slurm's
#      phase S submits into a DOWN partition), gpufleet-submit-load at 1, 8 and 32 clients,
#      $SUBMITS submits each, $T_RUNS runs of each (the median run is reported, every run's rate
#      beside it); every 2xx answer is after the SQLite commit.
#   then on one `gpufleet dev` cluster of $NODES agents x $GPUS_PER_NODE fake H100s, with the job
#   mix of the Slurm peer script (1-GPU jobs that write `date +%s%N` when they start, then sleep
#   $JOB_SLEEP s), waiting for an empty queue between phases:
#   L  $LAT_N jobs one at a time on the idle cluster (the next submit after the previous started)
#   A  $NJOBS jobs from one client, back to back
#   B  one array (sweep) submission of $NJOBS jobs
#   (With more jobs than GPUs a job starts only when another ends: the jobs start in waves, one
#   every JOB_SLEEP s, which bounds the rates of A, B and C; the table says so. Room for every job
#   at once (NODES x GPUS_PER_NODE >= the jobs; a fake node has at most 64 GPUs) measures the start
#   path itself. Put OUT_DIR on a tmpfs such as /dev/shm to keep the file system out of it: on an
#   ext4 without a journal, creating files after many deletions scans recently freed inodes
#   (`recently_deleted` in a profile). Phase T wants a real disk: its submits wait for fsync.)
#   C  4 clients x $NJOBS/8 jobs
#   X  the same job with nothing in between: no scheduler, agent or shim; one Python process per
#      core starts its share of $NJOBS as fast as it can (`subprocess.Popen`, vfork + exec), and the
#      start rate is read from the same stamps. A reference for what starting the job's own
#      processes costs on this machine, not a bound on a scheduler that starts them some other way.
# submit -> started = the job's own start stamp minus the client's send time (and, as Slurm's
# figures are taken, minus the time the answer arrived).
#
# SLURM_PEER_DIR=/path/to/peers/slurm runs its run_slurm_peer.sh afterwards with the same node
# count, GPUs, job count and job length (as root; it installs slurm-wlm if missing) and prints
# both side by side.
#
# Usage: bash scripts/bench_submit.sh
# Knobs: BUILD_DIR=build NODES=16 GPUS_PER_NODE=8 NJOBS=2000 SUBMITS=4000 T_RUNS=3 LAT_N=20 JOB_SLEEP=1
#        NO_BUILD=1 (use the binaries already in BUILD_DIR) PHASES="T L A B C X" OUT_DIR=/tmp/gpufleet-bench-submit SLURM_PEER_DIR= SLURM_PHASES="L S A B C"
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
NODES="${NODES:-16}"
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
NJOBS="${NJOBS:-2000}"
SUBMITS="${SUBMITS:-4000}"
T_RUNS="${T_RUNS:-3}"
LAT_N="${LAT_N:-20}"
JOB_SLEEP="${JOB_SLEEP:-1}"
PHASES="${PHASES:-T L A B C X}"
OUT_DIR="${OUT_DIR:-/tmp/gpufleet-bench-submit}"
SLURM_PEER_DIR="${SLURM_PEER_DIR:-}"
SLURM_PHASES="${SLURM_PHASES:-L S A B C}"
PY="${PYTHON:-python3}"

if [[ "${NO_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$BUILD_DIR/build.ninja" && ! -f "$BUILD_DIR/Makefile" ]]; then
    cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  cmake --build "$BUILD_DIR" --target gpufleet gpufleet-submit-load
fi
GF="$BUILD_DIR/src/gpufleet"
LOAD="$BUILD_DIR/bench/gpufleet-submit-load"

rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR/results"
RES="$OUT_DIR/results"
SERVER_PID=""
cleanup() {
  [[ -n "$SERVER_PID" ]] && kill -TERM "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
}
trap cleanup EXIT

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_health() {
  for _ in $(seq 1 300); do
    curl -fsS "$URL/v1/health" >/dev/null 2>&1 && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "the server exited" >&2; return 1; }
    sleep 0.1
  done
  echo "no answer from $URL" >&2
  return 1
}

stop_server() {
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

api() { curl -fsS -H "Authorization: Bearer $(cat "$DATA/admin.token")" "$@"; }

# wait_idle: until the queue (pending and running jobs) is empty.
wait_idle() {
  local deadline=$(($(date +%s) + 900))
  while [[ "$(api "$URL/v1/queue" | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))')" != 0 ]]; do
    [[ "$(date +%s)" -lt "$deadline" ]] || { echo "the queue did not empty in 900 s" >&2; return 1; }
    sleep 0.25
  done
}

# wait_stamps DIR N: until DIR holds N start stamps.
wait_stamps() {
  local deadline=$(($(date +%s) + 900))
  while [[ "$(find "$1" -maxdepth 1 -type f ! -name '*.t' | wc -l)" -lt "$2" ]]; do
    [[ "$(date +%s)" -lt "$deadline" ]] || { echo "only $(ls "$1" | wc -l) of $2 jobs started in 900 s" >&2; return 1; }
    sleep 0.25
  done
}

# The job: write the start stamp (atomically), then sleep. $1: stamp dir, $2: stamp name.
job_json() {
  printf '{"name": "bench", "resources": {"gpus": 1, "gpu_type": ["H100"]}, "run": "date +%%s%%N > %s/%s.t && mv %s/%s.t %s/%s; sleep %s"}' \
    "$1" "$2" "$1" "$2" "$1" "$2" "$JOB_SLEEP"
}

# analyze PHASE SUBMIT_LOG STAMP_DIR [KEY]: submit -> started statistics. KEY=rid: stamps are
# named by request id; KEY=job: by job id ($GPUFLEET_JOB_ID), all sent at the log's one time.
analyze() {
  "$PY" - "$1" "$2" "$3" "${4:-rid}" "$RES" <<'EOF'
import json, math, os, sys
phase, sublog, stamps, key, res = sys.argv[1:6]
subs = [l.split() for l in open(sublog)]
def pct(a, q):
    a = sorted(a)
    return a[min(len(a) - 1, max(0, int(math.ceil(q / 100 * len(a))) - 1))] if a else float("nan")
starts, from_send, from_answer = [], [], []
for name in os.listdir(stamps):
    if name.endswith(".t"):
        continue
    s = int(open(os.path.join(stamps, name)).read()) / 1e9
    starts.append(s)
by = {x[0]: x for x in subs}
if key == "rid":
    for rid, x in by.items():
        p = os.path.join(stamps, rid)
        if os.path.exists(p):
            s = int(open(p).read()) / 1e9
            from_send.append(s - int(x[1]) / 1e9)
            from_answer.append(s - int(x[2]) / 1e9)
else:
    t_send, t_answer = int(subs[0][1]) / 1e9, int(subs[0][2]) / 1e9
    from_send = [s - t_send for s in starts]
    from_answer = [s - t_answer for s in starts]
t0 = min(int(x[1]) for x in subs) / 1e9
t1 = max(int(x[2]) for x in subs) / 1e9
r = {
    "phase": phase,
    "submissions": len(subs),
    "started": len(starts),
    "submit_wall_s": round(t1 - t0, 3),
    "submit_rate_per_s": round(len(subs) / (t1 - t0), 1) if t1 > t0 and len(subs) > 1 else None,
    "submit_to_started_ms_from_send": {q: round(1000 * pct(from_send, v), 1) for q, v in (("p50", 50), ("p99", 99), ("max", 100))},
    "submit_to_started_ms_from_answer": {q: round(1000 * pct(from_answer, v), 1) for q, v in (("p50", 50), ("p99", 99), ("max", 100))},
    "job_start_rate_per_s": round(len(starts) / (max(starts) - min(starts)), 1) if len(starts) > 1 and max(starts) > min(starts) else None,
    "t0_to_last_start_s": round(max(starts) - t0, 3) if starts else None,
}
json.dump(r, open(os.path.join(res, "gpufleet_phase%s.json" % phase), "w"), indent=1)
print(json.dumps(r))
EOF
}

echo "== machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(date -u +%Y-%m-%dT%H:%MZ)"

# ---- T: durable submit throughput ----
if [[ " $PHASES " == *" T "* ]]; then
  for c in 1 8 32; do
    # T_RUNS runs, each on a fresh server and data directory; the run with the median rate is
    # the one reported (single runs on a small VM spread widely), with every run's rate beside it.
    for ((k = 1; k <= T_RUNS; k++)); do
      DATA="$OUT_DIR/T$c-$k"
      PORT="$(free_port)"
      URL="http://127.0.0.1:$PORT"
      "$GF" server --data-dir "$DATA" --listen "127.0.0.1:$PORT" --agent-listen "127.0.0.1:$(free_port)" 2>"$OUT_DIR/T$c-$k.server.log" &
      SERVER_PID=$!
      wait_health
      # Submits that got no answer are counted ("no_answer") and make the tool exit 1; go on.
      "$LOAD" --server "$URL" --token-file "$DATA/admin.token" --clients "$c" --requests "$SUBMITS" -o json \
        | tee "$RES/gpufleet_T${c}_run$k.json" || true
      stop_server
    done
    "$PY" - "$RES" "$c" "$T_RUNS" <<'EOF'
import json, os, sys
res, c, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs = []
for k in range(1, n + 1):
    p = os.path.join(res, "gpufleet_T%d_run%d.json" % (c, k))
    if os.path.exists(p) and os.path.getsize(p) > 0:
        runs.append(json.load(open(p)))
if runs:
    runs.sort(key=lambda r: r["submits_per_s"])
    median = dict(runs[(len(runs) - 1) // 2])
    median["runs_submits_per_s"] = [round(r["submits_per_s"]) for r in runs]
    json.dump(median, open(os.path.join(res, "gpufleet_T%d.json" % c), "w"))
EOF
  done
fi

# ---- L, A, B, C: a dev cluster ----
if [[ " $PHASES " == *" L "* || " $PHASES " == *" A "* || " $PHASES " == *" B "* || " $PHASES " == *" C "* ]]; then
  DATA="$OUT_DIR/dev"
  PORT="$(free_port)"
  URL="http://127.0.0.1:$PORT"
  # As root, jobs would run as nobody, who may not write the stamps here.
  DEV_USER_FLAGS=()
  [[ $EUID == 0 ]] && DEV_USER_FLAGS=(--job-user root --allow-root-jobs)
  "$GF" dev --data-dir "$DATA" --port "$PORT" --agents "$NODES" --fake-gpus "${GPUS_PER_NODE}xH100" \
    "${DEV_USER_FLAGS[@]}" --config "$DATA/config.yaml" >"$OUT_DIR/dev.log" 2>&1 &
  SERVER_PID=$!
  wait_health
  for _ in $(seq 1 300); do
    up="$(api "$URL/v1/nodes" | "$PY" -c 'import json,sys; print(sum(n["state"]=="up" for n in json.load(sys.stdin)["nodes"]))')"
    [[ "$up" == "$NODES" ]] && break
    sleep 0.1
  done
  [[ "$up" == "$NODES" ]] || { echo "only $up of $NODES nodes up" >&2; exit 1; }

  run_phase() {  # run_phase PHASE CLIENTS REQUESTS [--wait-stamp]
    local p="$1" c="$2" n="$3" s="$OUT_DIR/stamps$1"
    mkdir -p "$s"
    local extra=()
    [[ "${4:-}" == wait ]] && extra=(--wait-stamp "$s")
    local cpu0
    "$LOAD" --server "$URL" --token-file "$DATA/admin.token" --clients "$c" --requests "$n" --prefix "$p" \
      --job "$(job_json "$s" '{rid}')" --out "$OUT_DIR/$p.sub" "${extra[@]}" >"$OUT_DIR/$p.load.txt"
    wait_stamps "$s" "$n"
    wait_idle
    analyze "$p" "$OUT_DIR/$p.sub" "$s" rid
  }
  [[ " $PHASES " == *" L "* ]] && run_phase L 1 "$LAT_N" wait
  [[ " $PHASES " == *" A "* ]] && run_phase A 1 "$NJOBS"
  if [[ " $PHASES " == *" B "* ]]; then
    s="$OUT_DIR/stampsB"
    mkdir -p "$s"
    "$PY" - "$URL" "$DATA/admin.token" "$NJOBS" "$(job_json "$s" 'job-$GPUFLEET_JOB_ID')" "$OUT_DIR/B.sub" <<'EOF'
import http.client, json, sys, time, urllib.parse
url, token, n, job, out = sys.argv[1:6]
u = urllib.parse.urlparse(url)
job = json.loads(job)
job["array"] = {"i": [str(i) for i in range(int(n))]}
c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
body = json.dumps({"request_id": "array-%d" % time.time_ns(), "job": job})
t0 = time.time_ns()
c.request("POST", "/v1/jobs", body=body, headers={"Authorization": "Bearer " + open(token).read().strip()})
r = c.getresponse()
data = r.read()
t1 = time.time_ns()
if r.status // 100 != 2:
    sys.exit("array submit: HTTP %d %s" % (r.status, data[:300]))
open(out, "w").write("array %d %d %d %d\n" % (t0, t1, r.status, json.loads(data)["jobs"][0]["id"]))
EOF
    wait_stamps "$s" "$NJOBS"
    wait_idle
    analyze B "$OUT_DIR/B.sub" "$s" job
  fi
  [[ " $PHASES " == *" C "* ]] && run_phase C 4 $((NJOBS / 2))
  stop_server
fi

# ---- X: the machine's own start rate for this job, with nothing in between ----
if [[ " $PHASES " == *" X "* ]]; then
  s="$OUT_DIR/stampsX"
  mkdir -p "$s"
  "$PY" - "$NJOBS" "$(job_json "$s" 'x-{i}')" "$OUT_DIR/X.sub" <<'EOF'
import json, multiprocessing, os, subprocess, sys, time
n, job, out = int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
def spawn(share):
    procs = [subprocess.Popen(["/bin/sh", "-c", job["run"].replace("{i}", str(i))]) for i in share]
    for p in procs:
        p.wait()
k = os.cpu_count() or 1
t0 = time.time_ns()
workers = [multiprocessing.Process(target=spawn, args=(range(w, n, k),)) for w in range(k)]
for w in workers:
    w.start()
for w in workers:
    w.join()
t1 = time.time_ns()
open(out, "w").write("spawn %d %d 0 0\n" % (t0, t1))
EOF
  wait_stamps "$s" "$NJOBS"
  analyze X "$OUT_DIR/X.sub" "$s" job
fi

# ---- Slurm, same machine, same mix ----
if [[ -n "$SLURM_PEER_DIR" ]]; then
  SLURM_RUN_DIR=/tmp/slurm-peer-run
  NODES="$NODES" GPUS_PER_NODE="$GPUS_PER_NODE" NJOBS="$NJOBS" ARRAY_SIZE="$NJOBS" JOB_SLEEP="$JOB_SLEEP" \
    PAR=4 PAR_JOBS=$((NJOBS / 8)) LAT_N="$LAT_N" PHASES="$SLURM_PHASES" RUN_DIR="$SLURM_RUN_DIR" \
    bash "$SLURM_PEER_DIR/run_slurm_peer.sh" >"$OUT_DIR/slurm.log" 2>&1 || echo "the Slurm peer run failed; see $OUT_DIR/slurm.log" >&2
  for f in "$SLURM_RUN_DIR"/results/phase*.json "$SLURM_RUN_DIR"/results/phaseS.txt; do
    [[ -f "$f" ]] && cp "$f" "$RES/slurm_$(basename "$f")"
  done
fi

# ---- summary ----
"$PY" - "$RES" "$NODES" "$GPUS_PER_NODE" "$JOB_SLEEP" <<'EOF'
import glob, json, os, sys
res = sys.argv[1]
slots, job_sleep = int(sys.argv[2]) * int(sys.argv[3]), float(sys.argv[4])
def load(name):
    p = os.path.join(res, name)
    if not os.path.exists(p):
        return None
    text = open(p).read().strip()
    return json.loads(text.splitlines()[-1]) if name.endswith(".txt") else json.loads(text)
print("\n%-44s %-28s %s" % ("measure", "gpufleet", "Slurm"))
for c in (1, 8, 32):
    t = load("gpufleet_T%d.json" % c)
    if t:
        s = load("slurm_phaseS.txt") if c == 1 else None
        print("%-44s %-28s %s" % ("submits/s, %d client(s)" % c,
              "%.0f (p50 %.2f ms, p99 %.2f ms)" % (t["submits_per_s"], t["latency_ms"]["p50"], t["latency_ms"]["p99"]),
              "%.1f (p50 %.1f ms, p99 %.1f ms)" % (s["submit_rate_per_s"], s["sbatch_call_ms_p50"], s["sbatch_call_ms_p99"]) if s else ""))
        if len(t.get("runs_submits_per_s", [])) > 1:
            print("%-44s %s" % ("  (the median run; every run's submits/s)", " ".join(str(r) for r in t["runs_submits_per_s"])))
for p in "LABCX":
    g, s = load("gpufleet_phase%s.json" % p), load("slurm_phase%s.json" % p)
    if not g:
        continue
    sl = s["submit_to_job_running_s"] if s else None
    if p == "X":
        print("%-44s %-28s %s" % ("X: starts/s of the job with nothing in between", g["job_start_rate_per_s"] or "-", ""))
        continue
    print("%-44s %-28s %s" % ("%s: submit->started p50 / p99" % p,
          "%.0f / %.0f ms" % (g["submit_to_started_ms_from_send"]["p50"], g["submit_to_started_ms_from_send"]["p99"]),
          "%.0f / %.0f ms" % (1000 * sl["p50"], 1000 * sl["p99"]) if sl else ""))
    print("%-44s %-28s %s" % ("%s: job starts/s" % p, g["job_start_rate_per_s"], s.get("job_start_rate_per_s") if s else ""))
    n = g["started"]
    if p != "L" and n > slots and job_sleep > 0:
        # More jobs than GPUs: they start in waves, one a GPU frees (every JOB_SLEEP s), and the
        # rate is the jobs over the time from the first start to the last.
        waves = -(-n // slots)
        nodes = int(sys.argv[2])
        per_node = -(-n // nodes)
        # A fake node has at most 64 GPUs: past that, more nodes.
        hint = "GPUS_PER_NODE=%d" % per_node if per_node <= 64 else "NODES=%d GPUS_PER_NODE=64" % -(-n // 64)
        print("%-44s %s" % ("  (GPU-bound: %d jobs in %d waves on %d GPUs:" % (n, waves, slots),
              "at most %.0f/s; room for all needs NODES x GPUS_PER_NODE >= %d, e.g. %s)"
              % (n / ((waves - 1) * job_sleep), n, hint)))
    if p in "AC":
        print("%-44s %-28s %s" % ("%s: submits/s while running" % p, g["submit_rate_per_s"], s.get("submit_rate_per_s") if s else ""))
EOF
echo "results in $RES"
