#!/usr/bin/env bash
# One step of scripts/gpu_node.sh in a process of its own, so that `timeout` can stop it with
# everything it started: `step.sh NAME` runs step_NAME, `step.sh NAME FUNCTION ARGS…` runs
# step_FUNCTION ARGS… as step NAME (its note and files under NAME). Its settings come from
# scripts/gpu_node.sh through the environment (the variables it exports).
set -euo pipefail
step_name="$1"
function="${2:-$1}"
shift $(($# > 1 ? 2 : 1))
# shellcheck source=scripts/gpu_node/setup.sh
source "${root:?set by scripts/gpu_node.sh}/scripts/gpu_node/setup.sh"
# shellcheck source=scripts/gpu_node/build.sh
source "$kit/build.sh"
# shellcheck source=scripts/gpu_node/steps.sh
source "$kit/steps.sh"
"step_${function//-/_}" "$@"
