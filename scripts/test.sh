#!/usr/bin/env bash
# Builds Tandem and runs every test through CTest, from a fresh Debian machine:
# installs whatever build dependency is missing (non-interactive apt-get, only
# when missing), configures, builds, runs. Exits non-zero on any failure.
#
#   scripts/test.sh                      # every test, as CI runs them first
#   scripts/test.sh -L unit              # extra arguments go to ctest (-R Autograd, -L gpu, ...)
#   scripts/test.sh --sanitize address   # AddressSanitizer + UndefinedBehaviorSanitizer (and
#                                        # LeakSanitizer) over every test but gpu and bench,
#                                        # in build-asan (CUDA off); CI runs it second
#
# Environment: BUILD_DIR (default ./build, ./build-asan with --sanitize), BUILD_TYPE (default
# Release; RelWithDebInfo with --sanitize), JOBS (default: all cores).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sanitize=""
if [ "${1:-}" = "--sanitize" ]; then
  sanitize="${2:-}"
  [ "$sanitize" = "address" ] || { echo "error: --sanitize takes 'address' (got '${sanitize}')" >&2; exit 2; }
  shift 2
fi
build_dir="${BUILD_DIR:-$root/build${sanitize:+-asan}}"
build_type="${BUILD_TYPE:-${sanitize:+RelWithDebInfo}}"
build_type="${build_type:-Release}"
jobs="${JOBS:-$(nproc)}"

"$root/scripts/install_deps.sh"

# The real CIFAR-10 makes the data tests check it (they skip without it). Only a local archive is
# used here, never a download.
if [ -n "${CIFAR10_ARCHIVE:-}" ] || [ -f "$root/../shared/data/cifar-10-binary.tar.gz" ]; then
  "$root/scripts/get_cifar10.sh" "$root/data"
fi

echo "== configure ($build_type${sanitize:+, sanitizers: address + undefined}) in $build_dir"
configure=(-DCMAKE_BUILD_TYPE="$build_type")
if [ -n "$sanitize" ]; then
  # CPU code only (nvcc does not take these flags, and no GPU runs here),
  # no benchmarks; UBSan findings fail the test instead of being printed and forgotten.
  flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  configure+=(-DTANDEM_CUDA=OFF -DTANDEM_BUILD_BENCH=OFF "-DCMAKE_CXX_FLAGS=$flags"
              "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  set -- -LE "gpu|bench" --timeout 600 "$@"
fi
cmake -S "$root" -B "$build_dir" "${configure[@]}"

echo "== build (-j$jobs)"
start=$(date +%s)
cmake --build "$build_dir" -j "$jobs"
echo "   build took $(( $(date +%s) - start )) s"

echo "== test"
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "$@"
