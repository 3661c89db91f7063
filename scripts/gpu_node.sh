#!/usr/bin/env bash
# Builds, tests and benchmarks Tandem on a GPU node without a package registry, in one command
# that fits the device tool's limits (docs/engine.md, "On a GPU node"): at most 10 minutes a
# command, the node given back 30 s after it, at most 8 files back from $OUT, 64 MiB carried.
# The Debian packages the node lacks come from a bundle made here by scripts/offline_bundle.sh,
# unpacked into a private prefix; cuDNN, NCCL and cuBLAS come from the CUDA toolkit or NVIDIA's
# Python wheels (site-packages/nvidia/, as PyTorch's venv has them). Nothing outside --build-dir
# and --out is written.
#
# Here (Debian 12, package access), once; the check fails when what travels passes 64 MiB:
#   scripts/offline_bundle.sh                # ./offline-bundle: 14 .debs (one packs oneDNN 3.2), 8.8 MiB
#   scripts/cifar_subset.sh                  # ./cifar-subset: 10,000 + 2,000 CIFAR-10 images, 35 MiB
#   scripts/gpu_node.sh --check-carry --bundle offline-bundle --cifar cifar-subset
# There, the device tool's run, with carry ["offline-bundle", "cifar-subset"] and timeout_s 600:
#   scripts/gpu_node.sh --bundle offline-bundle --cifar cifar-subset --out "$OUT" --all
# and, at once (the node is warm for 30 s only), a second call with the same carry for what the
# first left undone (--steps rest: skipped for time, not reached, cut by the budget or
# interrupted, in the order below), timeout_s what the lease has left (the tool's status says)
# less 20 and --budget 10 less than that, then give_back:
#   scripts/gpu_node.sh --cifar cifar-subset --out "$OUT" --test --steps rest --budget 160
#
# The lease plan (15 minutes of device time; seconds, upper estimates: nothing has run on a GPU
# yet; `--plan` prints it for any --budget): start 60-120; the first call 570 + about 20 of
# transfers: build 150, environment 20, ctest-gpu 180, then the five trainings, which must not be
# cut (review H3): train-single 35, train-ddp-syncbn 30, train-dp 30, train-ddp-bf16 30,
# train-bf16 35 (all by 510 s); then bench-gpu 70 (cut at 560 at worst), pytorch-gpu 60,
# racecheck 60, memcheck 120, run when the build and ctest-gpu are faster (typical: build 100,
# ctest-gpu 90, trainings 20 each: everything by about 470 s). The second call (what is left,
# 160-220 s) takes the rest in that order; at worst memcheck waits for the next lease.
#
# Modes: --all (build, then the steps), --build, --test (the steps on the build already there: no
# --bundle needed once build-gpu/deps holds it), --check-carry (the size of what travels), --plan
# (the steps' order, limits and upper estimates against --budget: when each would start and end,
# which the budget would cut; runs nothing).
# Options: --out DIR (report.md, report.json, logs.tgz: nothing else), --bundle DIR, --cifar DIR
# (a CIFAR-10 folder, full or subset, for the training and benchmark steps; else synthetic
# images), --build-dir DIR (default ./build-gpu; the bundle is unpacked into DIR/deps, the logs
# kept in DIR/gpu-node-logs), --arch SM (default: nvidia-smi's compute capability, or
# $TANDEM_CUDA_ARCH), --jobs N (default: all cores), --targets "T1 T2 …" (what the build builds;
# default: what the steps run), --steps "S1,S2,…" (default: all but compare-cpu and torch-store;
# "rest": what the last run in --build-dir left undone), --budget S (default 570: seconds for the
# whole command, counted from its start).
#
# Each step runs under `timeout`, at most its limit and never past the budget; one that no longer
# fits is skipped, saying so, and a failure does not stop the others. report.md and report.json
# list every step from the start and are rewritten as each one starts and ends, logs.tgz as each
# ends (Note [Report as it goes] in scripts/gpu_node/report.sh), so a command killed at any moment
# still brings back a well-formed report. The exit status is non-zero when a step failed. The
# steps, in order of value (limit and upper estimate in seconds):
#   build           - 150  (--all, --build) unpack the bundle, configure (CUDA on, MPI off, sm from
#                          nvidia-smi), build, with what the budget leaves; build.log starts with
#                          the environment below but PyTorch and the built programs
#   environment    60  20  GPU, driver, nvcc, PyTorch, the wheels, both CUDA runtimes (K9), the
#                          cuBLAS and cuBLASLt pairs and the pair a GEMM test loads: one folder, or
#                          it fails (G8)
#   ctest-gpu     180 180  ctest -L gpu -j 8, 2 threads a test; nothing may skip but two-GPU tests
#   train-single   60  35  train_cifar --devices cuda:0: 2 epochs of 10,000 images, tested on 2,000
#   train-ddp-syncbn  60  30  one epoch, --mode ddp --backend nccl --nproc 1 --sync-bn
#   train-dp       60  30  one epoch, --mode dp --devices cuda:0,cuda:0 (two replicas on one GPU)
#   train-ddp-bf16    60  30  one epoch, --mode ddp --backend nccl --nproc 1 --grad-compression bf16
#   train-bf16     60  35  2 epochs, --devices cuda:0 --precision bf16
#   bench-gpu      90  70  bench_cifar's ResNet-20 step, batch 128, fp32 and bf16, NCHW and
#                          channels-last; bench_cuda_batch_norm (bf16 own kernels beside fp32 cuDNN)
#   pytorch-gpu    90  60  scripts/pytorch_gpu_step.py: PyTorch's step, the same rows, the same GPU
#   racecheck      60  60  compute-sanitizer racecheck on the own batch-norm kernels' tests
#   memcheck      120 120  compute-sanitizer memcheck on the kernels' own tests (K5)
#   compare-cpu   150 150  (CPU only; --steps) scripts/compare_pytorch.sh's ResNet-20 rows on 2 cores
#   torch-store    60  30  (CPU only; --steps) Tandem's TorchStore client against PyTorch's TCPStore
#
# Note [Offline prefix]: the bundle's .debs are unpacked with dpkg-deb -x into DIR/deps, so
# CMAKE_PREFIX_PATH=DIR/deps/usr finds their CMake configs. All of them compute their prefix from
# where they lie except Gloo's, which names /usr/lib/libgloo.so.0.5.0: it is rewritten to its
# own prefix variable. libgloo pulls in libibverbs and libnl, which the
# linker finds through -rpath-link and the programs through LD_LIBRARY_PATH, as they do cuDNN's
# sub-libraries and cuBLAS(Lt), which are loaded with dlopen. The prefix lies in the build folder
# so that ccache (scripts/build_env.sh) sees the same relative paths in every checkout.
set -euo pipefail
# A hook for tests/scripts/gpu_node_dry_run_test.sh: TANDEM_GPU_NODE_FAKE_STEPS="build=2,train-single=30:0"
# replaces those steps by a sleep of that many seconds ending with that status (default 0), GPU
# or not, so that the budget, the report and the kills can be checked on a machine without one.

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: scripts/gpu_node.sh --out DIR [--all|--build|--test] [--bundle DIR] [--cifar DIR] [--build-dir DIR] [--arch SM] [--jobs N] [--targets LIST] [--steps LIST|rest] [--budget S]; or --check-carry --bundle DIR [--cifar DIR]; or --plan [--budget S]"
die() { echo "error: $*" >&2; exit 2; }

