#!/usr/bin/env bash
# The GPU-node kit's one call, run here without a GPU, so that the first GPU run is not its
# first run: scripts/gpu_node.sh --bundle B --cifar C --out OUT --all, with its build faked
# (TANDEM_GPU_NODE_FAKE_STEPS: nothing is compiled; the steps use BUILD_DIR, the build under
# test) and a fake slow step where one is needed. It checks what the device tool needs (≤ 8
# files in OUT, expected 3, named in letters, digits, '.', '_' and '-' no more than 2 folders
# down; report.json parses, report.md has a row per step) after:
#   plan      --plan: at the upper estimates, no training step is cut or left to the second call
#             (review H3); the build's configure turns MPI off (H8);
#   full      the default steps: environment runs for real, the GPU steps skip with "no GPU";
#   refused   a forgotten carry path still brings back a report, a failed `setup` row (H9); a
#             failed build's note is its first error, not ninja's last line (H9);
#   budget    a slow step cut where the budget, counted from the script's start, ends, and the
#             steps after it skipped; then a slow build, cut the same way; then the second call's
#             --steps rest plans exactly what the first left undone (H3);
#   sigterm   --test (no --bundle: K8) killed with TERM mid-step: the step interrupted, the rest
#             not reached, the logs packed, exit 143, all within seconds;
#   sigkill   the script killed with KILL at several moments: the report written as it goes is
#             well-formed every time;
#   carry     --check-carry on the CIFAR-10 subset scripts/cifar_subset.sh makes (when the
#             data set is at hand) and the offline bundle (when made), and over 64 MiB failing.
#
#   gpu_node_dry_run_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir="$1" build_dir="$2"
kit="$source_dir/scripts/gpu_node.sh"
work="$(mktemp -d)"
sessions=()
cleanup() {
  local sid
  # What a killed script left running (its steps' `timeout` and `sleep`), by session.
  for sid in "${sessions[@]}"; do pkill -KILL -s "$sid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A bundle with no packages: the fake build unpacks nothing. A subset folder as the kit checks it.
mkdir -p "$work/bundle" "$work/cifar"
: >"$work/bundle/manifest.tsv"
: >"$work/cifar/test_batch.bin"

# check_out OUT [killed]: the files the device tool would bring back, and the report in them.
# After a KILL between the two files' renames, report.md may be one change ahead of report.json.
check_out() {
  local out="$1" killed="${2:-}" files bad
  files="$(cd "$out" && find . -type f | sed 's|^\./||' | sort)"
  [ "$(wc -l <<<"$files")" -le 8 ] || fail "$out holds more than 8 files: $files"
  bad="$(grep -vE '^([A-Za-z0-9._-]+/){0,2}[A-Za-z0-9._-]+$' <<<"$files" || true)"
  [ -z "$bad" ] || fail "$out has names the device tool refuses: $bad"
  [ -f "$out/report.json" ] && [ -f "$out/report.md" ] || fail "no report in $out: $files"
  python3 - "$out" "$killed" <<'EOF' || fail "the report in $out is not well-formed"
import json, re, sys
out, killed = sys.argv[1], sys.argv[2] == "killed"
report = json.load(open(f"{out}/report.json"))
assert report["state"] in ("running", "done", "interrupted", "stopped"), report["state"]
statuses = {"pending", "running", "ok", "failed", "timeout", "skipped", "interrupted"}
for step in report["steps"]:
    assert step["status"] in statuses and step["name"], step
md = open(f"{out}/report.md").read()
assert md.startswith("# Tandem on a GPU node"), md[:80]
rows = re.findall(r"^\| ([a-z0-9-]+) \| (pending|running|ok|failed|timeout|skipped|interrupted) \|", md, re.M)
if killed:
    rows = [(name, "any") for name, _ in rows]
assert rows == [(s["name"], "any" if killed else s["status"]) for s in report["steps"]], (rows, report)
EOF
}

# status OUT STEP: the step's status in report.json (and its note, after a tab).
status() {
  python3 -c 'import json, sys
for s in json.load(open(sys.argv[1] + "/report.json"))["steps"]:
    if s["name"] == sys.argv[2]: print(s["status"] + "\t" + s["note"])' "$1" "$2"
}
json_field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1] + "/report.json"))[sys.argv[2]])' "$1" "$2"; }

