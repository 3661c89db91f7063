#!/usr/bin/env python3
"""Plots bench_cifar results: images/s and scaling efficiency per configuration, and the
projection's efficiency per GPU count when the run had --project.

    bench_cifar --json bench.json [--project]
    scripts/plot_bench.py bench.json -o bench.png

Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""

import argparse
import json
import sys


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


def bar_panel(axis, rows, key, title, scale=1.0, reference=None):
    labels = [label(row) for row in rows]
    values = [(row[key] or 0) * scale if row.get("error") is None else 0 for row in rows]
    bars = axis.bar(range(len(rows)), values, color="tab:blue")
    for bar, row in zip(bars, rows):
        if row.get("error") is not None:
            axis.annotate("failed", (bar.get_x() + bar.get_width() / 2, 0), ha="center",
                          va="bottom", color="tab:red", fontsize=8)
    if reference is not None:
        axis.axhline(reference, color="grey", linestyle="--", linewidth=1)
    axis.set_xticks(range(len(rows)))
    axis.set_xticklabels(labels, fontsize=8)
    axis.set_title(title)


def projection_panel(axis, projection):
    series = {}
    for row in projection["rows"]:
        name = f"{row['mode']} {row['link']} b{row['global_batch']}"
        series.setdefault(name, []).append((row["gpus"], 100 * row["efficiency"]))
    for name, points in sorted(series.items()):
        points.sort()
        axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    axis.axhline(100, color="grey", linestyle="--", linewidth=1)
    axis.set_xlabel("GPUs")
    axis.set_ylabel("scaling efficiency (%)")
    axis.set_title("PROJECTION (not measured)")
    axis.legend(fontsize=7)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="bench_cifar --json output")
    parser.add_argument("-o", "--output", default="bench_cifar.png", help="PNG to write "
                        "(default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")  # files only, no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_bench.py: needs matplotlib: apt-get install python3-matplotlib")
    try:
        rows, projection = load_rows(args.results)
    except (OSError, ValueError, KeyError) as error:
        sys.exit(f"plot_bench.py: cannot read {args.results}: {error}")
    if not rows:
        sys.exit(f"plot_bench.py: {args.results} holds no rows")

    panels = 3 if projection and projection.get("rows") else 2
    figure, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.5))
    bar_panel(axes[0], rows, "images_per_s", "images/s (measured)")
    bar_panel(axes[1], rows, "efficiency", "scaling efficiency % (measured)", 100, 100)
    if panels == 3:
        projection_panel(axes[2], projection)
    figure.tight_layout()
    figure.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main(sys.argv[1:])
