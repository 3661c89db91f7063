#!/usr/bin/env bash
# DDP started by PyTorch's torchrun (Debian's python3-torch 1.13), as a PyTorch user would:
#   static      `torchrun --master-port P`: the agent hosts PyTorch's TCPStore and tells the
#               workers so (TORCHELASTIC_USE_AGENT_STORE=True); Tandem's ranks are its clients
#   standalone  `torchrun --standalone`: the c10d rendezvous; rank 0 hosts Tandem's own store
# Either way the per-epoch losses and accuracies must equal those of the same job run as
# `train_cifar --nproc 2` (same seed, same world size, same numbers).
# Skips (exit 77) without PyTorch.
#
#   torchrun_ddp_test.sh BUILD_DIR CASE
set -uo pipefail
build="$1" case="$2"
train="$build/apps/train_cifar"
python=/usr/bin/python3

"$python" -c 'import torch.distributed.run' 2>/dev/null || { echo "skipped: no PyTorch (python3-torch) for torchrun"; exit 77; }
scratch="$(mktemp -d)"
trap 'pkill -KILL -f "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT

job=(--mode ddp --backend gloo --synthetic --subset 512 --batch-size 64 --epochs 2 --workers 1 --no-progress --seed 3)
fail() { echo "FAILED: $*"; for f in "$scratch"/*.log; do echo "== $f"; tail -8 "$f"; done; exit 1; }

# A free port for the static rendezvous (bound once by Python to find it, then released).
port="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
case "$case" in
  static) rendezvous=(--master_port "$port") ;;
  standalone) rendezvous=(--standalone) ;;
  *) echo "unknown case '$case'"; exit 2 ;;
esac
# --redirects/--tee 1: under Python 3.11, torchrun 1.13's default "0" fails to parse (Std.NONE is
# not iterated in an IntFlag any more: "'NoneType' object has no attribute 'get'").
timeout 300 "$python" -m torch.distributed.run "${rendezvous[@]}" --nproc_per_node 2 \
  --redirects 1 --tee 1 --log_dir "$scratch/torchrun-logs" --no_python \
  "$train" "${job[@]}" --log-json "$scratch/torchrun.jsonl" >"$scratch/torchrun.log" 2>&1 \
  || fail "train_cifar under torchrun ($case) exited with $?"
timeout 300 "$train" "${job[@]}" --nproc 2 --log-json "$scratch/nproc.jsonl" >"$scratch/nproc.log" 2>&1 \
  || fail "train_cifar --nproc 2 exited with $?"

# Every per-epoch number but the timings must be equal.
"$python" - "$scratch/torchrun.jsonl" "$scratch/nproc.jsonl" <<'PY' || fail "the logs differ"
import json, sys
def epochs(path):
    rows = [json.loads(line) for line in open(path)]
    keep = ("epoch", "step", "lr", "train_loss", "train_accuracy", "test_loss", "test_accuracy", "world_size")
    return [{k: r[k] for k in keep} for r in rows if r.get("type") == "epoch"]
a, b = epochs(sys.argv[1]), epochs(sys.argv[2])
if len(a) != 2 or a != b:
    print("torchrun:", a, "\n--nproc 2:", b)
    sys.exit(1)
print("equal over", len(a), "epochs; last:", a[-1])
PY
echo "passed: torchrun ($case) trains as train_cifar --nproc 2 does"
