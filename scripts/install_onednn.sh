#!/usr/bin/env bash
# Installs oneDNN 3.2 from PyPI (onednn-cpu-gomp and onednn-devel-cpu-gomp 2023.2.0: the CPU-only
# build on GNU OpenMP, with its headers and CMake package) into a prefix outside the tree, where
# CMake looks for it (cmake/TandemDependencies.cmake, TANDEM_ONEDNN=3):
#
#   ${TANDEM_ONEDNN_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem/onednn-3.2}
#
#   scripts/install_onednn.sh              # install it there, unless it already is
#   scripts/install_onednn.sh --prefix     # print the prefix
#
# scripts/install_deps.sh runs it; it needs python3 with pip and PyPI. No root needed. Idempotent:
# a prefix whose stamp names the same wheels' checksums is left as it is.
#
# Note [oneDNN from PyPI]: the wheels hold no Python, only a prefix (lib/, include/,
# lib/cmake/dnnl/) under <name>.data/data/. They are fetched with `pip download`, checked against
# the SHA256 below, and that part unzipped into the prefix: what `pip install --prefix` would lay
# there, without an install into any Python (Debian's pip refuses one outside a venv, PEP 668;
# --target drops lib/), and with one copy of the 52 MiB library where the wheel, which cannot
# hold symbolic links, ships three (libdnnl.so, .so.3 and .so.3.2). The CMake package computes
# its prefix from where it lies, so the prefix can move (the GPU node's bundle moves it:
# scripts/offline_bundle.sh).
set -euo pipefail
case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  --prefix | "") ;;
  *) echo "error: unknown argument '$1' (usage: scripts/install_onednn.sh [--prefix])" >&2; exit 2 ;;
esac

version=2023.2.0  # oneDNN 3.2
wheels=(
  "onednn-cpu-gomp 2f22a54d6a890ed14bfa185d42a4be65d8b5b1df85dc1f0f3a9abe31620416fb"
  "onednn-devel-cpu-gomp 9763c69e8c907e119056bd52ad918ca84ac9ba939d130a99dfa95ccca3e5e284"
)
prefix="${TANDEM_ONEDNN_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem/onednn-3.2}"
if [ "${1:-}" = --prefix ]; then
  echo "$prefix"
  exit 0
fi

stamp="$prefix/.tandem-wheels"
expected="$(printf '%s\n' "${wheels[@]}")"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$expected" ] && [ -f "$prefix/lib/libdnnl.so.3.2" ]; then
  echo "== oneDNN 3.2: present in $prefix"
  exit 0
fi

python3 -m pip --version >/dev/null 2>&1 ||
  { echo "error: oneDNN 3.2 comes from PyPI and needs python3 with pip (apt-get install python3-pip)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
requirements="$work/requirements.txt"
for wheel in "${wheels[@]}"; do
  echo "${wheel% *}==$version --hash=sha256:${wheel#* }"
done >"$requirements"
echo "== oneDNN 3.2: downloading ${#wheels[@]} wheels from PyPI"
python3 -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
  --platform manylinux1_x86_64 --dest "$work" -r "$requirements"

staging="$prefix.new"
rm -rf "$staging"
mkdir -p "$staging"
python3 - "$staging" "$work"/*.whl <<'EOF'
import pathlib, sys, zipfile
staging = pathlib.Path(sys.argv[1])
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            parts = pathlib.PurePosixPath(member.filename).parts
            # <name>.data/data/<path> is the prefix's <path>; skip the duplicate library copies.
            if len(parts) < 3 or not parts[0].endswith(".data") or parts[1] != "data":
                continue
            relative = pathlib.Path(*parts[2:])
            if member.is_dir() or relative.name in ("libdnnl.so", "libdnnl.so.3"):
                continue
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(member))
EOF
chmod 755 "$staging/lib/libdnnl.so.3.2"
ln -s libdnnl.so.3.2 "$staging/lib/libdnnl.so.3"
ln -s libdnnl.so.3 "$staging/lib/libdnnl.so"
echo "$expected" >"$staging/.tandem-wheels"
rm -rf "$prefix"
mv "$staging" "$prefix"
echo "== oneDNN 3.2: installed in $prefix ($(du -sh "$prefix" | cut -f1))"
