#!/usr/bin/env python3
"""Builds data/catalog/offers.csv, the GPU offer excerpt gpufleet ships, from the raw cloud catalogs.

Usage: scripts/make_catalog.py [--prices-as-of YYYY-MM-DD] SOURCE_DIR [OUT_CSV]
  SOURCE_DIR  the raw catalog folder (skypilot_format/, skypilot_catalog_v8/, aws/ inside it)
  OUT_CSV     default data/catalog/offers.csv
  --prices-as-of  the date stamped on the first line (`# prices_as_of: DATE`); default
              PRICES_AS_OF below, the date of the newest snapshot in the raw collection

Python 3 standard library only. The output is deterministic (rows sorted, prices copied verbatim
as decimal strings, computed prices done in Decimal), so a rerun on the same input is byte-identical.

What it does (data/catalog/SOURCE.md says why):
  * keeps GPU rows only (TPUs, CPU-only shapes, Inferentia/Trainium/FPGA dropped);
  * GCP: joins each accelerator row with the host VMs the GPU can have in the same zone (a2/a3/a4
    are fixed by the GPU and count; one L4 goes on any of g2-standard-4/8/12/16/32, so each is an
    offer; T4/V100/P100/P4 attach to n1-standard-(8 x GPUs)); the host part is kept in host_usd_h
    so that the loader can judge the GPU part on its own;
  * AWS: on-demand and the 1-year reserved price (no upfront, effective hourly rate; blank where the
    table has none) per region from the vantage table; spot estimated as
    on-demand x (1 - savings%) from the Spot Advisor (Linux), with its interruption bucket; where
    the SkyPilot sample has per-zone spot prices (p5/p5en/p6), those zone rows replace the region row
    and take the region's reserved price from the vantage table;
  * reserved_1y_usd_h is AWS's only: the other sources publish no reserved or committed-use price,
    so it is blank there and the planner prices their reservations with a ratio (docs/planning.md);
  * Azure, Lambda, Nebius, OCI, Vast: copied, columns renamed. Vast's SpotPrice 0.00 means "none".
  * GPU names are made exact where the source's name is ambiguous (refine_accelerator): an A100
    with 80 GB per GPU is A100-80GB (AWS p4de, Vast), a V100 with 32 GB is V100-32GB (AWS p3dn),
    an H100 whose instance name says PCIe is H100-PCIe, and one that says NVL (or Azure's
    NC*ads_H100_v5 shapes, which are H100 NVL) is H100-NVL.
The first line is `# prices_as_of: YYYY-MM-DD`, which the loader reads to say the catalog's age.
It does not repair defects (spot above on-demand, fallback prices, fractional GPUs, unnamed GPUs):
the loader in src/cost/offer.cc finds them and reports them as warnings.
"""

import csv
import json
import os
import re
import sys
from decimal import Decimal, ROUND_HALF_EVEN

HEADER = [
    "cloud", "region", "zone", "instance_type", "accelerator", "gpu_count", "gpu_mem_mib", "vcpus",
    "ram_gib", "ondemand_usd_h", "host_usd_h", "spot_usd_h", "spot_kind", "aws_interruption_bucket",
    "reserved_1y_usd_h",
]

# The date of the newest snapshot in the raw collection (anycloud-sh/catalog @ 62ff0a98, 2026-05-20);
# the AWS parts are older (on-demand 2026-01-21, spot advisor 2025-06-28), see data/catalog/SOURCE.md.
PRICES_AS_OF = "2026-05-20"

# Azure's NC H100 v5 shapes (NC40ads, NC80adis and the confidential NCC40ads) carry the 94 GB H100
# NVL card, although the catalog calls it H100.
AZURE_H100_NVL = re.compile(r"^Standard_NCC?[0-9]+adi?s_H100_v5$")

NON_GPU_ACCEL = re.compile(r"^(tpu-|Inferentia|Trainium|AWS |Qualcomm|ARM |AMD Radeon)", re.I)


def num(s):
    """'208.0' -> '208', '1872.5' -> '1872.5', '' -> ''."""
    s = (s or "").strip()
    if not s:
        return ""
    d = Decimal(s)
    return str(d.to_integral_value()) if d == d.to_integral_value() else str(d.normalize())


def price(s):
    s = (s or "").strip()
    return "" if s == "" else s


