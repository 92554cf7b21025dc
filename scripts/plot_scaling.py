#!/usr/bin/env python3
"""Plots scripts/bench_scaling.sh's CSV as an SVG: replay CPU time and peak memory against the
number of jobs, both on log-log axes, one line per policy, with a dotted line of linear growth
through each panel's smallest point for reference (a line parallel to it grows linearly).

    python3 scripts/plot_scaling.py CSV OUT.svg [TILE CLUSTER]

Uses the rows of CSV for TILE and CLUSTER (default: parallel, proportional) that ended ok; where
a (policy, jobs) cell was measured more than once, the last row wins. Standard library only.
"""
import csv
import math
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
W, H = 430, 320  # one panel
LEFT, RIGHT, TOP, BOTTOM = 62, 14, 34, 46


def load(path, tile, cluster):
    cells = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["tile"] != tile or row["cluster"] != cluster or row["outcome"] != "ok":
                continue
            cells[(row["policy"], int(row["jobs"]))] = (float(row["cpu_s"]), int(row["peak_rss_kib"]) / 1024.0)
    return cells


def decades(lo, hi):
    return [10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]


def label(v, unit=""):
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:g}{suffix}{unit}"
    return f"{v:g}{unit}"


def panel(x0, title, unit, series, out):
    xs = [x for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts]
    xt, yt = decades(min(xs), max(xs)), decades(min(ys), max(ys))
    lx0, lx1 = math.log10(xt[0]), math.log10(xt[-1])
    ly0, ly1 = math.log10(yt[0]), math.log10(yt[-1])

    def px(x):
        return x0 + LEFT + (math.log10(x) - lx0) / max(lx1 - lx0, 1e-9) * (W - LEFT - RIGHT)

    def py(y):
        return TOP + (ly1 - math.log10(y)) / max(ly1 - ly0, 1e-9) * (H - TOP - BOTTOM)

    out.append(f'<text x="{x0 + W / 2}" y="20" text-anchor="middle" font-weight="bold">{title}</text>')
    for x in xt:
        out.append(f'<line x1="{px(x):.1f}" y1="{TOP}" x2="{px(x):.1f}" y2="{H - BOTTOM}" stroke="#ddd"/>')
        out.append(f'<text x="{px(x):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{label(x)}</text>')
    for y in yt:
        out.append(f'<line x1="{x0 + LEFT}" y1="{py(y):.1f}" x2="{x0 + W - RIGHT}" y2="{py(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 + LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{label(y, unit)}</text>')
    out.append(f'<text x="{x0 + W / 2}" y="{H - 8}" text-anchor="middle">jobs in the trace</text>')
    # Linear growth through the smallest point.
    x_min = min(xs)
    y_at = min(y for pts in series.values() for x, y in pts if x == x_min)
    x_end = xt[-1]
    y_end = y_at * x_end / x_min
    if y_end > yt[-1]:
        x_end, y_end = x_min * yt[-1] / y_at, yt[-1]
    out.append(f'<line x1="{px(x_min):.1f}" y1="{py(y_at):.1f}" x2="{px(x_end):.1f}" y2="{py(y_end):.1f}" '
               'stroke="#888" stroke-dasharray="2,3"/>')
    for i, (policy, pts) in enumerate(sorted(series.items())):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(pts))
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
        out.append(f'<text x="{x0 + LEFT + 8}" y="{TOP + 14 + 14 * i}" fill="{colour}">{policy}</text>')
    out.append(f'<text x="{x0 + LEFT + 8}" y="{TOP + 14 + 14 * len(series)}" fill="#888">··· linear</text>')


def main():
    if len(sys.argv) not in (3, 5):
        sys.exit(__doc__)
    tile, cluster = (sys.argv[3], sys.argv[4]) if len(sys.argv) == 5 else ("parallel", "proportional")
    cells = load(sys.argv[1], tile, cluster)
    if not cells:
        sys.exit(f"plot_scaling.py: {sys.argv[1]} has no ok rows for tile={tile} cluster={cluster}")
    cpu, rss = {}, {}
    for (policy, jobs), (c, m) in cells.items():
        cpu.setdefault(policy, []).append((jobs, max(c, 0.01)))
        rss.setdefault(policy, []).append((jobs, m))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{H}" font-family="sans-serif" '
           'font-size="11">', f'<rect width="{2 * W}" height="{H}" fill="white"/>']
    panel(0, f"gpufleet sim: CPU time (Philly tiled {tile}, cluster {cluster})", " s", cpu, out)
    panel(W, "peak memory (RSS)", " MiB", rss, out)
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
