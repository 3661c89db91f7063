#!/usr/bin/env bash
# Puts a verified CIFAR-10 (binary version) at DIR/cifar-10-batches-bin (DIR defaults to ./data).
# The archive comes from $CIFAR10_ARCHIVE, else ../shared/data/ beside the project, else the
# official site. Does nothing when a verified copy is already there.
#
#   scripts/get_cifar10.sh [DIR]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-./data}"
md5_list="$root/scripts/cifar-10-batches-bin.md5"
url="https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"

verify() { (cd "$dir" && md5sum --quiet -c "$md5_list") >/dev/null 2>&1; }

mkdir -p "$dir"
if [ -d "$dir/cifar-10-batches-bin" ] && verify; then
  echo "CIFAR-10: verified copy already at $dir/cifar-10-batches-bin"
  exit 0
fi

archive="${CIFAR10_ARCHIVE:-}"
if [ -z "$archive" ] && [ -f "$root/../shared/data/cifar-10-binary.tar.gz" ]; then
  archive="$root/../shared/data/cifar-10-binary.tar.gz"
fi
if [ -z "$archive" ]; then
  archive="$dir/cifar-10-binary.tar.gz"
  echo "CIFAR-10: downloading $url"
  if command -v curl >/dev/null; then curl -fL --retry 3 -o "$archive" "$url"
  elif command -v wget >/dev/null; then wget -O "$archive" "$url"
  else echo "error: need curl or wget to download $url (or set CIFAR10_ARCHIVE)" >&2; exit 1; fi
fi
[ -f "$archive" ] || { echo "error: CIFAR-10 archive $archive does not exist" >&2; exit 1; }

echo "CIFAR-10: extracting $archive into $dir"
tar -xzf "$archive" -C "$dir"
if ! verify; then
  echo "error: the files in $dir/cifar-10-batches-bin do not match their md5 sums ($md5_list)" >&2
  (cd "$dir" && md5sum -c "$md5_list" >&2) || true
  exit 1
fi
echo "CIFAR-10: verified at $dir/cifar-10-batches-bin"
