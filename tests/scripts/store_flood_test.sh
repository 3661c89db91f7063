#!/usr/bin/env bash
# A real job's store under idle connections (review S2, docs/reliability.md "Security: the
# rendezvous store"): a 2-node tandem-run job on loopback, node 0 started first; its store (the
# launcher's, Note [Who hosts the store]) receives idle connections before node 1 arrives, then
# node 1 starts and the two ranks train (train_cifar --mode ddp, Gloo, synthetic data, 2 steps).
#   nofile  node 0 under a hard limit of 1,024 descriptors (prlimit --nofile=1024:1024), 1,100
#           idle connections: the old thread-per-connection server spun its accept loop and rank 1
#           timed out; now node 0's launcher spends no CPU on them and the job trains
#   nproc   node 0 as uid 65534 (root ignores RLIMIT_NPROC) under prlimit --nproc=64:64, 300 idle
#           connections: the old server took a thread each and died in std::terminate at 62; now
#           node 0's launcher stays alive and the job trains. Root and setpriv only; skips otherwise
# Both launchers must exit 0; prints node 0's threads, CPU and memory under the flood.
#
#   store_flood_test.sh BUILD_DIR CASE
set -uo pipefail
build="$(cd "$1" && pwd)" case="$2"
train="$build/apps/train_cifar" run="$build/apps/tandem-run"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python=/usr/bin/python3
scratch="$(mktemp -d)"
trap 'exec 3>&-; pkill -KILL -f "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
fail() { echo "FAILED: $*"; for f in "$scratch"/*.log; do echo "== $f"; tail -12 "$f"; done; exit 1; }
skip() { echo "skipped: $*"; exit 77; }
free_port() {  # a port on loopback nobody listens on now
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

case "$case" in
  nofile) count=1100 limits=(prlimit --nofile=1024:1024 --) limit_line="Max open files *1024 *1024" ;;
  nproc)
    [ "$(id -u)" -eq 0 ] || skip "needs root, to run node 0 as uid 65534 (root ignores RLIMIT_NPROC)"
    command -v setpriv >/dev/null || skip "no setpriv (util-linux) to run node 0 as uid 65534"
    count=300 limits=(prlimit --nproc=64:64 -- setpriv --reuid=65534 --regid=65534 --clear-groups --)
    limit_line="Max processes *64 *64"
    # uid 65534 writes the metrics log here, and must reach the programs.
    chmod 0777 "$scratch"
    setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$run" \
      || skip "uid 65534 cannot run $run (a folder above it is closed to others)"
    # The programs load oneDNN from where the build found it, by default scripts/install_onednn.sh's
    # prefix in the builder's home, which root's is closed to others: uid 65534 gets a copy.
    dnnl="$(ldd "$train" | awk '/libdnnl/ { print $3 }')"
    if [ -n "$dnnl" ] && ! setpriv --reuid=65534 --regid=65534 --clear-groups -- test -r "$dnnl"; then
      { mkdir -p "$scratch/lib" && cp -L "$dnnl" "$scratch/lib/" && chmod -R a+rX "$scratch/lib"; } \
        || fail "cannot copy $dnnl for uid 65534"
      limits=(env LD_LIBRARY_PATH="$scratch/lib" "${limits[@]}")
    fi
    ;;
  *) echo "unknown case '$case'"; exit 2 ;;
esac
command -v prlimit >/dev/null || skip "no prlimit (util-linux)"
cd "$scratch" || fail "cannot enter $scratch"

port="$(free_port)"
TANDEM_JOB_TOKEN="$("$python" -c 'import secrets; print(secrets.token_hex(32))')"
export TANDEM_JOB_TOKEN
# 64 images, a global batch of 32: 2 steps on 2 ranks. --timeout bounds every wait on a peer, so
# a store that keeps node 1 out ends the job with an error instead of a hang.
job=(--mode ddp --backend gloo --synthetic --subset 64 --batch-size 32 --epochs 1 --workers 1
     --threads 1 --no-progress --seed 5 --timeout 20 --log-json "$scratch/job.jsonl")
node() {  # ID [command prefix...]: a launcher in the background; its pid in $launcher
  local id="$1"
  shift
  "$@" "$run" --nnodes 2 --node-rank "$id" --nproc-per-node 1 --master-addr 127.0.0.1 \
    --master-port "$port" --rdzv-timeout 30 --timeout 60 -- "$train" "${job[@]}" \
    >"$scratch/node$id.log" 2>&1 &
  launcher=$!
}

node 0 "${limits[@]}"; n0=$launcher
# The flood holds its connections until fd 3 (the write end of its stdin) closes.
mkfifo "$scratch/hold"
"$python" "$here/idle_connections.py" "$port" "$count" <"$scratch/hold" >"$scratch/flood.log" 2>&1 &
flood=$!
exec 3>"$scratch/hold"
deadline=$((SECONDS + 90))
until grep -q "idle connections open" "$scratch/flood.log"; do
  if ! kill -0 "$flood" 2>/dev/null; then
    wait "$flood"
    [ $? -eq 77 ] && skip "$(cat "$scratch/flood.log")"
    fail "the flood ended early"
  fi
  kill -0 "$n0" 2>/dev/null || fail "node 0's launcher ended before the flood was open"
  [ $SECONDS -lt $deadline ] || fail "the flood was not open within 90 s"
  sleep 0.05
done
cat "$scratch/flood.log"

# Node 0's launcher under the flood: alive, under the limit, its threads, resident memory, CPU
# spent in 1 s.
kill -0 "$n0" 2>/dev/null || fail "node 0's launcher died under the flood"
grep -q "^$limit_line" "/proc/$n0/limits" || fail "node 0's launcher is not under '$limit_line'"
if [ "$case" = nproc ]; then
  grep -qE "^Uid:\s+65534\s" "/proc/$n0/status" || fail "node 0's launcher does not run as uid 65534"
fi
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$n0/stat"; }
before=$(cpu_ticks)
sleep 1
spent=$(awk -v a="$before" -v b="$(cpu_ticks)" -v hz="$(getconf CLK_TCK)" \
  'BEGIN { printf "%.2f", (b - a) / hz }')
threads=$(awk '/^Threads:/ { print $2 }' "/proc/$n0/status")
rss=$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$n0/status")
echo "node 0's launcher under $count idle connections: $threads threads, $rss MB resident, $spent s of CPU in 1 s"
awk -v s="$spent" 'BEGIN { exit !(s < 0.5) }' || fail "node 0's launcher spun: $spent s of CPU in 1 s"

start=$SECONDS
node 1; n1=$launcher
wait "$n1" || fail "node 1's launcher exited with $?"
wait "$n0" || fail "node 0's launcher exited with $?"
exec 3>&-
wait "$flood"
grep -q '"type":"epoch".*"world_size":2' "$scratch/job.jsonl" || fail "no epoch trained on 2 ranks"
echo "node 1 joined and the job trained; both launchers exited 0, $((SECONDS - start)) s after node 1 started"
echo "passed: $case"
