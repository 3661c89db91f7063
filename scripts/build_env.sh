# shellcheck shell=bash disable=SC2154  # root and build_dir are the caller's
# Sourced by scripts/test.sh and scripts/fuzz.sh: what every CMake build of Tandem is configured
# with to build fast. Sets `cmake_speedups` (arguments for `cmake -S … -B …`) and exports ccache's
# settings. Needs `root` (the checkout) and `build_dir`.
#
# Note [Compiler cache]: CI runs on the machine where the work was done, in a fresh clone in
# another folder, so a ccache filled by the session's builds turns most of CI's compiling into
# cache hits. That needs the clone's folder out of every hash: CCACHE_BASEDIR makes the paths
# below the checkout relative before hashing (and before compiling, so __FILE__ is relative too),
# and CCACHE_NOHASHDIR keeps the working folder out of the hash of -g builds (their debug info
# then names the folder of whichever build filled the cache; file and line stay right). For the
# same reason no compile command may carry an absolute path in a -D value (the paths tests read
# are compiled into tests/support/test_paths.cpp alone). A machine without ccache or Ninja
# builds as before, only slower.

cmake_speedups=()
# Ninja schedules the whole tree at once (make goes folder by folder), but an existing build
# folder keeps the generator it was made with.
if command -v ninja >/dev/null && [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake_speedups+=(-G Ninja)
fi
if command -v ccache >/dev/null && [ "${TANDEM_CCACHE:-1}" != 0 ]; then
  cmake_speedups+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
                   -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
  # ccache's default size (5 GiB) holds many rounds of the four builds (Release with CUDA, ASan,
  # TSan, fuzz): together they took 84 MiB, compressed (2026-11-26).
else
  # Turned off (TANDEM_CCACHE=0) or not installed: say so, since a folder configured with the
  # launcher before would keep it.
  cmake_speedups+=(-DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER= -DCMAKE_CUDA_COMPILER_LAUNCHER=)
fi
