#!/usr/bin/env bash
# Writes a CIFAR-10 subset small enough to travel to a GPU node with the device tool (64 MiB in
# all, beside the repository and the offline bundle: scripts/gpu_node.sh --check-carry), so that
# the node's training steps report accuracy on real images:
#   DIR/data_batch_1.bin   the first training file, 10,000 images (29.3 MiB)
#   DIR/test_batch.bin     the first N test images (default 2,000: 5.9 MiB)
#   DIR/batches.meta.txt   the class names
#   DIR/subset.txt         the marker that lets train_cifar and bench_cifar read a folder with
#                          fewer and shorter files (Note [CIFAR-10 subsets] in data/cifar10.cpp)
#   DIR/subset.md5         the two .bin files' md5 sums, which the readers check them against
#                          (Note [CIFAR-10 md5 check]), as they check a whole data set's
# `train_cifar --data-dir DIR --subset 10000` then trains on all of it and tests on the 2,000.
#
#   scripts/cifar_subset.sh [--test-images N] [DIR]    # DIR defaults to ./cifar-subset (git-ignored)
#
# The files come from the first of: the CIFAR-10 that scripts/get_cifar10.sh puts in its default
# place ($TANDEM_DATA_DIR or ${XDG_DATA_HOME:-~/.local/share}/tandem), the old
# ./data/cifar-10-batches-bin, $CIFAR10_ARCHIVE, ./data/cifar-10-binary.tar.gz,
# ../shared/data/cifar-10-binary.tar.gz; both must match their md5 sums
# (scripts/cifar-10-batches-bin.md5) before they are cut. DIR is replaced only when complete.
# Errors are one line on stderr and a non-zero exit.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: scripts/cifar_subset.sh [--test-images N] [DIR]"
fail() { echo "error: $*" >&2; exit 1; }
test_images=2000 dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --test-images)
      [ $# -ge 2 ] || { echo "error: --test-images needs a value ($usage)" >&2; exit 2; }
      test_images="$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "error: unknown flag '$1' ($usage)" >&2; exit 2 ;;
    *) [ -z "$dir" ] || { echo "error: one DIR only ($usage)" >&2; exit 2; }; dir="$1"; shift ;;
  esac
done
[[ "$test_images" =~ ^[1-9][0-9]*$ ]] && [ "$test_images" -le 10000 ] ||
  { echo "error: --test-images takes 1 to 10000, got '$test_images'" >&2; exit 2; }
dir="${dir:-$root/cifar-subset}"
record_bytes=3073
marker="CIFAR-10 subset (scripts/cifar_subset.sh): data_batch_1.bin, 10000 training images; test_batch.bin, the first $test_images of the 10000 test images"

if [ -f "$dir/subset.txt" ] && [ "$(cat "$dir/subset.txt")" = "$marker" ] && [ -f "$dir/subset.md5" ] &&
   [ "$(stat -c %s "$dir/test_batch.bin" 2>/dev/null)" = $((test_images * record_bytes)) ] &&
   [ "$(stat -c %s "$dir/data_batch_1.bin" 2>/dev/null)" = $((10000 * record_bytes)) ]; then
  echo "CIFAR-10 subset: already at $dir"
  exit 0
fi

mkdir -p "$(dirname "$dir")"
scratch="$(mktemp -d "$(dirname "$dir")/.cifar-subset.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
files="cifar-10-batches-bin/data_batch_1.bin cifar-10-batches-bin/test_batch.bin cifar-10-batches-bin/batches.meta.txt"
data_home=""
for place in "$("$root/scripts/get_cifar10.sh" --default-dir 2>/dev/null || true)" "$root/data"; do
  [ -n "$place" ] && [ -f "$place/cifar-10-batches-bin/test_batch.bin" ] && { data_home="$place"; break; }
done
if [ -n "$data_home" ]; then
  source="$data_home/cifar-10-batches-bin"
  mkdir -p "$scratch/cifar-10-batches-bin"
  # shellcheck disable=SC2086  # the file list is words
  (cd "$data_home" && cp $files "$scratch/cifar-10-batches-bin/")
else
  source=""
  for archive in "${CIFAR10_ARCHIVE:-}" "$root/data/cifar-10-binary.tar.gz" "$root/../shared/data/cifar-10-binary.tar.gz"; do
    [ -n "$archive" ] && [ -f "$archive" ] && { source="$archive"; break; }
  done
  [ -n "$source" ] || fail "no CIFAR-10 here: run scripts/get_cifar10.sh, or set CIFAR10_ARCHIVE to cifar-10-binary.tar.gz"
  # shellcheck disable=SC2086
  tar -xzf "$source" -C "$scratch" $files 2>/dev/null || fail "$source is not a complete CIFAR-10 archive"
fi
(cd "$scratch" && grep -E "$(echo "$files" | tr ' ' '|')" "$root/scripts/cifar-10-batches-bin.md5" | md5sum --quiet -c -) \
  >/dev/null 2>&1 || fail "the files from $source do not match their md5 sums in scripts/cifar-10-batches-bin.md5"

mkdir "$scratch/subset"
mv "$scratch/cifar-10-batches-bin/data_batch_1.bin" "$scratch/cifar-10-batches-bin/batches.meta.txt" "$scratch/subset/"
head -c $((test_images * record_bytes)) "$scratch/cifar-10-batches-bin/test_batch.bin" >"$scratch/subset/test_batch.bin"
(cd "$scratch/subset" && md5sum data_batch_1.bin test_batch.bin >subset.md5)
echo "$marker" >"$scratch/subset/subset.txt"
rm -rf "$dir"
mv "$scratch/subset" "$dir"
echo "CIFAR-10 subset: $(du -sb "$dir" | awk '{ printf "%.1f MiB", $1 / 1048576 }') at $dir, from $source"
