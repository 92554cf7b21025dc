#!/usr/bin/env python3
"""Rebuilds data/catalog/offers.csv from the clouds' own published price files.

Usage: scripts/update_catalog.py --from DIR [--out CSV] [--prices-as-of YYYY-MM-DD] [--keep CSV]
  --from DIR        a folder of JSON files as the clouds publish them (any names, any subfolders;
                    each file is recognised by its shape):
                      AWS    the Price List bulk offer file for AmazonEC2 (`products` + `terms.OnDemand`,
                             and `terms.Reserved` where present), the whole file or a regional one;
                             `aws ec2 describe-spot-price-history --output json` (`SpotPriceHistory`),
                             one file per region;
                             optional: the Spot Advisor feed spot-advisor-data.json (`spot_advisor`),
                             for the interruption buckets;
                      GCP    Cloud Billing Catalog API pages of services/6F81-5844-456A/skus (`skus`);
                      Azure  Retail Prices API pages (`Items`), e.g. filtered on
                             serviceName eq 'Virtual Machines'.
  --out CSV         default data/catalog/offers.csv
  --prices-as-of    the date stamped on the first line; default: the newest date the files carry
                    (AWS publicationDate, spot Timestamp, GCP effectiveTime, Azure effectiveStartDate).
                    Give the day you fetched the files where you know it.
  --keep CSV        copy the rows of clouds these files do not cover (lambda, nebius, oci, vast) from
                    an existing catalog, e.g. the shipped one; their prices keep their own age.

Python 3 standard library only; no network access (fetch the files first, see docs/cost.md).
The output has the columns of scripts/make_catalog.py and is deterministic: prices are kept as
the decimal text the files give (JSON numbers are read as Decimal), sums are done in Decimal, rows
are sorted, so the same files give the same bytes.

What it does:
  * AWS: one row per (instance type, region) of a Linux, shared-tenancy, no-preinstalled-software,
    capacity "Used" Compute Instance with an hourly OnDemand price, for the GPU families in
    AWS_FAMILIES. Where spot history has prices for the type in that region, one row per
    availability zone instead, with the zone's latest Linux/UNIX spot price (`quoted`). The Spot
    Advisor feed, if given, adds the interruption bucket. reserved_1y_usd_h is the SKU's Reserved
    term of 1yr, standard offering class, No Upfront (its hourly rate; the shape make_catalog.py's
    vantage source gives); blank where the file has no such term.
  * GCP: the billing catalog prices a GPU VM in parts, per region: vCPU-hours and GiB-hours of its
    family (A2/A3/A4/G2/N1 "Instance Core"/"Instance Ram") plus GPU-hours ("Nvidia L4 GPU ...").
    Each machine shape of GCP_SHAPES is priced as vCPUs x core + GiB x ram + GPUs x gpu, for
    on-demand and for spot (usageType Preemptible); host_usd_h is the core + ram part. Zone is
    empty: the catalog prices regions. Commitment SKUs are ignored (reserved_1y_usd_h blank).
  * Azure: `Consumption` items of Virtual Machines in hours, Linux (no "Windows" in productName),
    not Low Priority; meterName with "Spot" is the spot price (Reservation items ignored:
    reserved_1y_usd_h blank). Shapes (GPU, count, vCPUs, RAM)
    come from AZURE_SHAPES, as the price API does not give them.
Shapes it does not know are counted on stderr, never guessed. A file that is not JSON, or not in
one of these shapes, stops the run with its name and line.
"""

import argparse
import csv
import json
import os
import re
import sys
from decimal import Decimal

HEADER = [
    "cloud", "region", "zone", "instance_type", "accelerator", "gpu_count", "gpu_mem_mib", "vcpus",
    "ram_gib", "ondemand_usd_h", "host_usd_h", "spot_usd_h", "spot_kind", "aws_interruption_bucket",
    "reserved_1y_usd_h",
]

