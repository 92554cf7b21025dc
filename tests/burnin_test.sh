#!/usr/bin/env bash
# scripts/burnin.py, the measurement half of the acceptance burn-in, on its CPU path (what CI runs;
# gpufleet's judge reads the same JSON from GPUs). Expect, with --quick:
#   - `suite` prints one JSON document of the CPU path: two "cpu" devices, matmul_fp32,
#     memory_bandwidth and a 2-process gloo allreduce_busbw with positive values, h2d/d2h and the
#     GPU-only matmuls skipped with a reason, every entry exactly one of value/skipped/error;
#   - --slowdown 10 reports matmul well under a third of the plain run's figure (a relative check,
#     never one on absolute speed), and a --time-limit too short for the all-reduce skips it with
#     "time limit" and sets timed_out;
#   - bad arguments exit 2 naming the flag;
#   - `allreduce` with two ranks on a free 127.0.0.1 port prints one JSON line per rank with
#     positive bus bandwidth, and a rank whose master never comes exits 4 within its time limit;
#   - a rank started with --parent-pid dies with that process.
# Needs PyTorch: TORCH_PYTHON, else $PYTHON if it has torch, else /usr/bin/python3 (Debian's
# python3-torch); skipped (exit 77) when none can import it.
#
# Usage: burnin_test.sh PATH/TO/gpufleet SOURCE_DIR   (the binary is not used)
source "$(dirname "$0")/lib.sh"

SRC="${2:?usage: burnin_test.sh GPUFLEET SOURCE_DIR}"
BURNIN="$SRC/scripts/burnin.py"

TP=""
for candidate in "${TORCH_PYTHON:-}" "$PYTHON" /usr/bin/python3; do
  [[ -n "$candidate" ]] || continue
  if "$candidate" -c 'import torch, torch.distributed' >/dev/null 2>&1; then
    TP="$candidate"
    break
  fi
done
if [[ -z "$TP" ]]; then
  echo "SKIP: no python here imports torch (tried TORCH_PYTHON, $PYTHON, /usr/bin/python3)"
  exit 77
fi

# Bad arguments: exit 2 and the message names the flag (argparse, before torch is imported).
for bad in "--slowdown 0.5" "--gpus 0,x" "--time-limit -3" "--device tpu"; do
  flag="${bad%% *}"
  # shellcheck disable=SC2086 # the words of $bad are separate arguments
  run "$WORK/bad" "$TP" "$BURNIN" suite --quick $bad
  expect_rc "$WORK/bad" 2 "suite $bad"
  expect_contains "$WORK/bad.err" "argument $flag" "the error for suite $bad names the flag"
done
run "$WORK/badrank" "$TP" "$BURNIN" allreduce --rank 2 --world-size 2 --master-addr 127.0.0.1 \
  --master-port 1
expect_rc "$WORK/badrank" 2 "allreduce --rank 2 --world-size 2"
expect_contains "$WORK/badrank.err" "--rank" "the error for a rank outside the world names --rank"

# The quick CPU suite.
run "$WORK/suite" "$TP" "$BURNIN" suite --device cpu --quick
expect_rc "$WORK/suite" 0 "burnin.py suite --device cpu --quick"
expect_contains "$WORK/suite.err" "burnin: matmul_fp32" "progress lines on stderr"
"$TP" - "$WORK/suite.out" <<'PY' || { show "$WORK/suite"; fail "the quick CPU suite's JSON is not as expected"; }
import json, sys
text = open(sys.argv[1]).read()
d = json.loads(text)  # one document, nothing else on stdout
assert d["suite"] == 1 and d["path"] == "cpu" and d["backend"] == "gloo", d
assert isinstance(d["torch"], str) and d["torch"], d["torch"]
assert d["devices"] == [{"index": i, "name": "cpu", "capability": None, "memory_mib": None,
                         "uuid": None} for i in (0, 1)], d["devices"]
assert d["timed_out"] is False and d["time_limit_s"] == 170 and d["elapsed_s"] > 0, d
tests = {(t["name"], t["gpu"]): t for t in d["tests"]}
for t in d["tests"]:
    assert sum(k in t for k in ("value", "skipped", "error")) == 1, t
    assert "error" not in t, t
for g in (0, 1):
    for name, unit in (("matmul_fp32", "TFLOPS"), ("matmul_bf16", "TFLOPS"),
                       ("memory_bandwidth", "GB/s")):
        t = tests[(name, g)]
        assert t["unit"] == unit and t["value"] > 0 and t["seconds"] >= 0, t
    for name in ("h2d_bandwidth", "d2h_bandwidth", "matmul_fp16", "matmul_tf32"):
        assert "CUDA" in tests[(name, g)]["skipped"], tests[(name, g)]
ar = tests[("allreduce_busbw", None)]
assert ar["gpus"] == 2 and ar["unit"] == "GB/s" and ar["value"] > 0, ar
assert ar["params"]["backend"] == "gloo", ar
print("matmul_fp32 %.4g TFLOPS, memory %.4g GB/s, allreduce busbw %.4g GB/s, %.1f s"
      % (tests[("matmul_fp32", 0)]["value"], tests[("memory_bandwidth", 0)]["value"],
         ar["value"], d["elapsed_s"]), file=sys.stderr)
