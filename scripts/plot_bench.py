#!/usr/bin/env python3
"""Plots bench_cifar results: images/s and scaling efficiency per configuration, and the
projection's efficiency per GPU count when the run had --project.

    bench_cifar --json bench.json [--repeats 3] [--project]
    scripts/plot_bench.py bench.json --out bench.png

images/s bars are the median of the run's repeats, with their min-max as error bars (JSON files
from before bench_cifar had --repeats have no spread: no error bars). An efficiency above 100 %,
which no scaling gives, is marked on its bar. Needs matplotlib (Debian: python3-matplotlib, which
scripts/install_deps.sh installs; see Note [Which python plots] in scripts/plot_common.py).
"""

import argparse
import json
import sys

from plot_common import pyplot

# Above this an efficiency is not real: the one-device row it was compared with was slowed
# (bench_cifar warns from the same 5 %).
IMPOSSIBLE_EFFICIENCY = 105


def load_rows(path):
    """The rows of a bench_cifar --json report (keys: its metric table, kMetrics in
    apps/bench_cifar/measurement.h), and its projection (None without --project)."""
    with open(path) as f:
        report = json.load(f)
    return report["rows"], report.get("projection")


def label(row):
    text = f"{row['mode']} x{int(row['devices'])}\nb{int(row['batch_size'])}"
    if row.get("overlap"):
        text += f"\noverlap {row['overlap']}"
    if row.get("dp_replicas") == "rebuilt":
        text += "\nrebuilt replicas"
    return text


def measured(row, key):
    return row.get("error") is None and row.get(key) is not None


def spread_of(rows):
    """(x, median, below, above) for each row with a min-max of images/s: the error bars."""
    bars = []
    for x, row in enumerate(rows):
        if measured(row, "images_per_s_min") and measured(row, "images_per_s_max"):
            median = row["images_per_s"]
            bars.append((x, median, median - row["images_per_s_min"],
                         row["images_per_s_max"] - median))
    return bars


def bar_panel(axis, rows, key, title, scale=1.0, reference=None):
    values = [row[key] * scale if measured(row, key) else 0 for row in rows]
    bars = axis.bar(range(len(rows)), values, color="tab:blue")
    for bar, row in zip(bars, rows):
        if row.get("error") is not None:
            axis.annotate("failed", (bar.get_x() + bar.get_width() / 2, 0), ha="center",
                          va="bottom", color="tab:red", fontsize=8)
    if reference is not None:
        axis.axhline(reference, color="grey", linestyle="--", linewidth=1)
    axis.set_xticks(range(len(rows)))
    axis.set_xticklabels([label(row) for row in rows], fontsize=8)
    axis.set_title(title)
    return bars


def images_panel(axis, rows):
    spread = spread_of(rows)
    title = "images/s (measured)"
    bar_panel(axis, rows, "images_per_s", title)
    if spread:
        x, median, below, above = zip(*spread)
        axis.errorbar(x, median, yerr=[below, above], fmt="none", ecolor="black", capsize=4,
                      linewidth=1)
        repeats = max(int(row.get("repeats") or 1) for row in rows)
        axis.set_title(f"{title}: median, min-max of {repeats} repeats")
    return len(spread)


def efficiency_panel(axis, rows):
    bars = bar_panel(axis, rows, "efficiency", "scaling efficiency % (measured)", 100, 100)
    impossible = 0
    for bar, row in zip(bars, rows):
        if measured(row, "efficiency") and 100 * row["efficiency"] > IMPOSSIBLE_EFFICIENCY:
            bar.set_color("tab:red")
            # Inside the top of the bar, the tallest of the panel as often as not.
            axis.annotate("> 100 %:\nbusy\nmachine",
                          (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                          xytext=(0, -4), textcoords="offset points", ha="center", va="top",
                          color="white", fontsize=8)
            impossible += 1
    return impossible


def projection_panel(axis, projection):
    series = {}
    for row in projection["rows"]:
        name = f"{row['mode']} {row['link']} b{row['global_batch']}"
        series.setdefault(name, []).append((row["gpus"], 100 * row["efficiency"]))
    for name, points in sorted(series.items()):
        points.sort()
        # dp and ddp can project the same efficiency: dashed squares keep dp visible over ddp.
        dp = name.startswith("dp ")
        axis.plot([p[0] for p in points], [p[1] for p in points], marker="s" if dp else "o",
                  linestyle="--" if dp else "-", label=name)
    axis.axhline(100, color="grey", linestyle="--", linewidth=1)
    axis.set_xlabel("GPUs")
    axis.set_ylabel("scaling efficiency (%)")
    axis.set_title("PROJECTION (not measured)")
    axis.legend(fontsize=7)


def draw(plt, rows, projection):
    """The figure, and what it shows: {"spread": rows with error bars, "impossible": rows
    above 100 % efficiency}."""
    panels = 3 if projection and projection.get("rows") else 2
    figure, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.5))
    shown = {"spread": images_panel(axes[0], rows), "impossible": efficiency_panel(axes[1], rows)}
    if panels == 3:
        projection_panel(axes[2], projection)
    figure.tight_layout()
    return figure, shown


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="bench_cifar --json output")
    # --out as in plot_training.py; -o and --output as before.
    parser.add_argument("--out", "-o", "--output", dest="out", default="bench_cifar.png",
                        help="PNG to write (default: %(default)s)")
    args = parser.parse_args(argv)
    plt = pyplot("plot_bench.py")
    try:
        rows, projection = load_rows(args.results)
    except (OSError, ValueError, KeyError) as error:
        sys.exit(f"plot_bench.py: cannot read {args.results}: {error}")
    if not rows:
        sys.exit(f"plot_bench.py: {args.results} holds no rows")
    figure, shown = draw(plt, rows, projection)
    figure.savefig(args.out, dpi=120)
    notes = [f"min-max of {shown['spread']} rows" if shown["spread"] else "no repeats: no spread"]
    if shown["impossible"]:
        notes.append(f"{shown['impossible']} above 100 % efficiency: a busy machine")
    print(f"plot_bench.py: wrote {args.out} ({'; '.join(notes)})")


if __name__ == "__main__":
    main(sys.argv[1:])