# Review H3: the trainings come right after ctest-gpu, so that a slow build and ctest-gpu still
# leave them their time; the benchmarks and the sanitizers, which a second call can take, last.
default_steps="environment ctest-gpu train-single train-ddp-syncbn train-dp train-ddp-bf16 train-bf16 bench-gpu pytorch-gpu racecheck memcheck"
all_steps="$default_steps compare-cpu torch-store"
declare -A limit_s=([environment]=60 [ctest-gpu]=180 [train-single]=60 [train-ddp-syncbn]=60
  [train-dp]=60 [train-ddp-bf16]=60 [train-bf16]=60 [bench-gpu]=90 [pytorch-gpu]=90
  [racecheck]=60 [memcheck]=120 [compare-cpu]=150 [torch-store]=60)
# Upper estimates, for --plan and the lease plan above (nothing has run on a GPU yet).
declare -A estimate_s=([build]=150 [environment]=20 [ctest-gpu]=180 [train-single]=35
  [train-ddp-syncbn]=30 [train-dp]=30 [train-ddp-bf16]=30 [train-bf16]=35 [bench-gpu]=70
  [pytorch-gpu]=60 [racecheck]=60 [memcheck]=120 [compare-cpu]=150 [torch-store]=30)
bundle="" out="" mode="" build_dir="$root/build-gpu" arch="${TANDEM_CUDA_ARCH:-}" cifar=""
jobs="$(nproc)" steps="$default_steps" budget_s=570 reserve_s=10 min_step_s=15
targets="engine_tests nn_tests data_tests parallel_tests comm_tests apps_tests train_cifar bench_cifar tandem-run bench_cuda_batch_norm"
while [ $# -gt 0 ]; do
  case "$1" in
    --build | --test | --all | --check-carry | --plan)
      [ -z "$mode" ] || die "give one of --all, --build, --test, --check-carry, --plan"; mode="${1#--}"; shift ;;
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
[ -n "$mode" ] || die "say what to do: --all, --build, --test, --check-carry or --plan ($usage)"
[[ "$budget_s" =~ ^[1-9][0-9]*$ ]] || die "--budget takes seconds, got '$budget_s'"

