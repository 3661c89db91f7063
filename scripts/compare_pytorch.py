#!/usr/bin/env python3
"""Tandem beside PyTorch: images/s of the same CIFAR ResNet training step in both, measured
interleaved in one run on one machine, with the ratio Tandem / PyTorch per workload.

A step is forward, cross-entropy, backward and SGD (momentum 0.9) on synthetic CIFAR-shaped
batches (random normal 3x32x32 images, random labels 0..9), global batch 128, in float32 and,
with --precisions bf16 (or fp32,bf16), in mixed precision: Tandem's --precision bf16 beside
PyTorch's torch.autocast("cpu", dtype=torch.bfloat16) around forward and loss.

Several PyTorch releases can be measured in the same run (--pytorch PYTHON, once per release):
Debian's 1.13 (the Python running this script, by default) and a current 2.x from
scripts/install_pytorch2.sh. Each runs eager in NCHW and in channels-last; a 2.x also runs
torch.compile (TorchInductor, channels-last) unless --no-compile. Each measurement runs in fresh
processes: Tandem's through `bench_cifar --json`, PyTorch's through scripts/pytorch_step.py
--worker under that release's Python (one process, or one per DDP rank over Gloo). For each
repeat, every workload runs all configurations back to back, in alternating order, so that the
machine's noise falls on all of them; the table gives medians.

Sharded data parallel (ZeRO, docs/parallel.md): the rows resnet20-zero1 and resnet18-zero1 run
bench_cifar --zero 1 beside PyTorch's torch.distributed.optim.ZeroRedundancyOptimizer;
resnet20-zero2 / resnet18-zero2 run bench_cifar --zero 2 beside FSDP2 (fully_shard) with
reshard_after_forward=False, and resnet20-zero3 / resnet18-zero3 --zero 3 beside FSDP2 with True
(Note [FSDP2 beside ZeRO 2 and 3] in scripts/pytorch_step.py; PyTorch 1.13 has no FSDP2 and
shows n/a there). The same rows with "-x4" run 4 ranks. Every DDP row also gives the bytes of
model state (parameters, gradients at their peak in a step, optimizer state) the fullest rank
holds, counted on both sides (Note [Counted memory]), in a table of its own:

    scripts/compare_pytorch.sh --rows resnet20-ddp,resnet20-zero1,resnet20-zero2
    scripts/compare_pytorch.sh --pytorch2 --rows resnet20-zero2,resnet20-zero3,resnet20-zero3-x4

    scripts/compare_pytorch.sh                       # builds bench_cifar if missing, then this
    scripts/compare_pytorch.sh --pytorch2            # also PyTorch 2.x (installed once, cached)
    python3 scripts/compare_pytorch.py --rows resnet20-single --repeats 1 --steps 3
    python3 scripts/compare_pytorch.py --pytorch-only  # without Tandem's binary
    python3 scripts/compare_pytorch.py --precisions fp32,bf16   # mixed precision rows too

Standard library only here; the PyTorch side needs torch in each --pytorch Python.
"""
import argparse
import datetime
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_pytorch_report as report  # noqa: E402  (after the path it lives on)

ROOT = Path(__file__).resolve().parent.parent
STEP = ROOT / "scripts" / "pytorch_step.py"
FORMATS = ("nchw", "channels_last")
# bench_cifar's spelling of each format, for its --memory-format flag.
TANDEM_FORMAT_FLAGS = {"nchw": "nchw", "channels_last": "channels-last"}
PRECISIONS = ("fp32", "bf16")  # bench_cifar's --precision names


@dataclass(frozen=True)
class Workload:
    name: str       # what --rows selects
    arch: str       # resnet20 or resnet18
    mode: str       # single or ddp (bench_cifar's --modes)
    world: int      # processes
    title: str      # the table's first column; {t}: threads per process, e.g. "2 threads"
    zero: int = 0   # ddp: ZeRO's stage (bench_cifar --zero; PyTorch: 1 ZeroRedundancyOptimizer,
                    # 2 and 3 FSDP2, Note [FSDP2 beside ZeRO 2 and 3] in pytorch_step.py)


# What PyTorch runs beside each ZeRO stage, for the rows' titles.
PYTORCH_ZERO_NAMES = {0: "DDP", 1: "ZeroRedundancyOptimizer",
                      2: "FSDP2, reshard_after_forward=False", 3: "FSDP2, reshard_after_forward=True"}


