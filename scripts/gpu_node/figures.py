#!/usr/bin/env python3
"""One line of figures from the JSON of bench_cifar (--json) or scripts/pytorch_gpu_step.py
(--json), for the note column of scripts/gpu_node.sh's report: ms/step per memory format and
precision, so the Tandem and PyTorch rows read side by side.

    figures.py bench-gpu-nchw.json bench-gpu-channels-last.json
    # nchw fp32 12.34 ms/step, nchw bf16 10.01 ms/step, channels-last fp32 …
"""
import json
import sys


def rows(path):
    with open(path) as f:
        for row in json.load(f).get("rows", []):
            layout = row.get("memory_format") or row.get("format") or "?"
            ms = row.get("ms_per_step")
            text = f"{layout.replace('_', '-')} {row.get('precision', '?')} "
            yield text + (f"{ms:.2f} ms/step" if isinstance(ms, (int, float)) else "no figure")


def main():
    figures = []
    for path in sys.argv[1:]:
        try:
            figures.extend(rows(path))
        except (OSError, ValueError, AttributeError) as error:
            figures.append(f"{path}: {error}")
    print(", ".join(figures))


if __name__ == "__main__":
    main()
