#!/usr/bin/env bash
# Tests of scripts/get_cifar10.sh, run by CTest (tests/CMakeLists.txt). The script is copied into
# a scratch project with no ../shared beside it, so it takes the download branch; the "download"
# is curl reading a file:// URL.
#
#   tests/scripts/get_cifar10_test.sh download   # needs the real archive; exit 77 (skip) without
#   tests/scripts/get_cifar10_test.sh bad-input  # failed download, truncated and foreign archives,
#                                                # and the default DIR (Note [Default data folder])
# HOME, XDG_DATA_HOME and TANDEM_DATA_DIR point into the scratch folder wherever DIR is left out,
# so the test never writes to the real home folder.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
real_archive="${CIFAR10_ARCHIVE:-$root/../shared/data/cifar-10-binary.tar.gz}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/project/scripts"
cp "$root/scripts/get_cifar10.sh" "$root/scripts/cifar-10-batches-bin.md5" "$work/project/scripts/"
get() { env -u CIFAR10_ARCHIVE bash "$work/project/scripts/get_cifar10.sh" "$@"; }
# get without DIR (or with $flag), from $work/cwd, with HOME in the scratch folder and the given
# environment (NAME=value ...).
flag=()
get_default() {
  mkdir -p "$work/cwd"
  (cd "$work/cwd" && env -u CIFAR10_ARCHIVE -u TANDEM_DATA_DIR -u XDG_DATA_HOME HOME="$work/home" \
    "$@" bash "$work/project/scripts/get_cifar10.sh" ${flag[@]+"${flag[@]}"})
}

check() {  # $1: what, then a command that must succeed
  local what="$1"; shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what" >&2; exit 1; fi
}

# Runs get_cifar10.sh and expects failure with a one-line error containing $2.
expect_error() {  # $1: data dir, $2: expected text; environment from the caller
  local status=0
  get "$1" >"$work/out" 2>"$work/err" || status=$?
  check "exit status non-zero ($status)" test "$status" -ne 0
  check "one-line error: $(cat "$work/err")" test "$(wc -l <"$work/err")" -eq 1
  check "error mentions '$2'" grep -qF "$2" "$work/err"
}

