#!/usr/bin/env bash
# Downloads the Debian 12 packages a GPU node lacks to build and test Tandem (it has the CUDA
# toolkit, a compiler, CMake, Ninja and Python, and no package registry) into DIR, with a
# manifest. scripts/gpu_node.sh unpacks them there into a private prefix (docs/engine.md, "On a
# GPU node"). Run it on a Debian 12 machine with package access; no root needed. Idempotent: a
# package whose .deb is present with the index's checksum is not fetched again, and .debs of
# other versions of the bundled packages are removed.
#
#   scripts/offline_bundle.sh                 # into ./offline-bundle (git-ignored)
#   scripts/offline_bundle.sh DIR
#
# DIR/manifest.tsv: one line per package: package, version, sha256, size in bytes, file.
#
# Note [Bundle contents]: the roots are what CMakeLists.txt finds with find_package (Gloo, CLI11,
# nlohmann-json, OpenSSL's libcrypto, GoogleTest/GMock, Google Benchmark); the rest is their Depends
# closure (apt-cache depends --recurse) minus what a machine with a compiler and CMake has (the
# closure of build-essential and cmake), less what linking and running Tandem do not need: the
# system packages libibverbs1's maintainer scripts pull in (adduser, passwd, PAM, debconf),
# ibverbs-providers (RDMA drivers, loaded only on RDMA hardware) and the -dev packages of Gloo's own
# dependencies (no Gloo header Tandem includes includes them). oneDNN is the build's default, 3.2
# from PyPI (Note [oneDNN from PyPI] in scripts/install_onednn.sh): no Debian package has it, so the
# prefix install_onednn.sh fills is packed here into a .deb of its own (its files under usr/, xz: 7
# MiB where the wheel is 37), listed in the manifest with its own checksum, and travels and unpacks
# as the others do; Debian's oneDNN 2.6 and the OpenCL packages its CMake config asks for are no
# longer bundled. The offline test (tests/scripts/offline_build_test.sh) checks the list is enough:
# it builds and tests Tandem with these packages' files (and the oneDNN 3.2 prefix) hidden from the
# system, supplied by the bundle alone.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ $# -le 1 ] || { echo "usage: scripts/offline_bundle.sh [DIR]" >&2; exit 2; }
case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) echo "error: unknown flag '$1' (usage: scripts/offline_bundle.sh [DIR])" >&2; exit 2 ;;
esac
dir="${1:-$root/offline-bundle}"

packages=(
  libgloo-dev libgloo0 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200  # Gloo
  libcli11-dev nlohmann-json3-dev                       # flags, checkpoint headers
  libssl-dev libssl3                                    # the store's job token (HMAC-SHA256)
  libgtest-dev libgmock-dev googletest                  # tests
  libbenchmark-dev libbenchmark1debian                  # microbench/
)

command -v apt-get >/dev/null && command -v apt-cache >/dev/null ||
  { echo "error: apt-get not found: run this on a Debian 12 machine with package access" >&2; exit 1; }
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

# The candidate version of each package, as the index has it: version, checksum, size, file name
# (one apt-cache call: it reads the whole index each time).
manifest="$dir/manifest.tsv.new"
apt-cache show --no-all-versions "${packages[@]}" 2>/dev/null | awk -v OFS='\t' '
  /^Package: / { package = $2 } /^Version: / { version = $2 } /^SHA256: / { sha256 = $2 }
  /^Size: / { size = $2 } /^Filename: / { n = split($2, parts, "/"); file = parts[n] }
  /^$/ && package != "" { print package, version, sha256, size, file; package = "" }
  END { if (package != "") print package, version, sha256, size, file }' >"$manifest" || true
missing=()
for package in "${packages[@]}"; do
  cut -f1 "$manifest" | grep -qxF "$package" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  rm -f "$manifest"
  echo "error: the package index has no ${missing[*]}: run 'apt-get update' (as root), on Debian 12" >&2
  exit 1
fi

# Fetch what is missing or does not match the index; drop other versions of the same packages.
fetched=0
while IFS=$'\t' read -r package version sha256 _ file; do
  for old in "$dir/${package}"_*.deb; do
    [ -e "$old" ] && [ "${old##*/}" != "$file" ] && rm -f "$old"
  done
  if [ -f "$dir/$file" ] && echo "$sha256  $dir/$file" | sha256sum --check --status; then
    continue
  fi
  rm -f "$dir/$file"
  (cd "$dir" && apt-get download -qq "$package=$version" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
  [ -f "$dir/$file" ] || { echo "error: apt-get download $package=$version gave no $file" >&2; exit 1; }
  echo "$sha256  $dir/$file" | sha256sum --check --status ||
    { echo "error: $file does not have the index's SHA256 $sha256" >&2; exit 1; }
  fetched=$((fetched + 1))
done <"$manifest"

# oneDNN 3.2 as a .deb (Note [Bundle contents]), packed again only when its version changes.
"$root/scripts/install_onednn.sh" >/dev/null
onednn_prefix="$("$root/scripts/install_onednn.sh" --prefix)"
onednn_version=2023.2.0
onednn_file="onednn-cpu-gomp_${onednn_version}_amd64.deb"
for old in "$dir"/onednn-cpu-gomp_*.deb; do
  [ -e "$old" ] && [ "${old##*/}" != "$onednn_file" ] && rm -f "$old"
done
if [ ! -f "$dir/$onednn_file" ]; then
  command -v dpkg-deb >/dev/null || { echo "error: no dpkg-deb to pack oneDNN 3.2 with" >&2; exit 1; }
  staging="$(mktemp -d)"
  mkdir -p "$staging/DEBIAN" "$staging/usr"
  cp -a "$onednn_prefix/lib" "$onednn_prefix/include" "$onednn_prefix/share" "$staging/usr/"
  printf '%s\n' "Package: onednn-cpu-gomp" "Version: $onednn_version" "Architecture: amd64" \
    "Maintainer: Tandem's scripts/offline_bundle.sh <nobody@localhost>" \
    "Description: oneDNN 3.2, CPU only, GNU OpenMP (PyPI's onednn-cpu-gomp and onednn-devel-cpu-gomp)" \
    >"$staging/DEBIAN/control"
  dpkg-deb --root-owner-group -Zxz --build "$staging" "$dir/$onednn_file.new" >/dev/null
  rm -rf "$staging"
  mv "$dir/$onednn_file.new" "$dir/$onednn_file"
  fetched=$((fetched + 1))
fi
printf 'onednn-cpu-gomp\t%s\t%s\t%s\t%s\n' "$onednn_version" \
  "$(sha256sum "$dir/$onednn_file" | cut -d' ' -f1)" "$(stat -c %s "$dir/$onednn_file")" "$onednn_file" >>"$manifest"
mv "$manifest" "$dir/manifest.tsv"

total="$(awk -F'\t' '{ s += $4 } END { printf "%.1f", s / 1048576 }' "$dir/manifest.tsv")"
echo "== offline bundle: $(wc -l <"$dir/manifest.tsv") packages, $total MiB in $dir ($fetched fetched or packed)"
