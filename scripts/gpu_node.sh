#!/usr/bin/env bash
# Builds and tests Tandem on a GPU node without a package registry (docs/engine.md, "On a GPU
# node"): the Debian packages it lacks come from a bundle made elsewhere by
# scripts/offline_bundle.sh, unpacked into a private prefix (nothing is installed; nothing outside
# --build-dir and --out is written). cuDNN, NCCL and cuBLAS come from the CUDA toolkit or from
# NVIDIA's Python wheels (site-packages/nvidia/, as PyTorch's venv has them).
#
#   scripts/gpu_node.sh --bundle offline-bundle --out OUT --build   # unpack, configure, build
#   scripts/gpu_node.sh --bundle offline-bundle --out OUT --test    # the steps below, a report
#   scripts/gpu_node.sh --bundle offline-bundle --out OUT --all     # both
#   scripts/gpu_node.sh ... --test --steps ctest-gpu,train-dp       # only these steps again
#
# Options: --build-dir DIR (default ./build-gpu; the bundle is unpacked into DIR/deps),
# --arch SM (CUDA architecture such as 90; default: nvidia-smi's compute capability, or
# $TANDEM_CUDA_ARCH), --cifar DIR (a CIFAR-10 binary folder for the training and benchmark
# steps instead of synthetic images), --jobs N (default: all cores), --targets "T1 T2 …"
# (what --build builds; default: what --test runs), --steps "S1 S2 …" (which --test runs),
# --budget S (seconds for all of --test, default 540).
#
# --test runs each step under `timeout`, its output in OUT/<step>.log, and goes on after a
# failure; OUT/report.md and OUT/report.json give each step's status (ok, failed, skipped and
# why) and seconds. Exits non-zero when a step failed. The steps, in order:
#   environment     GPU, driver, nvcc, cuDNN, NCCL, PyTorch and the libraries each program loads
#   ctest-gpu       ctest -L gpu: nothing may skip but the four tests that need two GPUs
#   memcheck        compute-sanitizer --tool memcheck over engine_tests --gtest_filter='*Gpu*'
#   train-single    train_cifar --devices cuda:0, one short epoch
#   train-dp        --mode dp --devices cuda:0,cuda:0 (two replicas on one GPU)
#   train-ddp-bf16  --mode ddp --backend nccl --nproc 1 --grad-compression bf16
#   train-ddp-syncbn  --mode ddp --backend nccl --nproc 1 --sync-bn
#   train-bf16      train_cifar --devices cuda:0 --precision bf16 (cuDNN/cuBLAS in bfloat16)
#   bench-gpu       bench_cifar --modes single --devices 1 (the GPU), NCHW and channels-last,
#                   each in fp32 and bf16
#   pytorch-gpu     scripts/pytorch_gpu_step.py: PyTorch's ResNet-20 step on the same GPU, fp32
#                   and autocast bf16
#   compare-cpu     scripts/compare_pytorch.sh's ResNet-20 rows on 2 pinned cores, GPUs hidden
#   torch-store     Tandem's TorchStore client against this PyTorch's TCPStore
#
# Note [Offline prefix]: the bundle's .debs are unpacked with dpkg-deb -x into DIR/deps, so
# CMAKE_PREFIX_PATH=DIR/deps/usr finds their CMake configs. All of them compute their prefix from
# where they lie except Gloo's, which names /usr/lib/libgloo.so.0.5.0: it is rewritten to its
# own prefix variable. libgloo and libdnnl pull in libibverbs, libnl and libOpenCL, which the
# linker finds through -rpath-link and the programs through LD_LIBRARY_PATH, as they do cuDNN's
# sub-libraries and cuBLAS(Lt), which are loaded with dlopen. The prefix lies in the build folder
# so that ccache (scripts/build_env.sh) sees the same relative paths in every checkout.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: scripts/gpu_node.sh --bundle DIR --out DIR [--build|--test|--all] [--build-dir DIR] [--arch SM] [--cifar DIR] [--jobs N] [--targets LIST] [--steps LIST] [--budget S]"
die() { echo "error: $*" >&2; exit 2; }