# --plan: the default steps against the budget with their upper estimates, as run_step spends
# it (reserve_s kept, a step with under min_step_s left skipped, none past its limit).
if [ "$mode" = plan ]; then
  t=0
  printf '%-18s %6s %9s %6s %6s  %s\n' step limit estimate start end "(budget $budget_s s)"
  for step in build $default_steps; do
    left=$((budget_s - reserve_s - t)) limit="${limit_s[$step]:-$budget_s}" verdict=""
    if [ "$left" -lt "$min_step_s" ]; then
      printf '%-18s %6s %9s %6s %6s  %s\n' "$step" "$limit" "${estimate_s[$step]}" - - "skipped: for the second call"
      continue
    fi
    took="${estimate_s[$step]}"
    [ "$took" -le "$limit" ] || took=$limit
    [ "$took" -le "$left" ] || { took=$left verdict="cut by the budget: for the second call"; }
    printf '%-18s %6s %9s %6s %6s  %s\n' "$step" "$limit" "${estimate_s[$step]}" "$t" "$((t + took))" "$verdict"
    t=$((t + took))
  done
  exit 0
fi

# Review H9: once --out is known, a refusal still brings back a report, with one failed `setup`
# row saying why (a forgotten carry path, a bad option), instead of an empty $OUT.
if [ -n "$out" ] && [ "$mode" != check-carry ]; then
  mkdir -p "$out"
  out="$(cd "$out" && pwd)"
  # shellcheck source=scripts/gpu_node/setup.sh
  source "$root/scripts/gpu_node/setup.sh"
  # shellcheck source=scripts/gpu_node/report.sh
  source "$kit/report.sh"
  nvcc="" data_text="" logs="$build_dir/gpu-node-logs"
  die() {
    echo "error: $*" >&2
    plan_step setup
    row_status[0]=failed row_seconds[0]=0 row_start[0]=0
    row_notes[0]="$(LC_ALL=C tr -cd '[:print:]' <<<"$*" | cut -c1-240)"
    report_state=stopped
    refresh_facts
    write_report
    exit 2
  }
fi
[ -z "$bundle" ] || [ -f "$bundle/manifest.tsv" ] || die "no bundle at '$bundle' (no manifest.tsv): make it with scripts/offline_bundle.sh"
[ -z "$cifar" ] || [ -f "$cifar/test_batch.bin" ] || die "--cifar '$cifar' has no test_batch.bin (scripts/cifar_subset.sh writes one)"
if [ "$mode" = check-carry ]; then
  [ -n "$bundle" ] || die "--check-carry needs --bundle DIR (and --cifar DIR if it travels too)"
  source "$root/scripts/gpu_node/carry.sh"
  check_carry "$root" "$bundle" ${cifar:+"$cifar"}
  exit
fi
[ -n "$out" ] || die "--out DIR is required (the report and logs.tgz go there)"
[ "$mode" = test ] || [ -n "$bundle" ] || die "--$mode needs --bundle DIR (scripts/offline_bundle.sh makes it)"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs takes a positive number, got '$jobs'"
[ -z "$arch" ] || [[ "$arch" =~ ^[1-9][0-9]+[af]?$ ]] || die "--arch takes an architecture such as 90, got '$arch'"
# --steps rest: what the last run in this build folder left undone (its report, kept in the logs).
if [ "$steps" = rest ]; then
  [ -f "$build_dir/gpu-node-logs/report.json" ] || die "--steps rest: no earlier run's report in $build_dir/gpu-node-logs"
  steps="$(python3 "$root/scripts/gpu_node/rest.py" "$build_dir/gpu-node-logs/report.json")" ||
    die "--steps rest: cannot read $build_dir/gpu-node-logs/report.json"
  echo "== --steps rest: ${steps:-nothing left}"
fi
for step in $steps; do
  [[ " $all_steps " == *" $step "* ]] || die "unknown step '$step' (steps: $all_steps)"
done
if [ "$mode" = test ] && [ ! -f "$build_dir/CMakeCache.txt" ]; then
  die "nothing built in $build_dir: run --all (or --build) first"
fi
# K8: --test needs the bundle's libraries unpacked, not the bundle.
if [ "$mode" = test ] && grep -q "^CMAKE_PREFIX_PATH:[A-Z]*=.*/deps/usr$" "$build_dir/CMakeCache.txt" &&
   [ ! -f "$build_dir/deps/.manifest" ]; then
  die "$build_dir was built with the offline bundle, but $build_dir/deps is gone: run --all again"
