# shellcheck shell=bash
# Sourced by .ci/run: runs CI's stages one after another, each with its output streamed as usual,
# and keeps the books: a line per stage with its wall time (and, for a test stage, how many tests
# ran), then a summary with the total against CI's hard limit. A stage that fails ends CI at once,
# after the summary of what ran. A test stage whose count falls below its floor fails too: a test
# executable that stops registering its tests (or a filter that drifts) must not pass unnoticed.
#
#   ci_stage NAME COUNTER FLOOR -- COMMAND…   # COUNTER: ctest | fuzz | none; FLOOR: least tests
#   ci_summary                                 # the table, the total, and the closing line

ci_limit_s=5400  # CI's hard limit: a run past it fails and nothing lands
ci_started=$(date +%s)
ci_rows=()
ci_passed=0 ci_failed=0 ci_skipped=0
ci_logs="$(mktemp -d)"
trap 'rm -rf "$ci_logs"' EXIT

# ctest's closing lines: "100% tests passed, 0 tests failed out of 687" and one "(Skipped)" line per
# skipped test. Prints "total failed skipped noun".
ci_count_ctest() {
  local log="$1" total failed skipped
  total="$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)"
  failed="$(sed -n 's/.*, \([0-9]*\) tests failed out of.*/\1/p' "$log" | tail -1)"
  skipped="$(grep -c '(Skipped)$' "$log" || true)"
  echo "${total:-0} ${failed:-0} ${skipped:-0} tests"
}

# scripts/fuzz.sh's table: one row per target ending in "ok" or "FAILED …".
ci_count_fuzz() {
  local log="$1" ok failed
  ok="$(grep -cE '^[a-z0-9_]+ +[0-9?]+ +[0-9?]+ +[0-9?]+  ok$' "$log" || true)"
  failed="$(grep -cE '^[a-z0-9_]+ +[0-9?]+ +[0-9?]+ +[0-9?]+  FAILED' "$log" || true)"
  echo "$((ok + failed)) $failed 0 targets"
}

ci_stage() {
  local name="$1" counter="$2" floor="$3"
  shift 3
  [ "$1" = "--" ] && shift
  local log="$ci_logs/$name.log" start status=0
  echo "==== stage $name: $*"
  start=$(date +%s)
  "$@" 2>&1 | tee "$log" || status=$?
  local seconds=$(( $(date +%s) - start )) tests=""
  if [ "$counter" != none ]; then
    local total failed skipped noun
    read -r total failed skipped noun < <("ci_count_$counter" "$log")
    ci_passed=$((ci_passed + total - failed - skipped))
    ci_failed=$((ci_failed + failed))
    ci_skipped=$((ci_skipped + skipped))
    tests="$total $noun ($failed failed, $skipped skipped)"
    if [ "$status" -eq 0 ] && [ "$total" -lt "$floor" ]; then
      echo "error: stage $name ran $total $noun, fewer than the $floor it ran before (see .ci/run)" >&2
      status=1
    fi
  fi
  local row
  row="$(printf '%-12s %6d s  %-7s %s' "$name" "$seconds" "$([ "$status" -eq 0 ] && echo ok || echo FAILED)" "$tests")"
  ci_rows+=("$row")
  echo "==== stage $row"
  if [ "$status" -ne 0 ]; then
    # A stage that failed with no failing test (a build, a count under its floor) still makes the
    # closing line say that something failed.
    [ "${failed:-0}" -gt 0 ] || ci_failed=$((ci_failed + 1))
    ci_summary
    exit "$status"
  fi
}

ci_summary() {
  local total=$(( $(date +%s) - ci_started ))
  echo "==== CI stages (wall time; $(nproc) cores; $(date -u +%Y-%m-%d))"
  printf '     %s\n' "${ci_rows[@]}"
  printf '==== CI total: %d s (%d min %02d s) of the %d s limit\n' "$total" $((total / 60)) $((total % 60)) "$ci_limit_s"
  echo "ci: $ci_passed passed, $ci_failed failed, $ci_skipped skipped"
}
