#!/usr/bin/env python3
"""Draws train_cifar --log-json files: test accuracy and training loss per epoch, one line per run.

    scripts/plot_training.py LOG.jsonl [LOG.jsonl ...] [--out curves.png] [--labels a,b] [--title T]
        [--target 91.25]

Without --out the PNG goes beside the first log (run.jsonl: run.png), so that the "plot:" line
train_cifar prints at the end runs as it stands.

A log may hold several invocations of one run (--resume appends): for an epoch logged more than
once, the last record wins. Short runs are drawn with a marker on each epoch, so that a one-epoch
run shows as a point. A target accuracy line is drawn only when asked: --target 91.25 for He et
al.'s ResNet-20 (a line far above a short run's curve would squash it). Needs matplotlib
(Debian's python3-matplotlib, installed by scripts/install_deps.sh; see Note [Which python plots]
in scripts/plot_common.py); runs headless.
"""

import argparse
import json
import sys
from pathlib import Path

from plot_common import pyplot

# Curves with fewer epochs than this get a marker on each one (a one-epoch curve is a single
# point, invisible as a line); longer ones stay plain lines.
MARKED_EPOCHS = 20


# What draw() reads from each epoch record.
EPOCH_FIELDS = ("epoch", "test_accuracy", "train_loss")


def read_epochs(path):
    """{epoch: record} of a JSON-lines log. A missing or unreadable file, a line that is not
    JSON and an epoch record without the fields drawn are each one line naming the file."""
    try:
        with open(path, encoding="utf-8") as log:
            lines = log.readlines()
    except UnicodeDecodeError:
        raise SystemExit(f"plot_training: {path} is not text (a train_cifar --log-json file?)")
    except OSError as error:
        raise SystemExit(f"plot_training: cannot read {path}: {error.strerror}")
    epochs = {}
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise SystemExit(f"plot_training: {path}:{number}: not JSON ({error.msg})")
        if not isinstance(record, dict) or record.get("type") != "epoch":
            continue
        missing = [field for field in EPOCH_FIELDS if not isinstance(record.get(field), (int, float))]
        if missing:
            raise SystemExit(f"plot_training: {path}:{number}: an epoch record without a number "
                             f"in {', '.join(missing)}")
        epochs[int(record["epoch"])] = record
    if not epochs:
        raise SystemExit(f"plot_training: {path} holds no epoch records (a train_cifar --log-json file?)")
    return epochs


def draw(plt, runs, target=None, title=""):
    """The figure of `runs` ([(label, {epoch: record})]), with a line at `target` percent if
    given."""
    from matplotlib.ticker import MaxNLocator

    figure, (accuracy_axes, loss_axes) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, epochs in runs:
        xs = sorted(epochs)
        style = {"label": label, "marker": "o" if len(xs) < MARKED_EPOCHS else None,
                 "markersize": 7 if len(xs) == 1 else 4}
        accuracy_axes.plot(xs, [100 * epochs[x]["test_accuracy"] for x in xs], **style)
        loss_axes.plot(xs, [epochs[x]["train_loss"] for x in xs], **style)
    if target:
        accuracy_axes.axhline(target, color="grey", linestyle="--", linewidth=1,
                              label=f"target {target:g} %")
    accuracy_axes.set(xlabel="epoch", ylabel="test accuracy (%)", title="Test accuracy")
    loss_axes.set(xlabel="epoch", ylabel="training loss", title="Training loss", yscale="log")
    for axes in (accuracy_axes, loss_axes):
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # no epoch 1.5
        axes.grid(True, alpha=0.3)
        axes.legend()
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    return figure


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", help="train_cifar --log-json files")
    # -o as in plot_bench.py, which takes --out too.
    parser.add_argument("--out", "-o", help="PNG to write (default: the first log's name, .png)")
    parser.add_argument("--labels", help="comma-separated legend labels (default: file names)")
    parser.add_argument("--title", default="")
    parser.add_argument("--target", type=float, default=None,
                        help="draw a line at this test accuracy, in percent (e.g. 91.25, He et "
                             "al.'s ResNet-20; default and 0: none)")
    args = parser.parse_args()

    labels = args.labels.split(",") if args.labels else [Path(p).stem for p in args.logs]
    if len(labels) != len(args.logs):
        raise SystemExit(f"plot_training: {len(labels)} labels for {len(args.logs)} logs")
    runs = [(label, read_epochs(path)) for label, path in zip(labels, args.logs)]

    out = args.out or str(Path(args.logs[0]).with_suffix(".png"))
    plt = pyplot("plot_training")
    figure = draw(plt, runs, args.target, args.title)
    figure.savefig(out, dpi=100)
    best = ", ".join(f"{label}: best {100 * max(r['test_accuracy'] for r in e.values()):.2f} % "
                     f"after {max(e)} epoch{'' if max(e) == 1 else 's'}" for label, e in runs)
    target = f"; target line at {args.target:g} %" if args.target else ""
    print(f"plot_training: wrote {out} ({best}{target})")


if __name__ == "__main__":
    sys.exit(main())