fi
limit_s[build]="$budget_s"  # the build may take what the budget leaves (--build with a larger one)
fake_steps="${TANDEM_GPU_NODE_FAKE_STEPS:-}"
[[ "$fake_steps" =~ ^([a-z-]+=[0-9]+(:[0-9]+)?(,|$))*$ ]] || die "TANDEM_GPU_NODE_FAKE_STEPS: NAME=SECONDS[:STATUS],… (got '$fake_steps')"
# "SECONDS STATUS" when the step is faked, else nothing.
fake_step() {
  local spec
  spec="$(tr ',' '\n' <<<"$fake_steps" | sed -n "s/^$1=//p" | head -1)"
  [ -z "$spec" ] || echo "${spec%%:*} $([[ "$spec" == *:* ]] && echo "${spec#*:}" || echo 0)"
}

mkdir -p "$build_dir"
build_dir="$(cd "$build_dir" && pwd)"
[ -z "$bundle" ] || bundle="$(cd "$bundle" && pwd)"
[ -z "$cifar" ] || cifar="$(cd "$cifar" && pwd)"
logs="$build_dir/gpu-node-logs"
mkdir -p "$logs"
caller_ld_library_path="${LD_LIBRARY_PATH:-}"
# shellcheck source=scripts/gpu_node/setup.sh
source "$root/scripts/gpu_node/setup.sh"  # again: prefix follows the absolute build folder
data_text="${cifar:+real images from $cifar}"
data_text="${data_text:-synthetic images}"
nvcc="$(find_nvcc)"
toolkit="" cuda_major=13
if [ -n "$nvcc" ]; then
  toolkit="$(cd "$(dirname "$(readlink -f "$nvcc")")/.." && pwd)"
  cuda_major="$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
fi

# The plan, in the report from the start.
[ "$mode" = test ] || plan_step build
if [ "$mode" != build ]; then
  for step in $default_steps compare-cpu torch-store; do
    [[ " $steps " != *" $step "* ]] || plan_step "$step"
  done
fi
start_report
plan="${row_names[*]}"
echo "== $mode: ${plan// /, }; budget $budget_s s; report in $out"

sanitizer="$(find_sanitizer)"
torch_python="$(find_torch_python)"
wheel_dirs="$(wheel_libdirs | paste -sd:)"
choose_cudart
LD_LIBRARY_PATH="$(runtime_library_path)"
no_gpu=""
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || no_gpu="no GPU (nvidia-smi lists none)"
export root build_dir logs bundle cifar arch jobs targets nvcc toolkit cuda_major caller_ld_library_path \
  LD_LIBRARY_PATH wheel_dirs sanitizer torch_python no_gpu gpu_name cudart_toolkit cudart_wheel toolkit_first
failures=0 step_verdict=""

no_build=""
if [ "$mode" != test ]; then
  run_step build "${limit_s[build]}" "" bash "$kit/step.sh" build
  [ "$step_verdict" = ok ] || no_build="the build did not finish ($step_verdict)"
  LD_LIBRARY_PATH="$(runtime_library_path)"  # with the cuDNN and NCCL configure found
  refresh_facts
  write_report
fi
[ -n "$no_build" ] || [ -f "$build_dir/CMakeCache.txt" ] || no_build="nothing built in $build_dir"
no_cuda="$no_build"
[ -n "$no_cuda" ] || [ "$(cache TANDEM_WITH_CUDA)" = ON ] || no_cuda="$build_dir was built without CUDA"
no_torch="" no_sanitizer=""
[ -n "$torch_python" ] || no_torch="no python3 with torch"
[ -n "$sanitizer" ] || no_sanitizer="no compute-sanitizer"

# The first reason given, if any: why a step cannot run.
why_not() {
  local reason
  for reason in "$@"; do [ -z "$reason" ] || { echo "$reason"; return; }; done
}
for step in $(printf '%s\n' "${row_names[@]}" | grep -vx build); do
  case "$step" in
    environment) skip="" ;;
    pytorch-gpu) skip="$(why_not "$no_gpu" "$no_torch")" ;;
    racecheck | memcheck) skip="$(why_not "$no_gpu" "$no_cuda" "$no_sanitizer")" ;;
    compare-cpu | torch-store) skip="$(why_not "$no_build" "$no_torch")" ;;
    *) skip="$(why_not "$no_gpu" "$no_cuda")" ;;
  esac
  run_step "$step" "${limit_s[$step]}" "$skip" bash "$kit/step.sh" "$step"
done

report_state="done"
finish_report "the end"
cat "$out/report.md"
[ "$failures" -eq 0 ]
