#!/usr/bin/env python3
"""The steps an earlier run of scripts/gpu_node.sh left undone, for `--steps rest`.

    rest.py REPORT_JSON   # prints "bench-gpu pytorch-gpu racecheck memcheck", in the run's order

Undone: skipped for time ("out of the time budget"), not reached, pending, running or interrupted
when the run stopped, or cut by the time budget (a timeout whose limit the budget shortened). Not
undone: those that ran (ok, failed, or stopped at their own limit), skipped for a reason a second
call would meet again (no GPU, no compute-sanitizer), and the build.
"""

import json
import sys


def undone(step):
    status, note = step["status"], step.get("note") or ""
    if step["name"] in ("build", "setup"):
        return False
    if status in ("pending", "running", "interrupted"):
        return True
    if status == "skipped":
        return note.startswith(("out of the time budget", "not reached"))
    return status == "timeout" and note.startswith("cut by the time budget")


def main():
    with open(sys.argv[1]) as f:
        report = json.load(f)
    print(" ".join(s["name"] for s in report["steps"] if undone(s)))


if __name__ == "__main__":
    main()
