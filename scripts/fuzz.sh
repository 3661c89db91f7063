#!/usr/bin/env bash
# Fuzzes every parser of outside input with libFuzzer: builds the targets of tests/fuzz with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer in build-fuzz (CUDA off, only what the targets
# need), then runs each for SECONDS, starting from its seeds in tests/fuzz/corpus/<target>.
# Prints executions and corpus size per target; exits non-zero when a target crashed, leaked,
# hung (-timeout) or used too much memory, leaving the input in build-fuzz/crashes/. CI runs it
# with 20 s per target.
#
#   scripts/fuzz.sh [SECONDS]        # default 20
#
# The targets run side by side, as many at a time as there are cores (each is one process on one
# core), so the wall time is about SECONDS times the targets over the cores.
#
# A crash found becomes a fixed bug plus its input copied into tests/fuzz/corpus/<target>/, which
# fuzz_tests (FuzzCorpus.*, in every test build) replays from then on.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-20}"
build_dir="${BUILD_DIR:-$root/build-fuzz}"
jobs="${JOBS:-$(nproc)}"
targets=(safetensors checkpoint cifar10 store_request store_session launch_env file_store_records)

"$root/scripts/install_deps.sh"
source "$root/scripts/build_env.sh"

# -O2 as before for speed of execution, line tables only: file and line in every frame of a
# report, without the cost of full debug info.
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
echo "== configure (clang, libFuzzer + ASan + UBSan) in $build_dir"
CC=clang CXX=clang++ cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" "${cmake_speedups[@]}" \
  -DTANDEM_CUDA=OFF -DTANDEM_BUILD_TESTS=OFF -DTANDEM_BUILD_BENCH=OFF -DTANDEM_FUZZ=ON \
  "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" >/dev/null
echo "== build (-j$jobs)"
start=$(date +%s)
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]/%/_fuzz}" >/dev/null
echo "   build took $(( $(date +%s) - start )) s"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mkdir -p "$build_dir/crashes"

# Runs one target for SECONDS; its log is build-fuzz/TARGET.log, its exit status TARGET.status.
fuzz_target() {
  local target="$1" corpus="$build_dir/corpus/$1"  # grows here; the seeds in the tree stay as they are
  mkdir -p "$corpus"
  local status=0
  "$build_dir/tests/fuzz/${target}_fuzz" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build_dir/crashes/$target-" \
    "$corpus" "$root/tests/fuzz/corpus/$target" >"$build_dir/$target.log" 2>&1 || status=$?
  echo "$status" >"$build_dir/$target.status"
}

printf '== fuzzing, %s s per target, %s at a time\n' "$seconds" "$jobs"
rm -f "$build_dir"/*.status
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_target "$target" &
done
wait

failed=()
printf '%-15s %12s %10s %8s  %s\n' target executions "exec/s" corpus result
for target in "${targets[@]}"; do
  log="$build_dir/$target.log"
  result=ok
  if [ "$(cat "$build_dir/$target.status" 2>/dev/null)" != 0 ]; then
    result="FAILED (see $log and $build_dir/crashes/)"
    failed+=("$target")
  fi
  executions="$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -1)"
  rate="$(awk '/stat::average_exec_per_sec/ {print $2}' "$log" | tail -1)"
  printf '%-15s %12s %10s %8s  %s\n' "$target" "${executions:-?}" "${rate:-?}" \
    "$(find "$build_dir/corpus/$target" -type f | wc -l)" "$result"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "error: fuzzing found a failure in: ${failed[*]}" >&2
  exit 1
fi
