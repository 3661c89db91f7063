#!/usr/bin/env python3
"""Draws train_cifar --log-json files: test accuracy and training loss per epoch, one line per run.

    scripts/plot_training.py LOG.jsonl [LOG.jsonl ...] --out curves.png [--labels a,b] [--title T]

A log may hold several invocations of one run (--resume appends): for an epoch logged more than
once, the last record wins. The target accuracy line (--target, default He et al.'s 91.25 % for
ResNet-20) is drawn when given a value above 0. Needs matplotlib (Debian's python3-matplotlib,
installed by scripts/install_deps.sh); runs headless.
"""

import argparse
import json
import sys
from pathlib import Path


def read_epochs(path):
    """{epoch: record} of a JSON-lines log; a line that is not JSON is an error naming it."""
    epochs = {}
    with open(path, encoding="utf-8") as log:
        for number, line in enumerate(log, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise SystemExit(f"plot_training: {path}:{number}: not JSON ({error.msg})")
            if record.get("type") == "epoch":
                epochs[int(record["epoch"])] = record
    if not epochs:
        raise SystemExit(f"plot_training: {path} holds no epoch records (a train_cifar --log-json file?)")
    return epochs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", help="train_cifar --log-json files")
    parser.add_argument("--out", required=True, help="PNG to write")
    parser.add_argument("--labels", help="comma-separated legend labels (default: file names)")
    parser.add_argument("--title", default="")
    parser.add_argument("--target", type=float, default=91.25,
                        help="test accuracy to mark, in percent (0: none)")
    args = parser.parse_args()

    labels = args.labels.split(",") if args.labels else [Path(p).stem for p in args.logs]
    if len(labels) != len(args.logs):
        raise SystemExit(f"plot_training: {len(labels)} labels for {len(args.logs)} logs")
    runs = [(label, read_epochs(path)) for label, path in zip(labels, args.logs)]

    try:
        import matplotlib
    except ImportError:
        raise SystemExit("plot_training: matplotlib is missing: run scripts/install_deps.sh "
                         "(Debian's python3-matplotlib; use /usr/bin/python3)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (accuracy_axes, loss_axes) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, epochs in runs:
        xs = sorted(epochs)
        accuracy_axes.plot(xs, [100 * epochs[x]["test_accuracy"] for x in xs], label=label)
        loss_axes.plot(xs, [epochs[x]["train_loss"] for x in xs], label=label)
    if args.target > 0:
        accuracy_axes.axhline(args.target, color="grey", linestyle="--", linewidth=1,
                              label=f"target {args.target:g} %")
    accuracy_axes.set(xlabel="epoch", ylabel="test accuracy (%)", title="Test accuracy")
    loss_axes.set(xlabel="epoch", ylabel="training loss", title="Training loss", yscale="log")
    for axes in (accuracy_axes, loss_axes):
        axes.grid(True, alpha=0.3)
        axes.legend()
    if args.title:
        figure.suptitle(args.title)
    figure.tight_layout()
    figure.savefig(args.out, dpi=100)
    best = ", ".join(f"{label}: best {100 * max(r['test_accuracy'] for r in e.values()):.2f} % "
                     f"after {max(e)} epochs" for label, e in runs)
    print(f"plot_training: wrote {args.out} ({best})")


if __name__ == "__main__":
    sys.exit(main())
