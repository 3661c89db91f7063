# shellcheck shell=bash disable=SC2154  # the caller's settings (scripts/gpu_node.sh)
# Sourced by scripts/gpu_node.sh: the report in --out (report.md, report.json, logs.tgz), kept
# well-formed at every moment, and run_step, which runs each step under the time budget.
#
# Note [Report as it goes]: the device tool kills a command at its limit and gives the node back
# 30 s after a call; what is in $OUT then is all that comes back, and at most 8 files of it. So
# OUT holds three files: report.md, report.json and logs.tgz (every log and JSON, kept in the
# build folder's gpu-node-logs). Each is rewritten whole after every change of a step, into a
# .part file renamed over the old one: a rename is atomic, so a kill at any moment, SIGKILL
# included, leaves the last well-formed version of each (report.md one change ahead of
# report.json when the kill falls between their renames). The report lists every planned step from the
# start (pending), the one running and what each ended with; TERM, INT or HUP stops the running
# step, marks it interrupted and the rest not reached, and packs the logs before exiting.

row_names=() row_status=() row_start=() row_seconds=() row_limit=() row_notes=()
report_started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
report_state=running  # running, done, interrupted or stopped (the script failed)
current_pid="" current_row=""

plan_step() {
  row_names+=("$1") row_status+=(pending) row_start+=("") row_seconds+=("") row_limit+=("") row_notes+=("")
}

row_index() {
  local i
  for i in "${!row_names[@]}"; do
    [ "${row_names[$i]}" != "$1" ] || { echo "$i"; return; }
  done
}

# set_row INDEX STATUS START SECONDS LIMIT NOTE, then the report is written again.
set_row() {
  local i="$1"
  row_status[i]="$2" row_start[i]="$3" row_seconds[i]="$4" row_limit[i]="$5"
  row_notes[i]="$(LC_ALL=C tr -cd '[:print:]' <<<"$6" | cut -c1-240)"  # one ASCII line
  write_report
}

json_string() {
  local s="$1"
  s="${s//\\/\\\\}" s="${s//\"/\\\"}"
  printf '"%s"' "$s"
}
json_number() { printf '%s' "${1:-null}"; }

# The header's facts, read again after the build.
refresh_facts() {
  gpu_name="" gpu_driver=""
  if command -v nvidia-smi >/dev/null; then
    IFS=, read -r gpu_name gpu_driver < <(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null |
      head -1 | sed 's/, /,/g') || true
  fi
  nvcc_version="$([ -z "$nvcc" ] || "$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  built_arch="$(cache CMAKE_CUDA_ARCHITECTURES)"
  cudnn_version="$(header_version "$(cache CUDNN_INCLUDE_DIR)/cudnn_version.h" CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL)"
  nccl_version="$(header_version "$(cache NCCL_INCLUDE_DIR)/nccl.h" NCCL_MAJOR NCCL_MINOR NCCL_PATCH)"
}

write_report_md() {
  echo "# Tandem on a GPU node: $mode, $report_state"
  echo
  echo "Started $report_started; $SECONDS s of a $budget_s s budget (counted from the start)."
  echo "GPU: ${gpu_name:-none} (driver ${gpu_driver:--}); nvcc ${nvcc_version:--}; kernels for sm_${built_arch:--};" \
       "cuDNN ${cudnn_version:--}; NCCL ${nccl_version:--}; data: $data_text."
  echo
  echo "| step | status | start s | seconds | limit s | note |"
  echo "| --- | --- | ---: | ---: | ---: | --- |"
  local i
  for i in "${!row_names[@]}"; do
    echo "| ${row_names[$i]} | ${row_status[$i]} | ${row_start[$i]} | ${row_seconds[$i]} | ${row_limit[$i]} | ${row_notes[$i]//|/\\|} |"
  done
  echo
  echo "Each step's output is STEP.log in logs.tgz (with the JSON of the benchmark and training steps)."
}

