#!/usr/bin/env bash
# DDP across a real network interface: two network namespaces ("hosts") joined by a veth pair,
# tandem-run --nnodes 2 started once in each, train_cifar --mode ddp over Gloo between them.
#   train   the job trains, and its per-epoch losses and accuracies equal those of the same job
#           as 2 ranks on one host (loopback): same seed, same global batch, same numbers
#   link    the link is taken down mid-run: both sides exit non-zero with a one-line error within
#           the collective timeout (--timeout 8) plus tandem-run's grace
#   kill    node 1 dies (its tandem-run and worker SIGKILLed, like a host that fails): node 0
#           exits non-zero within seconds
#   stop    node 1's worker is stopped (SIGSTOP): node 0 exits non-zero within --timeout plus
#           grace; once continued (SIGCONT) node 1 finds its peer gone and exits non-zero too
#   nnodes  node 1 is started with a wrong --nnodes 3: both sides exit non-zero, no hang
# Needs root and `ip netns` (skips with exit 77 and the reason otherwise). Names and addresses
# are unique per run (10.77.x.1/2), and everything is removed on exit.
#
#   netns_ddp_test.sh BUILD_DIR CASE     (CASE: train, link, kill, stop, nnodes)
set -uo pipefail
build="$1" case="$2"
train="$build/apps/train_cifar" run="$build/apps/tandem-run"

skip() { echo "skipped: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "no 'ip' command (iproute2)"
tag="t$$"
a="${tag}a" b="${tag}b"
subnet=$(( $$ % 200 + 20 ))
ip netns add "$a" 2>/dev/null || skip "ip netns add failed (no CAP_SYS_ADMIN, or no netns support)"
scratch="$(mktemp -d)"
cleanup() {
  pkill -KILL -f "$scratch" 2>/dev/null
  ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT
ip netns add "$b"
ip link add "${tag}x" type veth peer name "${tag}y"
ip link set "${tag}x" netns "$a"; ip link set "${tag}y" netns "$b"
ip -n "$a" addr add "10.77.$subnet.1/24" dev "${tag}x"; ip -n "$b" addr add "10.77.$subnet.2/24" dev "${tag}y"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "${tag}x" up; ip -n "$b" link set "${tag}y" up
master="10.77.$subnet.1"

job=(--synthetic --subset 512 --batch-size 64 --workers 1 --no-progress --mode ddp --threads 1 --seed 3)
fail() { echo "FAILED: $*"; for f in "$scratch"/*.log; do echo "== $f"; tail -5 "$f"; done; exit 1; }

nnodes=2
start_node() {  # namespace, node rank, interface, log, extra train_cifar flags...
  local ns="$1" node="$2" iface="$3" log="$4"; shift 4
  ip netns exec "$ns" env GLOO_SOCKET_IFNAME="$iface" "$run" --nnodes "$nnodes" --node-rank "$node" \
    --nproc-per-node 1 --master-addr "$master" --master-port 29611 --kill-grace 3 -- \
    "$train" "${job[@]}" "$@" >"$log" 2>&1 &
}

# Waits for `pid` at most `seconds`; sets status (124 when it had to be killed: a hang).
wait_bounded() {
  local pid="$1" ticks=$(( $2 * 5 ))
  while kill -0 "$pid" 2>/dev/null && [ $ticks -gt 0 ]; do sleep 0.2; ticks=$(( ticks - 1 )); done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"; wait "$pid"; status=124; return
  fi
  wait "$pid"; status=$?
}

epochs_of() { grep '"type":"epoch"' "$1" | sed 's/"images_per_second":[^,]*,//; s/"seconds":[^,]*,//'; }

case "$case" in
  train)
    start_node "$a" 0 "${tag}x" "$scratch/a.log" --epochs 2 --log-json "$scratch/net.jsonl"
    pa=$!
    start_node "$b" 1 "${tag}y" "$scratch/b.log" --epochs 2
    pb=$!
    wait $pa || fail "node 0 exited $?"
    wait $pb || fail "node 1 exited $?"
    "$train" "${job[@]}" --epochs 2 --nproc 2 --log-json "$scratch/local.jsonl" >"$scratch/local.log" 2>&1 \
      || fail "the loopback run failed"
    [ "$(epochs_of "$scratch/net.jsonl")" = "$(epochs_of "$scratch/local.jsonl")" ] \
      || fail "across hosts: $(epochs_of "$scratch/net.jsonl") / one host: $(epochs_of "$scratch/local.jsonl")"
    echo "2 hosts over ${tag}x/${tag}y = 2 ranks on loopback:"; epochs_of "$scratch/net.jsonl"
    ;;
  link|kill|stop)
    start_node "$a" 0 "${tag}x" "$scratch/a.log" --epochs 100 --timeout 8
    pa=$!
    start_node "$b" 1 "${tag}y" "$scratch/b.log" --epochs 100 --timeout 8
    pb=$!
    until grep -q "epoch 2/" "$scratch/a.log" 2>/dev/null; do
      kill -0 $pa 2>/dev/null || fail "node 0 ended before the fault"
      sleep 0.2
    done
    t0=$(date +%s.%N)
    worker_b="$(pgrep -P $pb -f train_cifar | head -1)"
    case "$case" in
      link) ip -n "$a" link set "${tag}x" down ;;
      kill) kill -KILL $pb ;;  # node 1's tandem-run; its worker dies with it (PR_SET_PDEATHSIG)
      stop) kill -STOP "$worker_b" ;;
    esac
    wait_bounded $pa 60
    [ $status -ne 0 ] || fail "node 0 exited 0 after the fault"
    [ $status -ne 124 ] || fail "node 0 was still running 60 s after the fault (hang)"
    [ "$case" = stop ] && kill -CONT "$worker_b"
    wait_bounded $pb 60
    [ $status -ne 0 ] || fail "node 1 exited 0 after the fault"
    [ $status -ne 124 ] || fail "node 1 was still running 60 s after the fault (hang)"
    elapsed=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    echo "$case: both nodes exited non-zero $elapsed s after the fault"
    grep -h -m1 -E "error|stopping" "$scratch/a.log" "$scratch/b.log" | cut -c1-200
    ;;
  nnodes)
    start_node "$a" 0 "${tag}x" "$scratch/a.log" --epochs 1 --timeout 8
    pa=$!
    nnodes=3 start_node "$b" 1 "${tag}y" "$scratch/b.log" --epochs 1 --timeout 8
    pb=$!
    t0=$(date +%s.%N)
    for p in $pa $pb; do
      wait_bounded $p 60
      [ $status -ne 0 ] || fail "a node exited 0 with mismatched --nnodes"
      [ $status -ne 124 ] || fail "a node was still running after 60 s (hang)"
    done
    elapsed=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    echo "nnodes: both nodes exited non-zero after $elapsed s"
    grep -h -m1 -iE "error|mismatch|stopping" "$scratch/a.log" "$scratch/b.log" | cut -c1-200
    ;;
  *) echo "unknown case $case"; exit 2 ;;
esac
