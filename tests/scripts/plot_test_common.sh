# shellcheck shell=bash
# Sourced by the plot scripts' tests (plot_bench_test.sh, plot_training_test.sh): Debian's python
# (exit 77, CTest's skip, when it has no matplotlib), a scratch folder removed on exit, and check.
python=/usr/bin/python3
"$python" -c 'import matplotlib' 2>/dev/null || { echo "skip: no matplotlib for $python"; exit 77; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

check() {  # $1: what, then a command that must succeed
  local what="$1"; shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what" >&2; exit 1; fi
}
