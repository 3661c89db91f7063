#!/usr/bin/env bash
# Tandem and PyTorch agree on a checkpoint's test accuracy: `train_cifar --eval-only` and
# evaluate_cifar_checkpoint.py (PyTorch alone) must give test accuracies within 0.05 point (or
# one image, where fewer than 2,000 are tested) of each other, Tandem's at least MIN.
#
#   pytorch_accuracy_test.sh TRAIN_CIFAR PYTHON ARCH MIN CHECKPOINT
#       a given checkpoint (the shipped ResNet-20 weights, docs/results.md) on all 10,000 test images
#   pytorch_accuracy_test.sh TRAIN_CIFAR PYTHON ARCH MIN --train IMAGES FLAG...
#       first trains one, `train_cifar --arch ARCH --data-dir DATA --save … FLAG...` (e.g. a 4-rank
#       --zero 2 run: its rank 0 gathers the shards into the one checkpoint format), then compares
#       on the first IMAGES test images
#
# Needs CIFAR-10: ./data/cifar-10-batches-bin, or the archive beside the project
# (scripts/get_cifar10.sh); without either it skips (exit 77) rather than download 163 MB.
set -euo pipefail
train_cifar="$1" python="$2" arch="$3" min="$4"
shift 4
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
data="$root/data/cifar-10-batches-bin"
if [ ! -f "$data/test_batch.bin" ]; then
  if [ -f "$root/../shared/data/cifar-10-binary.tar.gz" ] || [ -n "${CIFAR10_ARCHIVE:-}" ]; then
    # Tests that start at once extract one at a time: the later finds the verified copy.
    mkdir -p "$root/data"
    flock "$root/data" "$root/scripts/get_cifar10.sh" "$root/data" >/dev/null
  else
    echo "skipped: no CIFAR-10 test set at $data (run scripts/get_cifar10.sh)"
    exit 77
  fi
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
images=10000 subset=()
if [ "${1:-}" = --train ]; then
  images="$2" checkpoint="$scratch/trained.ckpt"
  shift 2
  # --subset N tests on the first N/5 images (train_cifar --help).
  subset=(--subset $((images * 5)))
  "$train_cifar" --arch "$arch" --data-dir "$data" --save "$checkpoint" --workers 1 --no-progress \
    --log-json "$scratch/train.jsonl" "$@" >"$scratch/train.out" 2>&1 \
    || { cat "$scratch/train.out"; exit 1; }
else
  checkpoint="$1"
fi
"$train_cifar" --arch "$arch" --eval-only --resume "$checkpoint" --data-dir "$data" "${subset[@]}" \
  --workers 1 --no-progress --log-json "$scratch/eval.jsonl" >"$scratch/tandem.out" 2>&1 \
  || { cat "$scratch/tandem.out"; exit 1; }
tandem="$("$python" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["test_accuracy"])' "$scratch/eval.jsonl")"
torch="$("$python" "$root/tests/interop/evaluate_cifar_checkpoint.py" "$arch" "$checkpoint" "$data" "$images" | awk '/^accuracy/ {print $2}')"
echo "test accuracy on $images images: Tandem $tandem, PyTorch $torch (at least $min wanted)"
"$python" - "$tandem" "$torch" "$min" "$images" <<'PY'
import sys
tandem, torch, minimum, images = map(float, sys.argv[1:])
if tandem < minimum:
    sys.exit(f"Tandem's accuracy {tandem:.4f} is below {minimum}")
if abs(tandem - torch) > max(0.0005, 1 / images):
    sys.exit(f"Tandem ({tandem:.4f}) and PyTorch ({torch:.4f}) differ by more than 0.05 point "
             f"or one image")
PY
