#!/usr/bin/env bash
# A DDP job that survives its faults (docs/reliability.md, "Faults survived"): 2 ranks of
# train_cifar --mode ddp (Gloo, synthetic data, 3 epochs of 32 steps) with --save-every-steps 4
# and --resume auto under a restarting launcher, hit by faults; it must exit 0 with a final
# checkpoint bit-identical (weights, buffers, momentum) to the same job run without faults.
#   kill      tandem-run --max-restarts 3: a random rank SIGKILLed at 3 random moments
#   stop      tandem-run --max-restarts 3: a random rank SIGSTOPped once; the other times out
#             (--timeout 4), tandem-run SIGKILLs the stopped one after --kill-grace and restarts
#   uneven    as kill, twice, on 2049 images: the ranks' shares differ by one batch and train under
#             parallel::Join, where saves stop once a rank could have joined
#   ranks3    3 ranks, gradient buckets of 0.05 MiB (--first-bucket-mb/--bucket-cap-mb), 480 images
#   ranks4    and 1 epoch of 10 steps: a random rank SIGKILLed just after the first mid-epoch save,
#             so the job resumes in the middle of an epoch; 3+ ranks add up a gradient in an order
#             that depends on its place in its bucket (Note [Bucket order on resume])
#   zero2     as ranks3 on 2 ranks at ZeRO stage 2 (--zero 2, Note [Sharded data parallel]): each
#             rank holds only its shard of the gradients and momentum, which rank 0 gathers into
#             each save and every rank takes its part of again on the restart
#   zero3     as zero2 at ZeRO stage 3 (--zero 3, Note [Stage 3 units]): the parameters sharded
#             too, gathered on every rank for each save
#   giveup    tandem-run --max-restarts 1, killed twice: the job ends non-zero with one line
#             naming the restarts used
#   torchrun  PyTorch's torchrun --max_restarts 3 (its TORCHELASTIC_RESTART_COUNT and per-attempt
#             store keys), a rank SIGKILLed twice (skips without PyTorch)
# Prints, per fault, how long after it the job was training again and from which step.
#
#   fault_restart_test.sh BUILD_DIR CASE [SEED]
set -uo pipefail
build="$1" case="$2" seed="${3:-$RANDOM}"
train="$build/apps/train_cifar" run="$build/apps/tandem-run"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python=/usr/bin/python3
RANDOM=$seed
echo "seed $seed (rerun: $0 $build $case $seed)"

