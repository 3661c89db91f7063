#!/usr/bin/env bash
# The GPU-node kit without a GPU node: builds Tandem with CUDA through the offline bundle alone
# (scripts/offline_bundle.sh, scripts/gpu_node.sh --build) in a mount namespace where every file
# of the bundled Debian packages (and of the -dev packages the bundle leaves out, Note [Bundle
# contents]) is hidden behind an empty file, and the oneDNN 3.2 prefix of scripts/install_onednn.sh
# behind an empty folder, then runs, there, every unit test of that build and
# gpu_node.sh's test steps that need no GPU (environment, torch-store). A header, CMake config
# or library the bundle lacks then breaks the configure, the compile, the link or the loading,
# instead of being taken from the system.
#
#   offline_build_test.sh SOURCE_DIR BUILD_DIR   # builds in BUILD_DIR (kernels for sm_90 only)
#
# The bundle is SOURCE_DIR/offline-bundle, made with scripts/offline_bundle.sh when missing.
# Needs root (unshare --mount); skips with exit 77 and the reason without it, or when the bundle
# is missing and apt cannot fetch it. TANDEM_OFFLINE_TESTS (a ctest -R pattern) narrows the
# unit tests that run; TANDEM_OFFLINE_SKIP (a ctest -E pattern) the ones left out.
set -uo pipefail
source_dir="$1" build_dir="$2"
bundle="$source_dir/offline-bundle"
# The whole project is built (`all`: every test program, the benchmarks on Google Benchmark, the
# interop writer), not only what a GPU node's --test needs, and the unit tests run (but those below), all through
# the bundle's loader path.
tests="${TANDEM_OFFLINE_TESTS:-.}"
# Left out by default: the unit tests that load nothing the others have not loaded, and spend their
# minutes computing (the kernels' reference sweeps, the two longest training runs, the
# kill-and-resume runs the drills repeat, the plotting scripts): 43 % of the unit tests' time on
# 2 cores (2026-11-27), in a stage that builds the whole tree besides.
skipped="${TANDEM_OFFLINE_SKIP-AgainstReference|^Plot|^MidEpochResume\.|^TrainCifar\.(Bf16LossFallsAndIsLogged|CheckpointsResumeAcrossPrecisions)\$}"

skip() { echo "skipped: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root to hide the system's packages in a mount namespace"
command -v unshare >/dev/null || skip "no unshare (util-linux)"
command -v dpkg-query >/dev/null || skip "not a Debian system (no dpkg-query)"
[ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null || skip "no CUDA toolkit (nvcc)"
if [ ! -f "$bundle/manifest.tsv" ]; then
  "$source_dir/scripts/offline_bundle.sh" "$bundle" ||
    skip "no bundle in $bundle, and scripts/offline_bundle.sh could not fetch it (no mirror?)"
fi

# The files to hide: those of every bundled package installed here, and of the packages the bundle
# leaves out on purpose, so that the build proves they are not needed.
left_out="libhiredis-dev libibverbs-dev libnl-3-dev libnl-route-3-dev ibverbs-providers"
hidden="$(mktemp)"
trap 'rm -f "$hidden"' EXIT
# shellcheck disable=SC2046  # package names are words
for package in $(cut -f1 "$bundle/manifest.tsv") $left_out; do
  dpkg-query -L "$package" 2>/dev/null
done | grep -vE '^/usr/share/(doc|man|lintian)/' | while read -r file; do
  [ -d "$file" ] || [ ! -e "$file" ] || echo "$file"
done | sort -u >"$hidden"
echo "== hiding $(wc -l <"$hidden") files of the system's packages"
# oneDNN 3.2 is no Debian package here: its prefix goes behind an empty folder (the bundle packs it).
onednn_prefix="$("$source_dir/scripts/install_onednn.sh" --prefix)"

out="$build_dir/report"
prefix_libs="$build_dir/deps/usr/lib/x86_64-linux-gnu:$build_dir/deps/usr/lib:$build_dir/deps/lib/x86_64-linux-gnu"
unshare --mount --propagation private bash -c '
  set -uo pipefail
  source_dir="$1" build_dir="$2" bundle="$3" hidden="$4" out="$5" prefix_libs="$6" tests="$7" skipped="$8"
  onednn_prefix="$9"
  while read -r file; do
    mount --bind /dev/null "$file" || { echo "error: could not hide $file"; exit 1; }
  done <"$hidden"
  if [ -d "$onednn_prefix" ]; then
    empty="$(mktemp -d)"
    mount --bind "$empty" "$onednn_prefix" || { echo "error: could not hide $onednn_prefix"; exit 1; }
  fi
  for header in "$onednn_prefix/include/oneapi/dnnl/dnnl.hpp" /usr/include/gloo/context.h /usr/include/CLI/CLI.hpp \
                /usr/include/nlohmann/json.hpp /usr/include/gtest/gtest.h; do
    [ ! -s "$header" ] || { echo "error: $header is still visible"; exit 1; }
  done
  start=$SECONDS
  # --budget: a whole build on 2 cores, not the GPU node'\''s 570 s.
  "$source_dir/scripts/gpu_node.sh" --build --bundle "$bundle" --out "$out" --build-dir "$build_dir" \
    --arch 90 --jobs "$(nproc)" --targets all --budget 2300 ||
    { cat "$build_dir/gpu-node-logs/build.log"; echo "error: the build through the bundle failed"; exit 1; }
  echo "== offline build: $((SECONDS - start)) s"
  # Debian'\''s PyTorch (the torch-store step) loads libgloo, hidden too: the bundle'\''s (and
  # Debian'\''s libdnnl 2.6, which the bundle no longer carries and so stays visible).
  start=$SECONDS
  status=0
  LD_LIBRARY_PATH="$prefix_libs" "$source_dir/scripts/gpu_node.sh" --test --bundle "$bundle" --out "$out" \
    --build-dir "$build_dir" --steps environment,torch-store || status=1
  grep -q "| torch-store | ok |" "$out/report.md" || { echo "error: the torch-store step did not pass"; status=1; }
  # The unit tests with the libraries gpu_node.sh gives its steps (the bundle first).
  LD_LIBRARY_PATH="$prefix_libs" ctest --test-dir "$build_dir" -L unit -R "$tests" \
    ${skipped:+-E "$skipped"} -j "$(nproc)" --no-tests=error --output-on-failure --timeout 300 || status=1
  echo "== offline tests: $((SECONDS - start)) s"
  exit $status
' offline "$source_dir" "$build_dir" "$bundle" "$hidden" "$out" "$prefix_libs" "$tests" "$skipped" \
  "$onednn_prefix"
