#!/usr/bin/env bash
# InstallExample.FindPackageBuildsAndTrains (tests/CMakeLists.txt): Tandem as a library, the way
# a user gets it (docs/library.md). This build is installed with `cmake --install` into a scratch
# prefix; examples/ddp_train, copied out of the tree, is configured against that prefix alone
# (find_package(Tandem CONFIG REQUIRED)), built with the build's generator and compiler, and run:
# alone (trains, saves a checkpoint) and under the installed tandem-run with 2 ranks (resumes from
# it; both ranks end with the same weights; rank 0 saves again).
#
# It fails when the package is broken: a header that an installed header includes was not
# installed, a dependency TandemConfig.cmake does not find (or, when it is missing, does not
# name), or the example compiling or linking anything of this checkout or its build instead of
# the prefix: every path under the checkout in the example's build files must be in the scratch
# folder, and its dependency records must list the installed headers.
#
#   install_example_test.sh SOURCE_DIR BUILD_DIR GENERATOR CXX_COMPILER [COMPILER_LAUNCHER]
set -euo pipefail

root="$1" build="$2" generator="$3" cxx="$4" launcher="${5:-}"
# Under the build folder, so below ccache's base directory (Note [Compiler cache] in
# scripts/build_env.sh): a fresh clone's CI run hits the cache for the example too.
work="$build/install-example"
prefix="$work/prefix" source="$work/src" example="$work/build" runs="$work/runs"
rm -rf "$work"
mkdir -p "$runs"
if [ "$launcher" = ccache ] || [ "$(basename "$launcher")" = ccache ]; then
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
fi

not_in() {  # $1: a text that must not occur in the file $2
  ! grep -q -- "$1" "$2"
}
check() {  # $1: what, then a command that must succeed
  local what="$1"; shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what" >&2; exit 1; fi
}
fail() { echo "FAILED: $*" >&2; exit 1; }
show_and_fail() {  # $1: a log to show, then the message
  local log="$1"; shift
  tail -n 40 "$log" >&2
  fail "$@"
}

# 1. The install: the package files, the libraries, the programs, and headers that are complete.
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || show_and_fail "$work/install.log" "cmake --install"
config_dir="$(dirname "$(find "$prefix" -name TandemConfig.cmake -print -quit)")"
check "TandemConfig.cmake installed ($config_dir)" test -f "$config_dir/TandemConfig.cmake"
check "TandemConfigVersion.cmake installed" test -f "$config_dir/TandemConfigVersion.cmake"
for program in tandem-run train_cifar bench_cifar; do
  check "bin/$program installed" test -x "$prefix/bin/$program"
done
headers="$prefix/include/tandem"
missing=0 count=0
while IFS= read -r header; do
  count=$((count + 1))
  while IFS= read -r include; do
    if [ ! -f "$headers/$include" ]; then
      echo "  ${header#"$headers"/} includes \"$include\", which was not installed" >&2
      missing=$((missing + 1))
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$header")
done < <(find "$headers" -name '*.h')
check "$count installed headers, every include among them installed too" test "$missing" -eq 0
check "more than the engine's headers installed" test "$count" -gt 50

# 2. The example, configured and built against the prefix alone.
cp -r "$root/examples/ddp_train" "$source"
configure=(-G "$generator" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release
           -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
[ -n "$launcher" ] && configure+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
cmake -S "$source" -B "$example" "${configure[@]}" >"$work/configure.log" 2>&1 ||
  show_and_fail "$work/configure.log" "find_package(Tandem) against $prefix"
# oneDNN's OpenCL lookup (Debian builds it with the OpenCL GPU runtime) is no business of the user's.
check "find_package(Tandem) says nothing of OpenCL" not_in "OpenCL" "$work/configure.log"
found_at="$(sed -n 's/^Tandem_DIR:PATH=//p' "$example/CMakeCache.txt")"
check "find_package took the installed Tandem ($found_at)" test "$found_at" = "$config_dir"
cmake --build "$example" >"$work/build.log" 2>&1 || show_and_fail "$work/build.log" "building the example"
check "ddp_train built" test -x "$example/ddp_train"

# Nothing of the checkout or its build may reach the example. Its build files (build.ninja or
# Makefiles: flags, include directories, link lines) name absolute paths: those under $root must
# all be in the scratch folder. The compiler's dependency records list the headers it read
# (relative to the build folder where ccache's base directory applies): each of Tandem's must be
# an installed one, and there must be some, or this proves nothing.
build_files=(-r --exclude=ddp_train --exclude='*.o')  # not the program: __FILE__ of the libraries
leaks="$(grep "${build_files[@]}" -hoa -- "$root\(/[[:alnum:]_./+-]*\)\?" "$example" |
         grep -v "^$work/" | sort -u || true)"
