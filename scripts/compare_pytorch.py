#!/usr/bin/env python3
"""Tandem beside PyTorch: images/s of the same CIFAR ResNet training step in both, measured
interleaved in one run on one machine, with the ratio Tandem / PyTorch per workload.

A step is forward, cross-entropy, backward and SGD (momentum 0.9) on synthetic CIFAR-shaped
batches (random normal 3x32x32 images, random labels 0..9), global batch 128, in float32 and,
with --precisions bf16 (or fp32,bf16), in mixed precision: Tandem's --precision bf16 beside
PyTorch's torch.autocast("cpu", dtype=torch.bfloat16) around forward and loss. Each
measurement runs in fresh processes: Tandem's through `bench_cifar --json`, PyTorch's as this
script again with the hidden --worker flag (one process, or one per DDP rank over Gloo). For each
repeat, every workload runs Tandem's configurations and PyTorch's (NCHW and channels-last) back to
back, in alternating order, so that the machine's noise falls on both; the table gives medians.

    scripts/compare_pytorch.sh                       # builds bench_cifar if missing, then this
    python3 scripts/compare_pytorch.py --rows resnet20-single --repeats 1 --steps 3
    python3 scripts/compare_pytorch.py --pytorch-only  # without Tandem's binary
    python3 scripts/compare_pytorch.py --precisions fp32,bf16   # mixed precision rows too

Needs Debian's python3-torch (scripts/install_deps.sh): run it with /usr/bin/python3 when
`python3` is another interpreter. Standard library and torch only.
"""
import argparse
import datetime
import importlib.util
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTORCH_FORMATS = ("nchw", "channels_last")
FORMAT_TITLES = {"nchw": "NCHW", "channels_last": "channels-last", "default": "default format"}
# bench_cifar's spelling of each format, for its --memory-format flag.
TANDEM_FORMAT_FLAGS = {"nchw": "nchw", "channels_last": "channels-last"}


@dataclass(frozen=True)
class Workload:
    name: str       # what --rows selects
    arch: str       # resnet20 or resnet18
    mode: str       # single or ddp (bench_cifar's --modes)
    world: int      # processes
    title: str      # the table's first column; {t}: threads per process, e.g. "2 threads"


WORKLOADS = {
    w.name: w
    for w in (
        Workload("resnet20-single", "resnet20", "single", 1, "ResNet-20, 1 process × {t}"),
        Workload("resnet20-ddp", "resnet20", "ddp", 2, "ResNet-20, DDP 2 ranks × {t} (Gloo)"),
        Workload("resnet18-single", "resnet18", "single", 1, "ResNet-18, 1 process × {t}"),
    )
}
# Steps per measurement when --warmup/--steps are not given: ResNet-18 costs ~10x ResNet-20 per
# image, and the default run (3 repeats, all workloads) should take about 10 minutes on 2 cores.
DEFAULT_STEPS = {"resnet20": (3, 10), "resnet18": (1, 3)}  # (warm-up, timed)
PRECISIONS = ("fp32", "bf16")  # bench_cifar's --precision names


def row_key(workload, precision):
    """One row of the table: a workload in one precision."""
    return f"{workload.name}:{precision}"


# --- the PyTorch worker: one process (or one DDP rank) measuring one configuration ------------

def pytorch_models():
    """tests/interop/check_pytorch_load.py defines the PyTorch twins of nn/resnet.cpp (option-B
    1x1 conv + BN shortcuts, torchvision's names), checked there against Tandem's checkpoints."""
    sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
    sys.path.insert(0, str(ROOT / "tests" / "interop"))
    import check_pytorch_load
    return check_pytorch_load


