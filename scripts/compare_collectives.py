#!/usr/bin/env python3
"""Tandem's collectives beside PyTorch's: bus bandwidth of every collective at every size, for
Tandem over Gloo, Tandem over MPI and PyTorch 1.13 over Gloo, measured interleaved in one run on
one machine, with the ratio Tandem / PyTorch per row.

Each side runs as one job per world size, fresh processes timing every collective and size:
Tandem's through bench_collectives --json (Gloo ranks started with env:// variables, as
tandem-run starts them; MPI ranks by mpirun), PyTorch's through scripts/pytorch_collectives.py
(the same sizes, bus factors and timing: Note [Bus bandwidth] in
apps/bench_collectives/collective_case.cpp). For each repeat every world size runs all sides back
to back, in alternating order, so that the machine's noise falls on all of them; the table gives
medians. Every rank runs one compute thread (TANDEM_NUM_THREADS, OMP_NUM_THREADS,
torch.set_num_threads), mpirun binds no rank to a core, and Gloo uses loopback ("lo").

With --netns the ranks are two "hosts": two network namespaces joined by a veth pair (as
tests/scripts/netns_ddp_test.sh builds them; root only), rank 0 in one, rank 1 in the other, Gloo
on each side's veth (GLOO_SOCKET_IFNAME); world size 2, Gloo sides only: a rank that mpirun
starts inside a namespace cannot reach mpirun's PMIx server on the host's loopback (Open MPI 4.1:
"OPAL ERROR: Unreachable" in MPI_Init_thread).

    python3 scripts/compare_collectives.py                      # 2 and 3 ranks, 3 repeats
    python3 scripts/compare_collectives.py --world-sizes 2 --sizes 4K,1M --repeats 1
    python3 scripts/compare_collectives.py --netns --json netns.json   # as root
    python3 scripts/compare_collectives.py --report netns.json         # its table again

Standard library only here; the PyTorch side needs torch in --pytorch's Python (default: the
first of this Python and /usr/bin/python3 that has it). Exit status 1 when a job failed.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import types
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_pytorch import free_port, machine_info, wait_all  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TWIN = ROOT / "scripts" / "pytorch_collectives.py"
SIDES = ("tandem-gloo", "tandem-mpi", "pytorch-gloo")
# mpirun refuses root, and more ranks than cores, unless told.
MPIRUN_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
              "OMPI_MCA_rmaps_base_oversubscribe": "1"}
ONE_THREAD = {"TANDEM_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class Netns:
    """Two network namespaces joined by a veth pair, removed on exit (root only)."""

    def __init__(self):
        tag = f"cc{os.getpid() % 100000}"
        subnet = os.getpid() % 200 + 20
        self.names = (f"{tag}a", f"{tag}b")
        self.links = (f"{tag}x", f"{tag}y")
        self.addresses = (f"10.78.{subnet}.1", f"10.78.{subnet}.2")

    def __enter__(self):
        if os.geteuid() != 0 or not shutil.which("ip"):
            sys.exit("compare_collectives: --netns needs root and `ip` (iproute2)")
        (a, b), (x, y) = self.names, self.links
        commands = [["ip", "netns", "add", a], ["ip", "netns", "add", b],
                    ["ip", "link", "add", x, "type", "veth", "peer", "name", y],
                    ["ip", "link", "set", x, "netns", a], ["ip", "link", "set", y, "netns", b]]
        for ns, link, address in zip(self.names, self.links, self.addresses):
            commands += [["ip", "-n", ns, "addr", "add", f"{address}/24", "dev", link],
                         ["ip", "-n", ns, "link", "set", "lo", "up"],
                         ["ip", "-n", ns, "link", "set", link, "up"]]
        for command in commands:
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                self.__exit__()
                sys.exit(f"compare_collectives: {' '.join(command)}: {done.stderr.strip()}")
        return self

    def __exit__(self, *_):
        for ns in self.names:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def rank_commands(side, world, args, out, netns):
    """[(argv, extra environment)] per rank of a Gloo side, or one mpirun for the MPI side."""
    flags = ["--collectives", args.collectives, "--sizes", args.sizes, "--warmup",
             str(args.warmup), "--iterations", str(args.iterations)]
    if side.startswith("tandem") and args.no_consistency_check:
        flags.append("--no-consistency-check")
    if side == "tandem-mpi":
        return [(["mpirun", "-np", str(world), "--bind-to", "none", str(args.bench)] + flags
                 + ["--backend", "mpi", "--json", out], MPIRUN_ENV)]
    program = [str(args.bench), "--backend", "gloo"] if side == "tandem-gloo" else \
        [args.pytorch, str(TWIN)]
    port = str(free_port())
    jobs = []
    for rank in range(world):
        env = {"RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_PORT": port,
               "MASTER_ADDR": netns.addresses[0] if netns else "127.0.0.1",
               "GLOO_SOCKET_IFNAME": netns.links[rank] if netns else "lo"}
        prefix = ["ip", "netns", "exec", netns.names[rank]] if netns else []
        jobs.append((prefix + program + flags + (["--json", out] if rank == 0 else []), env))
    return jobs


def run_job(side, world, args, work, netns):
    """One side at one world size: (bench_collectives-style report, or None; error or None)."""
    out = Path(tempfile.mkstemp(suffix=".json", dir=work)[1])
    processes, logs = [], []
    for index, (argv, extra) in enumerate(rank_commands(side, world, args, str(out), netns)):
        logs.append(f"{out}.{index}.log")
        with open(logs[-1], "w") as log:
            processes.append(subprocess.Popen(argv, env=dict(os.environ, **ONE_THREAD, **extra),
                                              stdout=log, stderr=subprocess.STDOUT))
    error = wait_all(processes, logs, args.timeout)
    if error:
        return None, error
    try:
        return json.loads(out.read_text()), None
    except ValueError:
        return None, f"{side} wrote no JSON report"


def run_all(args, netns):
    """samples[(world, side, collective, requested bytes)] = [busbw, ...]; errors."""
    samples, errors, unsupported = {}, [], {}
    with tempfile.TemporaryDirectory(prefix="compare_collectives.") as work:
        for repeat in range(args.repeats):
            for world in args.world_sizes:
                sides = list(reversed(args.sides)) if repeat % 2 else list(args.sides)
                for side in sides:
                    report, error = run_job(side, world, args, work, netns)
                    print(f"[{repeat + 1}/{args.repeats}] {side}, {world} ranks: "
                          f"{'failed' if error else 'done'}", file=sys.stderr, flush=True)
                    if error:
                        errors.append(f"{side}, {world} ranks: {error}")
                        continue
                    for row in report["rows"]:
                        key = (world, side, row["collective"], row["requested_bytes"])
                        if "unsupported" in row:
                            unsupported[key] = row["unsupported"]
                        else:
                            samples.setdefault(key, []).append(row["busbw_gbps"])
    return samples, errors, unsupported


def size_label(nbytes):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def as_run(args, info, samples, unsupported, errors):
    """What --json writes and the table is printed from (also by --report)."""
    return {"machine": dict(info, load_average_end=os.getloadavg()[0]), "netns": args.netns,
            "sides": args.sides, "world_sizes": args.world_sizes,
            "collectives": args.collectives.split(","), "iterations": args.iterations,
            "warmup": args.warmup, "repeats": args.repeats,
            "consistency_check": not args.no_consistency_check,
            "samples": [{"world_size": k[0], "side": k[1], "collective": k[2],
                         "requested_bytes": k[3], "busbw_gbps": v}
                        for k, v in sorted(samples.items())],
            "unsupported": [{"world_size": k[0], "side": k[1], "collective": k[2],
                             "requested_bytes": k[3], "error": v}
                            for k, v in sorted(unsupported.items())],
            "errors": errors}


def cell(run, world, side, collective, nbytes):
    """The median busbw of a row and side, "unsupported", or None where its job failed."""
    key = {"world_size": world, "side": side, "collective": collective,
           "requested_bytes": nbytes}
    if any(all(u[k] == v for k, v in key.items()) for u in run["unsupported"]):
        return "unsupported"
    for sample in run["samples"]:
        if all(sample[k] == v for k, v in key.items()):
            return statistics.median(sample["busbw_gbps"])
    return None


def print_table(run):
    """A Markdown table: busbw per side, then each Tandem side over PyTorch (above 1: faster)."""
    info = run["machine"]
    where = "two network namespaces (veth)" if run["netns"] else "loopback"
    print(f"Collectives, float32, {where}: busbw GB/s (nccl-tests' bus bandwidth), median of "
          f"{run['repeats']}; {run['iterations']} iterations after {run['warmup']} warm-up per "
          f"row; Tandem {'with' if run['consistency_check'] else 'without'} its consistency check")
    print(f"{info['cpu']}, {info['cpus']} CPUs, AVX-512/AMX: {', '.join(info['avx512']) or 'no'}; "
          f"{info['date']}; load average {info['load_average_start']:.2f} at the start, "
          f"{info['load_average_end']:.2f} at the end\n")
    sides = run["sides"]
    tandem = [s for s in sides if s.startswith("tandem")] if "pytorch-gloo" in sides else []
    print("| ranks | collective | size | " + " | ".join(sides)
          + "".join(f" | {s.split('-')[1]} / PyTorch" for s in tandem) + " |")
    print("| --- " * (3 + len(sides) + len(tandem)) + "|")
    sizes = sorted({s["requested_bytes"] for s in run["samples"] + run["unsupported"]})
    for world in run["world_sizes"]:
        for collective in run["collectives"]:
            for nbytes in sizes:
                values = {s: cell(run, world, s, collective, nbytes) for s in sides}
                peer = values.get("pytorch-gloo")
                cells = [str(world), collective, size_label(nbytes)]
                cells += [f"{v:.3g}" if isinstance(v, float) else v or "failed"
                          for v in values.values()]
                cells += [f"{values[s] / peer:.2f}" if isinstance(values[s], float)
                          and isinstance(peer, float) else "—" for s in tandem]
                print("| " + " | ".join(cells) + " |")
    for error in run["errors"]:
        print(f"failed: {error}")


def find_pytorch():
    for python in (sys.executable, "/usr/bin/python3"):
        if python and subprocess.run([python, "-c", "import torch"],
                                     capture_output=True).returncode == 0:
            return python
    return None


def default_build():
    if os.environ.get("BUILD_DIR"):
        return Path(os.environ["BUILD_DIR"])
    here = Path("build")
    return here if (here / "apps" / "bench_collectives").exists() else ROOT / "build"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=Path, default=default_build(),
                        help="Tandem's build folder (default: $BUILD_DIR, else ./build where it "
                             "has bench_collectives, else the checkout's build)")
    parser.add_argument("--pytorch", help="a Python with torch (default: found)")
    parser.add_argument("--sides", default=",".join(SIDES), help="default: %(default)s")
    parser.add_argument("--world-sizes", default="2,3", help="default: %(default)s")
    parser.add_argument("--collectives", default="all_reduce,broadcast,reduce,all_gather,"
                        "all_gather_into_tensor,gather,scatter,reduce_scatter,all_to_all")
    parser.add_argument("--sizes", default="4K,64K,1M,16M,64M", help="default: %(default)s")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="rounds over all jobs; medians")
    parser.add_argument("--no-consistency-check", action="store_true",
                        help="Tandem without Note [Collective consistency] (PyTorch has none)")
    parser.add_argument("--netns", action="store_true",
                        help="rank 0 and rank 1 in two network namespaces (root; 2 ranks, Gloo)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per job")
    parser.add_argument("--json", help="also write every sample here")
    parser.add_argument("--report", help="print the table of an earlier run's --json, run nothing")
    args = parser.parse_args()
    if args.report:
        return args
    args.sides = args.sides.split(",")
    if any(side not in SIDES for side in args.sides):
        parser.error(f"--sides: each of {', '.join(SIDES)}")
    args.world_sizes = [int(w) for w in args.world_sizes.split(",")]
    if args.netns:
        args.world_sizes = [2]
        args.sides = [s for s in args.sides if s != "tandem-mpi"]
    args.bench = args.build / "apps" / "bench_collectives"
    if any(s.startswith("tandem") for s in args.sides) and not os.access(args.bench, os.X_OK):
        parser.error(f"no {args.bench}: build it with "
                     f"`cmake --build {args.build} --target bench_collectives`")
    if "tandem-mpi" in args.sides and not shutil.which("mpirun"):
        parser.error("mpirun is not on PATH (Open MPI); leave tandem-mpi out of --sides")
    if "pytorch-gloo" in args.sides:
        args.pytorch = args.pytorch or find_pytorch()
        if not args.pytorch:
            parser.error("no Python here imports torch; scripts/install_deps.sh installs "
                         "python3-torch (or leave pytorch-gloo out of --sides)")
    return args


def main():
    args = parse_args()
    if args.report:
        print_table(json.loads(Path(args.report).read_text()))
        return 0
    info = machine_info(types.SimpleNamespace(threads=1))
    if args.netns:
        with Netns() as netns:
            samples, errors, unsupported = run_all(args, netns)
    else:
        samples, errors, unsupported = run_all(args, None)
    run = as_run(args, info, samples, unsupported, errors)
    print_table(run)
    if args.json:
        Path(args.json).write_text(json.dumps(run, indent=1) + "\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
