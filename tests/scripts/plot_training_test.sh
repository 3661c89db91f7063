#!/usr/bin/env bash
# Tests of scripts/plot_training.py, run by CTest (tests/CMakeLists.txt): a resumed run's log
# (an epoch logged twice, two summaries) draws a PNG and reports the best accuracy of the last
# records; a one-epoch run is drawn as a visible point; the target line appears only with
# --target; a log that is missing, binary, not JSON, without the drawn fields or without epochs is
# a one-line error, and so is a python
# without matplotlib (naming it). Exit 77 (skip) when Debian's Python has no matplotlib.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tests/scripts/plot_test_common.sh"

epoch() {  # $1 epoch, $2 test accuracy, $3 train loss
  printf '{"type":"epoch","epoch":%s,"test_accuracy":%s,"train_loss":%s,"lr":0.1}\n' "$1" "$2" "$3"
}
{
  epoch 1 0.40 1.6; epoch 2 0.70 1.2   # superseded below: were it kept, the best would be 70 %
  echo '{"type":"summary","epochs_done":2,"interrupted":true}'
  epoch 2 0.56 1.1; epoch 3 0.62 0.9   # resumed: epoch 2 again, the last record wins
  echo '{"type":"summary","epochs_done":3}'
} >"$work/run.jsonl"
epoch 1 0.30 1.9 >"$work/other.jsonl"

"$python" "$root/scripts/plot_training.py" "$work/run.jsonl" "$work/other.jsonl" \
  --labels a,b --out "$work/curves.png" >"$work/out"
check "PNG written" test -s "$work/curves.png"
check "PNG signature" bash -c "head -c 4 '$work/curves.png' | grep -q PNG"
check "best of the last records: $(cat "$work/out")" grep -qF "a: best 62.00 % after 3 epochs" "$work/out"

expect_error() {  # $1: expected text, then the arguments
  local text="$1" status=0; shift
  "$python" "$root/scripts/plot_training.py" "$@" --out "$work/x.png" >/dev/null 2>"$work/err" || status=$?
  check "exit status non-zero ($status)" test "$status" -ne 0
  check "one-line error: $(cat "$work/err")" test "$(wc -l <"$work/err")" -eq 1
  check "error mentions '$text'" grep -qF "$text" "$work/err"
}
echo 'not json' >"$work/bad.jsonl"
expect_error "bad.jsonl:1: not JSON" "$work/bad.jsonl"
echo '{"type":"summary"}' >"$work/empty.jsonl"
expect_error "holds no epoch records" "$work/empty.jsonl"
expect_error "2 labels for 1 logs" "$work/run.jsonl" --labels a,b
expect_error "cannot read $work/missing.jsonl: No such file or directory" "$work/missing.jsonl"
printf '\x89PNG\r\n\x1a\n\xff\xfe' >"$work/binary.jsonl"
expect_error "binary.jsonl is not text" "$work/binary.jsonl"
echo '{"type":"epoch","epoch":1,"train_loss":1.5}' >"$work/fields.jsonl"
expect_error "fields.jsonl:1: an epoch record without a number in test_accuracy" "$work/fields.jsonl"

# The figure itself (plot_training.draw): the one-epoch run "b" is a point with a marker, the
# 3-epoch run too; no target line unless asked for.
"$python" - "$root/scripts" "$work/run.jsonl" "$work/other.jsonl" <<'PY' >"$work/figure" 2>&1 || { cat "$work/figure"; exit 1; }
import sys
sys.path.insert(0, sys.argv[1])
import plot_training
from plot_common import pyplot
plt = pyplot("test")
runs = [("a", plot_training.read_epochs(sys.argv[2])), ("b", plot_training.read_epochs(sys.argv[3]))]
for target, lines_expected in ((None, 2), (0, 2), (91.25, 3)):
    accuracy = plot_training.draw(plt, runs, target).axes[0]
    lines = accuracy.get_lines()
    assert len(lines) == lines_expected, (target, [l.get_label() for l in lines])
    one_epoch = [l for l in lines if l.get_label() == "b"][0]
    assert len(one_epoch.get_xdata()) == 1 and one_epoch.get_marker() == "o", one_epoch.get_marker()
    targets = [l for l in lines if l.get_label().startswith("target")]
    assert len(targets) == (1 if target else 0), target
    assert all(float(t).is_integer() for t in accuracy.get_xticks()), accuracy.get_xticks()
    plt.close("all")
print("figure ok")
PY
check "one-epoch run has a marker, target line only with --target: $(cat "$work/figure")" \
  grep -qx "figure ok" "$work/figure"

"$python" "$root/scripts/plot_training.py" "$work/other.jsonl" --target 91.25 -o "$work/t.png" \
  >"$work/out"
check "--target 91.25 and -o (plot_bench.py's spelling) accepted" test -s "$work/t.png"
check "one epoch, not '1 epochs': $(cat "$work/out")" \
  grep -qF "other: best 30.00 % after 1 epoch; target line at 91.25 %)" "$work/out"
"$python" "$root/scripts/plot_training.py" "$work/other.jsonl" --out "$work/t.png" >"$work/out"
check "no target line unless asked: $(cat "$work/out")" \
  grep -qF "other: best 30.00 % after 1 epoch)" "$work/out"

# No matplotlib in Debian's python (hidden by a module that fails to import): one line naming it.
mkdir -p "$work/hide/matplotlib"
echo 'raise ImportError("hidden by plot_training_test.sh")' >"$work/hide/matplotlib/__init__.py"
PYTHONPATH="$work/hide" expect_error "$python cannot import matplotlib: apt-get install python3-matplotlib" \
  "$work/run.jsonl"

# No --out: beside the log, as train_cifar's "plot: scripts/plot_training.py LOG" line runs it.
(cd "$work" && "$python" "$root/scripts/plot_training.py" other.jsonl >"$work/out")
check "no --out: other.png beside other.jsonl ($(cat "$work/out"))" test -s "$work/other.png"
