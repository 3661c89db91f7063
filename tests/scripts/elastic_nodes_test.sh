#!/usr/bin/env bash
# Elastic membership (tandem-run --nnodes MIN:MAX, Note [Elastic rounds]): three tandem-run
# launchers on loopback, one worker each, train_cifar --mode ddp under --max-restarts.
#   shrink  --nnodes 2:3: node 2's launcher SIGKILLed for good just after the first mid-epoch save;
#           nodes 0 and 1 restart on their own (2 ranks, resuming at another world size), and once
#           they have saved, node 2 is started again: the running attempt ends and all three go on
#           from that checkpoint (ending at once, not at the next save: Note [Elastic rounds]); every
#           launcher exits 0, the log shows 3 -> 2 -> 3, nothing is left running
#   short   --nnodes 2:3 with node 0 alone: after --rdzv-timeout one line naming the nodes
#           missing, a non-zero exit, no worker started
# Prints how long after the loss the job was training again (rank 0's resume record).
#
#   elastic_nodes_test.sh BUILD_DIR CASE
set -uo pipefail
build="$1" case="$2"
train="$build/apps/train_cifar" run="$build/apps/tandem-run"
python=/usr/bin/python3
scratch="$(mktemp -d)"
trap 'pkill -KILL -f "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
fail() { echo "FAILED: $*"; for f in "$scratch"/*.log; do echo "== $f"; tail -15 "$f"; done; exit 1; }
port="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
# 48 images a step split over 3 or 2 ranks; the checkpoint and log name $scratch (for pkill).
job=(--mode ddp --backend gloo --synthetic --subset 480 --batch-size 48 --epochs 2 --workers 1
     --threads 1 --no-progress --seed 5 --lr 0.05 --timeout 5 --save "$scratch/f.ckpt"
     --save-every-steps 2 --resume auto --log-json "$scratch/f.jsonl")
node() {  # node ID LOGNAME [extra launcher flags...]: a launcher in the background; its pid in $launcher
  local id="$1" log="$2"
  shift 2
  "$run" --nnodes 2:3 --node-rank "$id" --nproc-per-node 1 --master-port "$port" --max-restarts 3 \
    --rdzv-last-call 1 --kill-grace 2 "$@" -- "$train" "${job[@]}" >"$scratch/$log.log" 2>&1 &
  launcher=$!
}
wait_for() {  # FILE REGEX: until FILE holds a line matching REGEX (grep -E), at most 120 s
  local deadline=$((SECONDS + 120))
  until grep -qE "$2" "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "no '$2' in $1"
    sleep 0.05
  done
}
no_orphans() { ! pgrep -f "^$train .*$scratch" >/dev/null || fail "workers left running"; }

case "$case" in
  shrink)
    node 0 n0 --rdzv-timeout 30; p0=$launcher
    node 1 n1 --rdzv-timeout 30; p1=$launcher
    node 2 n2 --rdzv-timeout 30; p2=$launcher
    deadline=$((SECONDS + 120))
    until [ -e "$scratch/f.ckpt.state" ]; do
      [ $SECONDS -lt $deadline ] || fail "no first save"
      sleep 0.02
    done
    kill -KILL "$p2"
    lost=$(date +%s.%N)
    echo "node 2's launcher SIGKILLed (its worker dies with it)"
    wait_for "$scratch/n0.log" "attempt 1 runs on 2 of 3 nodes \(0, 1\)"
    # Once the two have saved, so that the three resume from a 2-rank checkpoint.
    wait_for "$scratch/f.jsonl" '"attempt":1,[^}]*"type":"checkpoint"'
    joined=$(date +%s.%N)
    node 2 n2again --rdzv-timeout 30; p2=$launcher
    echo "node 2 started again"
    for p in $p0 $p1 $p2; do wait "$p" || fail "a launcher exited with $?"; done
    grep -q "runs on 3 of 3 nodes (0, 1, 2)" "$scratch/n2again.log" || fail "node 2 did not rejoin"
    "$python" - "$scratch/f.jsonl" "$lost" "$joined" <<'PY' || fail "the log does not show 3 -> 2 -> 3"
import json, sys
log = [json.loads(line) for line in open(sys.argv[1])]
resumes = [r for r in log if r["type"] == "resume"]
sizes = [(r["world_size_from"], r["world_size_to"]) for r in resumes]
print("resumes (world size from, to):", sizes)
assert sizes[0] == (3, 2) and sizes[-1] == (2, 3), sizes
assert [r for r in log if r["type"] == "epoch"][-1]["epoch"] == 2
print(f"training again {resumes[0]['unix_time'] - float(sys.argv[2]):.2f} s after node 2 was lost "
      f"(--rdzv-last-call 1), from step {resumes[0]['step']}, on 2 ranks")
print(f"training again {resumes[-1]['unix_time'] - float(sys.argv[3]):.2f} s after node 2 was "
      f"started again, from step {resumes[-1]['step']}, on 3 ranks")
PY
    no_orphans
    ;;
  short)
    start=$SECONDS
    node 0 n0 --rdzv-timeout 2; p0=$launcher
    wait "$p0"
    code=$?
    [ "$code" -ne 0 ] || fail "exit 0 without enough nodes"
    expected="only 1 of at least 2 nodes (--nnodes 2:3) joined attempt 0 within --rdzv-timeout (2 s); missing: node 1, 2"
    grep -qF "$expected" "$scratch/n0.log" || fail "expected '$expected'"
    [ "$(wc -l <"$scratch/n0.log")" -eq 1 ] || fail "more than one line"
    echo "exit $code after $((SECONDS - start)) s: $(cat "$scratch/n0.log")"
    no_orphans
    ;;
  *) echo "unknown case '$case'"; exit 2 ;;
esac
echo "passed: $case"
