#!/usr/bin/env bash
# Puts a verified CIFAR-10 (binary version) at DIR/cifar-10-batches-bin. DIR defaults to the
# place train_cifar and bench_cifar look without --data-dir (Note [Default data folder] in
# apps/common/data_dir.h): $TANDEM_DATA_DIR, else ${XDG_DATA_HOME:-$HOME/.local/share}/tandem, so
# one download is found from any folder. Without DIR, a verified copy at the old default
# (./data/cifar-10-batches-bin) is left where it is, which the programs still find.
# The archive comes from $CIFAR10_ARCHIVE, else ../shared/data/ beside the project, else it is
# downloaded from $CIFAR10_URL (default: the official site) into DIR. Does nothing when a verified
# copy is already there.
#
# Nothing half-done is left behind: a download goes to DIR/cifar-10-binary.tar.gz.part and is
# renamed only once complete, and the archive is extracted into a scratch folder that replaces
# DIR/cifar-10-batches-bin only after every file matched its md5 sum. Errors are one line on
# stderr and a non-zero exit.
#
#   scripts/get_cifar10.sh [DIR]
#   scripts/get_cifar10.sh --default-dir     # prints the default DIR
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

# Note [Default data folder]: the same order as apps/common/data_dir.cpp's. A relative
# XDG_DATA_HOME is ignored, as the XDG spec says.
default_dir() {
  if [ -n "${TANDEM_DATA_DIR:-}" ]; then echo "$TANDEM_DATA_DIR"; return; fi
  case "${XDG_DATA_HOME:-}" in
    /*) echo "$XDG_DATA_HOME/tandem" ;;
    *) [ -n "${HOME:-}" ] || { echo "error: set HOME, XDG_DATA_HOME or TANDEM_DATA_DIR, or give DIR" >&2; exit 1; }
       echo "$HOME/.local/share/tandem" ;;
  esac
}
if [ "${1:-}" = --default-dir ]; then default_dir; exit 0; fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$(default_dir)}"
md5_list="$root/scripts/cifar-10-batches-bin.md5"
url="${CIFAR10_URL:-https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz}"

fail() { echo "error: $*" >&2; exit 1; }
verify() { (cd "$1" && md5sum --quiet -c "$md5_list") >/dev/null 2>&1; }

download() {  # $1: the archive to write
  local partial="$1.part"
  rm -f "$partial"
  echo "CIFAR-10: downloading $url"
  local ok=0 why
  if command -v curl >/dev/null; then
    why="$(curl -fsSL --retry 3 -o "$partial" "$url" 2>&1)" && ok=1
  elif command -v wget >/dev/null; then
    why="$(wget -q -O "$partial" "$url" 2>&1)" && ok=1
  else
    fail "need curl or wget to download $url (or set CIFAR10_ARCHIVE to a local copy)"
  fi
  if [ "$ok" != 1 ]; then
    rm -f "$partial"
    fail "could not download $url: $(echo "$why" | tail -1) (set CIFAR10_ARCHIVE to a local copy)"
  fi
  mv "$partial" "$1"
}

if [ $# -eq 0 ] && ! { [ -d "$dir/cifar-10-batches-bin" ] && verify "$dir"; } &&
  [ -d data/cifar-10-batches-bin ] && verify data; then
  echo "CIFAR-10: verified copy at the old place ./data/cifar-10-batches-bin, still found there;" \
    "move it to $dir/cifar-10-batches-bin to find it from any folder"
  exit 0
fi
mkdir -p "$dir" || fail "cannot create $dir"
if [ -d "$dir/cifar-10-batches-bin" ] && verify "$dir"; then
  echo "CIFAR-10: verified copy already at $dir/cifar-10-batches-bin"
  exit 0
fi

archive="${CIFAR10_ARCHIVE:-}"
downloaded=0
if [ -z "$archive" ] && [ -f "$root/../shared/data/cifar-10-binary.tar.gz" ]; then
  archive="$root/../shared/data/cifar-10-binary.tar.gz"
fi
if [ -z "$archive" ]; then
  archive="$dir/cifar-10-binary.tar.gz"
  if [ -f "$archive" ]; then
    echo "CIFAR-10: using the archive downloaded earlier, $archive"
  else
    download "$archive"
    downloaded=1
  fi
fi
[ -f "$archive" ] || fail "CIFAR-10 archive $archive does not exist"

scratch="$(mktemp -d "$dir/.cifar-10-extract.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
echo "CIFAR-10: extracting $archive"
if ! tar -xzf "$archive" -C "$scratch" 2>/dev/null; then
  # A broken download would be found again on the next run; a user's own file is left alone.
  [ "$archive" = "$dir/cifar-10-binary.tar.gz" ] && rm -f "$archive"
  fail "$archive is not a complete CIFAR-10 archive (tar could not extract it)"
fi
if ! verify "$scratch"; then
  bad="$( (cd "$scratch" && md5sum -c "$md5_list" 2>/dev/null) | grep -v ': OK$' | head -3 | tr '\n' ' ' || true)"
  fail "the files in $archive do not match their md5 sums in $md5_list: ${bad:-no files}"
fi
rm -rf "$dir/cifar-10-batches-bin"
mv "$scratch/cifar-10-batches-bin" "$dir/cifar-10-batches-bin"
[ "$downloaded" = 1 ] && echo "CIFAR-10: kept the download at $archive"
echo "CIFAR-10: verified at $dir/cifar-10-batches-bin"
