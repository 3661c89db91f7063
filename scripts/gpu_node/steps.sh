# shellcheck shell=bash disable=SC2154  # the caller's settings (scripts/gpu_node.sh)
# Sourced by scripts/gpu_node/step.sh: the steps of scripts/gpu_node.sh after the build, each a
# function step_NAME whose output is the step's log. A step may leave a one-line summary for the
# report's note column with `note` (else a failure's note is the log's last line).

note() { echo "$*" >"$logs/$step_name.note"; }

# Versions and places, no built program needed (the build's log starts with these too: K7).
# `environment_facts quick` (the build's) leaves out what costs seconds: importing PyTorch (a
# CUDA context) and loading each cuBLAS pair for its version; `environment_facts all` (the
# environment step's) has them (review H10: they were paid twice inside the budget).
environment_facts() {
  local quick=""
  [ "$1" != quick ] || quick=1
  echo "== node: $(uname -r), $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.max.sm --format=csv || true
  else
    echo "no nvidia-smi"
  fi
  echo "== tools"
  if [ -n "$nvcc" ]; then "$nvcc" --version | tail -2; else echo "no nvcc"; fi
  g++ --version | head -1 || true
  cmake --version | head -1 || true
  echo "ninja $(ninja --version 2>/dev/null || echo 'not found')"
  echo "compute-sanitizer: ${sanitizer:-not found}"
  echo "== PyTorch and NVIDIA's wheels (python3: $(command -v python3 || echo none))"
  [ -n "$quick" ] || [ -z "$torch_python" ] || LD_LIBRARY_PATH="$caller_ld_library_path" "$torch_python" -c \
    'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version(), "NCCL", torch.cuda.nccl.version() if torch.cuda.is_available() else "-", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")' || true
  LD_LIBRARY_PATH="$caller_ld_library_path" python3 -c 'import importlib.metadata as m
print("\n".join(sorted(f"{d.metadata[\"Name\"]} {d.version}" for d in m.distributions() if d.metadata["Name"].lower().startswith("nvidia-"))))' 2>/dev/null || true
  echo "== CUDA runtimes (K9): toolkit ${cudart_toolkit:-none}, wheel ${cudart_wheel:-none};" \
       "$([ "${toolkit_first:-0}" = 1 ] && echo "the toolkit's first (newer)" || echo "the wheel's first")"
  echo "== cuBLAS and cuBLASLt in the loader path (G8: the programs load the first cuBLASLt)"
  local dir
  local IFS=:
  [ -z "$quick" ] || echo "(in the environment step)"
  [ -n "$quick" ] || for dir in $LD_LIBRARY_PATH; do
    [ -e "$dir/libcublasLt.so.$cuda_major" ] || continue
    echo "$dir: cuBLAS $(library_version "$dir/libcublas.so.$cuda_major"), cuBLASLt $(library_version "$dir/libcublasLt.so.$cuda_major")"
  done
  unset IFS
  echo "== LD_LIBRARY_PATH"
  tr ':' '\n' <<<"$LD_LIBRARY_PATH"
  local manifest="$prefix/.manifest"
  [ -z "$bundle" ] || manifest="$bundle/manifest.tsv"
  echo "== the bundle's packages ($manifest)"
  [ ! -f "$manifest" ] || cut -f1,2 "$manifest" | tr '\t' ' ' | paste -sd, | sed 's/,/, /g'
}

# G8: the cuBLAS the build dlopens must lie beside the cuBLASLt that the loader path gives it.
# Prints the pair; fails when they come from two folders.
check_cublas_pair() {
  local configured="$1" lt_dir
  lt_dir="$(first_holding "libcublasLt.so.$cuda_major" "$LD_LIBRARY_PATH")"
  [ -n "$lt_dir" ] || lt_dir="$(dirname "$configured") (its RUNPATH)"
  echo "cuBLAS pair: $configured + $lt_dir/libcublasLt.so.$cuda_major"
  [ "$(dirname "$(readlink -f "$configured")")" = "$(readlink -f "${lt_dir% (its RUNPATH)}")" ] ||
    { echo "error: cuBLAS and cuBLASLt come from two folders (G8): configure with -DCUDA_cublas_LIBRARY=$lt_dir/libcublas.so.$cuda_major"; return 1; }
}