case "${1:-}" in
  download)
    if [ ! -f "$real_archive" ]; then echo "skipped: no CIFAR-10 archive at $real_archive"; exit 77; fi
    command -v curl >/dev/null || { echo "skipped: no curl for a file:// download"; exit 77; }
    CIFAR10_URL="file://$(realpath "$real_archive")"
    export CIFAR10_URL
    get "$work/data" >"$work/out"
    check "downloaded and verified" grep -q "verified at" "$work/out"
    check "kept the archive" test -f "$work/data/cifar-10-binary.tar.gz"
    check "no partial download left" test ! -e "$work/data/cifar-10-binary.tar.gz.part"
    check "no scratch folder left" test -z "$(find "$work/data" -name '.cifar-10-extract.*')"
    check "test batch has 10,000 records" test "$(stat -c %s "$work/data/cifar-10-batches-bin/test_batch.bin")" -eq 30730000
    CIFAR10_URL="file:///nonexistent" get "$work/data" >"$work/out"
    check "second run finds the verified copy (no download)" grep -q "already at" "$work/out"
    # A damaged extracted copy is replaced from the kept archive, without downloading again.
    echo damaged >"$work/data/cifar-10-batches-bin/data_batch_3.bin"
    CIFAR10_URL="file:///nonexistent" get "$work/data" >"$work/out"
    check "damaged copy restored from the kept archive" grep -q "using the archive downloaded earlier" "$work/out"
    check "restored file verified" grep -q "verified at" "$work/out"
    # Without DIR, a verified copy at the old default (./data) is still taken, with a notice.
    mkdir -p "$work/cwd" && mv "$work/data" "$work/cwd/data"
    CIFAR10_URL="file:///nonexistent" get_default TANDEM_DATA_DIR="$work/new" >"$work/out"
    check "old place taken, no download: $(cat "$work/out")" grep -q "at the old place ./data/cifar-10-batches-bin" "$work/out"
    check "old place's notice names the new one" grep -qF "move it to $work/new/cifar-10-batches-bin" "$work/out"
    ;;
  bad-input)
    command -v curl >/dev/null || command -v wget >/dev/null || { echo "skipped: no curl or wget"; exit 77; }
    CIFAR10_URL="file://$work/nonexistent.tar.gz" expect_error "$work/a" "could not download"
    check "no archive or partial download left" test -z "$(ls -A "$work/a")"

    # A download cut short: the archive is removed so that the next run downloads again.
    head -c 100000 /dev/urandom | gzip >"$work/truncated.tar.gz"
    head -c 5000 "$work/truncated.tar.gz" >"$work/short.tar.gz"
    CIFAR10_URL="file://$work/short.tar.gz" expect_error "$work/b" "is not a complete CIFAR-10 archive"
    check "broken download removed" test ! -e "$work/b/cifar-10-binary.tar.gz"
    check "no extracted folder" test ! -e "$work/b/cifar-10-batches-bin"

    # A well-formed archive of the wrong files: md5 mismatch named, nothing put in place, and the
    # user's own archive (CIFAR10_ARCHIVE) left alone.
    mkdir -p "$work/foreign/cifar-10-batches-bin"
    head -c 30730 /dev/zero >"$work/foreign/cifar-10-batches-bin/data_batch_1.bin"
    tar -czf "$work/foreign.tar.gz" -C "$work/foreign" cifar-10-batches-bin
    status=0
    CIFAR10_ARCHIVE="$work/foreign.tar.gz" bash "$work/project/scripts/get_cifar10.sh" "$work/c" \
      >"$work/out" 2>"$work/err" || status=$?
    check "foreign archive fails" test "$status" -ne 0
    check "one-line md5 error: $(cat "$work/err")" test "$(wc -l <"$work/err")" -eq 1
    check "md5 error names a file" grep -q "do not match their md5 sums.*data_batch_1.bin: FAILED" "$work/err"
    check "foreign files not put in place" test ! -e "$work/c/cifar-10-batches-bin"
    check "user's archive kept" test -f "$work/foreign.tar.gz"

    CIFAR10_ARCHIVE="$work/none.tar.gz" bash "$work/project/scripts/get_cifar10.sh" "$work/d" \
      >"$work/out" 2>"$work/err" && { echo "FAILED: missing archive accepted" >&2; exit 1; }
    check "missing archive named" grep -q "none.tar.gz does not exist" "$work/err"

    # The default DIR: TANDEM_DATA_DIR, else an absolute XDG_DATA_HOME's tandem/, else
    # $HOME/.local/share/tandem (a relative XDG_DATA_HOME is ignored); an explicit DIR wins.
    default_is() {  # $1: the expected default, then the environment
      local expected="$1"; shift
      flag=(--default-dir)
      check "default DIR $expected ($*)" test "$(get_default "$@" 2>&1)" = "$expected"
      flag=()
      # Used by a run without DIR: the failed download's folder is made there.
      rm -rf "$expected"
      CIFAR10_URL="file://$work/nonexistent.tar.gz" get_default "$@" >/dev/null 2>"$work/err" || true
      check "run without DIR fetches into $expected" test -d "$expected"
    }
    default_is "$work/t" TANDEM_DATA_DIR="$work/t" XDG_DATA_HOME="$work/xdg"
    default_is "$work/xdg/tandem" XDG_DATA_HOME="$work/xdg"
    default_is "$work/home/.local/share/tandem" XDG_DATA_HOME=relative/share
    rm -rf "$work/t"
    TANDEM_DATA_DIR="$work/t" CIFAR10_URL="file://$work/nonexistent.tar.gz" get "$work/e" \
      >/dev/null 2>&1 || true
    check "explicit DIR wins over TANDEM_DATA_DIR" test -d "$work/e" -a ! -e "$work/t"
    ;;
  *)
    echo "usage: $0 download|bad-input" >&2
    exit 2
    ;;
esac