def gpu_mem_mib(gpu_info, count):
    """GpuInfo is a Python dict literal whose SizeInMiB is per GPU (Lambda's TotalGpuMemoryInMiB
    wrongly repeats it), except in Vast's rows, where SizeInMiB is the total of a multi-GPU offer:
    callers pass Vast's count so that the total is divided by it, and "1" elsewhere."""
    m = re.search(r"'SizeInMiB':\s*([0-9]+)", gpu_info or "")
    if not m:
        return ""
    size = int(m.group(1))
    t = re.search(r"'TotalGpuMemoryInMiB':\s*([0-9]+)", gpu_info or "")
    n = Decimal(count or "1")
    if t and n > 1 and int(t.group(1)) == size and n == n.to_integral_value():
        size //= int(n)
    return str(size)


def refine_accelerator(cloud, instance_type, acc, mem_gib_per_gpu):
    """The exact GPU name where the source's name covers several parts (see the module doc).
    mem_gib_per_gpu: the source's per-GPU memory in GiB, or None where it gives none."""
    name = instance_type.lower()
    if acc == "H100":
        if "pcie" in name:
            return "H100-PCIe"
        if "nvl" in name or (cloud == "azure" and AZURE_H100_NVL.match(instance_type)):
            return "H100-NVL"
    if acc == "A100" and mem_gib_per_gpu is not None and mem_gib_per_gpu >= 79:
        return "A100-80GB"
    if acc == "V100" and mem_gib_per_gpu is not None and mem_gib_per_gpu >= 31:
        return "V100-32GB"
    return acc


def aws_mem_gib_per_gpu(raw, count):
    """GpuMemoryRaw is per GPU for most families ("24 GB GDDR6") but the total of the instance for
    the HBM families p4d/p4de/p5/p5e/p6-b200 ("640 GB HBM2e" on 8 GPUs) and per GPU again for
    p6-b300 ("262 GB HBM3e"). An HBM figure that still leaves at least 40 GB per GPU when divided
    by the count is a total; anything else is per GPU. None when the source says "Unknown"."""
    m = re.match(r"([0-9.]+)\s*GB\s*(\S*)", raw or "")
    if not m:
        return None
    gb, kind = Decimal(m.group(1)), m.group(2)
    n = Decimal(count or "1")
    if n > 1 and kind.upper().startswith("HBM") and gb / n >= 40:
        return gb / n
    return gb


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def gcp(src):
    rows = read(os.path.join(src, "skypilot_format", "gcp_vms.csv"))
    hosts = {}  # (type, zone) -> row
    for r in rows:
        if r["InstanceType"]:
            hosts[(r["InstanceType"], r["AvailabilityZone"])] = r
    fixed = {  # (accelerator, count) -> host type
        ("A100", 1): "a2-highgpu-1g", ("A100", 2): "a2-highgpu-2g", ("A100", 4): "a2-highgpu-4g",
        ("A100", 8): "a2-highgpu-8g", ("A100", 16): "a2-megagpu-16g",
        ("A100-80GB", 1): "a2-ultragpu-1g", ("A100-80GB", 2): "a2-ultragpu-2g",
        ("A100-80GB", 4): "a2-ultragpu-4g", ("A100-80GB", 8): "a2-ultragpu-8g",
        ("H100", 1): "a3-highgpu-1g", ("H100", 2): "a3-highgpu-2g", ("H100", 4): "a3-highgpu-4g",
        ("H100", 8): "a3-highgpu-8g", ("H100-MEGA", 8): "a3-megagpu-8g", ("H200", 8): "a3-ultragpu-8g",
        ("B200", 8): "a4-highgpu-8g",
        ("L4", 2): "g2-standard-24", ("L4", 4): "g2-standard-48", ("L4", 8): "g2-standard-96",
    }
    # One L4 fits five g2 shapes that differ only in vCPUs and RAM (and price): each is an offer, so
    # that the cheapest 1 x L4 machine (g2-standard-4) is not lost behind g2-standard-8.
    one_l4 = ["g2-standard-4", "g2-standard-8", "g2-standard-12", "g2-standard-16", "g2-standard-32"]
    out, missing_host = [], 0
    for r in rows:
        acc = r["AcceleratorName"]
        if r["InstanceType"] or not acc or NON_GPU_ACCEL.match(acc):
            continue
        count = int(Decimal(r["AcceleratorCount"]))
        host_types = [fixed[(acc, count)]] if (acc, count) in fixed else []
        if acc == "L4" and count == 1:
            host_types = one_l4
        if not host_types and acc in ("T4", "V100", "P100", "P4"):
            host_types = ["n1-standard-%d" % min(8 * count, 96)]
        found = [(t, hosts.get((t, r["AvailabilityZone"]))) for t in host_types]
        found = [(t, h) for t, h in found if h is not None]
        if not found:
            missing_host += 1
            continue
        for host_type, host in found:
            od = spot = ""
            if r["Price"] and host["Price"]:
                od = str(Decimal(r["Price"]) + Decimal(host["Price"]))
            if r["SpotPrice"] and host["SpotPrice"]:
                spot = str(Decimal(r["SpotPrice"]) + Decimal(host["SpotPrice"]))
            out.append({
                "cloud": "gcp", "region": r["Region"], "zone": r["AvailabilityZone"], "instance_type": host_type,
                "accelerator": acc, "gpu_count": str(count), "gpu_mem_mib": gpu_mem_mib(r["GpuInfo"], "1"),
                "vcpus": num(host["vCPUs"]), "ram_gib": num(host["MemoryGiB"]), "ondemand_usd_h": od,
                "host_usd_h": host["Price"], "spot_usd_h": spot, "spot_kind": "quoted" if spot else "",
                "aws_interruption_bucket": "", "reserved_1y_usd_h": "",
            })
    print("gcp: %d offers, %d accelerator rows without a host VM in their zone" % (len(out), missing_host),
          file=sys.stderr)
    return out