scratch="$(mktemp -d)"
trap 'pkill -KILL -f "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
fail() { echo "FAILED: $*"; for f in "$scratch"/*.log; do echo "== $f"; tail -12 "$f"; done; exit 1; }

images=2048 nproc=2
[ "$case" = uneven ] && images=2049
job=(--mode ddp --backend gloo --synthetic --subset "$images" --batch-size 64 --epochs 3 --workers 1
     --threads 1 --no-progress --seed 5 --lr 0.05 --timeout 4)
if [ "$case" = ranks3 ] || [ "$case" = ranks4 ] || [ "$case" = zero2 ] || [ "$case" = zero3 ]; then
  nproc="${case#ranks}"
  case "$case" in zero*) nproc=2 ;; esac
  job=(--mode ddp --backend gloo --synthetic --subset 480 --batch-size 48 --epochs 1 --workers 1
       --threads 1 --no-progress --seed 5 --lr 0.05 --timeout 10 --first-bucket-mb 0.05
       --bucket-cap-mb 0.05)
  case "$case" in zero*) job+=(--zero "${case#zero}") ;; esac
fi

now() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# The fault-free job, under the same launcher as the faulty one.
clean_start=$(now)
timeout 300 "$run" --nproc-per-node "$nproc" --master-port 0 -- "$train" "${job[@]}" --save "$scratch/clean.ckpt" \
  --log-json "$scratch/clean.jsonl" \
  >"$scratch/clean.log" 2>&1 || fail "the fault-free job exited with $?"
clean_seconds=$(seconds_since "$clean_start")

launcher_pid=""
faulty() {  # launcher command... (its workers save to $scratch/f.ckpt); runs in the background
  faulty_start=$(now)
  "$@" "$train" "${job[@]}" --save "$scratch/f.ckpt" --save-every-steps 4 --resume auto \
    --log-json "$scratch/f.jsonl" >"$scratch/faulty.log" 2>&1 &
  launcher_pid=$!
}

# The faulty job's worker processes, whichever launcher started them.
workers() { pgrep -f "^$train .*$scratch/f.ckpt" | sort; }

# Waits until the launcher runs workers other than `$1` (the last attempt's), then a random
# 1.0–2.5 s into the attempt, and sends `$2` to one of them at random.
hit_a_rank() {
  local old="$1" sig="$2" deadline=$((SECONDS + 60)) now
  while [ $SECONDS -lt $deadline ]; do
    now="$(workers)"
    [ "$(wc -w <<<"$now")" -eq "$nproc" ] && [ "$now" != "$old" ] && break
    kill -0 "$launcher_pid" 2>/dev/null || fail "the launcher exited before fault $fault_count"
    sleep 0.05
  done
  local tenths=$((RANDOM % 16 + 10))
  sleep "$((tenths / 10)).$((tenths % 10))"
  victim="$(workers | shuf -n 1 --random-source=<(yes "$RANDOM"))"
  [ -n "$victim" ] || fail "no worker to hit"
  fault_count=$((fault_count + 1))
  date +%s.%N >>"$scratch/fault_times"
  kill "-$sig" "$victim"
  echo "fault $fault_count: SIG$sig to worker pid $victim"
  last_workers="$now"
}

expect_same_result() {
  wait "$launcher_pid"
  local code=$?
  [ "$code" -eq 0 ] || fail "the faulty job exited with $code"
  echo "fault-free job ${clean_seconds} s, the job with $fault_count faults $(seconds_since "$faulty_start") s"
  "$python" "$here/same_weights.py" "$scratch/clean.ckpt" "$scratch/f.ckpt" \
    || fail "the final checkpoint differs from the fault-free job's"
  report_recoveries
}

# For each fault: when training began again (the next resume record of rank 0's log) and from
# which step, and the steps redone: those begun between the checkpoint resumed from and the
# fault, estimated from the time between them and the fault-free job's time per step, at most
# the 4 steps to the next save (time beyond went to evaluating at the epoch's end).
report_recoveries() {
  "$python" - "$scratch/fault_times" "$scratch/f.jsonl" "$scratch/clean.jsonl" <<'PY'
import json, math, sys
faults = [float(t) for t in open(sys.argv[1])]
log = [json.loads(line) for line in open(sys.argv[2])]
clean = [r for r in map(json.loads, open(sys.argv[3])) if r["type"] == "epoch"]
step_seconds = sum(r["seconds"] for r in clean) / clean[-1]["step"]
for i, t in enumerate(faults):
    resume = next((r for r in log if r["type"] == "resume" and r["unix_time"] > t), None)
    if resume is None:
        continue
    saved = [r for r in log if r["type"] == "checkpoint" and r["unix_time"] < t
             and r["step"] == resume["step"]]
    redone = min(4, math.ceil((t - saved[-1]["unix_time"]) / step_seconds)) if saved else "?"
    print(f"fault {i + 1}: training again {resume['unix_time'] - t:.2f} s later, from step "
          f"{resume['step']} (epoch {resume['epoch'] + 1}, batch {resume['batch']}), attempt "
          f"{resume['attempt']}; about {redone} steps redone ({step_seconds:.3f} s a step)")
PY
}

fault_count=0 last_workers=""
case "$case" in
  kill)
    faulty timeout 300 "$run" --nproc-per-node 2 --master-port 0 --max-restarts 3 --kill-grace 2 --
    for _ in 1 2 3; do hit_a_rank "$last_workers" KILL; done
    expect_same_result
    restarts=$(grep -c "restarting all workers" "$scratch/faulty.log")
    [ "$restarts" -eq 3 ] || fail "expected 3 restarts, saw $restarts"
    ;;
  uneven)
    faulty timeout 300 "$run" --nproc-per-node 2 --master-port 0 --max-restarts 3 --kill-grace 2 --
    for _ in 1 2; do hit_a_rank "$last_workers" KILL; done
    expect_same_result
    grep -q "uneven shares joined" "$scratch/faulty.log" || fail "the shares were not uneven"
    ;;
  stop)
    faulty timeout 300 "$run" --nproc-per-node 2 --master-port 0 --max-restarts 3 --kill-grace 2 --
    hit_a_rank "" STOP
    expect_same_result
    # The survivor's collective (or the barrier of a save) gives up after --timeout.
    grep -qE "within 4 s|Timed out waiting 4000ms" "$scratch/faulty.log" || fail "the survivor did not time out on the stopped rank"
    grep -q "restarting all workers" "$scratch/faulty.log" || fail "tandem-run did not restart"
    grep -h -m1 -E "within 4 s|Timed out waiting 4000ms" "$scratch/faulty.log" | cut -c1-240
    ;;
  ranks3|ranks4|zero2|zero3)
    faulty timeout 300 "$run" --nproc-per-node "$nproc" --master-port 0 --max-restarts 1 --kill-grace 2 --
    deadline=$((SECONDS + 120))
    until [ -e "$scratch/f.ckpt.state" ]; do
      [ $SECONDS -lt $deadline ] && kill -0 "$launcher_pid" 2>/dev/null || fail "no first save"
      sleep 0.02
    done
    victim="$(workers | shuf -n 1 --random-source=<(yes "$RANDOM"))"
    fault_count=1
    date +%s.%N >>"$scratch/fault_times"
    kill -KILL "$victim"
    echo "fault 1: SIGKILL to worker pid $victim just after the first save"
    expect_same_result
    "$python" -c 'import json, sys; sys.exit(not any(r["type"] == "resume" and r["batch"] > 0
                  for r in map(json.loads, open(sys.argv[1]))))' "$scratch/f.jsonl" \
      || fail "the job did not resume in the middle of an epoch"
    ;;
  giveup)
    faulty timeout 300 "$run" --nproc-per-node 2 --master-port 0 --max-restarts 1 --kill-grace 2 --
    hit_a_rank "" KILL
    hit_a_rank "$last_workers" KILL
    wait "$launcher_pid"
    code=$?
    [ "$code" -ne 0 ] || fail "the job exited 0 after more faults than --max-restarts"
    [ "$(grep -c "gave up after 1 restart (--max-restarts 1)" "$scratch/faulty.log")" -eq 1 ] \
      || fail "expected one 'gave up after 1 restart' line"
    echo "exit $code: $(grep "gave up" "$scratch/faulty.log")"
    ;;
  torchrun)
    "$python" -c 'import torch.distributed.run' 2>/dev/null || { echo "skipped: no PyTorch (python3-torch) for torchrun"; exit 77; }
    port="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    # --redirects/--tee 1: see torchrun_ddp_test.sh (torchrun 1.13 under Python 3.11).
    faulty timeout 300 "$python" -m torch.distributed.run --master_port "$port" --nproc_per_node 2 \
      --max_restarts 3 --redirects 1 --tee 1 --log_dir "$scratch/torchrun-logs" --no_python
    for _ in 1 2; do hit_a_rank "$last_workers" KILL; done
    expect_same_result
    ;;
  *) echo "unknown case '$case'"; exit 2 ;;
esac
echo "passed: $case"
