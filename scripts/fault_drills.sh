#!/usr/bin/env bash
# Fault drills: runs a small DDP training job (train_cifar, 2 ranks under tandem-run, synthetic
# data) and breaks it in each way docs/reliability.md lists, timing how long the survivors take
# to exit and with what. Prints one line per drill: what was done, exit status, seconds from the
# fault to the job's exit, and the first error line. Single machine, loopback.
#
#   scripts/fault_drills.sh [BUILD_DIR]     # default ./build
set -uo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
train="$build/apps/train_cifar"
run="$build/apps/tandem-run"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
job=(--synthetic --subset 2048 --batch-size 64 --epochs 50 --workers 1 --no-progress --mode ddp --backend gloo --threads 1)

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { print b - a }'; }
report() {  # drill, status, seconds, log
  printf '%-44s exit %-4s %6.1f s  %s\n' "$1" "$2" "$3" \
    "$(grep -m1 -iE 'error|fail|did not|refus|cannot|no space|stopp' "$4" | cut -c1-150)"
}

# A rank dies (SIGKILL) or stops (SIGSTOP) in the middle of training.
signal_drill() {  # name, signal, extra train_cifar flags...
  local name="$1" sig="$2"; shift 2
  local log="$scratch/$name.log"
  "$run" --nproc-per-node 2 --master-port 0 --kill-grace 5 -- "$train" "${job[@]}" "$@" >"$log" 2>&1 &
  local launcher=$!
  until grep -q "^\[rank 0\] epoch 2/" "$log" 2>/dev/null || ! kill -0 $launcher 2>/dev/null; do
    sleep 0.2
  done
  local victim
  victim="$(pgrep -P $launcher | tail -1)"  # rank 1
  local start; start=$(now)
  kill "-$sig" "$victim"
  wait $launcher; local status=$?
  report "$name" $status "$(since "$start")" "$log"
  kill -CONT "$victim" 2>/dev/null; kill -KILL "$victim" 2>/dev/null
}

signal_drill "rank 1 killed (SIGKILL)" KILL
signal_drill "rank 1 stopped (SIGSTOP), --timeout 10" STOP --timeout 10
signal_drill "rank 1 interrupted (SIGINT)" INT

# The rendezvous port is taken.
python3 -c 'import socket,time; s=socket.socket(); s.bind(("127.0.0.1",29777)); s.listen(); time.sleep(30)' &
holder=$!; sleep 0.5
start=$(now)
"$run" --nproc-per-node 2 --master-port 29777 -- "$train" "${job[@]}" >"$scratch/port.log" 2>&1
report "rendezvous port already in use" $? "$(since "$start")" "$scratch/port.log"
kill $holder 2>/dev/null

# Broken checkpoints on --resume and --eval-only.
"$train" --synthetic --subset 256 --batch-size 64 --epochs 1 --workers 1 --no-progress \
  --save "$scratch/good.ckpt" >/dev/null 2>&1
head -c 5000 "$scratch/good.ckpt" >"$scratch/truncated.ckpt"; cp "$scratch/good.ckpt.state" "$scratch/truncated.ckpt.state"
for kind in corrupt-header corrupt-data; do
  cp "$scratch/good.ckpt" "$scratch/$kind.ckpt"; cp "$scratch/good.ckpt.state" "$scratch/$kind.ckpt.state"
done
printf 'garbage!' | dd of="$scratch/corrupt-header.ckpt" bs=1 seek=20 conv=notrunc 2>/dev/null
printf '\x7f' | dd of="$scratch/corrupt-data.ckpt" bs=1 seek=500000 conv=notrunc 2>/dev/null
head -c 100000 /dev/urandom >"$scratch/foreign.ckpt"; cp "$scratch/good.ckpt.state" "$scratch/foreign.ckpt.state"
for kind in truncated corrupt-header corrupt-data foreign; do
  for flag in --resume --eval-only; do
    start=$(now)
    args=(--synthetic --subset 256 --batch-size 64 --epochs 2 --workers 1 --no-progress --resume "$scratch/$kind.ckpt")
    [ "$flag" = --eval-only ] && args+=(--eval-only)
    "$train" "${args[@]}" >"$scratch/$kind$flag.log" 2>&1
    report "$kind checkpoint, $flag" $? "$(since "$start")" "$scratch/$kind$flag.log"
  done
done
