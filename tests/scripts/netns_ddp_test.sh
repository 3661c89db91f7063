#!/usr/bin/env bash
# DDP across a real network interface: two network namespaces ("hosts") joined by a veth pair,
# tandem-run --nnodes 2 started once in each, train_cifar --mode ddp over Gloo between them.
#   train   with no interface variables the job trains, and its per-epoch losses and accuracies
#           equal those of the same job as 2 ranks on one host (loopback): same seed, same
#           global batch, same numbers. Where the host name resolves to loopback (as in many
#           containers), each node must say it uses its address towards the store instead
#           (Note [Gloo address])
#   iface   GLOO_SOCKET_IFNAME set to each node's interface: the job trains (explicit wins)
#   torchrun  the same job started by PyTorch's torchrun on each host (its agent on node 0 hosts
#           PyTorch's TCPStore; Tandem's ranks are clients), no interface variables: equal
#           numbers again (skips without PyTorch)
#   tcp     no launcher: train_cifar started by hand in each namespace with --init-method
#           tcp://<node 0>:PORT --rank R --world-size 2, as in PyTorch's tutorials, no interface
#           variables: equal numbers again
#   file    the same with --init-method file:///<scratch>/rendezvous, a file both "hosts" see (the
#           shared file system's part), each node naming its interface (GLOO_SOCKET_IFNAME: a
#           file store has no connection whose address could stand in); equal numbers, and the
#           last rank out removed the file
#   badiface  GLOO_SOCKET_IFNAME names no interface on node 1: it exits non-zero with one line
#           naming it, and node 0 within its timeout
#   link    the link is taken down mid-run: both sides exit non-zero with a one-line error within
#           the collective timeout (--timeout 8) plus tandem-run's grace
#   kill    node 1 dies (its tandem-run and worker SIGKILLed, like a host that fails): node 0
#           exits non-zero within seconds
#   stop    node 1's worker is stopped (SIGSTOP): node 0 exits non-zero within --timeout plus
#           grace; once continued (SIGCONT) node 1 finds its peer gone and exits non-zero too
#   nnodes  node 1 is started with a wrong --nnodes 3: both sides exit non-zero, no hang
#   restart   tandem-run --max-restarts 3 on both hosts, train_cifar --save-every-steps 2
#           --resume auto: node 1's worker is SIGKILLed mid-run; both hosts restart their workers
#           together and the job ends with a checkpoint bit-identical to the loopback job's
#   relaunch  the same, but node 1's tandem-run itself is SIGKILLed (its worker dies with it) and
#           started again by hand: it rejoins the next attempt; same final checkpoint
# Needs root and `ip netns` (skips with exit 77 and the reason otherwise). Names and addresses
# are unique per run (10.77.x.1/2), and everything is removed on exit.
#
#   netns_ddp_test.sh BUILD_DIR CASE (CASE: train, iface, torchrun, tcp, file, badiface, link,
#                                     kill, stop, nnodes, restart, relaunch)
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

