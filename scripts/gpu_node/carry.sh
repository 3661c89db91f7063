# shellcheck shell=bash disable=SC2154  # the caller's settings (scripts/gpu_node.sh)
# Sourced by scripts/gpu_node.sh --check-carry: whether what the device tool sends fits its
# 64 MiB. It sends the working tree (tracked files and untracked ones git does not ignore, and a
# shared/ folder inside the checkout) and the ignored paths named in `carry`; sizes are the
# files' own (apparent) sizes.

carry_limit_bytes=$((64 * 1024 * 1024))

# The working tree as the tool counts it, in bytes.
tree_bytes() {
  local root="$1"
  git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    { echo "error: $root is not a git checkout: cannot tell what the device tool would send" >&2; return 1; }
  {
    (cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s -- 2>/dev/null) || true
    # A shared/ inside the checkout travels even when ignored.
    [ ! -d "$root/shared" ] || ! git -C "$root" check-ignore -q shared || du -sb "$root/shared" | cut -f1
  } | awk '{ s += $1 } END { print s + 0 }'
}

# check_carry ROOT PATH…: a line per part and the total; fails over 64 MiB.
check_carry() {
  local root="$1" total tree path bytes
  shift
  tree="$(tree_bytes "$root")" || return 1
  total="$tree"
  printf '%-40s %8.1f MiB\n' "working tree (git ls-files -co)" "$(awk -v b="$tree" 'BEGIN { print b / 1048576 }')"
  for path in "$@"; do
    [ -e "$path" ] || { echo "error: '$path' does not exist" >&2; return 1; }
    bytes="$(du -sb "$path" | cut -f1)"
    total=$((total + bytes))
    printf '%-40s %8.1f MiB\n' "$path" "$(awk -v b="$bytes" 'BEGIN { print b / 1048576 }')"
  done
  printf '%-40s %8.1f MiB of 64\n' "total" "$(awk -v b="$total" 'BEGIN { print b / 1048576 }')"
  if [ "$total" -gt "$carry_limit_bytes" ]; then
    echo "error: $total bytes would travel, more than the device tool's 64 MiB ($carry_limit_bytes)" >&2
    return 1
  fi
}