# The CUDA libraries a GEMM and a convolution test load (LD_DEBUG=libs), and the cuBLAS pair's
# folder among them. Needs a GPU: without one the tests skip before loading anything.
loaded_libraries() {
  rm -f "$logs"/ld-debug.*
  LD_DEBUG=libs LD_DEBUG_OUTPUT="$logs/ld-debug" "$build_dir/tests/engine_tests" \
    --gtest_filter='BFloat16CudaGpu.GemmMatchesTheCpuInFloat32:BFloat16CudaGpu.Convolution*' >/dev/null 2>&1 || true
  local loaded
  loaded="$(sed -n 's/.*calling init: //p' "$logs"/ld-debug.* 2>/dev/null |
    grep -E '/lib(cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|dnnl|gloo)\.so' | sort -u)"
  rm -f "$logs"/ld-debug.*
  local library
  while read -r library; do
    [ -z "$library" ] || echo "$library $(library_version "$library")"
  done <<<"$loaded"
  local cublas lt
  cublas="$(grep '/libcublas\.so' <<<"$loaded" | head -1)"
  lt="$(grep '/libcublasLt\.so' <<<"$loaded" | head -1)"
  [ -n "$cublas" ] && [ -n "$lt" ] || { echo "error: the GEMM test loaded no cuBLAS/cuBLASLt pair"; return 1; }
  [ "$(dirname "$cublas")" = "$(dirname "$lt")" ] ||
    { echo "error: cuBLAS ($cublas) and cuBLASLt ($lt) were loaded from two folders (G8)"; return 1; }
  echo "cuBLAS and cuBLASLt loaded from one folder: $(dirname "$cublas")"
}

step_environment() {
  environment_facts all
  echo "== the build in $build_dir"
  local cublas status=0
  cublas="$(cache CUDA_cublas_LIBRARY)"
  echo "kernels for sm_$(cache CMAKE_CUDA_ARCHITECTURES); CUDA in this build: $(cache TANDEM_WITH_CUDA)"
  echo "cuDNN $(cache_version CUDNN) ($(cache CUDNN_LIBRARY)); NCCL $(cache_version NCCL) ($(cache NCCL_LIBRARY))"
  if [ -n "$cublas" ]; then check_cublas_pair "$cublas" || status=1; fi
  echo "== linked (ldd), with the versions the CUDA libraries report"
  local program line
  for program in tests/engine_tests apps/train_cifar; do
    [ -x "$build_dir/$program" ] || continue
    echo "$program:"
    ldd "$build_dir/$program" | grep -E 'cudnn|cudart|nccl|dnnl|gloo|OpenCL|not found' | while read -r line; do
      echo "  $line $(library_version "$(awk '{ print $3 }' <<<"$line")")"
    done
  done
  echo "== loaded by a GEMM and a convolution test"
  if [ -n "$no_gpu" ]; then
    echo "not read: $no_gpu"
    note "${gpu_name:-no GPU}; cuBLAS ${cublas:-none configured}"
  elif loaded_libraries; then
    note "$gpu_name; cuBLAS+Lt from $(dirname "$cublas"); cudart toolkit ${cudart_toolkit:-?}, wheel ${cudart_wheel:-?}"
  else
    status=1
  fi
  return "$status"
}

# "9.19.0" for CUDNN or NCCL, from the header configure found.
cache_version() {
  case "$1" in
    CUDNN) header_version "$(cache CUDNN_INCLUDE_DIR)/cudnn_version.h" CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL ;;
    NCCL) header_version "$(cache NCCL_INCLUDE_DIR)/nccl.h" NCCL_MAJOR NCCL_MINOR NCCL_PATCH ;;
  esac
}

# K6: eight test processes at once, two threads each, fill the node's 16 cores. Skipped gpu tests
# other than those that need two GPUs fail the step (TANDEM_SKIP_WITHOUT_CUDA would hide a broken
# setup as skips).
step_ctest_gpu() {
  local copy="$logs/ctest-gpu.out" status=0 skipped
  local two_gpus="DdpNcclGpu.TwoRanksAllReduceAndMatchOneProcess|DdpNcclGpu.EachRankHoldsAContextOnItsOwnGpuOnly|DataParallelGpu.ResNet20OnTwoGpusMatchesOneGpuOverThreeSteps|CudaBackendGpu.CopyBetweenTwoDevices"
  TANDEM_NUM_THREADS=2 OMP_NUM_THREADS=2 ctest --test-dir "$build_dir" -L gpu -j 8 --timeout 120 \
    --no-tests=error --output-on-failure >"$copy" 2>&1 || status=$?
  cat "$copy"
  skipped="$(grep '(Skipped)$' "$copy" | grep -vE "($two_gpus) " || true)"
  note "$(grep -E 'tests passed|tests failed' "$copy" | tail -1)"
  rm -f "$copy"
  if [ -n "$skipped" ]; then
    echo "error: $(wc -l <<<"$skipped") gpu tests skipped on a GPU node; only two-GPU tests may"
    note "$(wc -l <<<"$skipped") gpu tests skipped (only two-GPU tests may)"
    return 1
  fi
  return "$status"
}