# EC2 family -> GPU (canonical gpufleet names; the price list gives the count, vCPUs and memory but
# not the GPU model).
AWS_FAMILIES = {
    "p2": "K80", "p3": "V100", "p3dn": "V100-32GB", "p4d": "A100", "p4de": "A100-80GB",
    "p5": "H100", "p5e": "H200", "p5en": "H200", "p6-b200": "B200", "p6-b300": "B300",
    "g3": "M60", "g3s": "M60", "g4dn": "T4", "g5": "A10G", "g6": "L4", "gr6": "L4", "g6e": "L40S",
}

# GCP machine type -> (family in the SKU descriptions, vCPUs, RAM GiB, GPU, GPUs).
GCP_SHAPES = {
    "a2-highgpu-1g": ("A2", 12, 85, "A100", 1), "a2-highgpu-2g": ("A2", 24, 170, "A100", 2),
    "a2-highgpu-4g": ("A2", 48, 340, "A100", 4), "a2-highgpu-8g": ("A2", 96, 680, "A100", 8),
    "a2-megagpu-16g": ("A2", 96, 1360, "A100", 16),
    "a2-ultragpu-1g": ("A2", 12, 170, "A100-80GB", 1), "a2-ultragpu-2g": ("A2", 24, 340, "A100-80GB", 2),
    "a2-ultragpu-4g": ("A2", 48, 680, "A100-80GB", 4), "a2-ultragpu-8g": ("A2", 96, 1360, "A100-80GB", 8),
    "a3-highgpu-1g": ("A3", 26, 234, "H100", 1), "a3-highgpu-2g": ("A3", 52, 468, "H100", 2),
    "a3-highgpu-4g": ("A3", 104, 936, "H100", 4), "a3-highgpu-8g": ("A3", 208, 1872, "H100", 8),
    "a3-megagpu-8g": ("A3", 208, 1872, "H100-MEGA", 8), "a3-ultragpu-8g": ("A3", 224, 2952, "H200", 8),
    "a4-highgpu-8g": ("A4", 224, 3968, "B200", 8),
    "g2-standard-4": ("G2", 4, 16, "L4", 1), "g2-standard-8": ("G2", 8, 32, "L4", 1),
    "g2-standard-12": ("G2", 12, 48, "L4", 1), "g2-standard-16": ("G2", 16, 64, "L4", 1),
    "g2-standard-24": ("G2", 24, 96, "L4", 2), "g2-standard-32": ("G2", 32, 128, "L4", 1),
    "g2-standard-48": ("G2", 48, 192, "L4", 4), "g2-standard-96": ("G2", 96, 384, "L4", 8),
}
# T4/V100/P100/P4 attach to N1 hosts; as in make_catalog.py, n1-standard-(8 x GPUs).
for _gpu, _counts in (("T4", (1, 2, 4)), ("V100", (1, 2, 4, 8)), ("P100", (1, 2, 4)), ("P4", (1, 2, 4))):
    for _n in _counts:
        _v = min(8 * _n, 96)
        GCP_SHAPES["n1-standard-%d+%dx%s" % (_v, _n, _gpu)] = ("N1", _v, Decimal(_v) * Decimal("3.75"), _gpu, _n)

# GPU name in a GCP SKU description ("Nvidia Tesla A100 80GB GPU running in ...") -> gpufleet name.
GCP_GPUS = {
    "T4": "T4", "V100": "V100", "P100": "P100", "P4": "P4", "A100": "A100", "A100 80GB": "A100-80GB",
    "L4": "L4", "H100 80GB": "H100", "H100 80GB Mega": "H100-MEGA", "H100 Mega 80GB": "H100-MEGA",
    "H200 141GB": "H200", "B200": "B200",
}

