#!/usr/bin/env bash
# Every program under scripts/ answers --help with its usage and exit 0, doing nothing
# else: the newcomer's first command (issue #45). A script is run only once its text shows that it
# handles --help (the usual case line, or argparse), so that a missing one fails here rather than
# installing packages or training. Sourced libraries and imported modules are not programs.
#
#   scripts_help_test.sh SOURCE_DIR
set -uo pipefail
root="$1"
not_programs=" build_env.sh cifar_recipe.sh plot_common.py compare_pytorch_report.py "
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cd "$scratch" || exit 2
failures=0
checked=0
for script in "$root"/scripts/*.sh "$root"/scripts/*.py; do
  name="$(basename "$script")"
  [[ "$not_programs" == *" $name "* ]] && continue
  if ! grep -qE -- '-h \| --help|\["-h"\], \["--help"\]|argparse' "$script"; then
    echo "scripts/$name: handles no --help (not run)"
    failures=$((failures + 1))
    continue
  fi
  case "$name" in *.py) runner=python3 ;; *) runner=bash ;; esac
  output="$(timeout 60 "$runner" "$script" --help 2>&1)"
  status=$?
  lines="$(printf '%s\n' "$output" | grep -c .)"
  if [ "$status" -ne 0 ] || [ "$lines" -lt 2 ]; then
    echo "scripts/$name --help: exit $status, $lines lines: $(printf '%s' "$output" | head -3)"
    failures=$((failures + 1))
  fi
  checked=$((checked + 1))
done
[ "$(ls -A "$scratch")" = "" ] || { echo "--help left files behind: $(ls -A "$scratch")"; failures=$((failures + 1)); }
[ $failures -eq 0 ] || { echo "FAILED: $failures"; exit 1; }
echo "passed: $checked programs under scripts/ answer --help with their usage and exit 0"