job=(--synthetic --subset 512 --batch-size 64 --workers 1 --no-progress --mode ddp --backend gloo --threads 1 --seed 3)
fail() { echo "FAILED: $*"; for f in "$scratch"/*.log; do echo "== $f"; tail -5 "$f"; done; exit 1; }

nnodes=2
launcher_flags=()
start_node() {  # namespace, node rank, GLOO_SOCKET_IFNAME ("": unset), log, train_cifar flags...
  local ns="$1" node="$2" iface="$3" log="$4"; shift 4
  local interface=(-u GLOO_SOCKET_IFNAME)
  [ -n "$iface" ] && interface=(GLOO_SOCKET_IFNAME="$iface")
  ip netns exec "$ns" env "${interface[@]}" "$run" --nnodes "$nnodes" --node-rank "$node" \
    --nproc-per-node 1 --master-addr "$master" --master-port 29611 --kill-grace 3 "${launcher_flags[@]}" -- \
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

# Runs the job for 2 epochs as 2 ranks on this host (loopback) and fails unless the epochs of the
# log $1 (the job across the hosts, started by $2) equal its own.
expect_loopback_epochs() {
  "$train" "${job[@]}" --epochs 2 --nproc 2 --log-json "$scratch/local.jsonl" >"$scratch/local.log" 2>&1 \
    || fail "the loopback run failed"
  [ "$(epochs_of "$1")" = "$(epochs_of "$scratch/local.jsonl")" ] \
    || fail "$2 across hosts: $(epochs_of "$1") / one host: $(epochs_of "$scratch/local.jsonl")"
}

case "$case" in
  train)
    start_node "$a" 0 "" "$scratch/a.log" --epochs 2 --log-json "$scratch/net.jsonl"
    pa=$!
    start_node "$b" 1 "" "$scratch/b.log" --epochs 2
    pb=$!
    wait $pa || fail "node 0 exited $?"
    wait $pb || fail "node 1 exited $?"
    expect_loopback_epochs "$scratch/net.jsonl" tandem-run
    if getent ahosts "$(hostname)" | awk '{print $1}' | grep -qv '^127\.\|^::1$'; then
      echo "host name $(hostname) resolves to a non-loopback address: Gloo binds it, as PyTorch does"
    else
      grep -q "resolves to loopback only; using 10.77.$subnet.1," "$scratch/a.log" \
        || fail "node 0 did not say it uses 10.77.$subnet.1"
      grep -q "resolves to loopback only; using 10.77.$subnet.2," "$scratch/b.log" \
        || fail "node 1 did not say it uses 10.77.$subnet.2"
      grep -h "resolves to loopback only" "$scratch/a.log" "$scratch/b.log" | cut -c1-200
    fi
    echo "2 hosts over ${tag}x/${tag}y, no interface variables = 2 ranks on loopback:"
    epochs_of "$scratch/net.jsonl"
    ;;
  iface)
    start_node "$a" 0 "${tag}x" "$scratch/a.log" --epochs 1
    pa=$!
    start_node "$b" 1 "${tag}y" "$scratch/b.log" --epochs 1
    pb=$!
    wait $pa || fail "node 0 exited $?"
    wait $pb || fail "node 1 exited $?"
    ! grep -q "resolves to loopback only" "$scratch/a.log" "$scratch/b.log" \
      || fail "GLOO_SOCKET_IFNAME was set, yet a node chose its own address"
    echo "iface: trained over GLOO_SOCKET_IFNAME=${tag}x/${tag}y"
    ;;
  torchrun)
    /usr/bin/python3 -c 'import torch.distributed.run' 2>/dev/null || skip "no PyTorch (python3-torch) for torchrun"
    for node in 0 1; do
      ns="$a"; [ $node -eq 1 ] && ns="$b"
      # --redirects/--tee 1: torchrun 1.13 cannot parse its default "0" under Python 3.11.
      ip netns exec "$ns" env -u GLOO_SOCKET_IFNAME /usr/bin/python3 -m torch.distributed.run \
        --nnodes 2 --node_rank $node --nproc_per_node 1 --master_addr "$master" --master_port 29611 \
        --redirects 1 --tee 1 --log_dir "$scratch/torchrun$node" --no_python \
        "$train" "${job[@]}" --epochs 2 --log-json "$scratch/net$node.jsonl" >"$scratch/torchrun$node.log" 2>&1 &
      pids[node]=$!
    done
    wait_bounded "${pids[0]}" 240; [ $status -eq 0 ] || fail "node 0 (torchrun) exited $status"
    wait_bounded "${pids[1]}" 240; [ $status -eq 0 ] || fail "node 1 (torchrun) exited $status"
    expect_loopback_epochs "$scratch/net0.jsonl" torchrun
    echo "torchrun on 2 hosts, no interface variables = 2 ranks on loopback:"
    epochs_of "$scratch/net0.jsonl"
    ;;
  tcp|file)
    init="tcp://$master:29611" ifaces=("" "")
    if [ "$case" = file ]; then init="file://$scratch/rendezvous" ifaces=("${tag}x" "${tag}y"); fi
    for node in 0 1; do
      ns="$a"; [ $node -eq 1 ] && ns="$b"
      interface=(-u GLOO_SOCKET_IFNAME)
      [ -n "${ifaces[$node]}" ] && interface=(GLOO_SOCKET_IFNAME="${ifaces[$node]}")
      ip netns exec "$ns" env "${interface[@]}" "$train" "${job[@]}" --epochs 2 \
        --init-method "$init" --rank $node --world-size 2 --log-json "$scratch/net$node.jsonl" \
        >"$scratch/$case$node.log" 2>&1 &
      pids[node]=$!
    done
    wait_bounded "${pids[0]}" 240; [ $status -eq 0 ] || fail "rank 0 ($init) exited $status"
    wait_bounded "${pids[1]}" 240; [ $status -eq 0 ] || fail "rank 1 ($init) exited $status"
    [ ! -e "$scratch/rendezvous" ] || fail "the file store was left behind"
    expect_loopback_epochs "$scratch/net0.jsonl" "$init"
    echo "$case: 2 hosts started by hand with --init-method $init = 2 ranks on loopback:"
    epochs_of "$scratch/net0.jsonl"
    ;;
  badiface)
    start_node "$a" 0 "" "$scratch/a.log" --epochs 1 --timeout 8
    pa=$!
    start_node "$b" 1 "nosuch0" "$scratch/b.log" --epochs 1 --timeout 8
    pb=$!
    for p in $pb $pa; do
      wait_bounded $p 60
      [ $status -ne 0 ] || fail "a node exited 0 with GLOO_SOCKET_IFNAME=nosuch0 on node 1"
      [ $status -ne 124 ] || fail "a node was still running after 60 s (hang)"
    done
    [ "$(grep -c "nosuch0" "$scratch/b.log")" -ge 1 ] || fail "node 1's error does not name nosuch0"
    echo "badiface: both nodes exited non-zero; node 1 said:"
    grep -h -m1 "nosuch0" "$scratch/b.log" | cut -c1-240
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
  restart|relaunch)
    launcher_flags=(--max-restarts 3)
    saving=(--epochs 3 --save "$scratch/net.ckpt" --save-every-steps 2 --resume auto)
    start_node "$a" 0 "" "$scratch/a.log" "${saving[@]}" --log-json "$scratch/net.jsonl"
    pa=$!
    start_node "$b" 1 "" "$scratch/b.log" "${saving[@]}"
    pb=$!
    until grep -q "epoch 1/3:" "$scratch/a.log" 2>/dev/null; do
      kill -0 $pa 2>/dev/null || fail "node 0 ended before the fault"
      sleep 0.1
    done
    sleep 0.5
    t0=$(date +%s.%N)
    if [ "$case" = restart ]; then
      kill -KILL "$(pgrep -P $pb -f train_cifar | head -1)"
    else
      kill -KILL $pb; wait $pb 2>/dev/null  # node 1's tandem-run; its worker dies with it
      start_node "$b" 1 "" "$scratch/b2.log" "${saving[@]}"
      pb=$!
    fi
    wait_bounded $pa 120; [ $status -eq 0 ] || fail "node 0 exited $status after the fault"
    wait_bounded $pb 120; [ $status -eq 0 ] || fail "node 1 exited $status after the fault"
    grep -q "restarting all workers" "$scratch/a.log" || fail "node 0 did not restart its worker"
    "$train" "${job[@]}" --epochs 3 --nproc 2 --save "$scratch/local.ckpt" >"$scratch/local.log" 2>&1 \
      || fail "the loopback run failed"
    /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/same_weights.py" "$scratch/net.ckpt" "$scratch/local.ckpt" \
      || fail "the restarted job's checkpoint differs from the loopback job's"
    resumed=$(grep '"type":"resume"' "$scratch/net.jsonl" | head -1)
    echo "$case: node 1 hit at $t0; both hosts restarted; resumed: $resumed"
    grep -h "restarting all workers" "$scratch/a.log" "$scratch"/b*.log | cut -c1-200
    ;;
  *) echo "unknown case $case"; exit 2 ;;
esac
