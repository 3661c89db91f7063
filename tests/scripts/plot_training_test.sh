#!/usr/bin/env bash
# Tests of scripts/plot_training.py, run by CTest (tests/CMakeLists.txt): a resumed run's log
# (an epoch logged twice, two summaries) draws a PNG and reports the best accuracy of the last
# records; a log that is not JSON, or holds no epochs, is a one-line error. Exit 77 (skip) when
# Debian's Python has no matplotlib.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python=/usr/bin/python3
"$python" -c 'import matplotlib' 2>/dev/null || { echo "skip: no matplotlib for $python"; exit 77; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

check() {  # $1: what, then a command that must succeed
  local what="$1"; shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what" >&2; exit 1; fi
}

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
