#!/usr/bin/env bash
# ResNet-20 on all of CIFAR-10 with He et al.'s (2016) schedule: 164 epochs of 391 steps (64k
# iterations), batch 128, lr 0.1 divided by 10 at epochs 82 and 123 (32k and 48k iterations),
# momentum 0.9, weight decay 1e-4, random crop (4-pixel padding) and horizontal flip. The paper
# reports 8.75 % test error (91.25 % accuracy). docs/results.md has the runs so far.
#
#   scripts/reproduce_resnet20.sh [DIR]     # default DIR: ./runs/resnet20-paper
#
# Job chaining: a checkpoint is written to DIR/ckpt after every epoch, and a second invocation
# resumes from it (the same run, not a new one); the per-epoch log is appended to DIR/log.jsonl.
# Extra train_cifar flags can follow DIR (e.g. --run-epochs 20 to stop after 20 more epochs).
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$root/runs/resnet20-paper}"
shift || true
train_cifar="${TRAIN_CIFAR:-$root/build/apps/train_cifar}"
[ -x "$train_cifar" ] || { echo "error: $train_cifar not built: run scripts/test.sh or cmake --build build" >&2; exit 1; }
# CIFAR-10 in its default place, which train_cifar finds without --data-dir (Note [Default data
# folder] in apps/common/data_dir.h).
"$root/scripts/get_cifar10.sh" >/dev/null
mkdir -p "$dir"
resume=()
[ -f "$dir/ckpt" ] && resume=(--resume "$dir/ckpt")
exec "$train_cifar" --arch resnet20 --epochs 164 --schedule multistep --lr 0.1 --momentum 0.9 \
  --weight-decay 1e-4 --batch-size 128 --seed 0 \
  --save "$dir/ckpt" --log-json "$dir/log.jsonl" --no-progress "${resume[@]}" "$@"
