#!/usr/bin/env bash
# A test of the layering test (layering_test.sh): it copies the source folders into a scratch
# folder, checks that the copy passes, then plants one include that breaks each rule and checks
# that layering_test.sh fails and names every planted line. A rule that stopped catching what it
# was written for (a typo in a pattern, a case arm that shadows it) fails here rather than
# passing quietly.
#
#   layering_plant_test.sh SOURCE_DIR
set -uo pipefail
root="$(cd "$1" && pwd)" || exit 2
here="$(cd "$(dirname "$0")" && pwd)"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/layering_plant.XXXXXX")" || exit 2
trap 'rm -rf "$scratch"' EXIT

folders=(engine nn data parallel examples apps)
# The tracked files; a source tree without git (an unpacked archive) copies what is there.
files="$(git -C "$root" ls-files -- "${folders[@]}" 2>/dev/null)"
[ -n "$files" ] || files="$(cd "$root" && find "${folders[@]}" -type f 2>/dev/null)"
(cd "$root" && printf '%s\n' "$files" | xargs -d '\n' cp --parents -t "$scratch") ||
  { echo "FAILED: could not copy the source folders"; exit 1; }

if ! bash "$here/layering_test.sh" "$scratch" >"$scratch/clean.out" 2>&1; then
  cat "$scratch/clean.out"
  echo "FAILED: the unplanted copy already breaks a rule"
  exit 1
fi

# FILE|INCLUDE|RULE: one include per rule, planted at the top of FILE.
plants=(
  'parallel/comm/gloo/gloo_process_group.cpp|parallel/comm/nccl/nccl_process_group.h|a backend includes another backend'
  'parallel/reducer.cpp|parallel/zero/sharding.h|the Reducer includes parallel/zero/'
  'nn/module.cpp|parallel/launch/launcher.h|nn/ includes parallel/launch/'
  'data/dataset.h|data/cifar10.h|the data-set interface includes CIFAR-10'
  'data/data_loader.h|data/transforms.h|the loader includes CIFAR-10 transforms'
  'parallel/comm/process_group.h|parallel/comm/rendezvous/store.h|the comm root includes rendezvous/'
  'parallel/comm/init_process_group.cpp|parallel/comm/mpi/mpi_process_group.h|init_process_group includes a backend, not the table'
  'engine/tensor.h|nn/module.h|engine/ includes a layer above'
  'nn/linear.cpp|engine/backend/backend.h|the kernel table outside the engine'
  'engine/cuda/runtime/stream.cpp|engine/cuda/kernels/launch.h|the CUDA runtime includes the kernels'
)
for plant in "${plants[@]}"; do
  IFS='|' read -r file include rule <<<"$plant"
  [ -f "$scratch/$file" ] || { echo "FAILED: no $file to plant '$rule' in"; exit 1; }
  printf '#include "%s"\n' "$include" | cat - "$scratch/$file" >"$scratch/planted" &&
    mv "$scratch/planted" "$scratch/$file"
done

if bash "$here/layering_test.sh" "$scratch" >"$scratch/planted.out" 2>&1; then
  cat "$scratch/planted.out"
  echo "FAILED: layering_test.sh passed a tree with ${#plants[@]} planted violations"
  exit 1
fi
missed=0
for plant in "${plants[@]}"; do
  IFS='|' read -r file include rule <<<"$plant"
  # The line names the include, or the folder a rule keeps out ("… includes parallel/zero/; …").
  if ! grep -F "layering: $file" "$scratch/planted.out" |
       grep -qF -e "$include" -e "${include%/*}/"; then
    echo "layering_plant: not caught: $file including $include ($rule)"
    missed=$((missed + 1))
  fi
done
if [ $missed -gt 0 ]; then
  cat "$scratch/planted.out"
  echo "FAILED: $missed of ${#plants[@]} planted violations went unnamed"
  exit 1
fi
echo "passed: layering_test.sh fails on each of ${#plants[@]} planted violations and names it"
