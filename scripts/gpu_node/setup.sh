# shellcheck shell=bash disable=SC2154  # the caller's settings (scripts/gpu_node.sh)
# Sourced by scripts/gpu_node.sh and scripts/gpu_node/step.sh: finding the toolkit, the
# libraries' folders and versions, and what the build's CMake cache says. Needs `root`,
# `build_dir` and `caller_ld_library_path` (LD_LIBRARY_PATH as the caller had it).

kit="$root/scripts/gpu_node"
prefix="$build_dir/deps"  # the bundle, unpacked (Note [Offline prefix] in scripts/gpu_node.sh)

# The toolkit's nvcc: $CUDA_HOME/bin, PATH, then /usr/local/cuda/bin; empty when there is none
# (the build step then fails saying so; the other steps still report).
find_nvcc() {
  local candidate
  for candidate in "${CUDA_HOME:+$CUDA_HOME/bin/nvcc}" "$(command -v nvcc || true)" /usr/local/cuda/bin/nvcc; do
    [ -n "$candidate" ] && [ -x "$candidate" ] && { echo "$candidate"; return; }
  done
  return 0
}

# The bundle's library folders: Debian 12 puts some in /usr/lib, /usr/lib/<triplet> and, for
# packages not yet moved to /usr (libnl), /lib/<triplet>.
libdirs() {
  find "$prefix/lib" "$prefix/usr/lib" -maxdepth 2 -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u
}

# A value of the build's CMake cache; empty when there is no cache or no such entry.
cache() {
  [ -f "$build_dir/CMakeCache.txt" ] || return 0
  sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt" | head -1
}

# header_version HEADER MACRO… : "9.19.0" from the #defines of the header configure found.
header_version() {
  local header="$1" macro parts=()
  shift
  [ -f "$header" ] || return 0
  for macro in "$@"; do
    parts+=("$(sed -n "s/^#define $macro  *\([0-9]*\).*/\1/p" "$header" | head -1)")
  done
  (IFS=.; echo "${parts[*]}")
}

# The lib folders of NVIDIA's wheels (site-packages/nvidia/*/lib), as the python3 on PATH sees
# them; scripts/gpu_node.sh keeps them in wheel_dirs (colon-separated).
wheel_libdirs() {
  command -v python3 >/dev/null || return 0
  LD_LIBRARY_PATH="$caller_ld_library_path" python3 -c 'import glob, site
dirs = site.getsitepackages() + [site.getusersitepackages()]
print("\n".join(sorted(p for d in dirs for p in glob.glob(d + "/nvidia/*/lib"))))' 2>/dev/null || true
}

# The version a library file reports of itself (cudaRuntimeGetVersion, cublasGetProperty, …),
# e.g. "13.0"; empty when it cannot be loaded. Each file in its own process: files of one soname
# must not meet.
library_version() {
  [ -f "$1" ] && command -v python3 >/dev/null || return 0
  LD_LIBRARY_PATH="$caller_ld_library_path" python3 "$kit/library_version.py" "$1" 2>/dev/null || true
}

# The first folder of a colon-separated path that holds FILE; empty when none does.
first_holding() {
  local file="$1" dir
  local IFS=:
  for dir in $2; do
    [ -n "$dir" ] && [ -e "$dir/$file" ] && { echo "$dir"; return; }
  done
  return 0
}

# K9: a CUDA runtime is backward compatible with programs built by an older nvcc of its major,
# not with those of a newer one. The wheels' copy (PyTorch's pin) comes before the toolkit's
# unless the toolkit's is newer. Sets cudart_toolkit, cudart_wheel and toolkit_first.
choose_cudart() {
  local wheel_dir
  cudart_toolkit="$(library_version "$toolkit/lib64/libcudart.so.$cuda_major")"
  wheel_dir="$(first_holding "libcudart.so.$cuda_major" "$wheel_dirs")"
  cudart_wheel="${wheel_dir:+$(library_version "$wheel_dir/libcudart.so.$cuda_major")}"
  toolkit_first=0
  if [ -n "$cudart_toolkit" ] && [ -n "$cudart_wheel" ] &&
     [ "$(printf '%s\n%s\n' "$cudart_wheel" "$cudart_toolkit" | sort -V | tail -1)" != "$cudart_wheel" ]; then
    toolkit_first=1
  fi
}

# The loader path of the build and of every step but PyTorch's: the bundle's libraries and the
# folders of the cuDNN and NCCL CMake found come first, then the wheels' (cuDNN's sub-libraries,
# cuBLAS(Lt), the CUDA runtime, nvrtc) and the toolkit's lib64, the toolkit first when its runtime
# is newer (choose_cudart). cuDNN loads its sub-libraries and cuBLASLt with dlopen; gtest's test
# discovery runs the test programs at build time.
runtime_library_path() {
  local path library wheels="$wheel_dirs" toolkit_lib="${toolkit:+$toolkit/lib64}"
  path="$(libdirs | paste -sd:)"
  for library in CUDNN_LIBRARY NCCL_LIBRARY; do
    [ -z "$(cache "$library")" ] || path+="${path:+:}$(dirname "$(cache "$library")")"
  done
  if [ "${toolkit_first:-0}" = 1 ]; then
    path+="${toolkit_lib:+:$toolkit_lib}${wheels:+:$wheels}"
  else
    path+="${wheels:+:$wheels}${toolkit_lib:+:$toolkit_lib}"
  fi
  path+="${caller_ld_library_path:+:$caller_ld_library_path}"
  # Each folder once, at its first place.
  tr ':' '\n' <<<"$path" | awk 'NF && !seen[$0]++' | paste -sd:
}

# G8: libcublas's DT_NEEDED libcublasLt resolves through LD_LIBRARY_PATH before its own RUNPATH,
# so the cuBLAS to load is the one beside the first cuBLASLt of the loader path: one pair, from
# one folder. Prints that libcublas, or nothing when the path has no cuBLASLt.
cublas_beside_cublaslt() {
  local dir
  dir="$(first_holding "libcublasLt.so.$cuda_major" "$1")"
  [ -n "$dir" ] && [ -f "$dir/libcublas.so.$cuda_major" ] && echo "$dir/libcublas.so.$cuda_major"
  return 0
}

# The python3 that has torch: the venv's on the GPU node; Debian's /usr/bin/python3
# (python3-torch) where python3 is another interpreter. Empty when none has it. Found, not
# imported (seconds): a torch that fails to load fails the steps that use it, saying why.
find_torch_python() {
  local candidate
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null &&
       "$candidate" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' 2>/dev/null; then
      command -v "$candidate"
      return
    fi
  done
  return 0
}

find_sanitizer() {
  command -v compute-sanitizer && return
  [ -n "$toolkit" ] && [ -x "$toolkit/bin/compute-sanitizer" ] && echo "$toolkit/bin/compute-sanitizer"
  return 0
}