def sharded_workloads():
    """DDP and ZeRO 1-3 of both networks, at 2 ranks (named as before) and at 4 ("-x4")."""
    for arch, title in (("resnet20", "ResNet-20"), ("resnet18", "ResNet-18")):
        for world in (2, 4):
            suffix = "" if world == 2 else f"-x{world}"
            for zero in range(4):
                name = f"{arch}-{'ddp' if zero == 0 else f'zero{zero}'}{suffix}"
                kind = "DDP" if zero == 0 else f"ZeRO-{zero}"
                pytorch = "" if zero == 0 else f"; PyTorch: {PYTORCH_ZERO_NAMES[zero]}"
                yield Workload(name, arch, "ddp", world,
                               f"{title}, {kind} {world} ranks × {{t}} (Gloo{pytorch})", zero)


WORKLOADS = {
    w.name: w
    for w in (
        Workload("resnet20-single", "resnet20", "single", 1, "ResNet-20, 1 process × {t}"),
        Workload("resnet18-single", "resnet18", "single", 1, "ResNet-18, 1 process × {t}"),
        *sharded_workloads(),
    )
}
DEFAULT_ROWS = ("resnet20-single", "resnet20-ddp", "resnet18-single")
# Steps per measurement when --warmup/--steps are not given: ResNet-18 costs ~10x ResNet-20 per
# image, and the default run (3 repeats, default rows, one PyTorch) takes about 10 minutes on 2
# cores. torch.compile compiles in its first steps (Note [Compile warm-up]).
DEFAULT_STEPS = {"resnet20": (3, 10), "resnet18": (1, 3)}  # (warm-up, timed)
COMPILE_WARMUP = 3


@dataclass(frozen=True)
class Peer:
    """One PyTorch release, run by its own Python."""
    python: str
    info: dict      # run_probe()'s answer: torch version, compile, oneDNN ISA, parameters

    @property
    def name(self):
        return "PyTorch " + ".".join(self.info["torch"].split("+")[0].split(".")[:2])


@dataclass(frozen=True)
class Config:
    """A column of the table: who runs the step (tandem, or a Peer), in which memory format, and
    how (eager or compile)."""
    side: str       # "tandem" or a Peer's name
    fmt: str        # nchw or channels_last
    variant: str = "eager"

    @property
    def key(self):
        return f"{self.side}|{self.fmt}|{self.variant}"


def configs_for(args, peers):
    """Every column of the run: Tandem's formats, then each PyTorch's eager formats and its
    compiled channels-last."""
    configs = [] if args.pytorch_only else [Config("tandem", f) for f in FORMATS]
    for peer in peers:
        configs += [Config(peer.name, f) for f in FORMATS]
        if peer.info["compile"] and not args.no_compile:
            configs.append(Config(peer.name, "channels_last", "compile"))
    return configs


# --- measurements ---------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_line(text):
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


def wait_all(processes, logs, timeout):
    """Waits for every process; when one fails or time runs out, kills the others (only ours),
    so that a rank whose peer died does not wait in Gloo until its own timeout.
    Returns the error text, or None."""
    deadline = time.monotonic() + timeout
    error = None
    while error is None and any(p.poll() is None for p in processes):
        failed = [r for r, p in enumerate(processes) if p.poll() not in (None, 0)]
        if failed:
            rank = failed[0]
            error = f"rank {rank} exited {processes[rank].returncode}: " + last_line(
                Path(logs[rank]).read_text(errors="replace"))
        elif time.monotonic() > deadline:
            error = f"timed out after {timeout} s"
        else:
            time.sleep(0.2)
    for p in processes:
        if p.poll() is None:
            p.kill()
            p.wait()
    for rank, p in enumerate(processes):
        if error is None and p.returncode != 0:
            error = f"rank {rank} exited {p.returncode}: " + last_line(
                Path(logs[rank]).read_text(errors="replace"))
    return error


def measure_pytorch(peer, workload, config, precision, args, steps, work):
    """One PyTorch measurement in fresh processes: (result dict or None, error or None)."""
    per_process = max(1, args.threads // workload.world)
    out = Path(tempfile.mkstemp(suffix=".json", dir=work)[1])
    env = dict(os.environ, OMP_NUM_THREADS=str(per_process), MKL_NUM_THREADS=str(per_process))
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: the ranks share this machine
    # Note [Compile warm-up]: TorchInductor compiles in the first steps of every fresh process.
    # Its cache (one folder for the run) lets every measurement after the first reuse the
    # generated code, so the warm-up steps need not hold minutes of compiling on 2 cores.
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(work) / "inductor"))
    warmup = max(steps[0], COMPILE_WARMUP) if config.variant == "compile" else steps[0]
    spec = {"arch": workload.arch, "format": config.fmt, "batch": args.batch, "warmup": warmup,
            "steps": steps[1], "threads": per_process, "world": workload.world,
            "port": free_port(), "seed": 0, "out": str(out), "precision": precision,
            "variant": config.variant, "zero": workload.zero}
    logs = [f"{out}.rank{rank}.log" for rank in range(workload.world)]
    processes = []
    for rank in range(workload.world):
        with open(logs[rank], "w") as log:
            processes.append(subprocess.Popen(
                [peer.python, str(STEP), "--worker", json.dumps(dict(spec, rank=rank))],
                env=env, stdout=subprocess.DEVNULL, stderr=log))
    error = wait_all(processes, logs, args.timeout)
    if error:
        return None, error
    return json.loads(out.read_text()), None


