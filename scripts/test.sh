#!/usr/bin/env bash
# Builds Tandem and runs every test through CTest, from a fresh Debian machine:
# installs whatever build dependency is missing (non-interactive apt-get, only
# when missing), configures, builds, runs. Exits non-zero on any failure.
#
#   scripts/test.sh              # everything CI runs
#   scripts/test.sh -L unit      # extra arguments go to ctest (-R Autograd, -L gpu, ...)
#
# Environment: BUILD_DIR (default ./build), BUILD_TYPE (default Release),
# JOBS (default: all cores).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
build_type="${BUILD_TYPE:-Release}"
jobs="${JOBS:-$(nproc)}"

"$root/scripts/install_deps.sh"

# The real CIFAR-10 makes the data tests check it (they skip without it). Only a local archive is
# used here, never a download.
if [ -n "${CIFAR10_ARCHIVE:-}" ] || [ -f "$root/../shared/data/cifar-10-binary.tar.gz" ]; then
  "$root/scripts/get_cifar10.sh" "$root/data"
fi

echo "== configure ($build_type) in $build_dir"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type"

echo "== build (-j$jobs)"
start=$(date +%s)
cmake --build "$build_dir" -j "$jobs"
echo "   build took $(( $(date +%s) - start )) s"

echo "== test"
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "$@"
