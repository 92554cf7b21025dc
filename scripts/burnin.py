#!/usr/bin/env python3
"""The acceptance burn-in: measures what a node's GPUs (or, in CI, its CPU) actually deliver.

gpufleet runs this script as a subprocess (`gpufleet node check`, and the agent when a node
registers), samples NVML itself while it runs, and judges the JSON it prints against reference
figures. This script only measures and reports; it never judges. Python 3 standard library + torch.

Usage:
  burnin.py suite [--device auto|cuda|cpu] [--gpus 0,1,...] [--time-limit SECONDS] [--quick]
                  [--slowdown F]
  burnin.py allreduce --rank R --world-size W --master-addr ADDR --master-port PORT
                      [--backend auto|nccl|gloo] [--mib 64] [--time-limit S] [--gpu I] [--quick]
                      [--slowdown F]

  --device      auto (default): the CUDA path when torch sees a CUDA device, else the CPU path.
                cuda: the CUDA path or exit 2 if there is none. cpu: the CPU path (what CI runs).
  --gpus        the devices to test, as torch numbers them (so after CUDA_VISIBLE_DEVICES).
                Default: every visible GPU; on the CPU path 0,1 (two pretend devices).
  --time-limit  seconds for the whole suite (default 170). No test is started that would not fit
                in what is left; it is listed as skipped ("time limit ...") and "timed_out" is true.
                A test still running 15 s past the limit is abandoned: the JSON is printed with
                what was measured and the script exits 0.
  --quick       every test as small and short as possible (for tests; a few seconds on a CPU).
  --slowdown F  for drills and tests: report every throughput divided by F (F >= 1, default 1),
                as a degraded node would.

Exit status: 0 when the suite ran (whatever the numbers: judging is gpufleet's job); 2 on bad
arguments (the message names the flag); 3 when torch cannot be imported. `allreduce` exits 4 when
the rendezvous fails or does not complete within --time-limit, 5 when it fails afterwards.
Progress goes to stderr as `burnin: <test> ...`; stdout carries only the JSON.

What is measured, how, and in which units (1 GB = 10^9 bytes, 1 TFLOPS = 10^12 FLOP/s):

  matmul_fp16, matmul_bf16, matmul_tf32, matmul_fp32 (TFLOPS, per GPU)
      torch.mm of two random N x N matrices into a preallocated output, counted as 2*N^3 floating
      point operations each. CUDA: N = 8192 (4096 on GPUs under 16 GiB, 2048 with --quick), a few
      warm-up products, then enough to fill about 1 s, timed with CUDA events. tf32 is fp32 with
      torch.backends.cuda.matmul.allow_tf32 = True (tensor cores), fp32 the same with it False;
      bf16 and tf32 need compute capability 8.0 (Ampere) or newer and are skipped below it.
      CPU: fp32 with N = 512 and bf16 with N = 1024 (128 / 256 with --quick), wall-clock timed;
      fp16 and tf32 are skipped (they are GPU tensor-core modes).
  memory_bandwidth (GB/s, per GPU)
      dst.copy_(src) of a large byte tensor on the device (1 GiB on GPUs of 16 GiB or more, else
      256 MiB; on the CPU 256 MiB; 64 / 16 MiB with --quick). Each copy counts its bytes twice:
      read once and written once, the way STREAM's Copy and NVIDIA's bandwidthTest count.
  h2d_bandwidth, d2h_bandwidth (GB/s, per GPU)
      copies of 256 MiB (32 MiB with --quick) between pinned host memory and the device, one
      direction each, timed with CUDA events; counted once. Skipped on the CPU path.
  allreduce_busbw (GB/s, across the selected devices; "gpu": null, "gpus": n)
      torch.distributed all_reduce (sum) of a float32 tensor, one process per GPU on 127.0.0.1
      (NCCL on the CUDA path, 256 MiB, 16 MiB with --quick; gloo on the CPU path, one process
      per --gpus entry, at most 4, 16 MiB, 1 MiB with --quick). The processes are this script's
      `allreduce` mode, so the single-node and the multi-node check measure the same way. A single
      GPU (or --gpus with one entry) gets a skipped entry.
      First one all-reduce of ones is checked to give n everywhere; then warm-up, then enough
      all-reduces for about a second; the time of the slowest rank counts.

      Bus bandwidth as NCCL-tests defines it (doc/PERFORMANCE.md in NVIDIA/nccl-tests): the
      algorithm bandwidth is the data size over the time of one operation, algbw = S / t. That
      number falls as ranks are added, because a ring all-reduce moves 2(n-1)/n times S through
      every rank's link (each rank sends and receives (n-1)/n of the data in the reduce-scatter
      half and again in the all-gather half). Multiplying by that factor,
          busbw = algbw * 2(n-1)/n,
      gives a figure independent of n that can be compared with the hardware's peak bandwidth
      (NVLink, PCIe, network): it is the speed the slowest link actually ran at.

JSON printed by `suite` (one document on stdout):
  {"suite": 1, "path": "cuda"|"cpu", "torch": "2.1.2", "cuda": "12.4"|null, "backend": "nccl"|"gloo",
   "cuda_visible_devices": "0,1"|null, "quick": false, "slowdown": 1.0,
   "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"|"cpu", "capability": "9.0"|null,
                "memory_mib": 81559|null, "uuid": "GPU-..."|null}],
   "tests": [{"name": "matmul_fp16", "gpu": 0, "value": 612.3, "unit": "TFLOPS", "seconds": 2.1,
              "params": {"n": 8192, "iterations": 180}},
             {"name": "allreduce_busbw", "gpu": null, "gpus": 8, "value": 180.0, "unit": "GB/s", ...},
             {"name": "h2d_bandwidth", "gpu": 0, "skipped": "no CUDA device: ..."},
             {"name": "matmul_bf16", "gpu": 0, "error": "RuntimeError: ..."}],
   "elapsed_s": 12.3, "time_limit_s": 170, "timed_out": false}
  Every test entry has exactly one of value (with unit, seconds), skipped (a reason) or error.
  "seconds" is the wall time of the test including warm-up. Values keep 4 significant digits.

`allreduce` prints one JSON line from every rank:
  {"rank": 0, "world_size": 2, "backend": "gloo", "algbw_gbs": 1.2, "busbw_gbs": 1.2, "mib": 64,
   "seconds": 3.4, "op_seconds": 0.055, "iterations": 18}
  where "seconds" is the rank's whole run (rendezvous included) and "op_seconds" the time of one
  all-reduce. backend auto is nccl when torch sees a CUDA device (the rank uses GPU --gpu, else
  $LOCAL_RANK, else rank modulo the GPU count), else gloo on CPU tensors.
"""

