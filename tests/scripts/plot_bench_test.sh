#!/usr/bin/env bash
# Tests of scripts/plot_bench.py, run by CTest (tests/CMakeLists.txt): a bench_cifar --json report
# with repeats draws its min-max as error bars around the medians; one from before --repeats (no
# spread keys) still draws, without them; an efficiency above 100 % is marked; --out, -o and
# --output all name the PNG; a python without matplotlib gets one line naming it and the fix that
# applies (Note [Which python plots] in scripts/plot_common.py). Exit 77 (skip) when Debian's
# Python has no matplotlib.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tests/scripts/plot_test_common.sh"

# Two measured rows (repeats 3) and a failed one, as bench_cifar --repeats 3 --json writes them
# (keys trimmed to those the script reads); the ddp row's efficiency is the UX review's 1064 %.
cat >"$work/repeats.json" <<'JSON'
{"benchmark": "bench_cifar", "load_average": 3.5, "options": {"repeats": 3}, "rows": [
 {"mode": "single", "devices": 1, "batch_size": 128, "overlap": null, "dp_replicas": null,
  "images_per_s": 154.0, "speedup": 1.0, "efficiency": 1.0, "repeats": 3,
  "images_per_s_min": 123.0, "images_per_s_max": 232.0, "images_per_s_samples": [232, 123, 154],
  "error": null},
 {"mode": "ddp", "devices": 2, "batch_size": 128, "overlap": "on", "dp_replicas": null,
  "images_per_s": 1638.6, "speedup": 10.64, "efficiency": 5.32, "repeats": 3,
  "images_per_s_min": 1600.0, "images_per_s_max": 1700.0,
  "images_per_s_samples": [1600, 1638.6, 1700], "error": null},
 {"mode": "ddp", "devices": 3, "batch_size": 128, "overlap": "on", "dp_replicas": null,
  "images_per_s": null, "speedup": null, "efficiency": null, "repeats": null,
  "images_per_s_min": null, "images_per_s_max": null, "images_per_s_samples": [],
  "error": "[bench_cifar] batch 128 does not split evenly over 3 processes"}],
 "projection": null}
JSON
# Before --repeats: no repeats, images_per_s_min/_max or samples.
"$python" - "$work/repeats.json" "$work/old.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
for row in report["rows"]:
    for key in ("repeats", "images_per_s_min", "images_per_s_max", "images_per_s_samples"):
        del row[key]
del report["options"]["repeats"]
json.dump(report, open(sys.argv[2], "w"))
PY

# The figure itself (plot_bench.draw): error bars from min to max around each measured median.
"$python" - "$root/scripts" "$work/repeats.json" "$work/old.json" <<'PY' >"$work/figure" 2>&1 || { cat "$work/figure"; exit 1; }
import sys
sys.path.insert(0, sys.argv[1])
import plot_bench
from plot_common import pyplot
plt = pyplot("test")
rows, projection = plot_bench.load_rows(sys.argv[2])
figure, shown = plot_bench.draw(plt, rows, projection)
assert shown == {"spread": 2, "impossible": 1}, shown
images = figure.axes[0]
bars = [c for c in images.containers if type(c).__name__ == "ErrorbarContainer"]
assert len(bars) == 1, images.containers
segments = sorted((float(s[0][1]), float(s[1][1])) for s in bars[0].lines[2][0].get_segments())
assert segments == [(123.0, 232.0), (1600.0, 1700.0)], segments
assert "median, min-max of 3 repeats" in images.get_title(), images.get_title()
old_rows, _ = plot_bench.load_rows(sys.argv[3])
old_figure, old_shown = plot_bench.draw(plt, old_rows, None)
assert old_shown["spread"] == 0, old_shown
assert not [c for c in old_figure.axes[0].containers if type(c).__name__ == "ErrorbarContainer"]
print("figure ok")
PY
check "min-max error bars, none for an old report: $(cat "$work/figure")" grep -qx "figure ok" "$work/figure"

for flag in --out -o --output; do
  rm -f "$work/bench.png"
  "$python" "$root/scripts/plot_bench.py" "$work/repeats.json" "$flag" "$work/bench.png" >"$work/out"
  check "$flag writes the PNG: $(cat "$work/out")" \
    bash -c "head -c 4 '$work/bench.png' | grep -q PNG"
done
check "says it drew the spread and the impossible efficiency" \
  grep -qF "(min-max of 2 rows; 1 above 100 % efficiency: a busy machine)" "$work/out"
"$python" "$root/scripts/plot_bench.py" "$work/old.json" --out "$work/old.png" >"$work/out"
check "an old report draws: $(cat "$work/out")" grep -qF "(no repeats: no spread" "$work/out"

expect_error() {  # $1: expected text, then the command
  local text="$1" status=0; shift
  "$@" >/dev/null 2>"$work/err" || status=$?
  check "exit status non-zero ($status)" test "$status" -ne 0
  check "one-line error: $(cat "$work/err")" test "$(wc -l <"$work/err")" -eq 1
  check "error mentions '$text'" grep -qF -- "$text" "$work/err"
}
echo '{"rows": []}' >"$work/empty.json"
expect_error "holds no rows" "$python" "$root/scripts/plot_bench.py" "$work/empty.json"
expect_error "cannot read $work/missing.json" \
  "$python" "$root/scripts/plot_bench.py" "$work/missing.json"

# No matplotlib in Debian's python (hidden by a module that fails to import): install it.
mkdir -p "$work/hide/matplotlib"
echo 'raise ImportError("hidden by plot_bench_test.sh")' >"$work/hide/matplotlib/__init__.py"
expect_error "$python cannot import matplotlib: apt-get install python3-matplotlib" \
  env PYTHONPATH="$work/hide" "$python" "$root/scripts/plot_bench.py" "$work/repeats.json"
# Another python without it (a venv, as pyenv's or conda's would be) while Debian's has it: not
# "install" (it is installed): the script runs itself again with Debian's python, and says so.
if "$python" -m venv --without-pip "$work/venv" 2>/dev/null; then
  rm -f "$work/venv.png"
  check "a python without matplotlib hands over to $python" \
    "$work/venv/bin/python3" "$root/scripts/plot_bench.py" "$work/repeats.json" --out "$work/venv.png" 2>"$work/err"
  check "and says so" grep -qF "$work/venv/bin/python3 cannot import matplotlib; running with $python" "$work/err"
  check "the plot is drawn" test -s "$work/venv.png"
else
  echo "skipped: no venv module for the other-python case"
fi
