#!/usr/bin/env bash
# The layers include downwards only (DESIGN.md): a library's sources may include their own folder
# and the layers below it, never one above. Every library has the repository root on its include
# path, so nothing but this test stops, say, engine/ from including nn/.
#
#   engine                   engine
#   nn                       engine nn
#   data                     engine data
#   parallel/comm            engine, the comm root (ProcessGroup, Work, checks, types, sockets)
#     rendezvous/            … and rendezvous/ (stores, init methods, the launch environment)
#     gloo/ nccl/ mpi/       … rendezvous/ and its own folder: a backend includes no other backend
#     backends.*             the table of backends, the one place that knows every backend: all
#                            of parallel/comm (Note [Backend table])
#     init_process_group.*   … rendezvous/ and the table, no backend's folder
#   parallel/launch          engine parallel/comm parallel/launch (the launcher's library)
#   parallel (zero/ too)     engine nn parallel/comm parallel (not parallel/launch)
#   apps                     anything
#   examples                 engine nn data parallel (programs built against the installed
#                            package, which has no apps/ or tests/; InstallExample.* checks what
#                            is installed), not parallel/launch
# Besides: data/dataset.h and data/data_loader.h include nothing of CIFAR-10;
# parallel/launch/ is included only by apps/ and tests/; the Reducer (parallel/reducer*)
# includes nothing of parallel/zero/ (it sees sharding through its bucket-storage interface);
# engine/backend/ only by the engine's op and backend folders; the CUDA runtime no kernel side.
#
# layering_plant_test.sh plants a violation of each rule in a copy of the sources and checks that
# this test names every one: a new rule adds its plant there.
#
#   layering_test.sh SOURCE_DIR
set -uo pipefail
root="$1"
cd "$root" || exit 2

comm_root='parallel/comm/[a-z_]+\.h$'
allowed() {  # file → an extended regex of the includes it may use
  case "$1" in
    engine/*) echo '^engine/' ;;
    nn/*) echo '^(engine|nn)/' ;;
    data/*) echo '^(engine|data)/' ;;
    parallel/comm/backends.*) echo '^(engine|parallel/comm)/' ;;
    parallel/comm/init_process_group.* | parallel/comm/rendezvous/*)
      echo "^(engine/|$comm_root|parallel/comm/rendezvous/)" ;;
    parallel/comm/gloo/* | parallel/comm/nccl/* | parallel/comm/mpi/*)
      local room="${1#parallel/comm/}"; room="${room%%/*}"
      echo "^(engine/|$comm_root|parallel/comm/rendezvous/|parallel/comm/$room/)" ;;
    parallel/comm/*) echo "^(engine/|$comm_root)" ;;
    parallel/launch/*) echo '^(engine|parallel/comm|parallel/launch)/' ;;
    parallel/*) echo '^(engine/|nn/|parallel/comm/|parallel/[a-z_]+\.h$|parallel/zero/)' ;;
    examples/*) echo '^(engine/|nn/|data/|parallel/comm/|parallel/[a-z_]+\.h$|parallel/zero/)' ;;
  esac
}

violations=0
fail() { echo "layering: $*"; violations=$((violations + 1)); }

while IFS= read -r file; do
  rule="$(allowed "$file")"
  while IFS= read -r line; do
    include="${line#*\"}"; include="${include%%\"*}"
    case "$include" in */*) ;; *) continue ;; esac   # "nccl.h", "gloo/...": not ours
    case "${include%%/*}" in engine|nn|data|parallel|apps|tests) ;; *) continue ;; esac
    [[ "$include" =~ $rule ]] || fail "$file includes \"$include\"; it may include only $rule"
  done < <(grep -h '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file")
done < <(find engine nn data parallel examples -type f \
           \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | sort)

# Each rule below names who may include a prefix (only) or who may not (never).
includers() {  # the files that include PREFIX, relative to the root
  grep -rlE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"$1" \
    --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' . \
    | sed 's|^\./||' | grep -vE '^(build[^/]*|\.git)/'
}
only() {  # only USERS PREFIX WHY: files outside the USERS regex may not include PREFIX
  while IFS= read -r file; do
    [[ "$file" =~ $1 ]] || fail "$file includes $2; $3"
  done < <(includers "$2")
}
never() {  # never WHO PREFIX WHY: files matching the WHO regex may not include PREFIX
  while IFS= read -r file; do
    [[ "$file" =~ $1 ]] && fail "$file includes $2; $3"
  done < <(includers "$2")
}
# The data-set interface and the loader sit beneath every concrete data set: CIFAR-10 (its reader,
# CifarImages, its transforms) builds on them, never the reverse (docs/data.md).
for cifar in data/cifar10.h data/transforms.h; do
  never '^data/(dataset|data_loader)\.h$' "$cifar" 'the data-set interface and the loader sit beneath CIFAR-10'
done
# The launcher's library is the programs' own (DESIGN.md).
only '^(apps|tests|parallel/launch)/' 'parallel/launch/' 'only apps/ (and tests) use the launcher library'
# Note [Bucket storage]: DDP and the Reducer know nothing of ZeRO beyond the bucket-storage
# interface, so sharding stays in its room.
never '^parallel/reducer' 'parallel/zero/' 'the Reducer sees sharding only through its bucket storage'
# Note [Runtime apart from kernels] (engine/device_runtime.h): the kernel contract, engine/backend/
# (the Backend table, the ops' option structs, the helpers both backends' kernels use), is the
# engine's op and backend folders' own; everything else (nn, data, parallel, apps, examples, the
# tests of other layers) sees the device runtime and the ops. Tensor's own methods dispatch through
# it (engine/tensor.cpp); the engine's tests and the microbenchmarks check or time the kernels.
only '^(engine/(ops|cpu|cuda|no_cuda|backend)/|engine/tensor\.cpp$|tests/engine/|microbench/)' \
  'engine/backend/' "outside the engine's op and backend folders use engine/device_runtime.h and the ops"
# The CUDA runtime (engine/cuda/runtime/) names libcudart alone: nothing of engine/cuda outside
# it (the kernels, their launch.h, cuDNN's and cuBLAS's checks) and neither library's headers, so
# that it can be brought up, and tested on the fake runtime, before the kernels.
while IFS= read -r line; do
  fail "${line#./}: the CUDA runtime includes the kernels' side"
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*("engine/cuda/|<cublas|<cudnn)' \
           engine/cuda/runtime | grep -vE '"engine/cuda/runtime/')
[ $violations -eq 0 ] || { echo "FAILED: $violations includes go up a layer or out of their room"; exit 1; }
echo "passed: every include in engine, nn, data, parallel (comm and its rooms, launch, zero) and examples goes down a layer or stays in its room; data/dataset.h and data/data_loader.h include nothing of CIFAR-10; parallel/launch/ is used only by apps/; the Reducer includes nothing of parallel/zero/; engine/backend/ stays with the engine's ops and backends; the CUDA runtime includes no kernel side"
