#!/usr/bin/env python3
"""Plots the MoE offload demo's per-batch figures: latency and expert hit rate
of the offloaded, all-resident and naive synchronous runs.

    moe_offload --csv moe_offload.csv          (or examples/python/moe_offload.py --csv ...)
    python3 tools/plot_moe.py moe_offload.csv [-o moe_offload.png] [--title TEXT]

The CSV is what the demo's --csv option writes: a header line
"run,batch,latency_ms,wait_ms,hit_rate" and one row per run and batch. The
plot has two panels sharing the batch axis: latency per batch (solid; the
part of it spent waiting on transfers dashed), and the hit rate per batch
(dots) with the running hit rate (line). Needs matplotlib (Agg backend, no
display).
"""
import argparse
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# The demo's run names, in the order it runs them, with their colours.
RUNS = (("offloaded", "tab:blue"), ("resident", "tab:green"), ("naive", "tab:red"))
COLUMNS = ("run", "batch", "latency_ms", "wait_ms", "hit_rate")


def read(path):
    """{run: {"batch": [...], "latency_ms": [...], "wait_ms": [...], "hit_rate": [...]}}"""
    runs = {}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise SystemExit(f"{path}: not a moe_offload CSV (no column {', '.join(missing)})")
        for row in reader:
            series = runs.setdefault(row["run"], {c: [] for c in COLUMNS[1:]})
            series["batch"].append(int(row["batch"]) + 1)
            for c in COLUMNS[2:]:
                series[c].append(float(row[c]))
    if not runs:
        raise SystemExit(f"{path}: no rows")
    return runs


def running_mean(values):
    out, total = [], 0.0
    for i, v in enumerate(values, 1):
        total += v
        out.append(total / i)
    return out


def plot(runs, output, title=None):
    fig, (lat, hit) = plt.subplots(2, 1, sharex=True, figsize=(10, 7), gridspec_kw={"height_ratios": [3, 2]})
    colours = dict(RUNS)
    names = [n for n, _ in RUNS if n in runs] + sorted(n for n in runs if n not in colours)
    for name in names:
        s = runs[name]
        colour = colours.get(name)
        mean = sum(s["latency_ms"]) / len(s["latency_ms"])
        lat.plot(s["batch"], s["latency_ms"], color=colour, lw=1.6, label=f"{name} (mean {mean:.1f} ms)")
        if any(s["wait_ms"]):
            lat.plot(s["batch"], s["wait_ms"], color=colour, lw=1.0, ls="--", alpha=0.8,
                     label=f"{name}: waiting on transfers")
        hit.plot(s["batch"], [100 * h for h in s["hit_rate"]], color=colour, ls="none", marker="o", ms=3.5,
                 alpha=0.55)
        overall = 100 * running_mean(s["hit_rate"])[-1]
        hit.plot(s["batch"], [100 * h for h in running_mean(s["hit_rate"])], color=colour, lw=1.6,
                 label=f"{name} (overall {overall:.0f} %)")
    lat.set_ylabel("latency per batch (ms)")
    lat.set_ylim(bottom=0)
    lat.grid(alpha=0.3)
    lat.legend(fontsize=8, ncol=2, loc="upper right")
    hit.set_ylabel("expert hit rate (%)")
    hit.set_xlabel("batch")
    hit.set_ylim(-5, 105)
    hit.grid(alpha=0.3)
    hit.legend(fontsize=8, loc="lower right", title="dots: per batch; lines: running", title_fontsize=8)
    fig.suptitle(title or "StrideWeave MoE expert offload: per-batch latency and hit rate", fontsize=11)
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("csv", help="the CSV written by moe_offload --csv")
    parser.add_argument("-o", "--output", help="PNG to write (default: the CSV's name with .png)")
    parser.add_argument("--title", help="the plot's title")
    args = parser.parse_args(argv)
    output = args.output or os.path.splitext(args.csv)[0] + ".png"
    plot(read(args.csv), output, args.title)
    print(f"plot_moe: wrote {output}")
    return output


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