def measure_tandem(workload, config, precision, args, steps, work):
    """One bench_cifar run of one configuration: (result dict or None, error or None)."""
    out = Path(tempfile.mkstemp(suffix=".json", dir=work)[1])
    command = [str(args.bench_cifar), "--modes", workload.mode, "--batch-sizes", str(args.batch),
               "--arch", workload.arch, "--warmup", str(steps[0]), "--steps", str(steps[1]),
               "--threads", str(args.threads), "--json", str(out),
               "--memory-format", TANDEM_FORMAT_FLAGS[config.fmt],
               "--repeats", "1"]  # this script repeats in its own rounds, beside PyTorch's
    if workload.mode == "ddp":
        command += ["--devices", str(workload.world), "--overlap", "on"]
    if workload.zero:
        command += ["--zero", str(workload.zero)]
    if precision != "fp32":
        command += ["--precision", precision]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None, f"bench_cifar timed out after {args.timeout} s"
    try:
        row = json.loads(out.read_text())["rows"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return None, f"bench_cifar exited {done.returncode}: " + last_line(done.stderr)
    if row.get("error") or row.get("images_per_s") is None:
        return None, row.get("error") or "bench_cifar wrote no images/s"
    return {"images_per_s": row["images_per_s"], "ms_per_step": row["ms_per_step"],
            "parameters": round(row["parameter_bytes"] / 4),  # float32
            "threads_per_process": row.get("threads_per_process"),
            "final_loss": row.get("final_loss"), "peak_rss_mb": row.get("peak_rss_mb"),
            "state_bytes": row.get("state_bytes")}, None


def steps_for(arch, args):
    warmup, steps = DEFAULT_STEPS[arch]
    return (warmup if args.warmup is None else args.warmup,
            steps if args.steps is None else args.steps)


def run_all(args, workloads, configs, peers, work):
    """The interleaved measurements: samples[(row key, config key)] = [images/s, ...]."""
    by_name = {peer.name: peer for peer in peers}
    samples, errors, details = {}, [], {}
    for repeat in range(args.repeats):
        for workload in workloads:
            jobs = [(c, p) for p in args.precisions for c in configs
                    if report.measures(workload, c, peers)]
            if repeat % 2:
                jobs.reverse()  # no configuration always goes first
            steps = steps_for(workload.arch, args)
            for config, precision in jobs:
                began = time.monotonic()
                if config.side == "tandem":
                    result, error = measure_tandem(workload, config, precision, args, steps, work)
                else:
                    result, error = measure_pytorch(by_name[config.side], workload, config,
                                                    precision, args, steps, work)
                key = (report.row_key(workload, precision), config.key)
                samples.setdefault(key, [])
                outcome = f"{result['images_per_s']:.1f} images/s" if result else "failed"
                what = f"{workload.name} {precision} {report.config_title(config)}"
                print(f"[{repeat + 1}/{args.repeats}] {what}: {outcome} "
                      f"({time.monotonic() - began:.0f} s)", file=sys.stderr, flush=True)
                if result:
                    samples[key].append(result["images_per_s"])
                    first = details.setdefault(key, result)
                    # The fullest state over the repeats (stage 2's peak depends on timing).
                    if result.get("state_bytes") is not None:
                        first["state_bytes"] = max(first["state_bytes"], result["state_bytes"])
                else:
                    errors.append(f"{what}: {error}")
    return samples, errors, details


# --- the machine and the PyTorch releases ---------------------------------------------------

def probe(python):
    """run_probe() under `python`, with oneDNN's verbose output parsed: its info dict."""
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1", OMP_NUM_THREADS="1")
    try:
        done = subprocess.run([python, str(STEP), "--probe"], capture_output=True, text=True,
                              env=env, timeout=300)
    except OSError as error:
        sys.exit(f"compare_pytorch: cannot run {python}: {error}")
    line = [l for l in done.stdout.splitlines() if l.startswith("PROBE ")]
    if done.returncode != 0 or not line:
        sys.exit(f"compare_pytorch: PyTorch failed to start under {python}: "
                 + last_line(done.stderr))
    info = json.loads(line[0][len("PROBE "):])
    isa = re.search(r"isa:(.+)$", done.stdout, re.M)
    version = re.search(r"(oneDNN v\S+)", done.stdout)
    info["onednn_isa"] = isa.group(1).strip() if isa else "unknown (no oneDNN verbose output)"
    info["onednn"] = version.group(1) if version else "oneDNN"
    return info


def machine_info(args):
    """The header: CPU, its AVX-512 and AMX flags, the load."""
    info = {"date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
            "cpu": "unknown", "cpus": os.cpu_count(), "threads": args.threads,
            "load_average_start": os.getloadavg()[0],
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset")}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = re.search(r"^Model name:\s*(.+)$", lscpu, re.M)
        info["cpu"] = model.group(1).strip() if model else "unknown"
    except OSError:
        pass
    try:
        flags = re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M).group(1)
        info["avx512"] = sorted({f for f in flags.split() if f.startswith(("avx512", "amx"))})
    except (OSError, AttributeError):
        info["avx512"] = []
    return info


def parse_args():
    parser = argparse.ArgumentParser(
        description="Tandem (bench_cifar) beside PyTorch: images/s of one CIFAR ResNet training "
                    "step, measured interleaved, with the ratio per workload.")
    parser.add_argument("--rows", default=",".join(DEFAULT_ROWS),
                        help="workloads, comma-separated (default: %(default)s): "
                             + ", ".join(WORKLOADS))
    parser.add_argument("--repeats", type=int, default=3, help="rounds over all rows; medians")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed steps per measurement (default: resnet20 3, resnet18 1; "
                             f"torch.compile at least {COMPILE_WARMUP})")
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per measurement (default: resnet20 10, resnet18 3)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="threads in all: single rows get all, each of 2 DDP ranks half "
                             "(default: the CPUs this process may use)")
    parser.add_argument("--batch", type=int, default=128, help="global batch (DDP: split over 2)")
    parser.add_argument("--bench-cifar", type=Path, default=ROOT / "build" / "apps" / "bench_cifar",
                        help="Tandem's bench_cifar (default: build/apps/bench_cifar in the repo)")
    parser.add_argument("--pytorch", action="append", metavar="PYTHON",
                        help="a Python whose torch is measured; give it once per PyTorch "
                             "release (default: this script's Python)")
    parser.add_argument("--no-compile", action="store_true",
                        help="no torch.compile columns (they compile for minutes on 2 cores)")
    parser.add_argument("--pytorch-only", action="store_true", help="measure PyTorch alone")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per measurement")
    parser.add_argument("--json", help="also write the table's data to this JSON file")
    parser.add_argument("--precisions", default="fp32",
                        help="fp32, bf16 or fp32,bf16: a row per workload and precision (bf16: "
                             "Tandem's --precision bf16, PyTorch's autocast)")
    args = parser.parse_args()
    names = [n for n in args.rows.split(",") if n]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown or not names:
        parser.error(f"--rows: unknown {unknown}; choose from {', '.join(WORKLOADS)}")
    if args.repeats < 1 or args.threads < 1 or (args.steps is not None and args.steps < 1):
        parser.error("--repeats, --threads and --steps must be at least 1")
    args.precisions = [p for p in args.precisions.split(",") if p]
    if not args.precisions or any(p not in PRECISIONS for p in args.precisions):
        parser.error(f"--precisions: choose from {', '.join(PRECISIONS)}")
    if args.batch % 2:
        parser.error("--batch must be even (DDP splits it over 2 ranks)")
    args.pytorch = args.pytorch or [sys.executable]
    return args, [WORKLOADS[n] for n in names]


def main():
    args, workloads = parse_args()
    if not args.pytorch_only and not os.access(args.bench_cifar, os.X_OK):
        sys.exit(f"compare_pytorch: bench_cifar not found at {args.bench_cifar}; build it "
                 f"with `cmake --build build --target bench_cifar` (scripts/compare_pytorch.sh "
                 f"does), pass --bench-cifar PATH, or measure PyTorch alone (--pytorch-only)")
    peers = [Peer(python, probe(python)) for python in args.pytorch]
    names = [peer.name for peer in peers]
    if len(set(names)) != len(names):
        sys.exit(f"compare_pytorch: two --pytorch Pythons run the same release ({names}); "
                 f"give each release once")
    info = machine_info(args)
    configs = configs_for(args, peers)
    with tempfile.TemporaryDirectory(prefix="compare_pytorch.") as work:
        samples, errors, details = run_all(args, workloads, configs, peers, work)
    run = report.Run(args, info, peers, workloads, configs, samples, errors, details,
                     {arch: steps_for(arch, args) for arch in DEFAULT_STEPS})
    report.print_table(run)
    if args.json:
        report.write_json(args.json, run)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
