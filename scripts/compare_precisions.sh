#!/usr/bin/env bash
# ResNet-20 on all of CIFAR-10 in float32 and in bf16 mixed precision (docs/results.md), the
# recipe of scripts/compare_modes.sh (one-cycle, lr 0.1, Nesterov, weight decay 1e-4, batch 128),
# one process each with one thread, both at once: the two runs share the machine alike, so their
# times compare as well as their accuracies. Resumable: rerun the same command after a stop.
#
#   scripts/compare_precisions.sh runs/precisions 15 0     # DIR, epochs, seed
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$root/runs/precisions}"
epochs="${2:-15}"
seed="${3:-0}"
train_cifar="${TRAIN_CIFAR:-$root/build/apps/train_cifar}"
[ -x "$train_cifar" ] || { echo "error: $train_cifar not built: run scripts/test.sh or cmake --build build" >&2; exit 1; }
"$root/scripts/get_cifar10.sh" "$root/data" >/dev/null
mkdir -p "$dir"

run_precision() {
  local precision="$1"
  if [ -f "$dir/$precision.jsonl" ] && grep -q "\"epoch\":$epochs," "$dir/$precision.jsonl"; then
    echo "$precision: finished already ($dir/$precision.jsonl)"
    return
  fi
  local resume=()
  [ -f "$dir/$precision.ckpt" ] && resume=(--resume "$dir/$precision.ckpt")
  echo "$precision: $(date -u '+%Y-%m-%d %H:%M UTC')"
  "$train_cifar" --arch resnet20 --epochs "$epochs" --schedule onecycle --lr 0.1 --momentum 0.9 \
    --nesterov --weight-decay 1e-4 --batch-size 128 --seed "$seed" \
    --data-dir "$root/data/cifar-10-batches-bin" --save "$dir/$precision.ckpt" \
    --log-json "$dir/$precision.jsonl" --no-progress --mode single --devices cpu:0 --threads 1 \
    --workers 1 --precision "$precision" "${resume[@]}" > "$dir/$precision.log" 2>&1
}

run_precision fp32 &
fp32=$!
run_precision bf16 &
bf16=$!
status=0
wait "$fp32" || status=$?
wait "$bf16" || status=$?
echo "done: $(date -u '+%Y-%m-%d %H:%M UTC') (exit $status); logs in $dir"
exit "$status"