# Azure armSkuName -> (GPU, GPUs, vCPUs, RAM GiB). The NC H100 v5 shapes carry the H100 NVL card.
AZURE_SHAPES = {
    "Standard_NC4as_T4_v3": ("T4", 1, 4, 28), "Standard_NC8as_T4_v3": ("T4", 1, 8, 56),
    "Standard_NC16as_T4_v3": ("T4", 1, 16, 110), "Standard_NC64as_T4_v3": ("T4", 4, 64, 440),
    "Standard_NC6s_v3": ("V100", 1, 6, 112), "Standard_NC12s_v3": ("V100", 2, 12, 224),
    "Standard_NC24s_v3": ("V100", 4, 24, 448), "Standard_NC24rs_v3": ("V100", 4, 24, 448),
    "Standard_ND40rs_v2": ("V100-32GB", 8, 40, 672),
    "Standard_NC8ads_A10_v4": ("A10", 1, 8, 100), "Standard_NC16ads_A10_v4": ("A10", 1, 16, 200),
    "Standard_NC32ads_A10_v4": ("A10", 2, 32, 400),
    "Standard_NV36ads_A10_v5": ("A10", 1, 36, 440), "Standard_NV36adms_A10_v5": ("A10", 1, 36, 880),
    "Standard_NV72ads_A10_v5": ("A10", 2, 72, 880),
    "Standard_NC24ads_A100_v4": ("A100-80GB", 1, 24, 220), "Standard_NC48ads_A100_v4": ("A100-80GB", 2, 48, 440),
    "Standard_NC96ads_A100_v4": ("A100-80GB", 4, 96, 880),
    "Standard_ND96asr_v4": ("A100", 8, 96, 900), "Standard_ND96amsr_A100_v4": ("A100-80GB", 8, 96, 1800),
    "Standard_NC40ads_H100_v5": ("H100-NVL", 1, 40, 320), "Standard_NCC40ads_H100_v5": ("H100-NVL", 1, 40, 320),
    "Standard_NC80adis_H100_v5": ("H100-NVL", 2, 80, 640),
    "Standard_ND96isr_H100_v5": ("H100", 8, 96, 1900), "Standard_ND96isr_H200_v5": ("H200", 8, 96, 1850),
    "Standard_ND96isr_MI300X_v5": ("MI300X", 8, 96, 1850),
    "Standard_NV12s_v3": ("M60", 1, 12, 112), "Standard_NV24s_v3": ("M60", 2, 24, 224),
    "Standard_NV48s_v3": ("M60", 4, 48, 448),
}


class InputError(Exception):
    pass


def num(d):
    """Decimal -> shortest plain text: Decimal('208.0') -> '208', Decimal('0.7060') -> '0.706'."""
    d = Decimal(d)
    if d == d.to_integral_value():
        return str(d.quantize(Decimal(1)))
    return format(d.normalize(), "f")


def date_of(text):
    m = re.match(r"([0-9]{4}-[0-9]{2}-[0-9]{2})", str(text or ""))
    return m.group(1) if m else None