import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import threading
import time

SUITE_VERSION = 1
EXIT_USAGE = 2
EXIT_NO_TORCH = 3
EXIT_RENDEZVOUS = 4
EXIT_ALLREDUCE = 5

MIB = 1 << 20
GIB = 1 << 30
CPU_ALLREDUCE_MAX_RANKS = 4
WATCHDOG_GRACE_S = 15.0


def log(msg):
    print("burnin: " + msg, file=sys.stderr, flush=True)


def sig(x, digits=4):
    """x rounded to `digits` significant digits (JSON-friendly float)."""
    if x == 0 or x != x or x in (float("inf"), float("-inf")):
        return float(x)
    return float("%.*g" % (digits, x))


def one_line(exc, limit=400):
    text = "%s: %s" % (type(exc).__name__, exc)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------
# Arguments

def gpu_list(text):
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise argparse.ArgumentTypeError(
                "expected comma-separated GPU numbers such as 0,1,2, got %r" % text)
        if int(part) in out:
            raise argparse.ArgumentTypeError("GPU %s is listed twice in %r" % (part, text))
        out.append(int(part))
    return out


def positive_seconds(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number of seconds, got %r" % text)
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError("must be a positive number of seconds, got %r" % text)
    return v


def slowdown_factor(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number >= 1, got %r" % text)
    if not v >= 1 or v == float("inf"):
        raise argparse.ArgumentTypeError("must be a number >= 1, got %r" % text)
    return v


def positive_mib(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a size in MiB, got %r" % text)
    if not v > 0 or v > 1 << 20:
        raise argparse.ArgumentTypeError("must be a size in MiB above 0, got %r" % text)
    return int(v) if v == int(v) else v


def nonneg_int(text):
    if not text.isdigit():
        raise argparse.ArgumentTypeError("expected a whole number >= 0, got %r" % text)
    return int(text)


def port_number(text):
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError("expected a TCP port 1-65535, got %r" % text)
    return int(text)


def make_parser():
    p = argparse.ArgumentParser(
        prog="burnin.py",
        description="gpufleet's acceptance burn-in: matmul TFLOPS, memory and host-device "
                    "bandwidth, all-reduce bus bandwidth. The docstring at the top of the file "
                    "says what is measured and how.")
    sub = p.add_subparsers(dest="mode", metavar="suite|allreduce")
    sub.required = True

    s = sub.add_parser("suite", help="run the whole burn-in on this node, print one JSON document")
    s.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="auto: CUDA when torch sees a GPU, else the CPU path (default auto)")
    s.add_argument("--gpus", type=gpu_list, default=None, metavar="0,1,...",
                   help="devices to test, as torch numbers them (default: all; CPU path: 0,1)")
    s.add_argument("--time-limit", type=positive_seconds, default=170.0, metavar="SECONDS",
                   help="for the whole suite; tests that would not fit are skipped (default 170)")
    s.add_argument("--quick", action="store_true", help="smallest sizes (for tests)")
    s.add_argument("--slowdown", type=slowdown_factor, default=1.0, metavar="F",
                   help="for drills and tests: report every throughput divided by F, as a "
                        "degraded node would")

    a = sub.add_parser("allreduce", help="one rank of a (multi-node) all-reduce bandwidth check")
    a.add_argument("--rank", type=nonneg_int, required=True)
    a.add_argument("--world-size", type=nonneg_int, required=True)
    a.add_argument("--master-addr", required=True)
    a.add_argument("--master-port", type=port_number, required=True)
    a.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    a.add_argument("--mib", type=positive_mib, default=64)
    a.add_argument("--time-limit", type=positive_seconds, default=120.0, metavar="SECONDS")
    a.add_argument("--gpu", type=nonneg_int, default=None,
                   help="the GPU this rank uses with nccl (default $LOCAL_RANK, else rank modulo "
                        "the GPU count)")
    a.add_argument("--quick", action="store_true", help="few, short iterations (for tests)")
    a.add_argument("--slowdown", type=slowdown_factor, default=1.0, metavar="F",
                   help="for drills and tests: report bandwidth divided by F")
    a.add_argument("--parent-pid", type=nonneg_int, default=None, metavar="PID",
                   help="die when this process (the suite that started the rank) dies")
    return p


def die_with(parent_pid):
    """Asks Linux to kill this process when its parent dies (a rank of a suite whose agent was
    killed must not stay on the GPUs), and exits at once if the parent is gone already."""
    try:
        import ctypes
        import signal
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        ulong = ctypes.c_ulong
        if libc.prctl(PR_SET_PDEATHSIG, ulong(int(signal.SIGKILL)), ulong(0), ulong(0), ulong(0)) != 0:
            log("cannot ask to die with the suite (prctl: %s); the time limit ends this rank"
                % os.strerror(ctypes.get_errno()))
    except (OSError, AttributeError):
        pass  # not Linux: the suite's own time limit still ends the rank
    if os.getppid() != parent_pid:
        sys.exit(1)


def import_torch():
    try:
        import torch  # noqa: F401
        import torch.distributed  # noqa: F401
    except Exception as e:  # ImportError, or a broken install (OSError on a missing library)
        log("PyTorch cannot be imported by %s (%s). Install it for this interpreter "
            "(Debian: apt-get install python3-torch, which is for /usr/bin/python3; or "
            "pip install torch) or run the script with a python that has it."
            % (sys.executable, one_line(e)))
        sys.exit(EXIT_NO_TORCH)
    return torch


# ---------------------------------------------------------------------------------------------
# Timing helpers

def clamp(v, lo, hi):
    return max(lo, min(hi, v))


def cuda_timed(torch, step, target_s, warmup=3, probe=3, min_iters=5, max_iters=20000):
    """Runs step() warmup times, then enough times for about target_s; returns (seconds, iters).

    Timed with CUDA events on the current device's current stream."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(probe):
        step()
    end.record()
    end.synchronize()
    per = max(start.elapsed_time(end) / 1000.0 / probe, 1e-7)
    iters = int(clamp(target_s / per, min_iters, max_iters))
    start.record()
    for _ in range(iters):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000.0, iters


def cpu_timed(step, target_s, warmup=1, max_iters=100000):
    for _ in range(warmup):
        step()
    t = time.perf_counter()
    step()
    per = max(time.perf_counter() - t, 1e-7)
    iters = int(clamp(target_s / per, 1, max_iters))
    t = time.perf_counter()
    for _ in range(iters):
        step()
    return time.perf_counter() - t, iters


# ---------------------------------------------------------------------------------------------
# The suite

class UsageError(Exception):
    """Arguments that turn out bad once torch is imported (exit 2)."""


class Skip(Exception):
    """A test that does not apply here; its message is the reason."""


class TimeLimit(Exception):
    """A test that ran out of the suite's time."""


class Suite:
    def __init__(self, args, torch):
        self.args = args
        self.torch = torch
        self.started = time.monotonic()
        self.deadline = self.started + args.time_limit
        self.tests = []
        self.timed_out = False
        self.current = None
        self.lock = threading.Lock()
        self.printed = False
        self.doc = None
        q = args.quick
        self.cuda = False
        if args.device != "cpu" and torch.cuda.is_available():
            self.cuda = True
        elif args.device == "cuda":
            raise UsageError("argument --device: cuda asked for, but torch %s sees no CUDA device "
                             "(torch.cuda.is_available() is False; built for CUDA %s; "
                             "CUDA_VISIBLE_DEVICES=%s)"
                             % (torch.__version__, torch.version.cuda,
                                os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")))
        if self.cuda:
            self.target = 0.15 if q else 1.0
            count = torch.cuda.device_count()
            self.gpus = args.gpus if args.gpus is not None else list(range(count))
            for g in self.gpus:
                if g >= count:
                    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")
                    raise UsageError("argument --gpus: GPU %d is not visible: torch sees %d CUDA "
                                     "device(s) (numbered from 0 after CUDA_VISIBLE_DEVICES=%s)"
                                     % (g, count, visible))
            if not self.gpus:
                raise UsageError("argument --gpus: no GPU selected")
            nccl = torch.distributed.is_available() and torch.distributed.is_nccl_available()
            self.backend = "nccl" if nccl else "gloo"
        else:
            self.target = 0.05 if q else 0.8
            self.gpus = args.gpus if args.gpus is not None else [0, 1]
            self.backend = "gloo"

    # -- bookkeeping

    def remaining(self):
        return self.deadline - time.monotonic()

    def run(self, name, gpu, estimate_s, fn, extra=None):
        entry = {"name": name, "gpu": gpu}
        if extra:
            entry.update(extra)
        where = "gpu %s" % gpu if gpu is not None else "all"
        left = self.remaining()
        if estimate_s > left:
            entry["skipped"] = ("time limit: %.1f s of --time-limit %g s left, the test needs "
                                "about %.1f s" % (max(left, 0.0), self.args.time_limit, estimate_s))
            self.timed_out = True
            log("%s %s: skipped (%s)" % (name, where, entry["skipped"]))
            self.tests.append(entry)
            return
        log("%s %s ..." % (name, where))
        self.current = entry
        t0 = time.monotonic()
        try:
            value, unit, params = fn()
            entry["value"] = sig(value / self.args.slowdown)
            entry["unit"] = unit
            entry["seconds"] = round(time.monotonic() - t0, 3)
            if params:
                entry["params"] = params
            log("%s %s: %s %s in %.2f s" % (name, where, entry["value"], unit, entry["seconds"]))
        except Skip as e:
            entry["skipped"] = str(e)
            log("%s %s: skipped (%s)" % (name, where, e))
        except TimeLimit as e:
            entry["error"] = "time limit: %s" % e
            self.timed_out = True
            log("%s %s: %s" % (name, where, entry["error"]))
        except Exception as e:
            entry["error"] = one_line(e)
            log("%s %s: error: %s" % (name, where, entry["error"]))
        finally:
            self.current = None
            if self.cuda:
                try:
                    self.torch.cuda.empty_cache()
                except Exception:
                    pass
        with self.lock:
            self.tests.append(entry)

    def skip(self, name, gpu, reason, extra=None):
        entry = {"name": name, "gpu": gpu}
        if extra:
            entry.update(extra)
        entry["skipped"] = reason
        log("%s %s: skipped (%s)" % (name, "gpu %s" % gpu if gpu is not None else "all", reason))
        self.tests.append(entry)

    # -- description

    def devices(self):
        torch = self.torch
        out = []
        for g in self.gpus:
            if not self.cuda:
                out.append({"index": g, "name": "cpu", "capability": None, "memory_mib": None,
                            "uuid": None})
                continue
            props = torch.cuda.get_device_properties(g)
            uuid = getattr(props, "uuid", None)
            uuid = None if uuid is None else str(uuid)
            if uuid and not uuid.startswith("GPU-"):
                uuid = "GPU-" + uuid
            out.append({"index": g, "name": props.name,
                        "capability": "%d.%d" % (props.major, props.minor),
                        "memory_mib": int(props.total_memory // MIB), "uuid": uuid})
        return out

    def document(self):
        torch = self.torch
        return {
            "suite": SUITE_VERSION,
            "path": "cuda" if self.cuda else "cpu",
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "backend": self.backend,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "quick": bool(self.args.quick),
            "slowdown": self.args.slowdown,
            "devices": None,
            "tests": self.tests,
            "elapsed_s": None,
            "time_limit_s": self.args.time_limit,
            "timed_out": False,
        }

    def emit(self, doc, abandoned=None):
        """Prints the document once (from the main thread, or from the watchdog)."""
        with self.lock:
            if self.printed:
                return False
            self.printed = True
            doc = dict(doc)
            tests = list(self.tests)
            if abandoned is not None:
                tests.append(abandoned)
                doc["timed_out"] = True
            doc["tests"] = tests
            doc["elapsed_s"] = round(time.monotonic() - self.started, 3)
            lim = self.args.time_limit
            doc["time_limit_s"] = int(lim) if lim == int(lim) else lim
            sys.stdout.write(json.dumps(doc) + "\n")
            sys.stdout.flush()
            return True

    def watchdog(self):
        """After the time limit and a grace period, prints what there is and exits 0."""
        entry = dict(self.current) if self.current else None
        if entry is not None:
            entry["error"] = ("time limit: still running %g s after --time-limit %g s; abandoned"
                              % (WATCHDOG_GRACE_S, self.args.time_limit))
        if self.doc is not None and self.emit(self.doc, abandoned=entry):
            log("time limit passed while a test hung; printed what was measured and gave up")
            os._exit(0)

    # -- the tests

    def main(self):
        self.doc = self.document()
        self.doc["devices"] = self.devices()
        timer = threading.Timer(self.args.time_limit + WATCHDOG_GRACE_S, self.watchdog)
        timer.daemon = True
        timer.start()
        log("%s path, torch %s, devices %s, %s%s" % (
            "CUDA" if self.cuda else "CPU", self.torch.__version__,
            ",".join(str(g) for g in self.gpus), "quick" if self.args.quick else "full",
            ", slowdown %g" % self.args.slowdown if self.args.slowdown != 1 else ""))
        if self.cuda:
            for g in self.gpus:
                self.cuda_device_tests(g)
        else:
            for g in self.gpus:
                self.cpu_device_tests(g)
        self.allreduce_test()
        timer.cancel()
        self.doc["timed_out"] = self.timed_out
        self.emit(self.doc)

    def cuda_device_tests(self, g):
        torch = self.torch
        q = self.args.quick
        props = torch.cuda.get_device_properties(g)
        big = props.total_memory >= 16 * GIB
        n = 2048 if q else (8192 if big else 4096)
        ampere = props.major >= 8
        cap = "%d.%d" % (props.major, props.minor)
        est = self.target + (1.0 if q else 3.0)
        with torch.cuda.device(g):
            self.run("matmul_fp16", g, est, lambda: self.cuda_matmul(g, torch.float16, n))
            if ampere:
                self.run("matmul_bf16", g, est, lambda: self.cuda_matmul(g, torch.bfloat16, n))
                self.run("matmul_tf32", g, est, lambda: self.cuda_matmul(g, torch.float32, n, True))
            else:
                why = "needs compute capability 8.0 or newer; this GPU is %s" % cap
                self.skip("matmul_bf16", g, "bf16 " + why)
                self.skip("matmul_tf32", g, "TF32 " + why)
            self.run("matmul_fp32", g, est, lambda: self.cuda_matmul(g, torch.float32, n, False))
            mem = 64 * MIB if q else (GIB if big else 256 * MIB)
            self.run("memory_bandwidth", g, est, lambda: self.cuda_memory(g, mem))
            xfer = 32 * MIB if q else 256 * MIB
            self.run("h2d_bandwidth", g, est, lambda: self.cuda_host_copy(g, xfer, True))
            self.run("d2h_bandwidth", g, est, lambda: self.cuda_host_copy(g, xfer, False))

    def cuda_matmul(self, g, dtype, n, tf32=None):
        torch = self.torch
        dev = torch.device("cuda", g)
        saved = torch.backends.cuda.matmul.allow_tf32
        try:
            if tf32 is not None:
                torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device=dev, dtype=dtype)
            b = torch.randn(n, n, device=dev, dtype=dtype)
            c = torch.empty(n, n, device=dev, dtype=dtype)
            secs, iters = cuda_timed(torch, lambda: torch.mm(a, b, out=c), self.target)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = saved
        return 2.0 * n ** 3 * iters / secs / 1e12, "TFLOPS", {"n": n, "iterations": iters}

    def cuda_memory(self, g, nbytes):
        torch = self.torch
        dev = torch.device("cuda", g)
        src = torch.empty(nbytes, dtype=torch.uint8, device=dev).fill_(1)
        dst = torch.empty_like(src)
        secs, iters = cuda_timed(torch, lambda: dst.copy_(src), self.target)
        return (2.0 * nbytes * iters / secs / 1e9, "GB/s",
                {"bytes": nbytes, "iterations": iters, "counted": "read+write"})

    def cuda_host_copy(self, g, nbytes, to_device):
        torch = self.torch
        dev = torch.device("cuda", g)
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True).fill_(1)
        devbuf = torch.empty(nbytes, dtype=torch.uint8, device=dev).fill_(1)
        if to_device:
            step = lambda: devbuf.copy_(host, non_blocking=True)  # noqa: E731
        else:
            step = lambda: host.copy_(devbuf, non_blocking=True)  # noqa: E731
        secs, iters = cuda_timed(torch, step, self.target, warmup=2, min_iters=3)
        return (nbytes * iters / secs / 1e9, "GB/s",
                {"bytes": nbytes, "iterations": iters, "pinned": True})

    def cpu_device_tests(self, g):
        torch = self.torch
        q = self.args.quick
        est = self.target * 2 + 0.5
        self.skip("matmul_fp16", g, "no CUDA device: fp16 matmul is measured on GPUs only")
        self.run("matmul_bf16", g, est,
                 lambda: self.cpu_matmul(torch.bfloat16, 256 if q else 1024))
        self.skip("matmul_tf32", g, "no CUDA device: TF32 is a GPU tensor-core mode")
        self.run("matmul_fp32", g, est,
                 lambda: self.cpu_matmul(torch.float32, 128 if q else 512))
        self.run("memory_bandwidth", g, est,
                 lambda: self.cpu_memory(16 * MIB if q else 256 * MIB))
        why = "no CUDA device: host-device copy not measured"
        self.skip("h2d_bandwidth", g, why)
        self.skip("d2h_bandwidth", g, why)

    def cpu_matmul(self, dtype, n):
        torch = self.torch
        a = torch.randn(n, n).to(dtype)
        b = torch.randn(n, n).to(dtype)
        c = torch.empty(n, n, dtype=dtype)
        secs, iters = cpu_timed(lambda: torch.mm(a, b, out=c), self.target)
        return (2.0 * n ** 3 * iters / secs / 1e12, "TFLOPS",
                {"n": n, "iterations": iters, "threads": torch.get_num_threads()})

    def cpu_memory(self, nbytes):
        torch = self.torch
        src = torch.empty(nbytes, dtype=torch.uint8).fill_(1)  # written: no shared zero pages
        dst = torch.empty_like(src)
        secs, iters = cpu_timed(lambda: dst.copy_(src), self.target)
        return (2.0 * nbytes * iters / secs / 1e9, "GB/s",
                {"bytes": nbytes, "iterations": iters, "counted": "read+write"})

    def allreduce_test(self):
        q = self.args.quick
        if self.cuda:
            ranks = list(self.gpus)
            mib = 16 if q else 256
            est = (8.0 if q else 15.0)
        else:
            ranks = self.gpus[:CPU_ALLREDUCE_MAX_RANKS]
            mib = 1 if q else 16
            est = (6.0 if q else 8.0)
        extra = {"gpus": len(ranks)}
        if len(ranks) < 2:
            self.skip("allreduce_busbw", None,
                      "one %s selected: an all-reduce needs two or more"
                      % ("GPU" if self.cuda else "device"), extra)
            return
        self.run("allreduce_busbw", None, est,
                 lambda: self.allreduce_ranks(ranks, mib), extra)

    def allreduce_ranks(self, ranks, mib):
        """Runs this script's `allreduce` mode once per rank on 127.0.0.1; rank 0's result."""
        world = len(ranks)
        env = dict(os.environ)
        if os.path.exists("/sys/class/net/lo"):  # keep the rendezvous and gloo on loopback
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")
            env.setdefault("NCCL_SOCKET_IFNAME", "lo")
        last_error = None
        for attempt in (1, 2):
            left = self.remaining()
            if left < 2:
                raise TimeLimit("%.1f s left, not enough to start the ranks" % max(left, 0))
            port = free_port()
            procs = []
            for r, g in enumerate(ranks):
                cmd = [sys.executable, os.path.abspath(__file__), "allreduce",
                       "--rank", str(r), "--world-size", str(world),
                       "--master-addr", "127.0.0.1", "--master-port", str(port),
                       "--backend", self.backend, "--mib", str(mib),
                       "--time-limit", "%.1f" % max(left, 1.0), "--parent-pid", str(os.getpid())]
                if self.cuda and self.backend == "nccl":
                    cmd += ["--gpu", str(g)]
                if self.args.quick:
                    cmd.append("--quick")
                procs.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              env=env, universal_newlines=True))
            deadline = time.monotonic() + max(left, 1.0) + 5.0
            results = []
            try:
                for p in procs:
                    out, err = p.communicate(timeout=max(deadline - time.monotonic(), 0.1))
                    results.append((p.returncode, out, err))
            except subprocess.TimeoutExpired:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                for p in procs:
                    p.wait()
                raise TimeLimit("the %d all-reduce ranks did not finish in time" % world)
            failed = [(r, rc, err) for r, (rc, out, err) in enumerate(results) if rc != 0]
            if not failed:
                lines = [json.loads(out.strip().splitlines()[-1]) for rc, out, err in results]
                first = lines[0]
                params = {"backend": first["backend"], "mib": first["mib"],
                          "algbw_gbs": sig(first["algbw_gbs"] / self.args.slowdown),
                          "iterations": first["iterations"], "op_seconds": first["op_seconds"]}
                return first["busbw_gbs"], "GB/s", params
            r, rc, err = failed[0]
            tail = [line for line in err.strip().splitlines() if line.strip()]
            last_error = "all-reduce rank %d exited %d: %s" % (
                r, rc, tail[-1] if tail else "(no message)")
            if any(rc == EXIT_RENDEZVOUS for _, rc, _ in failed) and attempt == 1:
                log("allreduce_busbw: rendezvous on port %d failed, trying another port" % port)
                continue
            break
        raise RuntimeError(last_error)


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def cmd_suite(args):
    torch = import_torch()
    try:
        suite = Suite(args, torch)
    except UsageError as e:
        log(str(e))
        return EXIT_USAGE
    suite.main()
    return 0


# ---------------------------------------------------------------------------------------------
# allreduce: one rank

def cmd_allreduce(args):
    if args.parent_pid is not None:
        die_with(args.parent_pid)
    if args.world_size < 1:
        log("argument --world-size: must be 1 or more, got %d" % args.world_size)
        return EXIT_USAGE
    if args.rank >= args.world_size:
        log("argument --rank: %d is not below --world-size %d" % (args.rank, args.world_size))
        return EXIT_USAGE
    started = time.monotonic()
    torch = import_torch()
    import torch.distributed as dist

    if not dist.is_available():
        log("this torch %s was built without torch.distributed" % torch.__version__)
        return EXIT_NO_TORCH
    cuda = torch.cuda.is_available()
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if cuda and dist.is_nccl_available() else "gloo"
    if backend == "nccl" and not (cuda and dist.is_nccl_available()):
        log("argument --backend: nccl needs a CUDA device and a torch built with NCCL "
            "(torch.cuda.is_available() is %s)" % cuda)
        return EXIT_USAGE
    device = torch.device("cpu")
    if backend == "nccl":
        count = torch.cuda.device_count()
        gpu = args.gpu
        if gpu is None:
            gpu = int(os.environ["LOCAL_RANK"]) if os.environ.get("LOCAL_RANK", "").isdigit() \
                else args.rank % count
        if gpu >= count:
            log("argument --gpu: GPU %d is not visible (torch sees %d)" % (gpu, count))
            return EXIT_USAGE
        device = torch.device("cuda", gpu)
        torch.cuda.set_device(device)

    rank, world = args.rank, args.world_size
    host = args.master_addr
    url = "tcp://%s:%d" % ("[%s]" % host if ":" in host else host, args.master_port)
    phase = ["rendezvous"]

    def expired():
        log("allreduce rank %d: %s with %s:%d (world size %d) did not finish within "
            "--time-limit %g s" % (rank, phase[0], host, args.master_port, world, args.time_limit))
        os._exit(EXIT_RENDEZVOUS if phase[0] == "rendezvous" else EXIT_ALLREDUCE)

    timer = threading.Timer(args.time_limit, expired)
    timer.daemon = True
    timer.start()
    try:
        dist.init_process_group(backend, init_method=url, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=max(args.time_limit, 1.0)))
    except Exception as e:
        log("allreduce rank %d: rendezvous with %s:%d (world size %d, %s) failed: %s"
            % (rank, host, args.master_port, world, backend, one_line(e)))
        return EXIT_RENDEZVOUS
    phase[0] = "all-reduce"
    try:
        result = measure_allreduce(torch, dist, device, world, args)
    except Exception as e:
        log("allreduce rank %d: %s" % (rank, one_line(e)))
        return EXIT_ALLREDUCE
    result = dict({"rank": rank, "world_size": world, "backend": backend}, **result)
    result["seconds"] = round(time.monotonic() - started, 3)
    timer.cancel()
    print(json.dumps(result), flush=True)
    try:
        dist.destroy_process_group()
    except Exception:
        pass
    return 0


def measure_allreduce(torch, dist, device, world, args):
    cuda = device.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    nbytes = int(args.mib * MIB) // 4 * 4
    x = torch.ones(max(nbytes // 4, 1), dtype=torch.float32, device=device)
    dist.all_reduce(x)
    sync()
    got = (x[0].item(), x[-1].item())
    if got != (float(world), float(world)):
        raise RuntimeError("all-reduce of ones gave %s, expected %d everywhere" % (got, world))
    x.zero_()  # sums of zeros stay zeros: no overflow, no denormals
    target = 0.1 if args.quick else 1.0
    target = min(target, args.time_limit / 4.0)
    for _ in range(1 if args.quick else 3):
        dist.all_reduce(x)
    sync()
    t = time.perf_counter()
    dist.all_reduce(x)
    sync()
    probe = torch.tensor([time.perf_counter() - t], dtype=torch.float64, device=device)
    dist.all_reduce(probe, op=dist.ReduceOp.MAX)  # every rank must run the same count
    per = max(probe.item(), 1e-7)
    iters = int(clamp(target / per, 2 if args.quick else 5, 1000))
    flag = torch.zeros(1, device=device)
    dist.all_reduce(flag)  # a barrier that works the same on every backend
    sync()
    t = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    sync()
    elapsed = torch.tensor([time.perf_counter() - t], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's time counts
    op = elapsed.item() / iters
    algbw = x.numel() * 4 / op / 1e9 / args.slowdown
    busbw = algbw * 2.0 * (world - 1) / world
    return {"algbw_gbs": sig(algbw), "busbw_gbs": sig(busbw), "mib": args.mib,
            "op_seconds": sig(op), "iterations": iters}


def main(argv=None):
    args = make_parser().parse_args(argv)
    if args.mode == "suite":
        return cmd_suite(args)
    return cmd_allreduce(args)


if __name__ == "__main__":
    sys.exit(main())