def run_worker(spec):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    torch.set_num_threads(spec["threads"])
    rank, world = spec["rank"], spec["world"]
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{spec['port']}",
                                rank=rank, world_size=world)
    torch.manual_seed(spec["seed"])  # the same weights on every rank, as DDP requires
    # scripts/pytorch_gpu_step.py runs this worker on a GPU; the comparison itself on the CPU.
    device = torch.device(spec.get("device", "cpu"))
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    network = pytorch_models().make(spec["arch"]).to(device)
    channels_last = spec["format"] == "channels_last"
    if channels_last:
        network = network.to(memory_format=torch.channels_last)
    model = torch.nn.parallel.DistributedDataParallel(network) if world > 1 else network
    optimizer = torch.optim.SGD(network.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

    # Distinct batches cycled through, built before the clock starts (as bench_cifar does).
    generator = torch.Generator().manual_seed(spec["seed"] * 1000 + rank + 1)
    local = spec["batch"] // world
    pool = []
    for _ in range(min(4, spec["warmup"] + spec["steps"])):
        images = torch.randn(local, 3, 32, 32, generator=generator)
        if channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        labels = torch.randint(0, 10, (local,), generator=generator)
        pool.append((images.to(device), labels.to(device)))

    start = None
    for i in range(spec["warmup"] + spec["steps"]):
        if i == spec["warmup"]:
            if world > 1:
                dist.barrier()  # the ranks start the clock together
            synchronize()
            start = time.perf_counter()
        images, labels = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)  # as Tandem's Sgd::zero_grad
        # bf16: PyTorch's recipe for CPUs, autocast around forward and loss (no GradScaler:
        # bfloat16 has float32's range).
        with torch.autocast(device.type, dtype=torch.bfloat16,
                            enabled=spec.get("precision") == "bf16"):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    synchronize()
    elapsed = time.perf_counter() - start
    if world > 1:
        dist.barrier()  # no rank leaves while another still needs it
        dist.destroy_process_group()
    if rank == 0:
        result = {"images_per_s": spec["batch"] * spec["steps"] / elapsed,
                  "ms_per_step": 1e3 * elapsed / spec["steps"],
                  "parameters": sum(p.numel() for p in network.parameters()),
                  "threads_per_process": torch.get_num_threads(),
                  "final_loss": loss.item(),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        Path(spec["out"]).write_text(json.dumps(result))


def run_probe():
    """Prints what PyTorch runs on; one conv large enough to take oneDNN's path, so that
    ONEDNN_VERBOSE (set by the parent) prints oneDNN's version and ISA."""
    import torch
    models = pytorch_models()
    torch.nn.functional.conv2d(torch.randn(16, 3, 32, 32), torch.randn(16, 3, 3, 3), padding=1)
    config = torch.__config__.show()
    capability = re.search(r"CPU capability usage: (\S+)", config)
    print("PROBE " + json.dumps({
        "torch": torch.__version__,
        "mkldnn": torch.backends.mkldnn.is_available(),
        "aten_capability": capability.group(1) if capability else "unknown",
        "parameters": {arch: sum(p.numel() for p in models.make(arch).parameters())
                       for arch in ("resnet20", "resnet18")},
    }), flush=True)


# --- the driver -----------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def last_line(text):
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


def measure_pytorch(workload, fmt, precision, args, steps, work):
    """One PyTorch measurement in fresh processes: (result dict or None, error or None)."""
    per_process = max(1, args.threads // workload.world)
    out = Path(tempfile.mkstemp(suffix=".json", dir=work)[1])
    env = dict(os.environ, OMP_NUM_THREADS=str(per_process), MKL_NUM_THREADS=str(per_process))
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: the ranks share this machine
    spec = {"arch": workload.arch, "format": fmt, "batch": args.batch, "warmup": steps[0],
            "steps": steps[1], "threads": per_process, "world": workload.world,
            "port": free_port(), "seed": 0, "out": str(out), "precision": precision}
    logs = [f"{out}.rank{rank}.log" for rank in range(workload.world)]
    processes = []
    for rank in range(workload.world):
        with open(logs[rank], "w") as log:
            processes.append(subprocess.Popen(
                [sys.executable, __file__, "--worker", json.dumps(dict(spec, rank=rank))],
                env=env, stdout=subprocess.DEVNULL, stderr=log))
    error = wait_all(processes, logs, args.timeout)
    if error:
        return None, error
    return json.loads(out.read_text()), None


def tandem_help(binary):
    """bench_cifar's --help, or "" when it cannot run."""
    try:
        return subprocess.run([str(binary), "--help"], capture_output=True, text=True,
                              timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def tandem_formats(help_text):
    """The formats bench_cifar can be asked for: both when its --help lists --memory-format,
    else only its default."""
    if "--memory-format" not in help_text:
        return ["default"]
    return list(PYTORCH_FORMATS)


def measure_tandem(workload, fmt, precision, args, steps, work):
    """One bench_cifar run of one configuration: (result dict or None, error or None)."""
    out = Path(tempfile.mkstemp(suffix=".json", dir=work)[1])
    command = [str(args.bench_cifar), "--modes", workload.mode, "--batch-sizes", str(args.batch),
               "--arch", workload.arch, "--warmup", str(steps[0]), "--steps", str(steps[1]),
               "--threads", str(args.threads), "--json", str(out)]
    if workload.mode == "ddp":
        command += ["--devices", str(workload.world), "--overlap", "on"]
    if fmt != "default":
        command += ["--memory-format", TANDEM_FORMAT_FLAGS[fmt]]
    if precision != "fp32":
        command += ["--precision", precision]
    if args.tandem_repeats_flag:
        # One measurement per call: this script repeats in its own rounds, beside PyTorch's.
        command += ["--repeats", "1"]
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
            "final_loss": row.get("final_loss"), "peak_rss_mb": row.get("peak_rss_mb")}, None


def machine_info(args):
    """The header: CPU, its AVX-512 flags, and what PyTorch and its oneDNN run on."""
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
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1", OMP_NUM_THREADS="1")
    probe = subprocess.run([sys.executable, __file__, "--probe"], capture_output=True, text=True,
                           env=env, timeout=300)
    line = [l for l in probe.stdout.splitlines() if l.startswith("PROBE ")]
    if probe.returncode != 0 or not line:
        sys.exit("compare_pytorch: PyTorch failed to start: " + last_line(probe.stderr))
    info.update(json.loads(line[0][len("PROBE "):]))
    isa = re.search(r"isa:(.+)$", probe.stdout, re.M)
    version = re.search(r"(oneDNN v\S+)", probe.stdout)
    info["onednn_isa"] = isa.group(1).strip() if isa else "unknown (no oneDNN verbose output)"
    info["onednn"] = version.group(1) if version else "oneDNN"
    return info


def steps_for(arch, args):
    warmup, steps = DEFAULT_STEPS[arch]
    return (warmup if args.warmup is None else args.warmup,
            steps if args.steps is None else args.steps)


def run_all(args, workloads, tandem_fmts, work):
    """The interleaved measurements: samples[(workload, side, format)] = [images/s, ...]."""
    samples, errors, details = {}, [], {}
    for repeat in range(args.repeats):
        for workload in workloads:
            jobs = [("tandem", f, p) for p in args.precisions for f in tandem_fmts]
            jobs += [("pytorch", f, p) for p in args.precisions for f in PYTORCH_FORMATS]
            if repeat % 2:
                jobs.reverse()  # neither side always goes first
            steps = steps_for(workload.arch, args)
            for side, fmt, precision in jobs:
                measure = measure_tandem if side == "tandem" else measure_pytorch
                began = time.monotonic()
                result, error = measure(workload, fmt, precision, args, steps, work)
                key = (row_key(workload, precision), side, fmt)
                samples.setdefault(key, [])
                outcome = f"{result['images_per_s']:.1f} images/s" if result else "failed"
                what = f"{workload.name} {precision} {side} {FORMAT_TITLES[fmt]}"
                print(f"[{repeat + 1}/{args.repeats}] {what}: {outcome} "
                      f"({time.monotonic() - began:.0f} s)", file=sys.stderr, flush=True)
                if result:
                    samples[key].append(result["images_per_s"])
                    details.setdefault(key, result)
                else:
                    errors.append(f"{what}: {error}")
    return samples, errors, details


def cell(values):
    if not values:
        return "failed"
    median = statistics.median(values)
    if len(values) == 1:
        return f"{median:.0f}"
    return f"{median:.0f} ({min(values):.0f}–{max(values):.0f})"


def best(samples, name, side, formats):
    medians = [statistics.median(samples[(name, side, f)]) for f in formats
               if samples.get((name, side, f))]
    return max(medians) if medians else None


def print_report(args, info, workloads, tandem_fmts, samples, errors, details):
    print(f"# Tandem beside PyTorch — {info['date']}")
    print(f"CPU: {info['cpu']} ({info['cpus']} CPUs); AVX-512: "
          f"{', '.join(info['avx512']) if info['avx512'] else 'no'}")
    print(f"PyTorch {info['torch']}: {info['onednn']} ISA '{info['onednn_isa']}', ATen kernels "
          f"{info['aten_capability']}, mkldnn {'on' if info['mkldnn'] else 'off'}")
    print(f"{args.threads} threads in all (DDP: {args.threads} / 2 per rank); global batch "
          f"{args.batch}; {args.repeats} repeat(s), median (min–max) images/s; load average "
          f"{info['load_average_start']:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    # Both sides use libgomp, whose threads spin while they wait: on cores shared with other
    # processes that costs multi-threaded rows several times their speed (passive does not spin).
    print(f"OMP_WAIT_POLICY: {info['omp_wait_policy']} (inherited by both sides)")
    if info["load_average_start"] > 0.5 * info["cpus"]:
        print(f"note: the machine was busy before the run (load average "
              f"{info['load_average_start']:.2f} on {info['cpus']} CPUs); multi-threaded rows "
              f"suffer most from other processes on the cores")
    for arch in sorted({w.arch for w in workloads}, reverse=True):
        warmup, steps = steps_for(arch, args)
        print(f"{arch}: {warmup} warm-up + {steps} timed steps per measurement; "
              f"{parameter_line(arch, info, details)}")
    print()
    tandem_columns = [] if args.pytorch_only else tandem_fmts
    header = ["workload"] + [f"Tandem {FORMAT_TITLES[f]}" for f in tandem_columns]
    header += ["PyTorch NCHW", "PyTorch channels-last"]
    if not args.pytorch_only:
        header.append("Tandem / best PyTorch")
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for w in workloads:
        threads = max(1, args.threads // w.world)
        for precision in args.precisions:
            key = row_key(w, precision)
            row = [w.title.format(t=f"{threads} thread" + ("s" if threads > 1 else ""))
                   + f", b{args.batch}" + (", bf16 (PyTorch: autocast)" if precision == "bf16"
                                           else "")]
            row += [cell(samples.get((key, "tandem", f), [])) for f in tandem_columns]
            row += [cell(samples.get((key, "pytorch", f), [])) for f in PYTORCH_FORMATS]
            if not args.pytorch_only:
                ours, theirs = (best(samples, key, "tandem", tandem_fmts),
                                best(samples, key, "pytorch", PYTORCH_FORMATS))
                row.append(f"{ours / theirs:.2f}" if ours and theirs else "-")
            print("| " + " | ".join(row) + " |")
    if len(tandem_columns) > 1:
        print("\nThe ratio takes the faster format on each side.")
    for line in precision_gains(args, workloads, tandem_fmts, samples):
        print(line)
    for error in errors:
        print(f"failed: {error}")


def precision_gains(args, workloads, tandem_fmts, samples):
    """bf16 against fp32 on each side, best format each, when both precisions ran."""
    if set(args.precisions) != set(PRECISIONS):
        return []
    lines = ["", "bf16 / fp32, each side's faster format:"]
    for w in workloads:
        gains = []
        for side, formats in (("Tandem", tandem_fmts), ("PyTorch", PYTORCH_FORMATS)):
            fast = best(samples, row_key(w, "bf16"), side.lower(), formats)
            slow = best(samples, row_key(w, "fp32"), side.lower(), formats)
            gains.append(f"{side} {fast / slow:.2f}" if fast and slow else f"{side} -")
        lines.append(f"- {w.name}: " + ", ".join(gains))
    return lines


def parameter_line(arch, info, details):
    """Whether Tandem's model (bench_cifar's parameter_bytes / 4) has PyTorch's parameter count."""
    theirs = info["parameters"][arch]
    ours = {r["parameters"] for (key, side, _), r in details.items()
            if side == "tandem" and WORKLOADS[key.split(":")[0]].arch == arch}
    if not ours:
        return f"parameters: PyTorch {theirs:,}"
    if ours == {theirs}:
        return f"parameters: Tandem {theirs:,} = PyTorch {theirs:,}"
    return f"parameters DIFFER: Tandem {sorted(ours)}, PyTorch {theirs:,}"


def write_json(path, args, info, workloads, tandem_fmts, samples, errors, details):
    rows = []
    for w in workloads:
        for precision in args.precisions:
            key = row_key(w, precision)
            entry = {"workload": w.name, "arch": w.arch, "mode": w.mode, "precision": precision,
                     "processes": w.world, "threads_per_process": max(1, args.threads // w.world),
                     "batch": args.batch, "warmup_steps": steps_for(w.arch, args)[0],
                     "timed_steps": steps_for(w.arch, args)[1]}
            for side, formats in (("tandem", tandem_fmts), ("pytorch", PYTORCH_FORMATS)):
                for f in formats:
                    values = samples.get((key, side, f), [])
                    entry[f"{side}_{f}"] = {"images_per_s": values,
                                            "median": statistics.median(values) if values else None}
                    # rank 0's for PyTorch, the largest rank's for Tandem (bench_cifar's)
                    peak = details.get((key, side, f), {}).get("peak_rss_mb")
                    if peak is not None:
                        entry[f"{side}_{f}"]["peak_rss_mb"] = peak
            ours = best(samples, key, "tandem", tandem_fmts)
            theirs = best(samples, key, "pytorch", PYTORCH_FORMATS)
            entry["ratio_tandem_over_best_pytorch"] = ours / theirs if ours and theirs else None
            rows.append(entry)
    info = dict(info, load_average_end=os.getloadavg()[0], repeats=args.repeats,
                tandem_formats=[] if args.pytorch_only else tandem_fmts)
    Path(path).write_text(json.dumps({"benchmark": "compare_pytorch", "machine": info,
                                      "rows": rows, "errors": errors}, indent=2) + "\n")


def parse_args():
    parser = argparse.ArgumentParser(
        description="Tandem (bench_cifar) beside PyTorch: images/s of one CIFAR ResNet training "
                    "step, measured interleaved, with the ratio per workload.")
    parser.add_argument("--rows", default=",".join(WORKLOADS),
                        help="workloads, comma-separated (default: all): " + ", ".join(WORKLOADS))
    parser.add_argument("--repeats", type=int, default=3, help="rounds over all rows; medians")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed steps per measurement (default: resnet20 3, resnet18 1)")
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per measurement (default: resnet20 10, resnet18 3)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="threads in all: single rows get all, each of 2 DDP ranks half "
                             "(default: the CPUs this process may use)")
    parser.add_argument("--batch", type=int, default=128, help="global batch (DDP: split over 2)")
    parser.add_argument("--bench-cifar", type=Path, default=ROOT / "build" / "apps" / "bench_cifar",
                        help="Tandem's bench_cifar (default: build/apps/bench_cifar in the repo)")
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
    return args, [WORKLOADS[n] for n in names]


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        return run_worker(json.loads(sys.argv[2]))
    if sys.argv[1:] == ["--probe"]:
        return run_probe()
    args, workloads = parse_args()
    if importlib.util.find_spec("torch") is None:
        sys.exit(f"compare_pytorch: {sys.executable} cannot import torch; run this with "
                 f"/usr/bin/python3 (Debian's python3-torch: scripts/install_deps.sh) or through "
                 f"scripts/compare_pytorch.sh, which finds it")
    tandem_fmts = []
    args.tandem_repeats_flag = False
    if not args.pytorch_only:
        if not os.access(args.bench_cifar, os.X_OK):
            sys.exit(f"compare_pytorch: bench_cifar not found at {args.bench_cifar}; build it "
                     f"with `cmake --build build --target bench_cifar` (scripts/compare_pytorch.sh "
                     f"does), pass --bench-cifar PATH, or measure PyTorch alone (--pytorch-only)")
        help_text = tandem_help(args.bench_cifar)
        tandem_fmts = tandem_formats(help_text)
        args.tandem_repeats_flag = "--repeats" in help_text  # bench_cifar builds before it had none
    info = machine_info(args)
    with tempfile.TemporaryDirectory(prefix="compare_pytorch.") as work:
        samples, errors, details = run_all(args, workloads, tandem_fmts, work)
    print_report(args, info, workloads, tandem_fmts, samples, errors, details)
    if args.json:
        write_json(args.json, args, info, workloads, tandem_fmts, samples, errors, details)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