def load_json(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as e:
        raise InputError("%s:%d: not JSON: %s" % (path, e.lineno, e.msg))


def classify(paths):
    kinds = {"aws_offer": [], "aws_spot": [], "aws_advisor": [], "gcp": [], "azure": []}
    for p in paths:
        d = load_json(p)
        if isinstance(d, dict) and "products" in d and "terms" in d:
            kinds["aws_offer"].append((p, d))
        elif isinstance(d, dict) and "SpotPriceHistory" in d:
            kinds["aws_spot"].append((p, d))
        elif isinstance(d, dict) and "spot_advisor" in d:
            kinds["aws_advisor"].append((p, d))
        elif isinstance(d, dict) and "skus" in d:
            kinds["gcp"].append((p, d))
        elif isinstance(d, dict) and "Items" in d:
            kinds["azure"].append((p, d))
        else:
            raise InputError("%s:1: not a price file this script knows (expected an AWS Price List offer "
                             "file, describe-spot-price-history output, the Spot Advisor feed, a GCP "
                             "Cloud Billing skus page or an Azure Retail Prices page)" % p)
    return kinds


def row(**kw):
    r = {k: "" for k in HEADER}
    r.update(kw)
    return r


def aws(offers, spots, advisors, dates, unknown):
    od = {}  # (type, region) -> (price text, vcpus, ram, gpus)
    for path, d in offers:
        dates.append(date_of(d.get("publicationDate")))
        terms = d["terms"].get("OnDemand", {})
        reserved_terms = d["terms"].get("Reserved", {})
        for sku, p in d["products"].items():
            a = p.get("attributes", {})
            if p.get("productFamily") != "Compute Instance":
                continue
            if (a.get("operatingSystem"), a.get("tenancy"), a.get("preInstalledSw"),
                    a.get("capacitystatus", "Used")) != ("Linux", "Shared", "NA", "Used"):
                continue
            itype, region = a.get("instanceType", ""), a.get("regionCode", "")
            family = itype.split(".")[0]
            gpus = a.get("gpu", "0")
            if family not in AWS_FAMILIES:
                if gpus not in ("", "0", "NA"):
                    unknown["aws " + family] = unknown.get("aws " + family, 0) + 1
                continue
            price = None
            for term in terms.get(sku, {}).values():
                for dim in term.get("priceDimensions", {}).values():
                    if dim.get("unit") == "Hrs" and "USD" in dim.get("pricePerUnit", {}):
                        price = Decimal(dim["pricePerUnit"]["USD"])
            if price is None or price == 0:
                continue
            reserved = None
            for term in reserved_terms.get(sku, {}).values():
                t = term.get("termAttributes", {})
                if (t.get("LeaseContractLength"), t.get("OfferingClass"), t.get("PurchaseOption")) != \
                        ("1yr", "standard", "No Upfront"):
                    continue
                for dim in term.get("priceDimensions", {}).values():
                    if dim.get("unit") == "Hrs" and "USD" in dim.get("pricePerUnit", {}):
                        reserved = Decimal(dim["pricePerUnit"]["USD"])
            ram = re.match(r"([0-9.,]+)", a.get("memory", ""))
            od[(itype, region)] = (price, a.get("vcpu", ""), ram.group(1).replace(",", "") if ram else "", gpus,
                                   num(reserved) if reserved else "")
    latest = {}  # (type, zone) -> (timestamp, price)
    for path, d in spots:
        for i, e in enumerate(d["SpotPriceHistory"]):
            if not str(e.get("ProductDescription", "")).startswith("Linux/UNIX"):
                continue
            for k in ("AvailabilityZone", "InstanceType", "SpotPrice", "Timestamp"):
                if k not in e:
                    raise InputError("%s:1: SpotPriceHistory[%d] lacks %s" % (path, i, k))
            key = (e["InstanceType"], e["AvailabilityZone"])
            if key not in latest or e["Timestamp"] > latest[key][0]:
                latest[key] = (e["Timestamp"], e["SpotPrice"])
            dates.append(date_of(e["Timestamp"]))
    zones = {}  # (type, region) -> [(zone, spot)]
    for (itype, zone), (_, spot) in latest.items():
        m = re.match(r"^([a-z]{2}(?:-gov)?-[a-z]+-[0-9]+)", zone)
        if m:
            zones.setdefault((itype, m.group(1)), []).append((zone, spot))
    bucket = {}
    for path, d in advisors:
        for region, oses in d["spot_advisor"].items():
            for itype, v in oses.get("Linux", {}).items():
                bucket[(itype, region)] = str(v.get("r", ""))
    out = []
    for (itype, region), (price, vcpus, ram, gpus, reserved) in od.items():
        base = dict(cloud="aws", region=region, instance_type=itype, accelerator=AWS_FAMILIES[itype.split(".")[0]],
                    gpu_count=num(gpus), vcpus=num(vcpus) if vcpus else "", ram_gib=num(ram) if ram else "",
                    ondemand_usd_h=num(price), reserved_1y_usd_h=reserved)
        b = bucket.get((itype, region), "")
        spot_zones = zones.get((itype, region))
        if not spot_zones:
            out.append(row(**base))
            continue
        for zone, spot in sorted(spot_zones):
            out.append(row(zone=zone, spot_usd_h=num(Decimal(spot)), spot_kind="quoted", aws_interruption_bucket=b, **base))
    return out


def gcp(pages, dates, unknown):
    rate = {}  # (kind, name, region, market) -> Decimal per hour (per vCPU, per GiB or per GPU)
    for path, d in pages:
        for i, s in enumerate(d["skus"]):
            desc = s.get("description", "")
            usage = s.get("category", {}).get("usageType", "")
            if usage not in ("OnDemand", "Preemptible") or "Commitment" in desc:
                continue
            market = "spot" if usage == "Preemptible" else "od"
            plain = re.sub(r"^Spot Preemptible ", "", desc)
            plain = plain.replace(" attached to Spot Preemptible VMs", "")
            g = re.match(r"^Nvidia (?:Tesla )?(.+?) GPU (?:running in|attached to)", plain, re.I)
            h = re.match(r"^(A2|A3|A4|G2|N1 Predefined) Instance (Core|Ram) running in", plain)
            if g and "Workstation" not in plain:
                name = GCP_GPUS.get(g.group(1))
                if name is None:
                    unknown["gcp " + g.group(1)] = unknown.get("gcp " + g.group(1), 0) + 1
                    continue
                key = ("gpu", name)
            elif h:
                key = (h.group(2).lower(), h.group(1).split(" ")[0])
            else:
                continue
            infos = s.get("pricingInfo") or []
            if not infos:
                raise InputError("%s:1: skus[%d] (%s) has no pricingInfo" % (path, i, desc))
            info = infos[-1]
            dates.append(date_of(info.get("effectiveTime")))
            tiers = info.get("pricingExpression", {}).get("tieredRates") or []
            if not tiers:
                raise InputError("%s:1: skus[%d] (%s) has no tieredRates" % (path, i, desc))
            unit = tiers[-1]["unitPrice"]
            price = Decimal(str(unit.get("units") or "0")) + Decimal(unit.get("nanos") or 0) / Decimal(10**9)
            for region in s.get("serviceRegions", []):
                rate[key + (region, market)] = price
    regions = sorted({k[2] for k in rate})
    out = []
    for shape, (family, vcpus, ram, gpu, n) in GCP_SHAPES.items():
        itype = shape.split("+")[0]
        for region in regions:
            prices = {}
            for market in ("od", "spot"):
                core = rate.get(("core", family, region, market))
                mem = rate.get(("ram", family, region, market))
                g = rate.get(("gpu", gpu, region, market))
                if core is not None and mem is not None and g is not None:
                    host = core * vcpus + mem * Decimal(ram)
                    prices[market] = (host + g * n, host)
            if "od" not in prices:
                continue
            spot = prices.get("spot")
            out.append(row(cloud="gcp", region=region, instance_type=itype, accelerator=gpu, gpu_count=str(n),
                           vcpus=str(vcpus), ram_gib=num(ram), ondemand_usd_h=num(prices["od"][0]),
                           host_usd_h=num(prices["od"][1]), spot_usd_h=num(spot[0]) if spot else "",
                           spot_kind="quoted" if spot else ""))
    return out


def azure(pages, dates, unknown):
    prices = {}  # (sku, region) -> {"od": Decimal, "spot": Decimal}
    for path, d in pages:
        for i, it in enumerate(d["Items"]):
            if it.get("serviceName") != "Virtual Machines" or it.get("type") != "Consumption":
                continue
            if it.get("unitOfMeasure") != "1 Hour" or "Windows" in it.get("productName", ""):
                continue
            meter = it.get("meterName", "")
            if "Low Priority" in meter:
                continue
            sku, region = it.get("armSkuName", ""), it.get("armRegionName", "")
            if "retailPrice" not in it:
                raise InputError("%s:1: Items[%d] (%s) has no retailPrice" % (path, i, sku))
            if sku not in AZURE_SHAPES:
                if sku.startswith("Standard_N"):
                    unknown["azure " + sku] = unknown.get("azure " + sku, 0) + 1
                continue
            dates.append(date_of(it.get("effectiveStartDate")))
            prices.setdefault((sku, region), {})["spot" if "Spot" in meter else "od"] = Decimal(it["retailPrice"])
    out = []
    for (sku, region), p in prices.items():
        if "od" not in p:
            continue
        gpu, n, vcpus, ram = AZURE_SHAPES[sku]
        spot = p.get("spot")
        out.append(row(cloud="azure", region=region, instance_type=sku, accelerator=gpu, gpu_count=str(n),
                       vcpus=str(vcpus), ram_gib=str(ram), ondemand_usd_h=num(p["od"]),
                       spot_usd_h=num(spot) if spot is not None else "", spot_kind="quoted" if spot is not None else ""))
    return out


def keep_rows(path, covered):
    with open(path, newline="") as f:
        lines = [l for l in f if not l.startswith("#")]
    return [r for r in csv.DictReader(lines) if r["cloud"] not in covered]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--from", dest="src", required=True)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                                  "catalog", "offers.csv"))
    ap.add_argument("--prices-as-of")
    ap.add_argument("--keep")
    args = ap.parse_args(argv[1:])
    if args.prices_as_of is not None and not re.match(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", args.prices_as_of):
        print("update_catalog: --prices-as-of must be YYYY-MM-DD, got %r" % args.prices_as_of, file=sys.stderr)
        return 2
    paths = []
    for root, _, files in os.walk(args.src):
        paths += [os.path.join(root, f) for f in files if f.endswith(".json")]
    paths.sort()
    if not paths:
        print("update_catalog: no .json price files under %s" % args.src, file=sys.stderr)
        return 2
    try:
        kinds = classify(paths)
        dates, unknown = [], {}
        rows = aws(kinds["aws_offer"], kinds["aws_spot"], kinds["aws_advisor"], dates, unknown)
        rows += gcp(kinds["gcp"], dates, unknown)
        rows += azure(kinds["azure"], dates, unknown)
    except InputError as e:
        print("update_catalog: %s" % e, file=sys.stderr)
        return 1
    except (KeyError, TypeError, AttributeError) as e:
        print("update_catalog: a price file is not in its documented shape (%s: %s)" % (type(e).__name__, e),
              file=sys.stderr)
        return 1
    covered = {r["cloud"] for r in rows}
    if args.keep:
        rows += keep_rows(args.keep, covered)
    as_of = args.prices_as_of or max((x for x in dates if x), default=None)
    if as_of is None:
        print("update_catalog: the files carry no date; pass --prices-as-of", file=sys.stderr)
        return 2
    rows.sort(key=lambda r: (r["cloud"], r["instance_type"], r["region"], r["zone"], r["accelerator"]))
    with open(args.out, "w", newline="") as f:
        f.write("# prices_as_of: %s\n" % as_of)
        w = csv.DictWriter(f, fieldnames=HEADER, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    for what, n in sorted(unknown.items()):
        print("update_catalog: skipped %d price(s) of %s (shape not in the script's tables)" % (n, what),
              file=sys.stderr)
    by_cloud = {}
    for r in rows:
        by_cloud[r["cloud"]] = by_cloud.get(r["cloud"], 0) + 1
    print("update_catalog: wrote %d offers (%s), prices as of %s, to %s" % (
        len(rows), ", ".join("%s %d" % kv for kv in sorted(by_cloud.items())), as_of, args.out), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
