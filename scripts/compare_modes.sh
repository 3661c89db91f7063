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
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$root/runs/modes}"
epochs="${2:-15}"
seed="${3:-0}"
# shellcheck source=scripts/cifar_recipe.sh
source "$root/scripts/cifar_recipe.sh"
recipe_setup

run_recipe single --mode single --devices cpu:0 --threads 2
run_recipe dp --mode dp --devices cpu:0,cpu:1
run_recipe ddp --mode ddp --backend gloo --nproc 2 --threads 1 --sync-bn