echo "== plan: the trainings fit the first call at the upper estimates; MPI off"
"$kit" --plan >"$work/plan.txt" || fail "--plan failed"
cat "$work/plan.txt"
for step in train-single train-ddp-syncbn train-dp train-ddp-bf16 train-bf16; do
  line="$(grep "^$step " "$work/plan.txt")" || fail "--plan lacks $step"
  [[ "$line" != *"second call"* ]] || fail "the lease plan leaves $step to the second call: $line"
done
# The last training ends before the first call's budget (570 s less the 10 s reserve).
python3 - "$work/plan.txt" <<'EOF' || fail "the trainings end past the budget"
import sys
rows = [line.split() for line in open(sys.argv[1]).read().splitlines()[1:]]
ends = [int(r[4]) for r in rows if r[0].startswith("train-")]
assert len(ends) == 5 and max(ends) <= 560, rows
EOF
flags="$(root="$source_dir" build_dir="$work/b" caller_ld_library_path="" nvcc=nvcc bash -c \
  'source "$root/scripts/gpu_node/setup.sh"; source "$kit/build.sh"; configure_flags 90 ""')"
grep -qx -- -DTANDEM_MPI=OFF <<<"$flags" || fail "the node's configure leaves MPI on: $flags"
grep -qx -- -DTANDEM_CUDA=ON <<<"$flags" || fail "the node's configure leaves CUDA to AUTO: $flags"

echo "== full: the one call, the build faked"
out="$work/full"
start=$SECONDS
TANDEM_GPU_NODE_FAKE_STEPS="build=1" "$kit" --bundle "$work/bundle" --cifar "$work/cifar" --out "$out" \
  --all --build-dir "$build_dir" >"$work/full.log" 2>&1 || { cat "$work/full.log"; fail "the full dry run failed"; }
check_out "$out"
[ "$(cd "$out" && ls | sort | paste -sd' ')" = "logs.tgz report.json report.md" ] || fail "expected 3 files: $(ls "$out")"
[ "$(json_field "$out" state)" = "done" ] || fail "state $(json_field "$out" state)"
[ "$(status "$out" environment | cut -f1)" = ok ] || { cat "$build_dir/gpu-node-logs/environment.log"; fail "environment: $(status "$out" environment)"; }
for step in ctest-gpu train-single train-bf16 bench-gpu pytorch-gpu train-dp train-ddp-bf16 train-ddp-syncbn racecheck memcheck; do
  [ "$(status "$out" "$step")" = "skipped	no GPU (nvidia-smi lists none)" ] || fail "$step: $(status "$out" "$step")"
done
for step in compare-cpu torch-store; do  # K4: not in the default steps
  [ -z "$(status "$out" "$step")" ] || fail "$step is among the default steps"
done
tar -tzf "$out/logs.tgz" >"$work/logs.list"  # a file: grep -q would cut tar's pipe
grep -qx './environment.log' "$work/logs.list" || fail "logs.tgz lacks environment.log"
echo "   ok in $((SECONDS - start)) s"

echo "== refused: a forgotten carry path and a failed build still bring back their reason"
out="$work/refused"
status=0
"$kit" --bundle "$work/no-such-bundle" --cifar "$work/cifar" --out "$out" --all \
  --build-dir "$work/build-refused" >"$work/refused.log" 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "a missing bundle: exit status $status, expected 2"
check_out "$out"
[ "$(json_field "$out" state)" = stopped ] || fail "refused: state $(json_field "$out" state)"
[[ "$(status "$out" setup)" == "failed	no bundle at '$work/no-such-bundle'"* ]] || fail "setup: $(status "$out" setup)"
out="$work/failed-build"
TANDEM_GPU_NODE_FAKE_STEPS="build=0:1" "$kit" --bundle "$work/bundle" --out "$out" --all --steps train-single \
  --build-dir "$work/build-failed" >"$work/failed-build.log" 2>&1 && fail "a failed build passed"
