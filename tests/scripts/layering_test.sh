#!/usr/bin/env bash
# The layers include downwards only (DESIGN.md): a library's sources may include their own folder
# and the layers below it, never one above. Every library has the repository root on its include
# path, so nothing but this test stops, say, engine/ from including nn/.
#
#   engine          engine
#   nn              engine nn
#   data            engine data
#   parallel/comm   engine parallel/comm          (the communication layer: no nn/, no DDP)
#   parallel        engine nn parallel            (parallel/comm included)
#   apps            anything
#   examples        engine nn data parallel       (programs built against the installed package,
#                                                  which has no apps/ or tests/; InstallExample.*
#                                                  checks what is installed)
#
#   layering_test.sh SOURCE_DIR
set -uo pipefail
root="$1"
cd "$root" || exit 2

allowed() {  # folder → the include prefixes its files may use
  case "$1" in
    engine) echo "engine/" ;;
    nn) echo "engine/ nn/" ;;
    data) echo "engine/ data/" ;;
    parallel/comm) echo "engine/ parallel/comm/" ;;
    parallel) echo "engine/ nn/ parallel/" ;;
    examples) echo "engine/ nn/ data/ parallel/" ;;
  esac
}

violations=0
for layer in engine nn data parallel/comm parallel examples; do
  prefixes="$(allowed "$layer")"
  # The files of this layer, not of a deeper layer listed on its own (parallel/comm in parallel).
  files=$(find "$layer" -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) \
            | grep -v "^parallel/comm/" )
  [ "$layer" = parallel/comm ] && files=$(find "$layer" -type f \( -name '*.h' -o -name '*.cpp' \))
  for file in $files; do
    while IFS= read -r line; do
      include="${line#*\"}"; include="${include%%\"*}"
      case "$include" in */*) ;; *) continue ;; esac   # "nccl.h", "gloo/...": not ours
      top="${include%%/*}"
      case "$top" in engine|nn|data|parallel|apps|tests) ;; *) continue ;; esac
      ok=0
      for prefix in $prefixes; do
        [ "${include#"$prefix"}" != "$include" ] && ok=1
      done
      if [ $ok -eq 0 ]; then
        echo "layering: $file includes \"$include\"; $layer may include only: $prefixes"
        violations=$((violations + 1))
      fi
    done < <(grep -h '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file")
  done
done
# Note [Runtime apart from kernels] (engine/device_runtime.h): the kernel contract, engine/backend/
# (the Backend table, the ops' option structs, the helpers both backends' kernels use), is the
# engine's op and backend folders' own; everything else (nn, data, parallel, apps, examples, the
# tests of other layers) sees the device runtime and the ops. Tensor's own methods dispatch through
# it (engine/tensor.cpp); the engine's tests and the microbenchmarks check or time the kernels.
kernel_contract_users='^engine/(ops|cpu|cuda|no_cuda|backend)/|^engine/tensor\.cpp$|^tests/engine/|^microbench/'
while IFS=: read -r file _; do
  if ! [[ "$file" =~ $kernel_contract_users ]]; then
    echo "layering: $file includes engine/backend/; outside the engine's op and backend folders use engine/device_runtime.h and the ops"
    violations=$((violations + 1))
  fi
done < <(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"engine/backend/' \
           --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' . \
           | sed 's|^\./||' | grep -vE '^(build|\.git)' | sed 's/$/:/')
# The CUDA runtime (engine/cuda/runtime/) names libcudart alone: nothing of engine/cuda outside
# it (the kernels, their launch.h, cuDNN's and cuBLAS's checks) and neither library's headers, so
# that it can be brought up, and tested on the fake runtime, before the kernels.
while IFS= read -r line; do
  echo "layering: ${line#./}: the CUDA runtime includes the kernels' side"
  violations=$((violations + 1))
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*("engine/cuda/|<cublas|<cudnn)' \
           engine/cuda/runtime | grep -vE '"engine/cuda/runtime/')
[ $violations -eq 0 ] || { echo "FAILED: $violations includes go up a layer"; exit 1; }
echo "passed: every include in engine, nn, data, parallel/comm, parallel and examples goes down a layer or stays, engine/backend/ stays with the engine's ops and backends, and the CUDA runtime includes no kernel side"
