#!/usr/bin/env bash
# ResNet-20 on all of CIFAR-10 in float32 and in bf16 mixed precision (docs/results.md), the
# recipe of scripts/cifar_recipe.sh (as scripts/compare_modes.sh), one process each with one
# thread, both at once: the two runs share the machine alike, so their
# times compare as well as their accuracies. Resumable: rerun the same command after a stop.
#
#   scripts/compare_precisions.sh runs/precisions 15 0     # DIR, epochs, seed
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$root/runs/precisions}"
epochs="${2:-15}"
seed="${3:-0}"
# shellcheck source=scripts/cifar_recipe.sh
source "$root/scripts/cifar_recipe.sh"
recipe_setup

run_precision() {
  run_recipe "$1" --mode single --devices cpu:0 --threads 1 --workers 1 --precision "$1" \
    > "$dir/$1.log" 2>&1
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