check_out "$out"
[ "$(status "$out" build)" = "failed	exit status 1: fake.cpp:1:2: error: a fake compiler error" ] ||
  fail "a failed build's note: $(status "$out" build)"
echo "   ok"

echo "== budget: a slow step, and a slow build, each cut where the budget ends"
# timed BUDGET NAME FAKES: the one call under that budget, in a build folder of its own (the two
# run side by side); its exit status and seconds in NAME.status.
timed() {
  local budget="$1" name="$2" start=$SECONDS status=0
  mkdir -p "$work/build-$name"
  TANDEM_GPU_NODE_FAKE_STEPS="$3" "$kit" --bundle "$work/bundle" --out "$work/$name" --all \
    --build-dir "$work/build-$name" --budget "$budget" >"$work/$name.log" 2>&1 || status=$?
  echo "$status $((SECONDS - start))" >"$work/$name.status"
}
start=$SECONDS
timed 40 budget "build=1,environment=1,ctest-gpu=100,train-single=100" &
timed 33 slow-build "build=100" &
wait
# check_cut NAME BUDGET STEP NEXT: STEP was cut where BUDGET, counted from the start, ends (less the
# 10 s kept for the report), NEXT skipped for time, and the whole run ended within BUDGET.
check_cut() {
  local name="$1" budget="$2" step="$3" next="$4" status took out="$work/$1"
  read -r status took <"$work/$name.status"
  check_out "$out"
  [ "$status" -ne 0 ] || fail "$name: a step cut at its limit must make the exit status non-zero"
  [ "$took" -le $((budget + 1)) ] || fail "$name: the budget of $budget s took $took s"
  [ "$(status "$out" "$step" | cut -f1)" = timeout ] || fail "$name: $step: $(status "$out" "$step")"
  python3 - "$out" "$step" "$budget" <<'EOF' || fail "$name: $step's limit is not the budget's end less the reserve"
import json, sys
step = {s["name"]: s for s in json.load(open(sys.argv[1] + "/report.json"))["steps"]}[sys.argv[2]]
assert abs(step["start_s"] + step["limit_s"] - (int(sys.argv[3]) - 10)) <= 1, step
EOF
  [[ "$(status "$out" "$next")" == "skipped	out of the time budget"* ]] || fail "$name: $next: $(status "$out" "$next")"
}
check_cut budget 40 ctest-gpu train-single
check_cut slow-build 33 build environment
[[ "$(status "$work/budget" ctest-gpu | cut -f2)" == "cut by the time budget: "* ]] ||
  fail "a step cut by the budget does not say so: $(status "$work/budget" ctest-gpu)"
# The second call: --steps rest plans what the first left undone, in order: ctest-gpu (cut by
# the budget) and train-single (skipped for time), not environment (it ran) nor the steps
# skipped for want of a GPU (they would be again).
: >"$work/build-budget/CMakeCache.txt"
"$kit" --out "$work/rest" --test --steps rest --build-dir "$work/build-budget" --budget 60 \
  >"$work/rest.log" 2>&1 || { cat "$work/rest.log"; fail "the second call failed"; }
check_out "$work/rest"
rows="$(python3 -c 'import json, sys; print(" ".join(s["name"] for s in json.load(open(sys.argv[1]))["steps"]))' "$work/rest/report.json")"
[ "$rows" = "ctest-gpu train-single" ] ||
  fail "--steps rest planned: $rows"
echo "   ok in $((SECONDS - start)) s"

