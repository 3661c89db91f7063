#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, so that `srun` can launch Tandem's DDP jobs in tests
# (tests/scripts/slurm_ddp_test.sh) and by hand. Debian's Slurm (slurm-wlm) and munge, run as root
# without systemd, as in shared/notes/slurm-one-node.md.
#
#   scripts/slurm_cluster.sh start    install what is missing, configure, start munged, slurmctld
#                                     and slurmd, wait until `sinfo` shows the node idle
#   scripts/slurm_cluster.sh stop     stop the daemons that this script started (others are left)
#   scripts/slurm_cluster.sh status   which daemons run and what `sinfo` says (exit 3: not up)
#   scripts/slurm_cluster.sh run      start, stay in the foreground until Ctrl-C / SIGTERM, stop
#
# `start` is idempotent: daemons that already run are kept. It never overwrites a slurm.conf that
# it did not write (its own carry the marker line below). State lives under /var/spool and /run, so
# a reboot leaves nothing running and nothing stale behind. Errors are one line on stderr, exit 1.
#
# Environment: SLURM_CLUSTER_WAIT (default 30): seconds `start` waits for the node to turn idle.
set -uo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
export PATH="$PATH:/usr/sbin:/sbin"   # the daemons live in /usr/sbin, missing from some PATHs

conf=/etc/slurm/slurm.conf
marker="# tandem: written by scripts/slurm_cluster.sh (a one-node test cluster; safe to delete)"
munge_key=/etc/munge/munge.key
state_dir=/run/tandem-slurm           # which daemons this script started (gone after a reboot, as they are)
started_file="$state_dir/started"
log_dir=/var/log/slurm
wait_s="${SLURM_CLUSTER_WAIT:-30}"
host="$(hostname)"

die() { echo "slurm_cluster: $*" >&2; exit 1; }
say() { echo "slurm_cluster: $*"; }

pid_file_of() {
  case "$1" in
    munged) echo /run/munge/munged.pid ;;
    slurmctld) echo /run/slurmctld.pid ;;
    slurmd) echo /run/slurmd.pid ;;
  esac
}

# The daemon's pid when it runs. The pid file alone could name a reused pid: check the name too.
running_pid() {
  local name="$1" file pid
  file="$(pid_file_of "$name")"
  pid="$(cat "$file" 2>/dev/null)" || pid=""
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then
    echo "$pid"; return 0
  fi
  # Started some other way (no pid file, or another path): look for the process itself.
  pid="$(pgrep -x "$name" | head -1)"
  [ -n "$pid" ] && { echo "$pid"; return 0; }
  return 1
}

started_here() { grep -qx "$1" "$started_file" 2>/dev/null; }
mark_started() { mkdir -p "$state_dir"; started_here "$1" || echo "$1" >>"$started_file"; }
unmark_started() { [ -f "$started_file" ] && sed -i "/^$1\$/d" "$started_file"; }

last_log_line() { tail -n 1 "$1" 2>/dev/null | cut -c1-200; }

require_root() { [ "$(id -u)" -eq 0 ] || die "must run as root (it installs packages and starts the Slurm daemons)"; }