def simple(src, rel, cloud, spot_zero_is_none=False):
    out = []
    for r in read(os.path.join(src, rel)):
        acc = r.get("AcceleratorName", "")
        # Rows without a GPU name are kept when the shape is a GPU family (Azure MI300X/GB200), so
        # that the loader counts them as unknown GPUs instead of silently losing them.
        if not r.get("AcceleratorCount"):
            continue
        if acc and NON_GPU_ACCEL.match(acc):
            continue
        spot = price(r.get("SpotPrice"))
        if spot_zero_is_none and spot and Decimal(spot) == 0:
            spot = ""
        mem = gpu_mem_mib(r.get("GpuInfo", ""), r["AcceleratorCount"] if cloud == "vast" else "1")
        acc = refine_accelerator(cloud, r["InstanceType"], acc, Decimal(mem) / 1024 if mem else None)
        out.append({
            "cloud": cloud, "region": r["Region"], "zone": r.get("AvailabilityZone", ""),
            "instance_type": r["InstanceType"], "accelerator": acc, "gpu_count": num(r["AcceleratorCount"]),
            "gpu_mem_mib": mem, "vcpus": num(r["vCPUs"]),
            "ram_gib": num(r["MemoryGiB"]), "ondemand_usd_h": price(r["Price"]), "host_usd_h": "",
            "spot_usd_h": spot, "spot_kind": "quoted" if spot else "", "aws_interruption_bucket": "",
            "reserved_1y_usd_h": "",
        })
    print("%s: %d offers" % (cloud, len(out)), file=sys.stderr)
    return out