# launch OUT FAKES ARGS…: the script in a session of its own (to clean up after a KILL), its pid
# in `pid` once its report exists.
launch() {
  local out="$1" fakes="$2" _
  shift 2
  TANDEM_GPU_NODE_FAKE_STEPS="$fakes" setsid "$kit" --out "$out" --build-dir "$build_dir" "$@" \
    >"$out.log" 2>&1 &
  pid=$!
  sessions+=("$pid")
  for _ in $(seq 100); do [ -f "$out/report.json" ] && return; sleep 0.1; done
  fail "no report in $out after 10 s"
}
# wait_running OUT STEP: until the report says STEP is running.
wait_running() {
  local _
  for _ in $(seq 150); do [ "$(status "$1" "$2" | cut -f1)" = running ] && return; sleep 0.1; done
  fail "$2 never ran: $(cat "$1.log")"
}

echo "== sigterm: --test without --bundle, TERM while a step runs"
out="$work/sigterm"
mkdir -p "$out"
launch "$out" "environment=0,ctest-gpu=60" --test
wait_running "$out" ctest-gpu
start=$SECONDS
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[ "$status" -eq 143 ] || fail "exit status $status after TERM, expected 143: $(cat "$out.log")"
[ $((SECONDS - start)) -le 8 ] || fail "TERM took $((SECONDS - start)) s to end the run"
check_out "$out"
[ "$(json_field "$out" state)" = interrupted ] || fail "state $(json_field "$out" state)"
[ "$(status "$out" ctest-gpu)" = "interrupted	stopped by SIGTERM" ] || fail "ctest-gpu: $(status "$out" ctest-gpu)"
[[ "$(status "$out" memcheck)" == "skipped	not reached: SIGTERM"* ]] || fail "memcheck: $(status "$out" memcheck)"
tar -tzf "$out/logs.tgz" >"$work/logs.list"
grep -qx './ctest-gpu.log' "$work/logs.list" || fail "logs.tgz lacks the interrupted step's log"
echo "   ok"

echo "== sigkill: KILL at several moments; the report as it goes stays well-formed"
for delay in 0 0.3 1 2.5 mid-step; do
  out="$work/sigkill-$delay"
  mkdir -p "$out"
  launch "$out" "build=1,environment=1,ctest-gpu=60" --bundle "$work/bundle" --all
  if [ "$delay" = mid-step ]; then wait_running "$out" ctest-gpu; else sleep "$delay"; fi
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  check_out "$out" killed
  [ "$(json_field "$out" state)" = running ] || fail "after KILL at $delay s: state $(json_field "$out" state)"
done
[ "$(status "$out" ctest-gpu | cut -f1)" = running ] || fail "ctest-gpu after KILL: $(status "$out" ctest-gpu)"
echo "   ok"

echo "== carry: what travels fits 64 MiB"
bundle="$work/bundle"
[ ! -f "$source_dir/offline-bundle/manifest.tsv" ] || bundle="$source_dir/offline-bundle"
if "$source_dir/scripts/cifar_subset.sh" "$work/subset" >"$work/subset.log" 2>&1; then
  "$kit" --check-carry --bundle "$bundle" --cifar "$work/subset" || fail "the bundle and the subset do not fit"
  # The subset is what train_cifar reads (Note [CIFAR-10 subsets]).
  [ ! -x "$build_dir/apps/train_cifar" ] ||
    "$build_dir/apps/train_cifar" --data-dir "$work/subset" --subset 64 --batch-size 32 --epochs 1 \
      --no-progress --devices cpu --threads 2 >"$work/train.log" 2>&1 || { cat "$work/train.log"; fail "train_cifar cannot read the subset"; }
else
  echo "   no CIFAR-10 subset: $(tail -1 "$work/subset.log")"
  "$kit" --check-carry --bundle "$bundle" --cifar "$work/cifar" || fail "the bundle does not fit"
fi
truncate -s 65M "$work/bundle/big.deb"
"$kit" --check-carry --bundle "$work/bundle" >"$work/carry.log" 2>&1 && fail "65 MiB passed the size check"
grep -q "more than the device tool's 64 MiB" "$work/carry.log" || fail "$(cat "$work/carry.log")"
echo "   ok"