all_steps="environment ctest-gpu memcheck train-single train-dp train-ddp-bf16 train-ddp-syncbn train-bf16 bench-gpu pytorch-gpu compare-cpu torch-store"
bundle="" out="" mode="" build_dir="$root/build-gpu" arch="${TANDEM_CUDA_ARCH:-}" cifar=""
jobs="$(nproc)" steps="$all_steps" budget_s=540
targets="engine_tests nn_tests data_tests parallel_tests comm_tests apps_tests train_cifar bench_cifar tandem-run"
while [ $# -gt 0 ]; do
  case "$1" in
    --build | --test | --all) [ -z "$mode" ] || die "give one of --build, --test, --all"; mode="${1#--}"; shift ;;
    --bundle | --out | --build-dir | --arch | --cifar | --jobs | --targets | --steps | --budget)
      [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value ($usage)"
      case "$1" in
        --bundle) bundle="$2" ;; --out) out="$2" ;; --build-dir) build_dir="$2" ;;
        --arch) arch="$2" ;; --cifar) cifar="$2" ;; --jobs) jobs="$2" ;;
        --targets) targets="${2//,/ }" ;; --steps) steps="${2//,/ }" ;; --budget) budget_s="$2" ;;
      esac
      shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' ($usage)" ;;
  esac
done
[ -n "$mode" ] || die "say what to do: --build, --test or --all ($usage)"
[ -n "$out" ] || die "--out DIR is required (logs and the report go there)"
[ -n "$bundle" ] || die "--bundle DIR is required (scripts/offline_bundle.sh makes it)"
[ -f "$bundle/manifest.tsv" ] || die "no bundle at '$bundle' (no manifest.tsv): make it with scripts/offline_bundle.sh"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs takes a positive number, got '$jobs'"
[[ "$budget_s" =~ ^[1-9][0-9]*$ ]] || die "--budget takes seconds, got '$budget_s'"
[ -z "$arch" ] || [[ "$arch" =~ ^[1-9][0-9]+[af]?$ ]] || die "--arch takes an architecture such as 90, got '$arch'"
[ -z "$cifar" ] || [ -f "$cifar/test_batch.bin" ] || die "--cifar '$cifar' has no test_batch.bin (a cifar-10-batches-bin folder)"
for step in $steps; do
  [[ " $all_steps " == *" $step "* ]] || die "unknown step '$step' (steps: $all_steps)"
done

