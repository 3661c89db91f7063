#!/usr/bin/env bash
# STYLE.md rule 9, enforced: every C++/CUDA file as .clang-format says, and clang-tidy at zero
# warnings (.clang-tidy says which checks, and why some are left out) over the sources of the
# libraries, programs and examples. CI runs it after the first build (it needs that build's
# compile_commands.json).
#
# Note [clang-tidy cache]: clang-tidy over the whole tree takes minutes, and most runs change a few
# files. A file found clean is remembered under the key of everything the verdict depends on
# (scripts/tidy_keys.py: tool versions, .clang-tidy, compile command, the file preprocessed with
# comments, so every header it includes): a later run checks only the files whose key is new, i.e.
# the changed files and those that include a changed header. Only clean results are kept, so a
# warning is reported on every run until fixed; with no cache (a new machine) every file is
# checked. TANDEM_TIDY_CACHE names the folder (default ~/.cache/tandem/clang-tidy; empty: none).
#
# Shell scripts pass shellcheck at its warning level (errors and warnings; its info and style notes
# are advice, e.g. "A && B || C is not if-then-else" where that is meant). Every C++ file names
# <cstdint> and <cstdio> where it uses them (scripts/check_includes.py, review H11).
#
#   scripts/check_style.sh [BUILD_DIR]        # default ./build; all three checks
#   scripts/check_style.sh --format-only      # clang-format alone, no build needed
#   scripts/check_style.sh --shell-only       # shellcheck alone
#   scripts/check_style.sh --fix              # clang-format -i over the tree, then both checks
set -uo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 2
format_only=0 shell_only=0 fix=0 build="$root/build"
for arg in "$@"; do
  case "$arg" in
    --format-only) format_only=1 ;;
    --shell-only) shell_only=1 ;;
    --fix) fix=1 ;;
    *) build="$arg" ;;
  esac
done
require() {
  command -v "$1" >/dev/null || { echo "error: $1 not found: run scripts/install_deps.sh" >&2; exit 1; }
}

# Every tracked shell script: *.sh, sourced ones included (each names its shell), and CI's run.
check_shell() {
  require shellcheck
  local scripts
  mapfile -t scripts < <(git ls-files '*.sh' .ci/run)
  echo "== shellcheck (${#scripts[@]} files)"
  shellcheck --severity=warning "${scripts[@]}" ||
    { echo "FAILED: shellcheck's findings above (at its warning level)" >&2; exit 1; }
}
if [ $shell_only -eq 1 ]; then check_shell; exit 0; fi
require clang-format
require clang-tidy

mapfile -t sources < <(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')
[ $fix -eq 1 ] && clang-format -i "${sources[@]}"
echo "== clang-format (${#sources[@]} files)"
report="$(mktemp)"
trap 'rm -f "$report"' EXIT
if ! clang-format --dry-run -Werror "${sources[@]}" 2>"$report"; then
  grep -E "error:" "$report" | cut -d: -f1 | sort | uniq -c | sed 's/^/   /'
  echo "FAILED: the files above are not clang-formatted (lines per file); run scripts/check_style.sh --fix" >&2
  exit 1
fi
[ $format_only -eq 1 ] && exit 0
check_shell
# Review H11: <cstdint> and <cstdio> named where used (no GCC 13 here to find them missing).
python3 "$root/scripts/check_includes.py" "$root" || exit 1

[ -f "$build/compile_commands.json" ] || {
  echo "error: no $build/compile_commands.json: configure the build first (cmake -S . -B $build)" >&2
  exit 1
}
# Library and program sources that the build compiled (a CPU-only build has no engine/cuda).
mapfile -t units < <(git ls-files 'engine/*.cpp' 'nn/*.cpp' 'data/*.cpp' 'parallel/*.cpp' 'apps/*.cpp' 'examples/*.cpp' |
                     while read -r f; do grep -q "\"file\": \"$root/$f\"" "$build/compile_commands.json" && echo "$f"; done)
start=$(date +%s)
cache="${TANDEM_TIDY_CACHE-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/tandem/clang-tidy}"
# "KEY FILE" for each unit not known clean; without a cache the key is only a name for the log.
unchecked=()
if [ -n "$cache" ]; then
  mkdir -p "$cache"
  python3 "$root/scripts/tidy_keys.py" "$build" "${units[@]}" >"$build/tidy.keys" || exit 1
  while read -r key file; do
    # Found clean before: re-dated, so that only keys no checkout has had for a month expire.
    if [ -f "$cache/$key" ]; then touch "$cache/$key"; else unchecked+=("$key $file"); fi
  done <"$build/tidy.keys"
  find "$cache" -type f -mtime +30 -delete
else
  for file in "${units[@]}"; do unchecked+=("$(echo "$file" | tr / _) $file"); done
fi
echo "== clang-tidy (${#units[@]} files: ${#unchecked[@]} to check, $(( ${#units[@]} - ${#unchecked[@]} )) clean before; $(nproc) at a time)"
# One file per clang-tidy, each with its own log, so that every clean one is remembered even when
# another fails (WarningsAsErrors makes a warning fail clang-tidy).
logs="$build/tidy"
rm -rf "$logs" && mkdir -p "$logs"
tidy_one='clang-tidy -p "$1" --quiet "$5" >"$2/$4.log" 2>&1 && { [ -z "$3" ] || touch "$3/$4"; }'
failed=0
if [ ${#unchecked[@]} -gt 0 ]; then
  printf '%s\n' "${unchecked[@]}" |
    xargs -P "$(nproc)" -L 1 sh -c "$tidy_one" _ "$build" "$logs" "$cache" || failed=1
fi
if [ $failed -ne 0 ]; then
  cat "$logs"/*.log >"$build/tidy.log"
  grep -E "(warning|error):" "$build/tidy.log" | sort -u
  echo "FAILED: clang-tidy found the above (full log: $build/tidy.log)" >&2
  exit 1
fi
echo "   clean in $(( $(date +%s) - start )) s"