install_if_missing() {
  local tool missing=0
  for tool in munged munge unmunge slurmctld slurmd srun sinfo scontrol; do
    command -v "$tool" >/dev/null || missing=1
  done
  [ $missing -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "Slurm is not installed and there is no apt-get to install it"
  say "installing slurm-wlm and munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  # Only refresh the package lists when they do not know the packages (a fresh container).
  if ! apt-cache show slurm-wlm munge >/dev/null 2>&1; then
    apt-get update -q >/dev/null 2>&1 || die "apt-get update failed"
  fi
  local log="$state_dir/apt.log"
  mkdir -p "$state_dir"
  if ! apt-get install -y -q --no-install-recommends slurm-wlm munge >"$log" 2>&1; then
    # Stale lists fail with 404s: refresh once and retry.
    apt-get update -q >/dev/null 2>&1
    apt-get install -y -q --no-install-recommends slurm-wlm munge >"$log" 2>&1 \
      || die "apt-get install slurm-wlm munge failed: $(grep -m1 -E '^E:' "$log" || last_log_line "$log")"
  fi
}

start_munged() {
  if running_pid munged >/dev/null; then return 0; fi
  if [ ! -s "$munge_key" ]; then
    # Any 1,024 random bytes will do: every daemon and client here shares this one key.
    mkdir -p /etc/munge
    dd if=/dev/urandom of="$munge_key" bs=1024 count=1 status=none || die "cannot write $munge_key"
  fi
  { chown munge:munge "$munge_key" && chmod 400 "$munge_key"; } || die "cannot give $munge_key to user munge"
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /run/munge /var/lib/munge /var/log/munge
  # --force: munged refuses to start when a parent folder looks writable by others, which
  # containers' overlay file systems often make it look.
  runuser -u munge -- munged --force || die "munged did not start (see /var/log/munge/munged.log: $(last_log_line /var/log/munge/munged.log))"
  mark_started munged
  local i
  for ((i = 0; i < 50; i++)); do
    munge -n 2>/dev/null | unmunge 2>/dev/null | grep -q 'STATUS: *Success' && return 0
    sleep 0.1
  done
  die "munged runs but 'munge -n | unmunge' does not say Success"
}

# Prints the configuration for this machine. CPUs and memory are read now, so a changed machine
# gets a changed file (and restarted daemons).
config_text() {
  local cpus mem_mb
  cpus="$(nproc)"
  # 90 % of MemTotal: slurmd drains a node whose RealMemory exceeds what it measures itself.
  mem_mb="$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)"
  cat <<EOF
$marker
# Why these settings: there is no systemd and no cgroup setup here, so processes are tracked by
# /proc (linuxproc) and not bound to CPUs (task/none); every daemon runs as root. No cgroup.conf:
# with one, slurmd looks for a cgroup plugin (and fails with CgroupPlugin=disabled).
ClusterName=tandem
SlurmctldHost=$host
AuthType=auth/munge
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# A node that went down (a daemon restart) returns by itself once slurmd registers again.
ReturnToService=2
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$(pid_file_of slurmctld)
SlurmdPidFile=$(pid_file_of slurmd)
SlurmctldLogFile=$log_dir/slurmctld.log
SlurmdLogFile=$log_dir/slurmd.log
# No mail on a test machine (slurmctld logs an error for a missing mail program otherwise).
MailProg=/bin/true
InactiveLimit=0
KillWait=5
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=tandem Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

refuse_foreign_config() {
  if [ -e "$conf" ] && [ "$(head -n 1 "$conf")" != "$marker" ]; then
    die "$conf exists and was not written by this script; not touching it (move it away to use this script)"
  fi
}

write_config() {
  local fresh
  fresh="$(config_text)"
  [ -e "$conf" ] && [ "$(cat "$conf")" = "$fresh" ] && return 0
  # A changed file only takes effect after a restart: restart what we run, refuse what we don't.
  local name
  for name in slurmd slurmctld; do
    if running_pid "$name" >/dev/null; then
      started_here "$name" || die "$name runs (not started by this script) with another configuration; stop it first"
      stop_daemon "$name"
    fi
  done
  mkdir -p "$(dirname "$conf")"
  printf '%s\n' "$fresh" >"$conf" || die "cannot write $conf"
}

start_slurm_daemon() {
  local name="$1" i
  running_pid "$name" >/dev/null && return 0
  mkdir -p "$log_dir" /var/spool/slurmctld /var/spool/slurmd
  "$name" || die "$name did not start (see $log_dir/$name.log: $(last_log_line "$log_dir/$name.log"))"
  mark_started "$name"
  for ((i = 0; i < 50; i++)); do
    running_pid "$name" >/dev/null && return 0
    sleep 0.1
  done
  die "$name exited after starting (see $log_dir/$name.log: $(last_log_line "$log_dir/$name.log"))"
}

node_state() { sinfo -h -N -n "$host" -o %t 2>/dev/null | head -1; }

# slurmd's registration time, from when this call started it. slurmctld restores the node's last
# state from /var/spool, so "idle" alone can be the old slurmd's word, not the new one's.
slurmd_since=""
registered() {
  [ -z "$slurmd_since" ] && return 0
  local at
  at="$(scontrol show node "$host" 2>/dev/null | grep -o 'SlurmdStartTime=[^ ]*' | cut -d= -f2)"
  # ISO times of one time zone compare as strings.
  [ -n "$at" ] && [ "$at" != None ] && ! [[ "$at" < "$slurmd_since" ]]
}

wait_until_idle() {
  local deadline=$((SECONDS + wait_s)) state="" resumed=0
  while [ $SECONDS -lt $deadline ]; do
    state="$(node_state)"
    case "$state" in
      idle|mix|alloc) registered && return 0 ;;
      # Down or drained but responding (no '*'): left from an earlier configuration; resume once.
      down|drain|drng)
        if [ $resumed -eq 0 ]; then
          scontrol update nodename="$host" state=resume >/dev/null 2>&1
          resumed=1
        fi ;;
    esac
    sleep 0.5
  done
  local daemon=slurmd
  running_pid slurmctld >/dev/null || daemon=slurmctld
  die "node $host is '${state:-not listed}' after ${wait_s} s, not idle (see $log_dir/$daemon.log: $(last_log_line "$log_dir/$daemon.log"))"
}