nvcc="${CUDA_HOME:+$CUDA_HOME/bin/nvcc}"
[ -n "$nvcc" ] && [ -x "$nvcc" ] || nvcc="$(command -v nvcc || true)"
[ -n "$nvcc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
[ -n "$nvcc" ] || { echo "error: no nvcc (on PATH, \$CUDA_HOME/bin or /usr/local/cuda/bin): this needs the CUDA toolkit" >&2; exit 1; }
toolkit="$(cd "$(dirname "$(readlink -f "$nvcc")")/.." && pwd)"

mkdir -p "$out" "$build_dir"
out="$(cd "$out" && pwd)" build_dir="$(cd "$build_dir" && pwd)" bundle="$(cd "$bundle" && pwd)"
prefix="$build_dir/deps"
# The bundle's library folders: Debian 12 puts some in /usr/lib, /usr/lib/<triplet> and, for
# packages not yet moved to /usr (libnl), /lib/<triplet>.
libdirs() {
  find "$prefix/lib" "$prefix/usr/lib" -maxdepth 2 -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u
}

# --- the bundle, unpacked once per manifest (Note [Offline prefix])
unpack_bundle() {
  local stamp="$prefix/.manifest" package version sha256 file
  if [ -f "$stamp" ] && cmp -s "$stamp" "$bundle/manifest.tsv"; then
    echo "== bundle: already unpacked in $prefix"
    return
  fi
  command -v dpkg-deb >/dev/null || { echo "error: no dpkg-deb to unpack the bundle with" >&2; exit 1; }
  rm -rf "$prefix"
  mkdir -p "$prefix"
  while IFS=$'\t' read -r package version sha256 _ file; do
    [ -f "$bundle/$file" ] || { echo "error: the bundle lacks $file ($package $version): run scripts/offline_bundle.sh again" >&2; exit 1; }
    echo "$sha256  $bundle/$file" | sha256sum --check --status ||
      { echo "error: $bundle/$file does not match its manifest checksum" >&2; exit 1; }
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

cuda_arch() {
  if [ -n "$arch" ]; then
    echo "$arch"
  elif command -v nvidia-smi >/dev/null; then
    local cap
    cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')"
    [[ "$cap" =~ ^[0-9]+$ ]] || { echo "error: nvidia-smi gave no compute capability ('$cap'): pass --arch" >&2; exit 1; }
    echo "$cap"
  else
    echo "error: no nvidia-smi to read the GPU's architecture from: pass --arch (e.g. 90) or set TANDEM_CUDA_ARCH" >&2
    exit 1
  fi
}

# The bundle's libraries and the cuDNN and NCCL CMake found come first, then the wheels' (cuDNN's
# sub-libraries, cuBLAS(Lt), the CUDA runtime, nvrtc), then the toolkit's: PyTorch, which runs in
# the same environment in some steps (compare-cpu, torch-store), then loads the CUDA libraries it
# was built with, and Tandem the same ones (CUDA 13 runtimes and cuBLAS of a later minor serve a
# program built with 13.0). The build needs it too: gtest's test discovery runs the test programs,
# and libdnnl finds libOpenCL only through it. PyTorch's own step keeps the caller's environment.
caller_ld_library_path="${LD_LIBRARY_PATH:-}"
runtime_library_path() {
  local path wheel_libs="" library
  path="$(libdirs | paste -sd:)"
  for library in CUDNN_LIBRARY NCCL_LIBRARY; do
    [ ! -f "$build_dir/CMakeCache.txt" ] || path+=":$(dirname "$(cache "$library")")"
  done
  if command -v python3 >/dev/null; then
    wheel_libs="$(python3 -c 'import glob, site
dirs = site.getsitepackages() + [site.getusersitepackages()]
print(":".join(sorted(p for d in dirs for p in glob.glob(d + "/nvidia/*/lib"))))' 2>/dev/null || true)"
  fi
  echo "$path${wheel_libs:+:$wheel_libs}:$toolkit/lib64${caller_ld_library_path:+:$caller_ld_library_path}"
}
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt" | head -1; }
# header_version HEADER MACRO… : "9.19.0" from the #defines of the header configure found.
header_version() {
  local header="$1" macro parts=()
  shift
  for macro in "$@"; do
    parts+=("$(sed -n "s/^#define $macro  *\([0-9]*\).*/\1/p" "$header" 2>/dev/null | head -1)")
  done
  (IFS=.; echo "${parts[*]}")
}

build() {
  unpack_bundle
  LD_LIBRARY_PATH="$(runtime_library_path)"
  export LD_LIBRARY_PATH
  local cuda_arch_value
  cuda_arch_value="$(cuda_arch)"
  # shellcheck source=scripts/build_env.sh
  source "$root/scripts/build_env.sh"  # Ninja and ccache, as every build (needs root, build_dir)
  local rpath_link="" dir
  for dir in $(libdirs); do rpath_link+="${rpath_link:+ }-Wl,-rpath-link,$dir"; done
  local configure=(-DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$cuda_arch_value"
                   "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCMAKE_PREFIX_PATH=$prefix/usr"
                   "-DCMAKE_EXE_LINKER_FLAGS=$rpath_link" "-DCMAKE_SHARED_LINKER_FLAGS=$rpath_link")
  [ -z "$cifar" ] || configure+=("-DTANDEM_CIFAR10_DIR=$(cd "$cifar" && pwd)")
  echo "== configure (CUDA on, sm_$cuda_arch_value) in $build_dir"
  cmake -S "$root" -B "$build_dir" "${configure[@]}" "${cmake_speedups[@]}"
  LD_LIBRARY_PATH="$(runtime_library_path)"  # now with the cuDNN and NCCL configure found
  echo "== build (-j$jobs): $targets"
  local start=$SECONDS
  # shellcheck disable=SC2086  # the target list is words
  cmake --build "$build_dir" -j "$jobs" --target $targets
  echo "   build took $((SECONDS - start)) s"
}

case "$mode" in
  build) build 2>&1 | tee "$out/build.log"; exit "${PIPESTATUS[0]}" ;;
  all) build 2>&1 | tee "$out/build.log"; [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1 ;;
esac

# --- the test steps
[ -f "$build_dir/CMakeCache.txt" ] || { echo "error: nothing built in $build_dir: run --build first" >&2; exit 1; }
[ "$(cache TANDEM_WITH_CUDA)" = ON ] || { echo "error: $build_dir was built without CUDA" >&2; exit 1; }
LD_LIBRARY_PATH="$(runtime_library_path)"
export LD_LIBRARY_PATH

built_arch="$(cache CMAKE_CUDA_ARCHITECTURES)"
cudnn_version="$(header_version "$(cache CUDNN_INCLUDE_DIR)/cudnn_version.h" CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL)"
nccl_version="$(header_version "$(cache NCCL_INCLUDE_DIR)/nccl.h" NCCL_MAJOR NCCL_MINOR NCCL_PATCH)"
bin="$build_dir"
data=(--synthetic)
[ -z "$cifar" ] || data=(--data-dir "$(cd "$cifar" && pwd)")
train=("$bin/apps/train_cifar" --epochs 1 --subset 2560 --batch-size 128 --no-progress "${data[@]}")
# The venv's python3 on the GPU node; Debian's /usr/bin/python3 (python3-torch) where python3 is
# another interpreter.
torch_python=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null &&
     LD_LIBRARY_PATH="$caller_ld_library_path" "$candidate" -c 'import torch' 2>/dev/null; then
    torch_python="$(command -v "$candidate")"
    break
  fi
done
sanitizer="$(command -v compute-sanitizer || true)"
[ -n "$sanitizer" ] || [ ! -x "$toolkit/bin/compute-sanitizer" ] || sanitizer="$toolkit/bin/compute-sanitizer"

step_environment() {
  set -x
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv || true
  nvidia-smi -L || true
  "$nvcc" --version
  g++ --version | head -1; cmake --version | head -1
  echo "cuDNN $cudnn_version ($(cache CUDNN_LIBRARY)); NCCL $nccl_version ($(cache NCCL_LIBRARY))"
  echo "kernels for sm_$built_arch; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ls "$toolkit"/lib64/lib{cublas,cudnn,nccl}* 2>/dev/null || true
  [ -z "$torch_python" ] || LD_LIBRARY_PATH="$caller_ld_library_path" "$torch_python" -c \
    'import torch; print("torch", torch.__version__, "cuDNN", torch.backends.cudnn.version(), "NCCL", torch.cuda.nccl.version(), "CUDA", torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")' || true
  ldd "$bin/tests/engine_tests" | grep -E 'cudnn|cudart|dnnl|gloo|OpenCL|not found' || true
  ldd "$bin/apps/train_cifar" | grep -E 'nccl|cudart|gloo|not found' || true
  cat "$bundle/manifest.tsv"
}

# Skipped gpu tests other than those that need two GPUs fail the step (TANDEM_SKIP_WITHOUT_CUDA
# would hide a broken setup as skips).
step_ctest_gpu() {
  local copy="$out/.ctest-gpu.out" two_gpus="DdpNcclGpu.TwoRanksAllReduceAndMatchOneProcess|DdpNcclGpu.EachRankHoldsAContextOnItsOwnGpuOnly|DataParallelGpu.ResNet20OnTwoGpusMatchesOneGpuOverThreeSteps|CudaBackendGpu.CopyBetweenTwoDevices"
  local status=0
  ctest --test-dir "$build_dir" -L gpu -j 8 --timeout 120 --no-tests=error --output-on-failure \
    >"$copy" 2>&1 || status=$?
  cat "$copy"
  local skipped
  skipped="$(grep '(Skipped)$' "$copy" | grep -vE "($two_gpus) " || true)"
  rm -f "$copy"
  if [ -n "$skipped" ]; then
    echo "$skipped"
    echo "error: $(wc -l <<<"$skipped") gpu tests skipped on a GPU node (above); only two-GPU tests may"
    return 1
  fi
  return "$status"
}

step_memcheck() {
  "$sanitizer" --tool memcheck --error-exitcode 1 "$bin/tests/engine_tests" --gtest_filter='*Gpu*'
}

step_bench_gpu() {
  local real=()
  [ -z "$cifar" ] || real=(--real --data-dir "$(cd "$cifar" && pwd)")
  # --repeats 1: one run of 20 steps each, as before --repeats existed, to stay in the step's 90 s.
  "$bin/apps/bench_cifar" --modes single --devices 1 --batch-sizes 128 --warmup 3 --steps 20 \
    --repeats 1 --precision fp32,bf16 --memory-format nchw "${real[@]}" --json "$out/bench-gpu-nchw.json"
  "$bin/apps/bench_cifar" --modes single --devices 1 --batch-sizes 128 --warmup 3 --steps 20 \
    --repeats 1 --precision fp32,bf16 --memory-format channels-last "${real[@]}" \
    --json "$out/bench-gpu-channels-last.json"
}

step_compare_cpu() {
  CUDA_VISIBLE_DEVICES="" LD_LIBRARY_PATH="$LD_LIBRARY_PATH" BUILD_DIR="$build_dir" taskset -c 0,1 \
    "$root/scripts/compare_pytorch.sh" --rows resnet20-single,resnet20-ddp --repeats 1 --threads 2 \
    --json "$out/compare-cpu.json"
}

step_torch_store() {
  TANDEM_TORCH_PYTHON="$torch_python" "$bin/tests/comm_tests" --gtest_filter='TorchStore.*'
}

export -f step_environment step_ctest_gpu step_memcheck step_bench_gpu step_compare_cpu step_torch_store cache
export build_dir bin out root nvcc toolkit bundle sanitizer torch_python caller_ld_library_path cifar built_arch \
  cudnn_version nccl_version

names=() statuses=() seconds=() notes=()
failed=0
# run_step NAME LIMIT_S SKIP_REASON COMMAND…: runs COMMAND under timeout (unless SKIP_REASON is
# set, or NAME was not asked for), its output in OUT/NAME.log. The limits add up to more than the
# budget (a slow step may use another's time), but no step starts with less than 20 s left, or
# runs past the budget: --test as a whole stays inside one 10-minute command.
budget=$((SECONDS + budget_s))
run_step() {
  local name="$1" limit="$2" skip="$3" status=0 note=""
  shift 3
  [[ " $steps " == *" $name "* ]] || return 0
  local log="$out/$name.log" start=$SECONDS
  echo "== $name"
  [ "$((budget - SECONDS))" -ge 20 ] || skip="${skip:-out of the time budget}"
  [ "$limit" -le "$((budget - SECONDS))" ] || limit=$((budget - SECONDS))
  if [ -n "$skip" ]; then
    echo "skipped: $skip" >"$log"
    names+=("$name") statuses+=(skipped) seconds+=(0) notes+=("$skip")
    echo "   skipped: $skip"
    return 0
  fi
  { printf '$'; printf ' %q' "$@"; echo; } >"$log"
  timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1 || status=$?
  local took=$((SECONDS - start)) verdict=ok
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    verdict=failed note="timed out after $limit s"
  elif [ "$status" -ne 0 ]; then
    verdict=failed note="exit status $status: $(grep -v '^\s*$' "$log" | tail -1 | cut -c1-160)"
  fi
  [ "$verdict" = ok ] || failed=$((failed + 1))
  names+=("$name") statuses+=("$verdict") seconds+=("$took") notes+=("$note")
  echo "   $verdict ($took s)${note:+: $note}"
}

no_gpu=""
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || no_gpu="no GPU (nvidia-smi lists none)"
no_torch="" no_sanitizer=""
[ -n "$torch_python" ] || no_torch="python3 cannot import torch"
[ -n "$sanitizer" ] || no_sanitizer="no compute-sanitizer"

run_step environment 60 "" bash -c 'step_environment'
run_step ctest-gpu 240 "" bash -c 'step_ctest_gpu'
run_step memcheck 150 "${no_gpu:-$no_sanitizer}" bash -c 'step_memcheck'
run_step train-single 60 "$no_gpu" "${train[@]}" --devices cuda:0
run_step train-dp 60 "$no_gpu" "${train[@]}" --mode dp --devices cuda:0,cuda:0
run_step train-ddp-bf16 60 "$no_gpu" "${train[@]}" --mode ddp --backend nccl --nproc 1 --grad-compression bf16
run_step train-ddp-syncbn 60 "$no_gpu" "${train[@]}" --mode ddp --backend nccl --nproc 1 --sync-bn
run_step train-bf16 60 "$no_gpu" "${train[@]}" --devices cuda:0 --precision bf16
run_step bench-gpu 90 "$no_gpu" bash -c 'step_bench_gpu'
run_step pytorch-gpu 90 "${no_torch:-$no_gpu}" env LD_LIBRARY_PATH="$caller_ld_library_path" \
  "$torch_python" "$root/scripts/pytorch_gpu_step.py" --json "$out/pytorch-gpu.json"
run_step compare-cpu 150 "$no_torch" bash -c 'step_compare_cpu'
run_step torch-store 60 "$no_torch" bash -c 'step_torch_store'

# --- the report
json_string() {
  local s="$1"
  s="${s//\\/\\\\}" s="${s//\"/\\\"}" s="${s//$'\t'/ }"
  printf '"%s"' "$s"
}
{
  echo "# Tandem on a GPU node: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)" \
       "| nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')" \
       "| cuDNN $cudnn_version | NCCL $nccl_version | sm_$built_arch" \
       "| data: ${cifar:-synthetic}"
  echo
  echo "| step | status | seconds | note | log |"
  echo "| --- | --- | ---: | --- | --- |"
  for i in "${!names[@]}"; do
    echo "| ${names[$i]} | ${statuses[$i]} | ${seconds[$i]} | ${notes[$i]//|/\\|} | ${names[$i]}.log |"
  done
} >"$out/report.md"
{
  echo "{"
  echo "  \"date\": $(json_string "$(date -u +%Y-%m-%dT%H:%M:%SZ)"),"
  echo "  \"gpu\": $(json_string "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"),"
  echo "  \"cuda_arch\": $(json_string "$built_arch"),"
  echo "  \"cudnn\": $(json_string "$cudnn_version"), \"nccl\": $(json_string "$nccl_version"),"
  echo "  \"data\": $(json_string "${cifar:-synthetic}"),"
  echo "  \"steps\": ["
  for i in "${!names[@]}"; do
    [ "$i" -eq 0 ] || echo ","
    printf '    {"name": %s, "status": %s, "seconds": %d, "note": %s, "log": %s}' \
      "$(json_string "${names[$i]}")" "$(json_string "${statuses[$i]}")" "${seconds[$i]}" \
      "$(json_string "${notes[$i]}")" "$(json_string "${names[$i]}.log")"
  done
  echo
  echo "  ]"
  echo "}"
} >"$out/report.json"
cat "$out/report.md"
[ "$failed" -eq 0 ]
