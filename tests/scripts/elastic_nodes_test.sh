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
#   forming a node lost while a round forms (Note [Members confirm]): nodes 0 and 2 join, node 2's
#           launcher is SIGKILLed during the last call. Two jobs at once: (a) node 0 alone left,
#           so MIN is not reached: one line, a non-zero exit, no worker started; (b) node 1
#           starts as node 2 dies: the round sealed with node 2 is closed when node 2 does not
#           confirm it, and nodes 0 and 1 run the next one (workers: a shell printing the world
#           size), both exit 0
#   bound   a run that shrinks from 3 to 2 ranks ends, 4 steps on, within a stated bound of the
#           undisturbed 2-rank run resumed from the same checkpoint (the bound, why, and why
#           only over a few steps: below)
#   torchrun PyTorch 1.13's torchrun --nnodes 1:3 --rdzv_backend c10d --max_restarts 3: two
#           agents on loopback, one worker each; agent 1 and its worker SIGKILLed just after the
#           first mid-epoch save (a machine lost); agent 0 finishes the run on 1 rank, the log
#           shows 2 -> 1 (skips without PyTorch)
# Prints how long after the loss the job was training again (rank 0's resume record).
#
#   elastic_nodes_test.sh BUILD_DIR CASE
set -uo pipefail
build="$1" case="$2"
train="$build/apps/train_cifar" run="$build/apps/tandem-run"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python=/usr/bin/python3
scratch="$(mktemp -d)"
trap 'pkill -KILL -f "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
fail() { echo "FAILED: $*"; for f in "$scratch"/*.log; do echo "== $f"; tail -15 "$f"; done; exit 1; }
free_port() {  # a port on loopback nobody listens on now
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port="$(free_port)"
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
  forming)
    start=$SECONDS
    # Every launcher's command line names $scratch, so pgrep finds what is left of either job.
    # shellcheck disable=SC2016 # the workers' shell expands RANK and WORLD_SIZE
    elastic() {  # PORT ID LOGNAME RDZV_TIMEOUT: a launcher whose workers only print; pid in $launcher
      "$run" --nnodes 2:3 --node-rank "$2" --nproc-per-node 1 --master-port "$1" --max-restarts 3 \
        --rdzv-last-call 2 --rdzv-timeout "$4" -- /bin/sh -c 'echo "rank $RANK of $WORLD_SIZE"' \
        "$scratch" >"$scratch/$3.log" 2>&1 &
      launcher=$!
    }
    port_b="$(free_port)"
    elastic "$port" 0 a0 4; a0=$launcher
    elastic "$port" 2 a2 4; a2=$launcher
    elastic "$port_b" 0 b0 60; b0=$launcher
    elastic "$port_b" 2 b2 60; b2=$launcher
    # Node 2 takes its ticket right after it connects to the store: kill it then, inside the
    # last call (2 s from the second node's ticket), so it joined a round not yet sealed.
    for pid_port in "$a2 $port" "$b2 $port_b"; do
      deadline=$((SECONDS + 60))
      # shellcheck disable=SC2086 # two words: the pid and the port
      until "$python" "$here/connected_to.py" $pid_port; do
        [ $SECONDS -lt $deadline ] || fail "node 2 never reached the store"
        sleep 0.05
      done
    done
    sleep 0.3
    kill -KILL "$a2" "$b2"
    elastic "$port_b" 1 b1 60; b1=$launcher
    wait "$a2" "$b2" 2>/dev/null
    wait "$a0" && fail "job (a): exit 0 without enough nodes"
    expected="only 1 of at least 2 nodes (--nnodes 2:3) joined attempt 1 within --rdzv-timeout (4 s); missing: node 1, 2"
    grep -qF "$expected" "$scratch/a0.log" || fail "job (a): expected '$expected'"
    [ "$(wc -l <"$scratch/a0.log")" -eq 1 ] || fail "job (a): more than one line"
    echo "job (a) ended after $((SECONDS - start)) s: $(cat "$scratch/a0.log")"
    wait "$b0" || fail "job (b): node 0 exited with $?"
    wait "$b1" || fail "job (b): node 1 exited with $?"
    for log in b0 b1; do
      grep -q "attempt 1 runs on 2 of 3 nodes (0, 1)" "$scratch/$log.log" || fail "job (b): $log"
      grep -q "rank [01] of 2$" "$scratch/$log.log" || fail "job (b): $log's worker"
    done
    echo "job (b) ran attempt 1 on nodes 0 and 1 after $((SECONDS - start)) s"
    ! pgrep -f "$scratch" >/dev/null || fail "processes left running"
    ;;
  bound)
    # From checkpoint C (epoch 1 on 3 ranks), run A trains epoch 2 on 3 ranks and epoch 3 on 2
    # (the shrink, resumed at another world size); run B trains epochs 2-3 on 2 ranks. Two steps
    # of 48 images an epoch. With --sync-bn both compute the same function of the same global
    # batches (the same images and augmentations in each step, the same learning rates; the batch
    # statistics global): they differ only in float32 summation order, the all-reduce adding 3
    # partial sums instead of 2, each over 16 instead of 24 images. That rounding (~1e-7) is
    # magnified by cancellation in the sums of the batch-norm parameters' gradients (after one
    # step the momentum differs by 0.2% of its change, alike between 1 and 2 ranks), then by
    # training itself, about twofold a step (weights: 9e-6 after 1 step, 1e-4 after 4, 2.6e-3
    # after 8). Measured here (2 vCPU Intel Xeon, AVX-512): ||A - B|| = 1.0e-4 of how far B
    # moved from C for the weights and buffers, 2.6e-2 for the momentum. The bounds, 1e-3 and
    # 0.1, leave 10x and 4x for other CPUs' kernels, which round differently; plain BatchNorm
    # (per-rank statistics: another function at each world size) gives 4.4e-2 and 0.54, so the
    # bounds fail on a difference in the math, not only on rounding. They hold over these 2 + 2
    # steps only: training goes on magnifying the rounding (measured on this job: 5.2e-3 after
    # 2 + 6 steps, 3.4e-2 after 10 + 6, 2.3 after 40 + 40), so over a long run no bound on the
    # weights holds (docs/reliability.md).
    job=(--mode ddp --backend gloo --synthetic --subset 96 --batch-size 48 --epochs 3 --workers 1
         --threads 1 --no-progress --seed 5 --lr 0.05 --sync-bn)
    "$train" "${job[@]}" --nproc 3 --run-epochs 1 --save "$scratch/c.ckpt" >"$scratch/c.log" 2>&1 \
      || fail "checkpoint C: exit $?"
    for run in a b; do
      cp "$scratch/c.ckpt" "$scratch/$run.ckpt" && cp "$scratch/c.ckpt.state" "$scratch/$run.ckpt.state"
    done
    resume() {  # RUN NPROC [flags...]: resumes RUN's checkpoint on NPROC ranks
      "$train" "${job[@]}" --nproc "$2" --save "$scratch/$1.ckpt" --resume auto \
        --log-json "$scratch/$1.jsonl" "${@:3}" >>"$scratch/$1.log" 2>&1
    }
    resume a 3 --run-epochs 1 & a=$!
    resume b 2 || fail "run B: exit $?"
    wait "$a" || fail "run A on 3 ranks: exit $?"
    resume a 2 || fail "run A on 2 ranks: exit $?"
    grep -q '"world_size_from":3,"world_size_to":2' "$scratch/a.jsonl" || fail "run A did not shrink"
    "$python" "$here/same_weights.py" "$scratch/a.ckpt" "$scratch/b.ckpt" --from "$scratch/c.ckpt" \
      --within 1e-3 0.1 || fail "run A is not within the bound of run B"
    ;;
  torchrun)
    "$python" -c 'import torch.distributed.run' 2>/dev/null || { echo "skipped: no PyTorch (python3-torch) for torchrun"; exit 77; }
    # is_host: agent 0 hosts the c10d store (both would claim it on loopback); last_call_timeout
    # 2: the first round waits 2 s for a second agent (30 s by default). --redirects/--tee 1: see
    # torchrun_ddp_test.sh. --monitor_interval 1: the agent looks at its worker every second.
    agent() {  # ID IS_HOST: a torchrun agent in the background; its pid in $launcher
      "$python" -m torch.distributed.run --nnodes 1:3 --nproc_per_node 1 --rdzv_backend c10d \
        --rdzv_endpoint "127.0.0.1:$port" --rdzv_id "elastic$port" \
        --rdzv_conf "is_host=$2,last_call_timeout=2" --max_restarts 3 --monitor_interval 1 \
        --redirects 1 --tee 1 --log_dir "$scratch/logs$1" --no_python "$train" "${job[@]}" \
        >"$scratch/a$1.log" 2>&1 &
      launcher=$!
    }
    job+=(--epochs 1)  # the last --epochs counts: one epoch, torchrun's keep-alive costs enough
    start=$SECONDS
    agent 0 true; a0=$launcher
    agent 1 false; a1=$launcher
    # A save by the two (on a loaded machine the first round may form with agent 0 alone).
    wait_for "$scratch/a0.log" "mode ddp on 2 ranks"
    saves() { local n; n=$(grep -c '"type":"checkpoint"' "$scratch/f.jsonl" 2>/dev/null); echo "${n:-0}"; }
    before=$(saves) deadline=$((SECONDS + 120))
    until [ "$(saves)" -gt "$before" ]; do
      [ $SECONDS -lt $deadline ] || fail "no save on 2 ranks"
      sleep 0.02
    done
    # A machine lost: the agent and its worker at once (the worker alone would be restarted).
    worker1=$(pgrep -P "$a1")
    kill -KILL "$a1" "$worker1"
    lost=$(date +%s.%N)
    wait "$a1" 2>/dev/null
    echo "agent 1 and its worker SIGKILLed at $((SECONDS - start)) s"
    wait "$a0" || fail "agent 0 exited with $?"
    echo "agent 0 done at $((SECONDS - start)) s"
    "$python" - "$scratch/f.jsonl" "$lost" <<'PY' || fail "the log does not show 2 -> 1"
import json, sys
log = [json.loads(line) for line in open(sys.argv[1])]
resumes = [r for r in log if r["type"] == "resume"]
sizes = [(r["world_size_from"], r["world_size_to"]) for r in resumes]
print("resumes (world size from, to):", sizes)
assert sizes[-1] == (2, 1), sizes
epochs = [r for r in log if r["type"] == "epoch"]
assert epochs[-1]["epoch"] == 1 and epochs[-1]["world_size"] == 1, epochs[-1]
print(f"training again {resumes[0]['unix_time'] - float(sys.argv[2]):.2f} s after agent 1 was "
      f"lost (torchrun's keep-alive: 10-15 s, then last call 2 s), from step {resumes[0]['step']}")
PY
    no_orphans
    ;;
  *) echo "unknown case '$case'"; exit 2 ;;
esac
echo "passed: $case"