[ -z "$leaks" ] || fail "the example's build names the checkout instead of the prefix:"$'\n'"$leaks"
echo "ok: the example's build names nothing of the checkout outside the prefix"
read_headers="$(grep "${build_files[@]}" -hoa -- '[[:alnum:]_./+-]*/\(engine/tensor\|parallel/distributed_data_parallel\)\.h' \
                  "$example" | sort -u || true)"
check "the compiler read the installed headers" grep -q "include/tandem/parallel/distributed_data_parallel.h" <<<"$read_headers"
others="$(grep -v "include/tandem/" <<<"$read_headers" || true)"
[ -z "$others" ] || fail "the example read Tandem's headers from elsewhere than the prefix:"$'\n'"$others"
echo "ok: every Tandem header the compiler read is an installed one"

# 3. A missing dependency fails find_package(Tandem) with a line naming it.
if cmake -S "$source" -B "$work/build-no-gloo" "${configure[@]}" -DCMAKE_DISABLE_FIND_PACKAGE_Gloo=ON \
     >"$work/no-gloo.log" 2>&1; then
  fail "find_package(Tandem) succeeded without Gloo"
fi
check "without Gloo: $(grep -o 'Tandem needs Gloo[^.]*' "$work/no-gloo.log" | head -n 1)" \
  grep -q "Tandem needs Gloo, which was not found: apt-get install libgloo-dev" "$work/no-gloo.log"

# 4. One process: trains, prints its loss, saves the checkpoint pair.
checkpoint="$runs/model.safetensors"
timeout 120 "$example/ddp_train" 3 "$checkpoint" >"$runs/single.out" 2>&1 ||
  show_and_fail "$runs/single.out" "ddp_train alone"
cat "$runs/single.out"
check "alone: three steps with a loss" grep -qE '^step 3 loss [0-9]+\.[0-9]+$' "$runs/single.out"
check "alone: saved at step 3" grep -qF "saved $checkpoint at step 3" "$runs/single.out"
check "checkpoint written" test -s "$checkpoint"
check "its sidecar written" test -s "$checkpoint.state"

# 5. Two ranks under the installed tandem-run: both resume from that checkpoint, train three more
#    steps with their gradients averaged, and end with the same weights.
timeout 120 "$prefix/bin/tandem-run" --nproc-per-node 2 --master-port 0 -- \
  "$example/ddp_train" 3 "$checkpoint" >"$runs/ddp.out" 2>&1 || show_and_fail "$runs/ddp.out" "tandem-run --nproc-per-node 2"
cat "$runs/ddp.out"
for rank in 0 1; do
  check "rank $rank of 2" grep -qF "[rank $rank] rank $rank of 2 on cpu:0" "$runs/ddp.out"
  check "rank $rank resumed at step 3" grep -qF "[rank $rank] resumed from $checkpoint at step 3" "$runs/ddp.out"
  check "rank $rank: step 6 with a loss" grep -qE "^\[rank $rank\] step 6 loss [0-9]+\.[0-9]+$" "$runs/ddp.out"
done
sums="$(sed -n 's/^\[rank [01]\] weight sum //p' "$runs/ddp.out" | sort -u)"
check "both ranks end with the same weights (sum $sums)" test "$(echo "$sums" | wc -l)" -eq 1 -a -n "$sums"
check "rank 0 saved at step 6" grep -qF "[rank 0] saved $checkpoint at step 6" "$runs/ddp.out"
check "rank 1 saved nothing" test "$(grep -c '^\[rank 1\] saved' "$runs/ddp.out")" -eq 0
rm -rf "$work"
