#!/usr/bin/env bash
# DDP launched by Slurm's srun on a one-node cluster (scripts/slurm_cluster.sh): the job trains,
# its per-epoch losses and accuracies equal those of the same job started as `--nproc 2` (same
# seed, same world size, same numbers), and each srun rank took cores ÷ 2 threads, as
# parallel/comm/rendezvous/launch_env.cpp derives from SLURM_TASKS_PER_NODE when nothing else sets them.
# Needs root (it installs and starts Slurm); skips with exit 77 and the reason when it cannot have
# a cluster. Stops the cluster at the end only when it was not already up before the test.
# Then the restart pattern of docs/reliability.md: `srun` in a loop with --save-every-steps and
# --resume auto, one task SIGKILLed during the first attempt; the next srun resumes and the job
# ends with a checkpoint bit-identical to the fault-free --nproc 2 job's.
#
#   slurm_ddp_test.sh BUILD_DIR
set -uo pipefail
build="$(cd "$1" && pwd)"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cluster="$root/scripts/slurm_cluster.sh"
train="$build/apps/train_cifar"
export PATH="$PATH:/usr/sbin:/sbin"
t0=$SECONDS

skip() { echo "skipped: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root to install and start Slurm"
[ -x "$train" ] || { echo "FAILED: $train is missing (build the train_cifar target)"; exit 1; }

scratch="$(mktemp -d)"
job_name="tandem-ddp-$$"
we_started=0
cleanup() {
  # A step cut off by `timeout` could leave its tasks behind: cancel this test's job by name.
  command -v scancel >/dev/null && scancel --name "$job_name" >/dev/null 2>&1
  [ $we_started -eq 1 ] && timeout 60 bash "$cluster" stop >/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT

# Leave a cluster that someone already runs as it is; otherwise start one and stop it afterwards.
if ! timeout 30 bash "$cluster" status >/dev/null 2>&1; then
  we_started=1
  out="$(timeout 400 bash "$cluster" start 2>&1)" || skip "no Slurm cluster: $(tail -n 1 <<<"$out")"
fi

fail() {
  echo "FAILED: $*"
  for f in "$scratch"/*; do echo "== $f"; tail -n 8 "$f"; done
  echo "== /var/log/slurm/slurmd.log"; tail -n 5 /var/log/slurm/slurmd.log 2>/dev/null
  exit 1
}

# Any free port: srun does not pick one, the ranks only need to agree on it.
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null)"
[ -n "$port" ] || port=$(( 29500 + $$ % 2000 ))
export MASTER_ADDR=127.0.0.1 MASTER_PORT="$port"

base=(--mode ddp --backend gloo --synthetic --subset 1024 --workers 0 --no-progress --seed 3)
job=("${base[@]}" --epochs 1)
# --kill-on-bad-exit: a rank that dies takes the other down instead of leaving it waiting.
timeout 150 srun --job-name "$job_name" --ntasks 2 --time 5 --kill-on-bad-exit=1 \
  "$train" "${job[@]}" --log-json "$scratch/srun.jsonl" >"$scratch/srun.log" 2>&1 \
  || fail "srun --ntasks 2 train_cifar exited $?"
timeout 150 "$train" "${job[@]}" --nproc 2 --log-json "$scratch/nproc.jsonl" >"$scratch/nproc.log" 2>&1 \
  || fail "train_cifar --nproc 2 exited $?"

# The records without their timings: what is left must be equal to the last bit.
numbers_of() { sed 's/"images_per_second":[^,]*,//; s/"seconds":[^,]*,//; s/"train_seconds":[^,]*,//' "$1"; }
[ -s "$scratch/srun.jsonl" ] || fail "srun's job wrote no --log-json records"
[ "$(numbers_of "$scratch/srun.jsonl")" = "$(numbers_of "$scratch/nproc.jsonl")" ] \
  || fail "the logs differ: srun $(numbers_of "$scratch/srun.jsonl") / --nproc 2 $(numbers_of "$scratch/nproc.jsonl")"

# Only rank 0 prints the header ("..., N threads, ..."). The other rank decides from the same
# inputs (SLURM_TASKS_PER_NODE or SLURM_NTASKS_PER_NODE, and the node's cores), checked below.
expected=$(( $(nproc) / 2 )); [ $expected -ge 1 ] || expected=1
threads="$(grep -m1 -oE '[0-9]+ threads?,' "$scratch/srun.log" | cut -d' ' -f1)"
[ "$threads" = "$expected" ] \
  || fail "under srun rank 0 took '${threads:-?}' threads, expected $expected ($(nproc) cores ÷ 2 tasks)"
# shellcheck disable=SC2016  # expanded by each task, not here
seen="$(timeout 60 srun --job-name "$job_name" --ntasks 2 --time 1 \
  sh -c 'echo "${SLURM_NTASKS_PER_NODE:-${SLURM_TASKS_PER_NODE:-?}} $(nproc)"' 2>&1 | sort -u)"
[ "$seen" = "2 $(nproc)" ] || fail "srun tasks see tasks-on-node and cores '$seen', expected '2 $(nproc)' in both"

echo "srun --ntasks 2 = train_cifar --nproc 2 ($expected threads per rank of $(nproc) cores, $((SECONDS - t0)) s):"
grep '"type":"epoch"' "$scratch/srun.jsonl" | grep -o '"\(train\|test\)_\(loss\|accuracy\)":[^,}]*' | paste -sd' '

# Restarts under Slurm: srun in a loop (docs/reliability.md), a task killed in the first attempt.
saving=(--epochs 3 --save-every-steps 2 --resume auto)
timeout 150 "$train" "${base[@]}" --epochs 3 --nproc 2 --save "$scratch/clean.ckpt" >"$scratch/clean.log" 2>&1 \
  || fail "the fault-free --nproc 2 job exited $?"
( sleep 3; pkill -KILL -f "^$train .*$scratch/loop.ckpt" -n ) &
killer=$!
attempts=0
for _ in 0 1 2 3; do
  attempts=$((attempts + 1))
  timeout 150 srun --job-name "$job_name" --ntasks 2 --time 5 --kill-on-bad-exit=1 \
    "$train" "${base[@]}" "${saving[@]}" --save "$scratch/loop.ckpt" >>"$scratch/loop.log" 2>&1 && break
done
wait $killer
[ $attempts -ge 2 ] || fail "the killed task did not fail the first srun (it ended before the kill?)"
[ $attempts -le 3 ] || fail "srun failed $attempts times"
python3 "$(dirname "${BASH_SOURCE[0]}")/same_weights.py" "$scratch/clean.ckpt" "$scratch/loop.ckpt" \
  || fail "the restarted srun job's checkpoint differs from the fault-free job's"
echo "srun in a loop: $attempts attempts, $(grep -m1 "resuming" "$scratch/loop.log" | cut -c1-120)"