def aws(src):
    vantage = read(os.path.join(src, "aws", "aws_gpu_ondemand_vantage.csv"))
    advisor = {}
    for r in read(os.path.join(src, "aws", "aws_spot_advisor_gpu.csv")):
        if r["OS"] == "Linux":
            advisor[(r["Region"], r["InstanceType"])] = r
    sample = read(os.path.join(src, "aws", "aws_skypilot_v8_p5_p6_sample.csv"))
    sampled = {(r["InstanceType"], r["Region"]) for r in sample}
    # A reservation is bought per region, so the sample's zone rows take their region's price.
    reserved = {(r["InstanceType"], r["Region"]): price(r["ReservedUSDPerHour"]) for r in vantage if r["Region"]}
    out = []
    for r in vantage:
        model = r["GpuModel"]
        if not r["Region"] or not model.startswith("NVIDIA ") or not r["OnDemandUSDPerHour"]:
            continue
        if (r["InstanceType"], r["Region"]) in sampled:
            continue
        acc = model[len("NVIDIA "):].replace(" Blackwell", "").replace("Grace ", "")
        acc = refine_accelerator("aws", r["InstanceType"], acc, aws_mem_gib_per_gpu(r["GpuMemoryRaw"], r["GpuCount"]))
        ram = re.match(r"([0-9.]+)", r["MemoryRaw"] or "")
        spot, bucket, kind = "", "", ""
        adv = advisor.get((r["Region"], r["InstanceType"]))
        if adv:
            saving = Decimal(adv["SavingsPctVsOnDemand"])
            est = Decimal(r["OnDemandUSDPerHour"]) * (Decimal(100) - saving) / Decimal(100)
            spot = str(est.quantize(Decimal("0.000001"), rounding=ROUND_HALF_EVEN))
            bucket, kind = adv["InterruptionRangeIndex"], "estimated"
        out.append({
            "cloud": "aws", "region": r["Region"], "zone": "", "instance_type": r["InstanceType"],
            "accelerator": acc, "gpu_count": num(r["GpuCount"]), "gpu_mem_mib": "", "vcpus": num(r["vCPUs"]),
            "ram_gib": num(ram.group(1)) if ram else "", "ondemand_usd_h": r["OnDemandUSDPerHour"],
            "host_usd_h": "", "spot_usd_h": spot, "spot_kind": kind, "aws_interruption_bucket": bucket,
            "reserved_1y_usd_h": price(r["ReservedUSDPerHour"]),
        })
    for r in sample:
        adv = advisor.get((r["Region"], r["InstanceType"]))
        spot = price(r["SpotPrice"])
        out.append({
            "cloud": "aws", "region": r["Region"], "zone": r["AvailabilityZone"], "instance_type": r["InstanceType"],
            "accelerator": r["AcceleratorName"], "gpu_count": num(r["AcceleratorCount"]), "gpu_mem_mib": "",
            "vcpus": num(r["vCPUs"]), "ram_gib": num(r["MemoryGiB"]), "ondemand_usd_h": price(r["Price"]),
            "host_usd_h": "", "spot_usd_h": spot, "spot_kind": "quoted" if spot else "",
            "aws_interruption_bucket": adv["InterruptionRangeIndex"] if adv else "",
            "reserved_1y_usd_h": reserved.get((r["InstanceType"], r["Region"]), ""),
        })
    print("aws: %d offers (%d per-zone rows from the SkyPilot sample)" % (len(out), len(sample)), file=sys.stderr)
    return out


def main(argv):
    argv = list(argv)
    as_of = PRICES_AS_OF
    if len(argv) > 2 and argv[1] == "--prices-as-of":
        as_of = argv[2]
        del argv[1:3]
    if not re.match(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", as_of):
        print("--prices-as-of must be YYYY-MM-DD, got %r" % as_of, file=sys.stderr)
        return 2
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    src = argv[1]
    dst = argv[2] if len(argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "data", "catalog", "offers.csv")
    rows = []
    rows += aws(src)
    rows += simple(src, "skypilot_format/azure_vms_gpu.csv", "azure")
    rows += gcp(src)
    rows += simple(src, "skypilot_format/lambda_vms.csv", "lambda")
    rows += simple(src, "skypilot_catalog_v8/nebius_vms_gpu.csv", "nebius")
    rows += simple(src, "skypilot_catalog_v8/oci_vms_gpu_one_region.csv", "oci")
    rows += simple(src, "skypilot_format/vast_vms.csv", "vast", spot_zero_is_none=True)
    rows.sort(key=lambda r: (r["cloud"], r["instance_type"], r["region"], r["zone"], r["accelerator"]))
    # One row per offer, as gpufleet's loader requires (a second row for the same cloud, region,
    # zone, instance type, GPU and count is an error there): a refresh that would break the
    # controller's start stops here instead, naming the rows.
    seen = {}
    for r in rows:
        key = (r["cloud"], r["region"], r["zone"], r["instance_type"], r["accelerator"].lower(), r["gpu_count"])
        if key in seen:
            print("duplicate offer %s: %r and %r; fix the source or merge them" % (" ".join(key), seen[key], r),
                  file=sys.stderr)
            return 1
        seen[key] = r
    with open(dst, "w", newline="") as f:
        f.write("# prices_as_of: %s\n" % as_of)
        w = csv.DictWriter(f, fieldnames=HEADER, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print("wrote %d offers to %s" % (len(rows), dst), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
