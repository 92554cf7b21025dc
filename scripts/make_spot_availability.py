#!/usr/bin/env python3
"""Derives the spot availability and spot lifetime summaries gpufleet ships.

Usage: scripts/make_spot_availability.py SRC_DIR [OUT_DIR]
  SRC_DIR  the raw spot trace folder: it holds aws_spot_availability_traces_2022/<period>/
           <zone>_<gpu>_<count>.csv and aws_spot_lifetimes_2020_us-east-1.csv (a folder whose
           spot/ subfolder holds them is accepted too)
  OUT_DIR  default data/catalog (next to this script's repository)

Writes OUT_DIR/spot_availability.csv and OUT_DIR/spot_lifetimes.csv.
data/catalog/spot_availability.SOURCE.md says where the inputs come from and what every column
means. Python 3 standard library only; the output is deterministic (sorted rows, fixed number
formats), so a rerun on the same input is byte-identical.

Availability traces: one sample every 10 minutes, launch_failed 1 = a new spot launch failed
(no capacity at that moment), 0 = it succeeded. Each sample stands for one 10-minute interval.
A trace is cut into segments at every period (file) boundary and wherever two consecutive
samples are more than 15 minutes apart; nothing is counted across a cut:
  * a run (outage = maximal run of 1s, available period = maximal run of 0s) that touches a
    segment's first or last sample is censored: its true length is unknown, so it is counted in
    censored_outages / censored_available_runs and left out of the duration statistics;
  * transitions for the two-state Markov chain are counted only between consecutive samples of
    the same segment.
"""

import csv
import datetime
import math
import os
import re
import sys

SAMPLE_MINUTES = 10          # nominal sampling interval of the traces
MAX_STEP_SECONDS = 15 * 60   # a larger step between samples is a gap in the sampling
TRACE_DIR = "aws_spot_availability_traces_2022"
LIFETIMES_FILE = "aws_spot_lifetimes_2020_us-east-1.csv"
TRACE_NAME = re.compile(r"^(?P<zone>[a-z]{2}-[a-z]+-\d[a-z])_(?P<gpu>[a-z0-9]+)_(?P<count>\d+)\.csv$")
GPU_NAMES = {"k80": "K80", "v100": "V100"}

AVAILABILITY_COLUMNS = [
    "gpu", "gpus_per_node", "zone", "traces", "samples", "hours", "unavailable_fraction",
    "outages", "censored_outages", "mean_outage_minutes", "p50_outage_minutes",
    "p90_outage_minutes", "max_outage_minutes", "available_runs", "censored_available_runs",
    "mean_available_minutes", "p50_available_minutes", "fail_given_ok", "ok_given_fail",
    "markov_mean_outage_minutes", "markov_mean_available_minutes",
]

LIFETIME_COLUMNS = [
    "instance_type", "gpu", "gpus_per_node", "zones", "instances", "preempted", "censored",
    "total_observed_hours", "median_observed_lifetime_hours", "mean_observed_lifetime_hours",
    "hazard_per_hour", "exp_mean_lifetime_hours", "km_median_lifetime_hours",
]


def parse_time(text):
    """'2022-10-26T22:05:04.000Z' -> aware datetime (UTC)."""
    text = text.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    return datetime.datetime.fromisoformat(text)


def read_trace(path):
    """Returns [(time, failed)] sorted by time. Rejects bad values and repeated timestamps."""
    samples = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            value = row["launch_failed"].strip()
            if value not in ("0", "1"):
                raise ValueError("%s: launch_failed must be 0 or 1, got %r" % (path, value))
            samples.append((parse_time(row["time_utc"]), value == "1"))
    samples.sort(key=lambda s: s[0])
    for a, b in zip(samples, samples[1:]):
        if a[0] == b[0]:
            raise ValueError("%s: two samples at %s" % (path, a[0].isoformat()))
    return samples


def split_segments(samples):
    """Cuts one period's samples wherever consecutive samples are more than 15 min apart.
    Returns a list of lists of booleans (True = launch failed)."""
    segments = []
    current = []
    previous = None
    for time, failed in samples:
        if previous is not None and (time - previous).total_seconds() > MAX_STEP_SECONDS:
            segments.append(current)
            current = []
        current.append(failed)
        previous = time
    if current:
        segments.append(current)
    return segments


