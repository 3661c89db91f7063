#!/usr/bin/env bash
# Tandem beside PyTorch (scripts/compare_pytorch.py): builds bench_cifar if it is missing, finds a
# Python with Debian's python3-torch, then runs the comparison with your flags.
#
#   scripts/compare_pytorch.sh                  # all rows, 3 repeats (~10 min on 2 cores)
#   scripts/compare_pytorch.sh --rows resnet20-single --repeats 1 --json compare.json
#   scripts/compare_pytorch.sh --pytorch-only   # no Tandem build needed
#
# Environment: BUILD_DIR (default ./build).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
bench="$build_dir/apps/bench_cifar"

own_binary=0
for arg in "$@"; do
  case "$arg" in
    --pytorch-only | --bench-cifar | --bench-cifar=* | -h | --help) own_binary=1 ;;
  esac
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

exec "$python" "$root/scripts/compare_pytorch.py" "${extra[@]}" "$@"