stop_daemon() {
  local name="$1" pid i
  pid="$(running_pid "$name")" || { unmark_started "$name"; return 0; }
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  unmark_started "$name"
}

cmd_start() {
  require_root
  refuse_foreign_config   # before anything starts, so that a refusal leaves nothing running
  install_if_missing
  start_munged
  write_config
  start_slurm_daemon slurmctld
  running_pid slurmd >/dev/null || slurmd_since="$(date +%Y-%m-%dT%H:%M:%S)"
  start_slurm_daemon slurmd
  wait_until_idle
  say "node $host is up ($(sinfo -h -N -n "$host" -o '%t, %c CPUs, %m MB'); partition $(sinfo -h -o %P | head -1))"
}

cmd_stop() {
  require_root
  local name
  for name in slurmd slurmctld munged; do   # slurmd before slurmctld, munge last: both use it
    if ! running_pid "$name" >/dev/null; then
      unmark_started "$name"
    elif started_here "$name"; then
      stop_daemon "$name"; say "stopped $name"
    else
      say "$name runs but was not started by this script; left running"
    fi
  done
  return 0
}

cmd_status() {
  local name pid up=0
  for name in munged slurmctld slurmd; do
    if pid="$(running_pid "$name")"; then
      say "$name running (pid $pid$(started_here "$name" && echo ", started by this script"))"
    else
      say "$name not running"
    fi
  done
  if command -v sinfo >/dev/null && running_pid slurmctld >/dev/null; then
    sinfo -N -o '%N %t %c %m %P' 2>&1
    case "$(node_state)" in idle|mix|alloc) up=1 ;; esac
  fi
  [ $up -eq 1 ] && return 0 || return 3
}

cmd_run() {
  cmd_start
  local sleeper
  # sleep in the background so that the trap runs at once on a signal (bash runs traps only
  # between commands, and `wait` is interruptible where a foreground sleep is not).
  sleep infinity &
  sleeper=$!
  trap 'kill "$sleeper" 2>/dev/null; cmd_stop; exit 0' INT TERM
  say "cluster running in the foreground; Ctrl-C stops it"
  wait "$sleeper"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  run) cmd_run ;;
  *) echo "usage: $0 start|stop|status|run" >&2; exit 2 ;;
esac
