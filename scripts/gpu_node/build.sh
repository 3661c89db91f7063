# shellcheck shell=bash disable=SC2154  # the caller's settings (scripts/gpu_node.sh)
# Sourced by scripts/gpu_node/step.sh: the build step (unpack the bundle, configure, build) of
# scripts/gpu_node.sh. Needs what setup.sh sets, and bundle, arch, jobs, targets, nvcc, toolkit.

# The bundle, unpacked once per manifest (Note [Offline prefix] in scripts/gpu_node.sh).
unpack_bundle() {
  local stamp="$prefix/.manifest" package version sha256 file
  if [ -f "$stamp" ] && cmp -s "$stamp" "$bundle/manifest.tsv"; then
    echo "== bundle: already unpacked in $prefix"
    return
  fi
  command -v dpkg-deb >/dev/null || { echo "error: no dpkg-deb to unpack the bundle with" >&2; return 1; }
  rm -rf "$prefix"
  mkdir -p "$prefix"
  while IFS=$'\t' read -r package version sha256 _ file; do
    [ -f "$bundle/$file" ] || { echo "error: the bundle lacks $file ($package $version): run scripts/offline_bundle.sh again" >&2; return 1; }
    echo "$sha256  $bundle/$file" | sha256sum --check --status ||
      { echo "error: $bundle/$file does not match its manifest checksum" >&2; return 1; }
    dpkg-deb -x "$bundle/$file" "$prefix"
  done <"$bundle/manifest.tsv"
  local gloo
  for gloo in "$prefix"/usr/share/cmake/Gloo/GlooTargets-*.cmake; do
    [ -f "$gloo" ] && sed -i 's|"/usr/lib/|"${_IMPORT_PREFIX}/lib/|g' "$gloo"
  done
  local absolute
  absolute="$(grep -rlE 'IMPORTED_LOCATION[A-Z_]* +"/usr/' "$prefix"/usr/share/cmake "$prefix"/usr/lib/*/cmake \
    "$prefix"/usr/lib/cmake 2>/dev/null || true)"
  [ -z "$absolute" ] || echo "warning: CMake files in the bundle still import from /usr: $absolute" >&2
  cp "$bundle/manifest.tsv" "$stamp"
  echo "== bundle: $(wc -l <"$bundle/manifest.tsv") packages unpacked in $prefix"
}

# --arch, else nvidia-smi's compute capability (9.0 -> 90).
cuda_arch() {
  if [ -n "$arch" ]; then
    echo "$arch"
    return
  fi
  command -v nvidia-smi >/dev/null ||
    { echo "error: no nvidia-smi to read the GPU's architecture from: pass --arch (e.g. 90) or set TANDEM_CUDA_ARCH" >&2; return 1; }
  local cap
  cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')"
  [[ "$cap" =~ ^[0-9]+$ ]] || { echo "error: nvidia-smi gave no compute capability ('$cap'): pass --arch" >&2; return 1; }
  echo "$cap"
}

# The configure flags, one a line, for kernels of sm_ARCH with RPATH_LINK's linker flags. MPI is
# off (review H8): the node's venv may bring an MPI whose runtime (UCX, ...) the loader path
# lacks, and gtest's discovery would run an MPI-linked comm_tests at build time.
configure_flags() {
  printf '%s\n' -DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=ON -DTANDEM_MPI=OFF "-DCMAKE_CUDA_ARCHITECTURES=$1" \
    "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCMAKE_PREFIX_PATH=$prefix/usr" "-DCMAKE_EXE_LINKER_FLAGS=$2" \
    "-DCMAKE_SHARED_LINKER_FLAGS=$2"
}

# K7: what the node has is in build.log before anything is compiled, so a failed build still
# says which nvcc, wheels and libraries it met. Then the bundle, CMake (twice when the cuBLAS
# beside the loader path's cuBLASLt is not the one found: G8) and the targets.
step_build() {
  environment_facts quick
  [ -n "$nvcc" ] || { echo "error: no nvcc (on PATH, \$CUDA_HOME/bin or /usr/local/cuda/bin): this needs the CUDA toolkit" >&2; return 1; }
  unpack_bundle
  export LD_LIBRARY_PATH
  LD_LIBRARY_PATH="$(runtime_library_path)"
  local cuda_arch_value
  cuda_arch_value="$(cuda_arch)"
  # shellcheck source=scripts/build_env.sh
  source "$root/scripts/build_env.sh"  # Ninja and ccache, as every build (needs root, build_dir)
  local rpath_link="" dir
  for dir in $(libdirs); do rpath_link+="${rpath_link:+ }-Wl,-rpath-link,$dir"; done
  local configure=()
  mapfile -t configure < <(configure_flags "$cuda_arch_value" "$rpath_link")
  echo "== configure (CUDA on, MPI off, sm_$cuda_arch_value) in $build_dir"
  cmake -S "$root" -B "$build_dir" "${configure[@]}" "${cmake_speedups[@]}"
  LD_LIBRARY_PATH="$(runtime_library_path)"  # now with the cuDNN and NCCL configure found
  local cublas
  cublas="$(cublas_beside_cublaslt "$LD_LIBRARY_PATH")"
  if [ -n "$cublas" ] && [ "$(readlink -f "$cublas")" != "$(readlink -f "$(cache CUDA_cublas_LIBRARY)")" ]; then
    echo "== configure again: cuBLAS beside the cuBLASLt the programs load, $cublas (G8)"
    cmake -S "$root" -B "$build_dir" "-DCUDA_cublas_LIBRARY=$cublas" >/dev/null
  fi
  echo "== build (-j$jobs): $targets"
  local start=$SECONDS
  # shellcheck disable=SC2086  # the target list is words
  cmake --build "$build_dir" -j "$jobs" --target $targets
  echo "   build took $((SECONDS - start)) s"
}
