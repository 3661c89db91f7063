#!/usr/bin/env bash
# The modes agree: ResNet-20 trained on all of CIFAR-10 with one schedule, one seed and one global
# batch (128) in each of train_cifar's modes, one after another:
#   single  one process on cpu:0, 2 threads
#   dp      DataParallel over cpu:0,cpu:1 (one thread per replica)
#   ddp     DistributedDataParallel over Gloo, 2 ranks of 1 thread, SyncBatchNorm (so the 2 ranks
#           normalise over the global batch as one process does)
# Schedule: 15 epochs one-cycle, lr 0.1, Nesterov momentum 0.9, weight decay 1e-4 (the issue's
# data point reached 87.26 % with it). docs/results.md compares the final accuracies.
#
#   scripts/compare_modes.sh [DIR] [EPOCHS] [SEED]   # default DIR ./runs/modes, EPOCHS 15, SEED 0
#
# Each mode logs to DIR/<mode>.jsonl and saves DIR/<mode>.ckpt after every epoch; running the
# script again resumes an unfinished mode and skips finished ones (job chaining).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$root/runs/modes}"
epochs="${2:-15}"
seed="${3:-0}"
train_cifar="${TRAIN_CIFAR:-$root/build/apps/train_cifar}"
[ -x "$train_cifar" ] || { echo "error: $train_cifar not built: run scripts/test.sh or cmake --build build" >&2; exit 1; }
"$root/scripts/get_cifar10.sh" "$root/data" >/dev/null
mkdir -p "$dir"

run_mode() {
  local mode="$1"; shift
  if [ -f "$dir/$mode.jsonl" ] && grep -q "\"epoch\":$epochs," "$dir/$mode.jsonl"; then
    echo "$mode: finished already ($dir/$mode.jsonl)"
    return
  fi
  local resume=()
  [ -f "$dir/$mode.ckpt" ] && resume=(--resume "$dir/$mode.ckpt")
  echo "$mode: $(date -u '+%Y-%m-%d %H:%M UTC')"
  "$train_cifar" --arch resnet20 --epochs "$epochs" --schedule onecycle --lr 0.1 --momentum 0.9 \
    --nesterov --weight-decay 1e-4 --batch-size 128 --seed "$seed" \
    --data-dir "$root/data/cifar-10-batches-bin" --save "$dir/$mode.ckpt" \
    --log-json "$dir/$mode.jsonl" --no-progress "${resume[@]}" "$@"
}

run_mode single --mode single --devices cpu:0 --threads 2
run_mode dp --mode dp --devices cpu:0,cpu:1
run_mode ddp --mode ddp --backend gloo --nproc 2 --threads 1 --sync-bn
