#!/usr/bin/env bash
# STYLE.md rule 9, enforced: every C++/CUDA file as .clang-format says, and clang-tidy at zero
# warnings (.clang-tidy says which checks, and why some are left out) over the sources of the
# libraries and programs. CI runs it after the first build (it needs that build's
# compile_commands.json).
#
#   scripts/check_style.sh [BUILD_DIR]        # default ./build; both checks
#   scripts/check_style.sh --format-only      # no build needed
#   scripts/check_style.sh --fix              # clang-format -i over the tree, then both checks
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 2
format_only=0 fix=0 build="$root/build"
for arg in "$@"; do
  case "$arg" in
    --format-only) format_only=1 ;;
    --fix) fix=1 ;;
    *) build="$arg" ;;
  esac
done
for tool in clang-format clang-tidy; do
  command -v "$tool" >/dev/null || { echo "error: $tool not found: run scripts/install_deps.sh" >&2; exit 1; }
done

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

[ -f "$build/compile_commands.json" ] || {
  echo "error: no $build/compile_commands.json: configure the build first (cmake -S . -B $build)" >&2
  exit 1
}
# Library and program sources that the build compiled (a CPU-only build has no engine/cuda).
mapfile -t units < <(git ls-files 'engine/*.cpp' 'nn/*.cpp' 'data/*.cpp' 'parallel/*.cpp' 'apps/*.cpp' |
                     while read -r f; do grep -q "\"file\": \"$root/$f\"" "$build/compile_commands.json" && echo "$f"; done)
echo "== clang-tidy (${#units[@]} files, $(nproc) at a time)"
start=$(date +%s)
if ! printf '%s\n' "${units[@]}" | xargs -P "$(nproc)" -n 4 clang-tidy -p "$build" --quiet \
       >"$build/tidy.log" 2>&1; then
  grep -E "(warning|error):" "$build/tidy.log" | sort -u
  echo "FAILED: clang-tidy found the above (full log: $build/tidy.log)" >&2
  exit 1
fi
echo "   clean in $(( $(date +%s) - start )) s"
