#!/usr/bin/env bash
# fp32 against bf16 beside a fixed background load (Note [bf16 on busy cores] in
# apps/common/busy_cores.h): starts LOOPS busy loops, one process each, then runs bench_cifar's
# single-device ResNet-20 in turns (fp32, bf16, fp32, ...) under each setting, so that both
# precisions meet the same load; prints the CPU, each run, and a Markdown table of the medians
# with bf16/fp32. The same runs without the loops give the quiet ratio beside it. With
# --profile DIR, one more run of each precision per setting under the load writes bench_cifar's
# per-op tables (DIR/<setting>_<precision>/*.ops.md): the rows that grow are the answer.
#
#   scripts/bench_under_load.sh [--build DIR] [--loops N] [--rounds N] [--profile DIR]
#
# Settings (each a thread count and an environment): "2 threads", "1 thread",
# "2 threads, OMP_WAIT_POLICY=passive", "2 threads, GOMP_SPINCOUNT=10000". Defaults: build
# "build", 4 loops, 3 rounds. Environment: ARCH (resnet20), BATCH (128), STEPS (5), WARMUP (2).
set -euo pipefail
build=build loops=4 rounds=3 profile=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --build) build="$2"; shift 2 ;;
    --loops) loops="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --profile) profile="$2"; shift 2 ;;
    *) echo "error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
bench="$build/apps/bench_cifar"
[ -x "$bench" ] || { echo "error: no $bench: build it first (scripts/test.sh --build-only)" >&2; exit 1; }
[[ "$loops" =~ ^[0-9]+$ && "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "error: --loops and --rounds take counts" >&2; exit 2; }
arch="${ARCH:-resnet20}" batch="${BATCH:-128}" steps="${STEPS:-5}" warmup="${WARMUP:-2}"
out="$(mktemp -d)"
settings=("2|" "1|" "2|OMP_WAIT_POLICY=passive" "2|GOMP_SPINCOUNT=10000")
busy_pids=()
stop_loops() { [ ${#busy_pids[@]} -eq 0 ] || kill "${busy_pids[@]}" 2>/dev/null || true; busy_pids=(); }
trap 'stop_loops; rm -rf "$out"' EXIT
start_loops() { for _ in $(seq "$1"); do (while :; do :; done) & busy_pids+=($!); done; sleep 1; }

# bench_cifar once: setting, precision, JSON path, extra arguments. Prints images/s.
run_one() {
  local threads="${1%%|*}" env_setting="${1#*|}" precision="$2" json="$3"; shift 3
  local env_args=()
  [ -z "$env_setting" ] || env_args=("$env_setting")
  env "${env_args[@]}" "$bench" --modes single --devices 1 --arch "$arch" --precision "$precision" \
    --allow-slow-bf16 --batch-sizes "$batch" --threads "$threads" --repeats 1 --steps "$steps" \
    --warmup "$warmup" --json "$json" "$@" >"${json%.json}.log" 2>&1 ||
    { echo "error: bench_cifar failed ($1 $precision):" >&2; tail -3 "${json%.json}.log" >&2; exit 1; }
  python3 -c 'import json, sys; print("%.1f" % (json.load(open(sys.argv[1]))["rows"][0]["images_per_s"] or 0))' "$json"
}

echo "== CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; flags: $(grep -o 'avx512_bf16\|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), load before: $(cut -d' ' -f1-3 /proc/loadavg); $arch, batch $batch, $steps steps after $warmup"
for background in 0 "$loops"; do
  start_loops "$background"
  for round in $(seq "$rounds"); do
    for index in "${!settings[@]}"; do
      for precision in fp32 bf16; do
        ips=$(run_one "${settings[$index]}" "$precision" "$out/${background}_${index}_${precision}_$round.json")
        echo "   loops $background, round $round, ${settings[$index]}, $precision: $ips images/s"
        echo "$background $index $precision $ips" >>"$out/results"
      done
    done
  done
  if [ -n "$profile" ] && [ "$background" != 0 ]; then
    for index in "${!settings[@]}"; do
      for precision in fp32 bf16; do
        run_one "${settings[$index]}" "$precision" "$out/profile.json" \
          --profile "$profile/setting${index}_$precision" >/dev/null
      done
    done
  fi
  stop_loops
done

python3 - "$out/results" "$loops" "${settings[@]}" <<'EOF'
import statistics, sys
path, loops, settings = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {}
for line in open(path):
    background, index, precision, ips = line.split()
    runs.setdefault((background, int(index), precision), []).append(float(ips))
def median(background, index, precision):
    return statistics.median(runs[(background, index, precision)])
print("\n| setting | quiet fp32 | quiet bf16 | bf16/fp32 quiet | %s loops fp32 | %s loops bf16 | bf16/fp32 loaded |" % (loops, loops))
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for index, setting in enumerate(settings):
    threads, env = setting.split("|", 1)
    name = "%s thread%s%s" % (threads, "" if threads == "1" else "s", ", " + env if env else "")
    q32, q16 = median("0", index, "fp32"), median("0", index, "bf16")
    l32, l16 = median(loops, index, "fp32"), median(loops, index, "bf16")
    print("| %s | %.0f | %.0f | %.2f× | %.0f | %.0f | %.2f× |" % (name, q32, q16, q16 / q32, l32, l16, l16 / l32))
EOF