write_report_json() {
  echo "{"
  echo "  \"tool\": \"scripts/gpu_node.sh\", \"mode\": $(json_string "$mode"), \"state\": $(json_string "$report_state"),"
  echo "  \"started\": $(json_string "$report_started"), \"elapsed_s\": $SECONDS, \"budget_s\": $budget_s,"
  echo "  \"gpu\": $(json_string "$gpu_name"), \"driver\": $(json_string "$gpu_driver"), \"nvcc\": $(json_string "$nvcc_version"),"
  echo "  \"cuda_arch\": $(json_string "$built_arch"), \"cudnn\": $(json_string "$cudnn_version"), \"nccl\": $(json_string "$nccl_version"),"
  echo "  \"data\": $(json_string "$data_text"),"
  echo "  \"steps\": ["
  local i
  for i in "${!row_names[@]}"; do
    printf '    {"name": %s, "status": %s, "start_s": %s, "seconds": %s, "limit_s": %s, "note": %s, "log": %s}' \
      "$(json_string "${row_names[$i]}")" "$(json_string "${row_status[$i]}")" "$(json_number "${row_start[$i]}")" \
      "$(json_number "${row_seconds[$i]}")" "$(json_number "${row_limit[$i]}")" "$(json_string "${row_notes[$i]}")" \
      "$(json_string "${row_names[$i]}.log")"
    [ "$i" -eq $((${#row_names[@]} - 1)) ] && echo || echo ","
  done
  echo "  ]"
  echo "}"
}

# Note [Report as it goes]: whole files, renamed into place. Once the run has started
# (kept_report set), report.json is also kept in the logs folder, where the next call's
# `--steps rest` reads what this one left undone.
write_report() {
  write_report_md >"$out/report.md.part" && mv -f "$out/report.md.part" "$out/report.md"
  write_report_json >"$out/report.json.part" && mv -f "$out/report.json.part" "$out/report.json"
  [ -z "${kept_report:-}" ] || { cp -f "$out/report.json" "$kept_report.part" && mv -f "$kept_report.part" "$kept_report"; }
}

# A failed step's note when it left none (review H9): the first compiler, CMake or program error
# of its log (a build's last line is only "ninja: build stopped"), else its last line.
first_error() {
  local line
  line="$(grep -m1 -E '(^|[^A-Za-z])error:|^CMake Error' "$1" || true)"
  [ -n "$line" ] || line="$(grep -v '^\s*$' "$1" | tail -1)"
  echo "$line"
}

# The device tool brings back files of up to 16 MiB: past 15, each log is cut to its last MiB.
pack_logs() {
  local status=0 from="$logs" file
  tar -czf "$out/logs.tgz.part" --warning=no-file-changed -C "$from" . 2>/dev/null || status=$?
  if [ "$(stat -c %s "$out/logs.tgz.part" 2>/dev/null || echo 0)" -gt $((15 * 1024 * 1024)) ]; then
    from="$(mktemp -d)"
    for file in "$logs"/*; do tail -c 1048576 "$file" >"$from/${file##*/}"; done
    status=0
    tar -czf "$out/logs.tgz.part" -C "$from" . 2>/dev/null || status=$?
    rm -rf "$from"
  fi
  # GNU tar's 1: a log changed while it was read (a step still stopping); the archive is whole.
  [ "$status" -le 1 ] && mv -f "$out/logs.tgz.part" "$out/logs.tgz"
  rm -f "$out/logs.tgz.part"
}

# Pending steps are marked not reached (and one caught between its row and its start,
# interrupted); the report and the logs are written one last time.
finish_report() {
  local i
  for i in "${!row_names[@]}"; do
    case "${row_status[$i]}" in
      pending) row_status[i]=skipped row_notes[i]="not reached: $1" ;;
      running) row_status[i]=interrupted row_notes[i]="stopped: $1" ;;
    esac
  done
  refresh_facts  # what a build cut short had configured
  write_report
  pack_logs
}

# TERM, INT or HUP (the device tool's kill at its limit, or Ctrl-C): the running step is stopped
# (timeout passes the signal on, then KILLs after 5 s), the report finished, the logs packed.
on_signal() {
  local signal="$1" number="$2" i
  trap - TERM INT HUP
  report_state=interrupted
  if [ -n "$current_pid" ]; then
    kill -TERM "$current_pid" 2>/dev/null || true
    wait "$current_pid" 2>/dev/null || true  # at most timeout's --kill-after
    i="$current_row"
    row_status[i]=interrupted row_seconds[i]=$((SECONDS - row_start[i])) row_notes[i]="stopped by SIG$signal"
  fi
  finish_report "SIG$signal after $SECONDS s"
  echo "== interrupted by SIG$signal after $SECONDS s: $out/report.md" >&2
  exit $((128 + number))
}

# The script itself failed (set -e): the report still ends well-formed.
on_exit() {
  local status=$?
  [ "$report_state" = running ] || return "$status"
  report_state=stopped
  finish_report "the script stopped with status $status"
  return "$status"
}

start_report() {
  trap 'on_signal TERM 15' TERM
  trap 'on_signal INT 2' INT
  trap 'on_signal HUP 1' HUP
  trap on_exit EXIT
  rm -f "$out"/report.md "$out"/report.json "$out"/logs.tgz "$out"/*.part
  kept_report="$logs/report.json"
  refresh_facts
  write_report
}

# run_step NAME LIMIT SKIP_REASON COMMAND…: COMMAND under `timeout`, in the background so that a
# signal reaches the trap at once, its output in the logs folder as NAME.log. It gets at most
# LIMIT seconds, and never more than the budget leaves (reserve_s of it kept for the last
# report); with less than min_step_s left, or with a SKIP_REASON, it is skipped, saying why.
# Sets step_verdict (ok, failed, timeout or skipped) and counts failures.
run_step() {
  local name="$1" limit="$2" skip="$3" i start=$SECONDS status=0 left
  shift 3
  i="$(row_index "$name")"
  if [ -n "$(fake_step "$name")" ]; then
    # shellcheck disable=SC2046  # seconds and status
    set -- bash "$kit/step.sh" "$name" fake $(fake_step "$name")
    skip=""
  fi
  left=$((budget_s - reserve_s - SECONDS))
  [ -n "$skip" ] || [ "$left" -ge "$min_step_s" ] || skip="out of the time budget ($left s left)"
  if [ -n "$skip" ]; then
    echo "== $name: skipped: $skip"
    # shellcheck disable=SC2034  # read by gpu_node.sh after each step
    step_verdict=skipped
    set_row "$i" skipped "$start" 0 "" "$skip"
    return
  fi
  local cut=""
  [ "$limit" -le "$left" ] || limit=$left cut="cut by the time budget: "
  local log="$logs/$name.log"
  rm -f "$logs/$name.note"
  { printf '$'; printf ' %q' "$@"; echo; } >"$log"
  echo "== $name (at most $limit s)"
  set_row "$i" running "$start" "" "$limit" ""
  timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1 </dev/null &
  current_pid=$! current_row=$i
  wait "$current_pid" || status=$?
  current_pid="" current_row=""
  local took=$((SECONDS - start)) verdict=ok note=""
  [ ! -f "$logs/$name.note" ] || note="$(head -1 "$logs/$name.note")"
  rm -f "$logs/$name.note"
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    verdict=timeout note="${cut}stopped at its limit of $limit s${note:+; $note}"
  elif [ "$status" -ne 0 ]; then
    verdict=failed note="exit status $status: ${note:-$(first_error "$log")}"
  fi
  [ "$verdict" = ok ] || failures=$((failures + 1))
  echo "   $verdict ($took s)${note:+: $note}"
  # shellcheck disable=SC2034  # read by gpu_node.sh after each step
  step_verdict="$verdict"
  set_row "$i" "$verdict" "$start" "$took" "$limit" "$note"
  pack_logs
}