class Tally:
    """Counts over any number of segments; pooled rows add segments of several traces."""

    def __init__(self):
        self.traces = 0
        self.samples = 0
        self.failed = 0
        self.outages = []        # lengths (samples) of complete outage runs
        self.available = []      # lengths (samples) of complete available runs
        self.censored_outages = 0
        self.censored_available = 0
        self.ok_ok = self.ok_fail = self.fail_ok = self.fail_fail = 0

    def add_segment(self, seg):
        self.samples += len(seg)
        self.failed += sum(1 for s in seg if s)
        for a, b in zip(seg, seg[1:]):
            if a and b:
                self.fail_fail += 1
            elif a:
                self.fail_ok += 1
            elif b:
                self.ok_fail += 1
            else:
                self.ok_ok += 1
        start = 0
        while start < len(seg):
            end = start
            while end + 1 < len(seg) and seg[end + 1] == seg[start]:
                end += 1
            length = end - start + 1
            censored = start == 0 or end == len(seg) - 1
            if seg[start]:
                if censored:
                    self.censored_outages += 1
                else:
                    self.outages.append(length)
            else:
                if censored:
                    self.censored_available += 1
                else:
                    self.available.append(length)
            start = end + 1

    def merge(self, other):
        self.traces += other.traces
        self.samples += other.samples
        self.failed += other.failed
        self.outages += other.outages
        self.available += other.available
        self.censored_outages += other.censored_outages
        self.censored_available += other.censored_available
        self.ok_ok += other.ok_ok
        self.ok_fail += other.ok_fail
        self.fail_ok += other.fail_ok
        self.fail_fail += other.fail_fail


def nearest_rank(values, percent):
    """Nearest-rank percentile of a non-empty list (always one of the values)."""
    ordered = sorted(values)
    rank = max(1, int(math.ceil(percent / 100.0 * len(ordered))))
    return ordered[rank - 1]


def fmt(value, digits):
    if value is None:
        return ""
    return "%.*f" % (digits, value)


def minutes(samples):
    return samples * SAMPLE_MINUTES


def availability_row(gpu, count, zone, t):
    fail_given_ok = t.ok_fail / (t.ok_ok + t.ok_fail) if t.ok_ok + t.ok_fail else None
    ok_given_fail = t.fail_ok / (t.fail_ok + t.fail_fail) if t.fail_ok + t.fail_fail else None
    out = t.outages
    up = t.available
    return {
        "gpu": gpu,
        "gpus_per_node": count,
        "zone": zone,
        "traces": str(t.traces),
        "samples": str(t.samples),
        "hours": fmt(t.samples * SAMPLE_MINUTES / 60.0, 1),
        "unavailable_fraction": fmt(t.failed / t.samples, 4) if t.samples else "",
        "outages": str(len(out)),
        "censored_outages": str(t.censored_outages),
        "mean_outage_minutes": fmt(minutes(sum(out)) / len(out), 1) if out else "",
        "p50_outage_minutes": fmt(minutes(nearest_rank(out, 50)), 0) if out else "",
        "p90_outage_minutes": fmt(minutes(nearest_rank(out, 90)), 0) if out else "",
        "max_outage_minutes": fmt(minutes(max(out)), 0) if out else "",
        "available_runs": str(len(up)),
        "censored_available_runs": str(t.censored_available),
        "mean_available_minutes": fmt(minutes(sum(up)) / len(up), 1) if up else "",
        "p50_available_minutes": fmt(minutes(nearest_rank(up, 50)), 0) if up else "",
        "fail_given_ok": fmt(fail_given_ok, 4),
        "ok_given_fail": fmt(ok_given_fail, 4),
        "markov_mean_outage_minutes":
            fmt(SAMPLE_MINUTES / ok_given_fail, 1) if ok_given_fail else "",
        "markov_mean_available_minutes":
            fmt(SAMPLE_MINUTES / fail_given_ok, 1) if fail_given_ok else "",
    }


