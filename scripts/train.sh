#!/usr/bin/env bash
# Trains a ResNet on CIFAR-10 from a fresh machine: installs what is missing, builds Tandem
# (Release), fetches and verifies the data set, then runs train_cifar.
#
#   scripts/train.sh                      # a sensible default for this machine (below)
#   scripts/train.sh --mode ddp --nproc 2 --epochs 20    # your own train_cifar flags instead
#
# Defaults: on a machine where nvidia-smi lists GPUs, ResNet-20 on every one of them (DataParallel: DDP
# over NCCL is written but has not run on a GPU yet) with the paper's schedule (its 64k iterations of
# batch 128 are 164 epochs of the 50,000 training images; lr 0.1 ÷10 at 50 % and 75 %); on a CPU-only
# machine, a short ResNet-20 run (10,000 images, 4 epochs, a few minutes on 2 cores) that shows
# the accuracy climbing. Both write resnet20[-cpu].ckpt (+ .state, .prev, .prev.state) and
# resnet20[-cpu].jsonl in the checkout; train_cifar's last lines say how to resume, evaluate and plot.
# Run again, the default continues its checkpoint (--resume auto), and says so once it is finished.
# Environment: BUILD_DIR (default ./build), DATA_DIR (default: where train_cifar looks without
# --data-dir, ${TANDEM_DATA_DIR:-${XDG_DATA_HOME:-~/.local/share}/tandem}; your own --data-dir or
# --synthetic instead skips the download).
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
data_dir="${DATA_DIR:-}"  # empty: get_cifar10.sh's default, which train_cifar finds by itself

"$root/scripts/install_deps.sh"
echo "== build (Release) in $build_dir"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target train_cifar tandem-run
train="$build_dir/apps/train_cifar"
# Your own --data-dir (or --synthetic) wins: then nothing is fetched and none is added.
fetch=1
data_flag=()
[ -n "$data_dir" ] && data_flag=(--data-dir "$data_dir/cifar-10-batches-bin")
for arg in "$@"; do
  case "$arg" in
    --data-dir|--data-dir=*|--synthetic) fetch=0 data_flag=() ;;
  esac
done
if [ "$fetch" = 1 ]; then
  "$root/scripts/get_cifar10.sh" ${data_dir:+"$data_dir"}
fi
if [ $# -gt 0 ]; then
  exec "$train" ${data_flag[@]+"${data_flag[@]}"} "$@"
fi

# The GPUs are counted with nvidia-smi, not by Tandem, and named explicitly: a GPU machine whose
# CUDA cannot be used (a driver older than CUDA 13's R580, a build without the CUDA backend) then
# stops with train_cifar's one-line error instead of training on the CPU for 164 epochs.
gpus=0
if command -v nvidia-smi >/dev/null; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)
fi
if [ "$gpus" -gt 0 ]; then
  if ! grep -q "^TANDEM_WITH_CUDA:INTERNAL=ON" "$build_dir/CMakeCache.txt" 2>/dev/null; then
    echo "error: nvidia-smi lists $gpus GPU(s) but this Tandem build has no CUDA backend (the" \
      "configure summary in $build_dir says what is missing); to train on the CPU anyway, pass" \
      "your own flags: scripts/train.sh --mode single ..." >&2
    exit 1
  fi
  devices=$(seq -s, -f "cuda:%g" 0 $((gpus - 1)))
  echo "== ResNet-20 on $gpus GPU(s) ($devices), the paper's schedule"
  exec "$train" ${data_flag[@]+"${data_flag[@]}"} --mode dp --devices "$devices" --arch resnet20 --epochs 164 \
    --batch-size 128 --lr 0.1 --schedule multistep --save "$root/resnet20.ckpt" \
    --resume auto --log-json "$root/resnet20.jsonl"
fi
echo "== no GPU build: a short ResNet-20 run on the CPU ($(nproc) cores)"
exec "$train" ${data_flag[@]+"${data_flag[@]}"} --mode single --arch resnet20 --subset 10000 --epochs 4 \
  --batch-size 128 --lr 0.1 --schedule onecycle --save "$root/resnet20-cpu.ckpt" \
  --resume auto --log-json "$root/resnet20-cpu.jsonl"
