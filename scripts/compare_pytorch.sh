#!/usr/bin/env bash
# Tandem beside PyTorch (scripts/compare_pytorch.py): builds bench_cifar if it is missing, finds a
# Python with Debian's python3-torch (1.13), with --pytorch2 also a current PyTorch 2.x (installed
# once by scripts/install_pytorch2.sh into a cached virtual environment outside the tree), then
# runs the comparison with your other flags.
#
#   scripts/compare_pytorch.sh                  # default rows, PyTorch 1.13, 3 repeats (~10 min on 2 cores)
#   scripts/compare_pytorch.sh --pytorch2       # PyTorch 1.13 and 2.15 (eager and torch.compile)
#   scripts/compare_pytorch.sh --pytorch2 --rows resnet20-single,resnet20-ddp --repeats 1 --json compare.json
#   scripts/compare_pytorch.sh --pytorch-only   # no Tandem build needed
#   scripts/compare_pytorch.sh --rows resnet20-ddp,resnet20-zero1,resnet20-zero2   # ZeRO rows (PyTorch:
#                                               # ZeroRedundancyOptimizer) and each rank's model state
#
# Environment: BUILD_DIR (default ./build), TANDEM_PYTORCH2_VENV (scripts/install_pytorch2.sh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
bench="$build_dir/apps/bench_cifar"

own_binary=0 pytorch2=0 args=()
for arg in "$@"; do
  case "$arg" in
    --pytorch2) pytorch2=1; continue ;;
    --pytorch-only | --bench-cifar | --bench-cifar=*) own_binary=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      echo; echo "scripts/compare_pytorch.py's own flags:"
      exec python3 "$root/scripts/compare_pytorch.py" --help ;;
  esac
  args+=("$arg")
done
extra=()
if [ "$own_binary" -eq 0 ]; then
  if [ ! -x "$bench" ]; then
    echo "== bench_cifar missing: building it (Release) in $build_dir"
    if [ ! -f "$build_dir/CMakeCache.txt" ]; then
      cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
    fi
    cmake --build "$build_dir" -j "$(nproc)" --target bench_cifar
  fi
  extra=(--bench-cifar "$bench")
fi

# Debian's torch lives in /usr/bin/python3's dist-packages; `python3` may be another interpreter.
python=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import torch' 2>/dev/null; then
    python="$candidate"
    break
  fi
done
if [ -z "$python" ]; then
  echo "error: no python3 can import torch; scripts/install_deps.sh installs python3-torch" >&2
  exit 1
fi
extra+=(--pytorch "$(command -v "$python")")
if [ "$pytorch2" -eq 1 ]; then
  extra+=(--pytorch "$("$root/scripts/install_pytorch2.sh" | tail -1)")
fi

exec "$python" "$root/scripts/compare_pytorch.py" "${extra[@]}" "${args[@]}"
