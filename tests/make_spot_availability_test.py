#!/usr/bin/env python3
"""Tests of scripts/make_spot_availability.py (Python 3 standard library, unittest).

1. A tiny synthetic trace set with known outages, written to a temp dir, must give known
   fractions, run lengths and Markov transition probabilities; gaps in the sampling and period
   boundaries must cut runs and transitions.
2. A synthetic lifetimes file must give known hazard, means and Kaplan-Meier median.
3. If the raw spot traces are at hand (GPUFLEET_SPOT_SRC, or shared/data/catalog/spot inside
   or next to the repository), the shipped data/catalog/spot_*.csv must be byte-identical to what
   the script makes from them; otherwise that test is skipped.

Run: python3 tests/make_spot_availability_test.py
"""

import csv
import datetime
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "make_spot_availability.py")
sys.dont_write_bytecode = True  # no __pycache__ in scripts/
sys.path.insert(0, os.path.join(REPO, "scripts"))
import make_spot_availability as msa  # noqa: E402

T0 = datetime.datetime(2022, 10, 26, 22, 5, 4, tzinfo=datetime.timezone.utc)


def write_trace(path, start, values, gaps=()):
    """Writes a trace sampled every 10 min from start; gaps = indexes before which an extra
    30 minutes pass (a hole in the sampling)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    t = start
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["index", "time_utc", "launch_failed"])
        for i, v in enumerate(values):
            if i in gaps:
                t += datetime.timedelta(minutes=30)
            w.writerow([i, t.strftime("%Y-%m-%dT%H:%M:%S.000Z"), v])
            t += datetime.timedelta(minutes=10)
    return t


def write_lifetimes(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["InstanceId", "InstanceType", "GpuType", "GpuCount", "AvailabilityZone",
                    "CreatedAtUTC", "LastSeenRunningUTC", "FirstSeenNotRunningUTC",
                    "LifetimeHours", "Censored"])
        for i, (itype, gpu, count, zone, hours, censored) in enumerate(rows):
            w.writerow(["i-%03d" % i, itype, gpu, count, zone, "", "", "", hours, censored])


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def find(rows, gpu, count, zone):
    hits = [r for r in rows if (r["gpu"], r["gpus_per_node"], r["zone"]) == (gpu, count, zone)]
    assert len(hits) == 1, (gpu, count, zone, hits)
    return hits[0]


class SyntheticTraces(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        src = cls.tmp.name
        traces = os.path.join(src, msa.TRACE_DIR)
        # V100 x1, us-west-2a, period 1: segment A = 0 0 1 1 0 0 0 1 0 0, a 30-minute hole,
        # then segment B = 1 1 0 0. Complete outages: 2 and 1 samples; complete available run:
        # 3 samples; censored: outage at B's start, available runs at A's ends and B's end.
        end = write_trace(os.path.join(traces, "P1", "us-west-2a_v100_1.csv"), T0,
                          [0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0], gaps=(10,))
        # Period 2 starts right after period 1 ends, but a period boundary still cuts:
        # 1 0 is a censored outage then a censored available run.
        write_trace(os.path.join(traces, "P2", "us-west-2a_v100_1.csv"), end, [1, 0])
        # K80 x8, us-west-2b: one complete outage of 3 samples.
        write_trace(os.path.join(traces, "P1", "us-west-2b_k80_8.csv"), T0, [0, 1, 1, 1, 0])
        write_lifetimes(os.path.join(src, msa.LIFETIMES_FILE), [
            ("p3.2xlarge", "V100", 1, "us-east-1b", "1.0", 0),
            ("p3.2xlarge", "V100", 1, "us-east-1b", "2.0", 0),
            ("p3.2xlarge", "V100", 1, "us-east-1c", "3.0", 1),
            ("p3.2xlarge", "V100", 1, "us-east-1c", "4.0", 0),
            ("p2.8xlarge", "K80", 8, "us-east-1c", "5.0", 1),
        ])
        cls.out = os.path.join(src, "out")
        subprocess.run([sys.executable, SCRIPT, src, cls.out], check=True,
                       stdout=subprocess.DEVNULL)
        cls.avail = read_rows(os.path.join(cls.out, "spot_availability.csv"))
        cls.life = read_rows(os.path.join(cls.out, "spot_lifetimes.csv"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_columns(self):
        self.assertEqual(list(self.avail[0].keys()), msa.AVAILABILITY_COLUMNS)
        self.assertEqual(list(self.life[0].keys()), msa.LIFETIME_COLUMNS)

    def test_row_set(self):
        keys = [(r["gpu"], r["gpus_per_node"], r["zone"]) for r in self.avail]
        self.assertEqual(keys, [
            ("K80", "8", "us-west-2b"), ("V100", "1", "us-west-2a"),   # trace groups
            ("K80", "8", "all"), ("V100", "1", "all"),                 # per GPU, zones pooled
            ("all", "1", "all"), ("all", "8", "all"),                  # per gpus_per_node
            ("all", "all", "all"),                                     # overall
        ])

    def test_trace_group_with_gap_and_period_boundary(self):
        r = find(self.avail, "V100", "1", "us-west-2a")
        self.assertEqual(r["traces"], "2")
        self.assertEqual(r["samples"], "16")
        self.assertEqual(r["hours"], "2.7")                       # 16 x 10 min
        self.assertEqual(r["unavailable_fraction"], "0.3750")     # 6 / 16
        self.assertEqual(r["outages"], "2")
        self.assertEqual(r["censored_outages"], "2")
        self.assertEqual(r["mean_outage_minutes"], "15.0")        # (20 + 10) / 2
        self.assertEqual(r["p50_outage_minutes"], "10")
        self.assertEqual(r["p90_outage_minutes"], "20")
        self.assertEqual(r["max_outage_minutes"], "20")
        self.assertEqual(r["available_runs"], "1")
        self.assertEqual(r["censored_available_runs"], "4")
        self.assertEqual(r["mean_available_minutes"], "30.0")
        # Within-segment transitions: ok->ok 5, ok->fail 2, fail->fail 2, fail->ok 4.
        # Counting across the hole (0 -> 1) or the period boundary (0 -> 1) would change both.
        self.assertEqual(r["fail_given_ok"], "0.2857")            # 2 / 7
        self.assertEqual(r["ok_given_fail"], "0.6667")            # 4 / 6
        self.assertEqual(r["markov_mean_outage_minutes"], "15.0")  # 10 / (4/6)
        self.assertEqual(r["markov_mean_available_minutes"], "35.0")  # 10 / (2/7)

    def test_single_complete_outage(self):
        r = find(self.avail, "K80", "8", "us-west-2b")
        self.assertEqual(r["unavailable_fraction"], "0.6000")
        self.assertEqual((r["outages"], r["censored_outages"]), ("1", "0"))
        self.assertEqual(r["mean_outage_minutes"], "30.0")
        self.assertEqual(r["max_outage_minutes"], "30")
        self.assertEqual((r["available_runs"], r["censored_available_runs"]), ("0", "2"))
        self.assertEqual(r["mean_available_minutes"], "")
        self.assertEqual(r["fail_given_ok"], "1.0000")            # 1 / 1
        self.assertEqual(r["ok_given_fail"], "0.3333")            # 1 / 3

    def test_pooled_rows(self):
        self.assertEqual(find(self.avail, "all", "1", "all")["unavailable_fraction"], "0.3750")
        overall = find(self.avail, "all", "all", "all")
        self.assertEqual(overall["traces"], "3")
        self.assertEqual(overall["samples"], "21")
        self.assertEqual(overall["unavailable_fraction"], "0.4286")   # 9 / 21
        self.assertEqual(overall["outages"], "3")
        self.assertEqual(overall["mean_outage_minutes"], "20.0")      # (20 + 10 + 30) / 3
        self.assertEqual(overall["fail_given_ok"], "0.3750")          # 3 / 8
        self.assertEqual(overall["ok_given_fail"], "0.5556")          # 5 / 9

    def test_lifetimes(self):
        rows = {r["instance_type"]: r for r in self.life}
        self.assertEqual(sorted(rows), ["all", "p2.8xlarge", "p3.2xlarge"])
        p3 = rows["p3.2xlarge"]
        self.assertEqual((p3["gpu"], p3["gpus_per_node"]), ("V100", "1"))
        self.assertEqual(p3["zones"], "us-east-1b;us-east-1c")
        self.assertEqual((p3["instances"], p3["preempted"], p3["censored"]), ("4", "3", "1"))
        self.assertEqual(p3["total_observed_hours"], "10.000")
        self.assertEqual(p3["median_observed_lifetime_hours"], "2.500")
        self.assertEqual(p3["mean_observed_lifetime_hours"], "2.500")
        self.assertEqual(p3["hazard_per_hour"], "0.3000")             # 3 / 10 h
        self.assertEqual(p3["exp_mean_lifetime_hours"], "3.333")
        self.assertEqual(p3["km_median_lifetime_hours"], "2.000")     # S(1)=.75, S(2)=.5
        p2 = rows["p2.8xlarge"]                                       # censored only
        self.assertEqual(p2["hazard_per_hour"], "0.0000")
        self.assertEqual(p2["exp_mean_lifetime_hours"], "")
        self.assertEqual(p2["km_median_lifetime_hours"], "")
        self.assertEqual(rows["all"]["hazard_per_hour"], "0.2000")    # 3 / 15 h

    def test_deterministic(self):
        again = os.path.join(self.tmp.name, "again")
        subprocess.run([sys.executable, SCRIPT, self.tmp.name, again], check=True,
                       stdout=subprocess.DEVNULL)
        for name in ("spot_availability.csv", "spot_lifetimes.csv"):
            with open(os.path.join(self.out, name), "rb") as a, \
                    open(os.path.join(again, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)


class Validation(unittest.TestCase):
    def test_bad_value_rejected(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "us-west-2a_v100_1.csv")
            write_trace(path, T0, [0, 2, 0])
            with self.assertRaises(ValueError):
                msa.read_trace(path)

    def test_gap_threshold(self):
        t = T0
        step = datetime.timedelta
        samples = [(t, False), (t + step(minutes=15), True),      # 15 min: same segment
                   (t + step(minutes=31), True)]                   # 16 min: a gap
        self.assertEqual(msa.split_segments(samples), [[False, True], [True]])


def shipped_source():
    env = os.environ.get("GPUFLEET_SPOT_SRC")
    candidates = [env] if env else []
    candidates += [os.path.join(REPO, "shared", "data", "catalog", "spot"),
                   os.path.join(os.path.dirname(REPO), "shared", "data", "catalog", "spot")]
    for c in candidates:
        if c and os.path.isdir(os.path.join(c, msa.TRACE_DIR)):
            return c
    return None


class ShippedFiles(unittest.TestCase):
    def test_shipped_csv_matches_script(self):
        src = shipped_source()
        if src is None:
            self.skipTest("raw spot traces not found (set GPUFLEET_SPOT_SRC)")
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([sys.executable, SCRIPT, src, out], check=True,
                           stdout=subprocess.DEVNULL)
            for name in ("spot_availability.csv", "spot_lifetimes.csv"):
                with open(os.path.join(out, name), "rb") as a, \
                        open(os.path.join(REPO, "data", "catalog", name), "rb") as b:
                    self.assertEqual(a.read(), b.read(),
                                     "data/catalog/%s is stale: rerun "
                                     "scripts/make_spot_availability.py" % name)


if __name__ == "__main__":
    unittest.main()