def derive_availability(trace_root):
    groups = {}   # (gpu, count, zone) -> Tally
    periods = sorted(d for d in os.listdir(trace_root)
                     if os.path.isdir(os.path.join(trace_root, d)))
    if not periods:
        raise ValueError("no period folders under %s" % trace_root)
    for period in periods:
        folder = os.path.join(trace_root, period)
        for name in sorted(os.listdir(folder)):
            m = TRACE_NAME.match(name)
            if not m:
                continue
            gpu = GPU_NAMES.get(m.group("gpu"), m.group("gpu").upper())
            key = (gpu, int(m.group("count")), m.group("zone"))
            tally = groups.setdefault(key, Tally())
            tally.traces += 1
            for seg in split_segments(read_trace(os.path.join(folder, name))):
                tally.add_segment(seg)
    if not groups:
        raise ValueError("no <zone>_<gpu>_<count>.csv traces under %s" % trace_root)

    rows = []
    for key in sorted(groups):
        gpu, count, zone = key
        rows.append(availability_row(gpu, str(count), zone, groups[key]))
    # Pooled over zones, per (gpu, gpus_per_node).
    for gpu, count in sorted({(k[0], k[1]) for k in groups}):
        pooled = Tally()
        for key in sorted(groups):
            if key[0] == gpu and key[1] == count:
                pooled.merge(groups[key])
        rows.append(availability_row(gpu, str(count), "all", pooled))
    # Pooled per gpus_per_node class.
    for count in sorted({k[1] for k in groups}):
        pooled = Tally()
        for key in sorted(groups):
            if key[1] == count:
                pooled.merge(groups[key])
        rows.append(availability_row("all", str(count), "all", pooled))
    overall = Tally()
    for key in sorted(groups):
        overall.merge(groups[key])
    rows.append(availability_row("all", "all", "all", overall))
    return rows


def kaplan_meier_median(items):
    """items: [(hours, event)] with event True = preempted. Returns the smallest time at which
    the Kaplan-Meier survival estimate is <= 0.5, or None when it never gets there."""
    times = sorted({h for h, e in items if e})
    survival = 1.0
    for t in times:
        at_risk = sum(1 for h, _ in items if h >= t)
        events = sum(1 for h, e in items if e and h == t)
        survival *= 1.0 - events / at_risk
        if survival <= 0.5 + 1e-12:
            return t
    return None


def median(values):
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def lifetime_row(instance_type, gpu, count, rows):
    items = [(float(r["LifetimeHours"]), r["Censored"].strip() == "0") for r in rows]
    total = sum(h for h, _ in items)
    preempted = sum(1 for _, e in items if e)
    hazard = preempted / total if total > 0 else None
    km = kaplan_meier_median(items)
    return {
        "instance_type": instance_type,
        "gpu": gpu,
        "gpus_per_node": count,
        "zones": ";".join(sorted({r["AvailabilityZone"] for r in rows})),
        "instances": str(len(items)),
        "preempted": str(preempted),
        "censored": str(len(items) - preempted),
        "total_observed_hours": fmt(total, 3),
        "median_observed_lifetime_hours": fmt(median([h for h, _ in items]), 3),
        "mean_observed_lifetime_hours": fmt(total / len(items), 3),
        "hazard_per_hour": fmt(hazard, 4),
        "exp_mean_lifetime_hours": fmt(1.0 / hazard, 3) if hazard else "",
        "km_median_lifetime_hours": fmt(km, 3),
    }


def derive_lifetimes(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if r["Censored"].strip() not in ("0", "1"):
            raise ValueError("%s: Censored must be 0 or 1 (instance %s)" % (path, r["InstanceId"]))
        if float(r["LifetimeHours"]) < 0:
            raise ValueError("%s: negative lifetime (instance %s)" % (path, r["InstanceId"]))
    by_type = {}
    for r in rows:
        by_type.setdefault(r["InstanceType"], []).append(r)
    out = []
    for itype in sorted(by_type):
        group = by_type[itype]
        gpus = sorted({r["GpuType"] for r in group})
        counts = sorted({r["GpuCount"] for r in group})
        out.append(lifetime_row(itype, ";".join(gpus), ";".join(counts), group))
    out.append(lifetime_row("all", "all", "all", rows))
    return out


def write_csv(path, columns, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def resolve_source(src):
    if os.path.isdir(os.path.join(src, TRACE_DIR)):
        return src
    if os.path.isdir(os.path.join(src, "spot", TRACE_DIR)):
        return os.path.join(src, "spot")
    raise SystemExit("make_spot_availability: %s holds no %s/ folder" % (src, TRACE_DIR))


def main(argv):
    if len(argv) not in (2, 3) or argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__)
        return 2
    src = resolve_source(argv[1])
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_dir = argv[2] if len(argv) == 3 else os.path.join(repo, "data", "catalog")
    os.makedirs(out_dir, exist_ok=True)
    avail = derive_availability(os.path.join(src, TRACE_DIR))
    life = derive_lifetimes(os.path.join(src, LIFETIMES_FILE))
    write_csv(os.path.join(out_dir, "spot_availability.csv"), AVAILABILITY_COLUMNS, avail)
    write_csv(os.path.join(out_dir, "spot_lifetimes.csv"), LIFETIME_COLUMNS, life)
    print("wrote %d availability rows and %d lifetime rows to %s"
          % (len(avail), len(life), out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
