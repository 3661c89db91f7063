#!/usr/bin/env bash
# The shipped ResNet-20 weights (docs/results.md) reach the paper's accuracy, and Tandem and
# PyTorch agree on them: `train_cifar --eval-only` and evaluate_cifar_checkpoint.py (PyTorch
# alone) must give test accuracies within 0.05 point of each other, Tandem's at least MIN.
#
#   shipped_checkpoint_test.sh TRAIN_CIFAR PYTHON CHECKPOINT ARCH MIN
#
# Needs CIFAR-10's test set: ./data/cifar-10-batches-bin, or the archive beside the project
# (scripts/get_cifar10.sh); without either it skips (exit 77) rather than download 163 MB.
set -euo pipefail
train_cifar="$1" python="$2" checkpoint="$3" arch="$4" min="$5"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
data="$root/data/cifar-10-batches-bin"
if [ ! -f "$data/test_batch.bin" ]; then
  if [ -f "$root/../shared/data/cifar-10-binary.tar.gz" ] || [ -n "${CIFAR10_ARCHIVE:-}" ]; then
    "$root/scripts/get_cifar10.sh" "$root/data" >/dev/null
  else
    echo "skipped: no CIFAR-10 test set at $data (run scripts/get_cifar10.sh)"
    exit 77
  fi
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
"$train_cifar" --arch "$arch" --eval-only --resume "$checkpoint" --data-dir "$data" \
  --workers 1 --no-progress --log-json "$scratch/eval.jsonl" >"$scratch/tandem.out" 2>&1 \
  || { cat "$scratch/tandem.out"; exit 1; }
tandem="$("$python" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["test_accuracy"])' "$scratch/eval.jsonl")"
torch="$("$python" "$root/tests/interop/evaluate_cifar_checkpoint.py" "$arch" "$checkpoint" "$data" | awk '/^accuracy/ {print $2}')"
echo "test accuracy of $checkpoint: Tandem $tandem, PyTorch $torch (at least $min wanted)"
"$python" - "$tandem" "$torch" "$min" <<'PY'
import sys
tandem, torch, minimum = map(float, sys.argv[1:])
if tandem < minimum:
    sys.exit(f"Tandem's accuracy {tandem:.4f} is below {minimum}")
if abs(tandem - torch) > 0.0005:
    sys.exit(f"Tandem ({tandem:.4f}) and PyTorch ({torch:.4f}) differ by more than 0.05 point")
PY