# train_cifar EPOCHS FLAGS…: ResNet-20 on 10,000 training images (the CIFAR-10 subset's training
# file), tested on 2,000 (--subset's fifth: the subset's test images); the note is its last line.
train() {
  local epochs="$1" data=(--synthetic)
  shift
  [ -z "$cifar" ] || data=(--data-dir "$cifar")
  rm -f "$logs/$step_name.jsonl"
  "$build_dir/apps/train_cifar" --epochs "$epochs" --subset 10000 --batch-size 128 --no-progress "${data[@]}" \
    --log-json "$logs/$step_name.jsonl" "$@" | tee "$logs/$step_name.out"
  local status="${PIPESTATUS[0]}"
  note "$(grep '^done:' "$logs/$step_name.out" | tail -1)"
  rm -f "$logs/$step_name.out"
  return "$status"
}
# Two epochs (review H3): that accuracy climbs, in the time the lease plan gives them.
step_train_single() { train 2 --devices cuda:0; }
step_train_bf16() { train 2 --devices cuda:0 --precision bf16; }
# One epoch each: that they run, and agree with one device.
step_train_dp() { train 1 --mode dp --devices cuda:0,cuda:0; }
step_train_ddp_bf16() { train 1 --mode ddp --backend nccl --nproc 1 --grad-compression bf16; }
step_train_ddp_syncbn() { train 1 --mode ddp --backend nccl --nproc 1 --sync-bn; }

# Tandem's ResNet-20 step on the GPU at batch 128, fp32 and bf16, NCHW and channels-last: the
# rows scripts/pytorch_gpu_step.py measures for PyTorch.
step_bench_gpu() {
  local real=() format
  [ -z "$cifar" ] || real=(--real --data-dir "$cifar")
  for format in nchw channels-last; do
    "$build_dir/apps/bench_cifar" --modes single --devices 1 --batch-sizes 128 --warmup 3 --steps 20 \
      --repeats 1 --precision fp32,bf16 --memory-format "$format" "${real[@]}" \
      --json "$logs/bench-gpu-$format.json" || return
  done
  note "$(python3 "$kit/figures.py" "$logs/bench-gpu-nchw.json" "$logs/bench-gpu-channels-last.json")"
  # G1's evidence: bf16 batch norm (own kernels) beside fp32 (cuDNN) on ResNet-20's and -18's
  # shapes, GPU event times (a few seconds); a failure here does not fail the step's rows above.
  "$build_dir/microbench/bench_cuda_batch_norm" --benchmark_format=console ||
    echo "bench_cuda_batch_norm failed (status $?)"
}

# PyTorch in its own environment (the caller's loader path: its pinned CUDA libraries).
step_pytorch_gpu() {
  LD_LIBRARY_PATH="$caller_ld_library_path" "$torch_python" "$root/scripts/pytorch_gpu_step.py" \
    --json "$logs/pytorch-gpu.json" || return
  note "$(python3 "$kit/figures.py" "$logs/pytorch-gpu.json")"
}

# K5: the kernels' own tests under compute-sanitizer, cuDNN's heuristics instead of its timed
# search of every algorithm, and no report of the CUDA API errors the tests provoke on purpose
# (CudaAllocatorGpu's 1 PB allocation is left out anyway). racecheck covers the batch-norm
# kernels' shared-memory reductions: their tests only, not the fp32 one that runs cuDNN, whose
# kernels are NVIDIA's to answer for (review H7).
sanitize() {
  local tool="$1" filter="$2"
  TANDEM_CUDNN_BENCHMARK=0 "$sanitizer" --tool "$tool" --report-api-errors no --error-exitcode 1 \
    "$build_dir/tests/engine_tests" --gtest_filter="$filter" || return
  note "$(grep -E '^(=+ )?(ERROR SUMMARY|RACECHECK SUMMARY)' "$logs/$step_name.log" | tail -1)"
}
step_racecheck() { sanitize racecheck 'BatchNormCudaGpu.BFloat16*:BatchNormCudaGpu.OwnKernels*'; }
step_memcheck() {
  sanitize memcheck 'BFloat16CudaGpu.*:BatchNormCudaGpu.*:HalfGpu.*:LabelCheckGpu.*:CudaBackendGpu.*:UploadGpu.*:CudaStreamGpu.*:CudaPinnedGpu.*:-*TwoDevices*'
}

# CPU-only, not in the default steps (K4): they spend no GPU, only the lease's minutes.
step_compare_cpu() {
  CUDA_VISIBLE_DEVICES="" BUILD_DIR="$build_dir" taskset -c 0,1 \
    "$root/scripts/compare_pytorch.sh" --rows resnet20-single,resnet20-ddp --repeats 1 --threads 2 \
    --json "$logs/compare-cpu.json"
}
step_torch_store() {
  TANDEM_TORCH_PYTHON="$torch_python" "$build_dir/tests/comm_tests" --gtest_filter='TorchStore.*'
}

# The dry run's stand-in for any step (TANDEM_GPU_NODE_FAKE_STEPS in scripts/gpu_node.sh).
# A failing one ends as a failed build does (its note is then the first error: review H9).
step_fake() {
  echo "fake step: $1 s, then exit status $2"
  sleep "$1"
  if [ "$2" -ne 0 ]; then
    echo "fake.cpp:1:2: error: a fake compiler error"
    echo "ninja: build stopped: subcommand failed."
  else
    note "fake: $1 s, exit status $2"
  fi
  return "$2"
}
