#!/usr/bin/env bash
# oneDNN 3.2 against Debian's 2.6 (Note [oneDNN 2 and 3] in engine/cpu/dnnl_primitive_descs.h):
# bench_cifar of two builds of the same tree, one per oneDNN, run in turns (3.2, 2.6, 3.2, ...)
# so that a shared machine's load falls on both alike: one process, batch 128, ResNet-20 and
# ResNet-18, fp32 and bf16, on the CPU's own ISA and capped at AVX2 (ONEDNN_MAX_CPU_ISA=AVX2, the
# path of AVX2-only machines; bf16 there is the float32 primitives on widened copies,
# --allow-slow-bf16). Prints the CPU, its AVX-512/AMX flags and the load, then a Markdown table:
# the median images/s of each and their ratio (3.2 / 2.6) for every row.
#
#   scripts/compare_onednn.sh BUILD_3 BUILD_2 [ROUNDS] [OUT_DIR]   # ROUNDS default 3
#
# BUILD_3 is a build folder configured as by default, BUILD_2 one with -DTANDEM_ONEDNN=2; each
# needs apps/bench_cifar built. OUT_DIR (default: a temporary folder) keeps each run's JSON.
# Environment: ARCHS (default "resnet20 resnet18"), ISAS (default "native avx2"), STEPS and
# WARMUP per architecture ("resnet20=10,resnet18=3" and "resnet20=3,resnet18=2"), BATCH (default
# 128), THREADS (default: every core).
set -euo pipefail
case "${1:-}" in -h | --help | "") sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
[ $# -ge 2 ] && [ $# -le 4 ] || { echo "usage: scripts/compare_onednn.sh BUILD_3 BUILD_2 [ROUNDS] [OUT_DIR]" >&2; exit 2; }
build_3="$1" build_2="$2" rounds="${3:-3}" out="${4:-$(mktemp -d)}"
for build in "$build_3" "$build_2"; do
  [ -x "$build/apps/bench_cifar" ] || { echo "error: no $build/apps/bench_cifar: build it first" >&2; exit 1; }
done
mkdir -p "$out"
archs="${ARCHS:-resnet20 resnet18}" isas="${ISAS:-native avx2}" threads="${THREADS:-$(nproc)}"
batch="${BATCH:-128}" steps="${STEPS:-resnet20=10,resnet18=3}" warmup="${WARMUP:-resnet20=3,resnet18=2}"
per_arch() { tr ',' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

echo "== CPU: $(lscpu | sed -n 's/^Model name: *//p'), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'), $(nproc) CPUs"
echo "== flags: $(grep -o 'avx512[a-z_0-9]*\|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "== start $(date -u '+%Y-%m-%d %H:%M UTC'), load:$(uptime | sed 's/.*load average//')"
for round in $(seq "$rounds"); do
  for isa in $isas; do
    for arch in $archs; do
      for version in 3 2; do
        build="$build_3"
        [ "$version" = 3 ] || build="$build_2"
        tag="onednn$version"
        json="$out/${arch}_${isa}_${tag}_$round.json"
        env_isa=()
        [ "$isa" = native ] || env_isa=(ONEDNN_MAX_CPU_ISA="${isa^^}" DNNL_MAX_CPU_ISA="${isa^^}")
        env "${env_isa[@]}" "$build/apps/bench_cifar" --modes single --devices 1 --arch "$arch" \
          --precision fp32,bf16 --allow-slow-bf16 --batch-sizes "$batch" --threads "$threads" --repeats 1 \
          --steps "$(per_arch "$steps" "$arch")" --warmup "$(per_arch "$warmup" "$arch")" \
          --json "$json" >"${json%.json}.log" 2>&1 ||
          { echo "error: $tag $arch $isa failed:" >&2; tail -5 "${json%.json}.log" >&2; exit 1; }
        echo "   round $round $isa $arch $tag: $(python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
print(", ".join("%s %.1f img/s" % (r["precision"], r["images_per_s"] or 0) for r in j["rows"]), "load %.2f" % j["load_average"])' "$json")"
      done
    done
  done
done
echo "== end $(date -u '+%Y-%m-%d %H:%M UTC'), load:$(uptime | sed 's/.*load average//')"

python3 - "$out" <<'EOF'
import glob, json, os, statistics, sys
out, tag3, tag2 = sys.argv[1], "onednn3", "onednn2"
runs = {}
for path in glob.glob(os.path.join(out, "*.json")):
    arch, isa, tag, _ = os.path.basename(path)[:-5].split("_")
    for row in json.load(open(path))["rows"]:
        runs.setdefault((arch, isa, row["precision"], tag), []).append(row["images_per_s"])
print("\n| model | precision | ISA | oneDNN 3.2 img/s | oneDNN 2.6 img/s | 3.2 / 2.6 | runs |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for arch, isa, precision in sorted({k[:3] for k in runs}, key=lambda k: (k[1] != "native", k[0], k[2])):
    a, b = runs.get((arch, isa, precision, tag3), []), runs.get((arch, isa, precision, tag2), [])
    if not a or not b:
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"| {arch} | {precision} | {isa} | {ma:.1f} | {mb:.1f} | {ma / mb:.2f}x | {len(a)} + {len(b)} |")
EOF