PY

# --slowdown 10 and a time limit too short for the all-reduce (it needs process start-ups).
run "$WORK/slow" "$TP" "$BURNIN" suite --device cpu --quick --slowdown 10 --time-limit 3
expect_rc "$WORK/slow" 0 "burnin.py suite --slowdown 10 --time-limit 3"
"$TP" - "$WORK/suite.out" "$WORK/slow.out" <<'PY' || { show "$WORK/slow"; fail "--slowdown or --time-limit is not honoured"; }
import json, sys
base, slow = (json.load(open(p)) for p in sys.argv[1:3])
pick = lambda d, name: next(t for t in d["tests"] if t["name"] == name and t["gpu"] == 0)
for name in ("matmul_fp32", "matmul_bf16"):
    b, s = pick(base, name)["value"], pick(slow, name)["value"]
    assert 0 < s < b / 3, "%s: %s with --slowdown 10, %s without" % (name, s, b)
assert slow["slowdown"] == 10, slow["slowdown"]
ar = next(t for t in slow["tests"] if t["name"] == "allreduce_busbw")
assert ar["skipped"].startswith("time limit"), ar
assert slow["timed_out"] is True and slow["time_limit_s"] == 3, slow
PY

# allreduce: two ranks on a free loopback port, started the way gpufleet starts them.
PORT="$("$TP" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
pids=()
for r in 0 1; do
  GLOO_SOCKET_IFNAME=lo "$TP" "$BURNIN" allreduce --rank "$r" --world-size 2 --master-addr 127.0.0.1 \
    --master-port "$PORT" --backend gloo --mib 1 --quick --time-limit 40 \
    </dev/null >"$WORK/rank$r.out" 2>"$WORK/rank$r.err" &
  pids+=("$!")
done
for r in 0 1; do
  RC=0
  wait "${pids[$r]}" || RC=$?
  expect_rc "$WORK/rank$r" 0 "allreduce rank $r of 2"
done
cat "$WORK/rank0.out" "$WORK/rank1.out" >"$WORK/ranks.out"
"$TP" - "$WORK/ranks.out" <<'PY' || { cat "$WORK/ranks.out" >&2; fail "the 2-rank all-reduce lines are not as expected"; }
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(lines) == 2 and sorted(l["rank"] for l in lines) == [0, 1], lines
for l in lines:
    assert l["world_size"] == 2 and l["backend"] == "gloo" and l["mib"] == 1, l
    assert l["busbw_gbs"] > 0 and l["algbw_gbs"] > 0 and l["seconds"] > 0, l
    assert abs(l["busbw_gbs"] - l["algbw_gbs"]) <= 1e-3 * l["algbw_gbs"], l  # 2(n-1)/n = 1 at n = 2
PY

# A rank whose master never answers gives up with exit 4 once its time limit passes.
PORT="$("$TP" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
run "$WORK/alone" "$TP" "$BURNIN" allreduce --rank 1 --world-size 2 --master-addr 127.0.0.1 \
  --master-port "$PORT" --backend gloo --time-limit 2
expect_rc "$WORK/alone" 4 "allreduce rank 1 with no master"
expect_contains "$WORK/alone.err" "rendezvous with 127.0.0.1:$PORT" "the failed rendezvous is named"

# A rank started with --parent-pid dies with that process (a suite whose agent was killed leaves
# no rank on the GPUs), and one whose parent is gone already does not start.
"$TP" - "$BURNIN" "$PORT" <<'PY' || fail "a rank outlived the process that started it"
import subprocess, sys, time
burnin, port = sys.argv[1], sys.argv[2]
starter = r'''
import os, subprocess, sys
p = subprocess.Popen([sys.executable, sys.argv[1], "allreduce", "--rank", "1", "--world-size", "2",
                      "--master-addr", "127.0.0.1", "--master-port", sys.argv[2], "--backend", "gloo",
                      "--time-limit", "300", "--parent-pid", str(os.getpid())])
print(p.pid, flush=True)
sys.stdin.read()  # until the test kills this process
'''
mid = subprocess.Popen([sys.executable, "-c", starter, burnin, port], stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, text=True)
rank = int(mid.stdout.readline())
mid.kill()
mid.wait()
def state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"
for _ in range(600):  # waits for the kill, up to a minute; nothing is timed
    if state(rank) in ("gone", "Z"):
        break
    time.sleep(0.1)
assert state(rank) in ("gone", "Z"), "rank %d still %s after its parent died" % (rank, state(rank))
# A parent pid that is not the rank's parent: it exits at once instead of joining the all-reduce.
rc = subprocess.run([sys.executable, burnin, "allreduce", "--rank", "1", "--world-size", "2",
                     "--master-addr", "127.0.0.1", "--master-port", port, "--backend", "gloo",
                     "--time-limit", "300", "--parent-pid", "1"]).returncode
assert rc == 1, rc
PY

echo "PASS: burnin.py measures the CPU path, honours --slowdown and --time-limit, rejects bad flags, all-reduces across 2 ranks, and its ranks die with the suite"
