#!/usr/bin/env python3
"""The README's commands run as written (#31: the UX review found one that failed on the torchrun
the README named). Every command line of the README's bash blocks runs, in order, in one scratch
folder where ./build is this build and ./scripts this checkout's scripts, so each finds what the
commands before it wrote (run.ckpt, run.jsonl, bench.json). To take seconds rather than hours,
flags that shrink the work are added where the command does not give them (train_cifar: synthetic
data, 64 images, batch 32, 2 epochs; bench programs: a step or two); a flag the command gives is
never changed. The commands that cannot run here are named with the reason, and a command matched
by no rule fails the test, so a new README command gets a rule, a run or a reason. Ranks started
by hand (consecutive train_cifar lines with the same --init-method tcp:// or file:// and their own
--rank) run at once as one job, on this machine: the tcp:// host becomes 127.0.0.1 at a free port,
the file:// path a file in the scratch folder.

    readme_commands_test.py SOURCE_DIR BUILD_DIR
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

# What cannot run on one CPU machine, or is CI itself; each with the test that covers it instead.
SKIPPED = [
    (r"^scripts/test\.sh\b", "CI itself"),
    (r"^scripts/install_deps\.sh\b", "CI's deps stage"),
    (r"^cmake ", "CI's build stage (InstallExample.* runs cmake --install)"),
    (r"^scripts/get_cifar10\.sh\b", "GetCifar10Script.* (it needs the archive)"),
    (r"^scripts/train\.sh$", "trains for minutes (the line with flags runs, shortened)"),
    (r"^export ", "variables for the launchers below"),
    (r"^tandem-run --nnodes 2:3\b", "three machines (ElasticNodes.* runs three launchers on loopback)"),
    (r"^tandem-run --nnodes 2\b", "two machines (NetnsDdp.* runs two network namespaces)"),
    (r"^torchrun --nnodes 1:3\b", "several machines (ElasticNodes.torchrun runs two agents on loopback)"),
    (r"^mpirun\b.* -H ", "several machines (mpirun -np 2 runs the same on one)"),
    (r"^srun\b|^for attempt .* srun\b", "a Slurm cluster (SlurmDdp.*, as root)"),
]

# mpirun refuses root, and more ranks than cores, unless told; a user who needs it does the same.
MPIRUN_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                  OMPI_MCA_rmaps_base_oversubscribe="1")

TRAIN = [("--synthetic", None), ("--subset", "64"), ("--batch-size", "32"), ("--workers", "0"),
         ("--epochs", "2")]
BENCH_CIFAR = [("--steps", "1"), ("--warmup", "0"), ("--repeats", "1"), ("--batch-sizes", "32")]
BENCH_COLLECTIVES = [("--sizes", "4K"), ("--warmup", "1"), ("--iterations", "2")]
GOOGLE_BENCHMARK = [("--benchmark_min_time=0.01", None)]


def commands(readme):
    """(line number, command) for every command of the README's bash blocks: continuation lines
    joined, comments dropped."""
    out, in_block, pending, first = [], False, "", 0
    for number, line in enumerate(open(readme, encoding="utf-8"), start=1):
        line = line.rstrip("\n")
        if line.startswith("```"):
            in_block = line.strip() == "```bash"
            continue
        if not in_block:
            continue
        text = re.sub(r"(^|\s)#.*$", "", line).rstrip()
        if not pending:
            first = number
        if text.endswith("\\"):
            pending += text[:-1].rstrip() + " "
            continue
        text = (pending + text).strip()
        pending = ""
        if text:
            out.append((first, text))
    return out


def with_flags(command, flags):
    """The command with each flag it does not give appended (a flag's name, or name=value)."""
    words = command.split()
    for name, value in flags:
        bare = name.split("=")[0]
        if any(word == bare or word.startswith(bare + "=") for word in words):
            continue
        if name == "--synthetic" and "--data-dir" in words:
            continue
        command += f" {name}" + (f" {value}" if value is not None else "")
    return command


def shortened(command):
    """The command as run here, or None for one no rule knows."""
    if re.search(r"(^|\s)(--help|--version)(\s|$)", command):
        return command
    if "bench_collectives" in command or command.startswith("python3 scripts/compare_collectives"):
        return with_flags(command, BENCH_COLLECTIVES)
    if "bench_cifar" in command:
        return with_flags(command, BENCH_CIFAR)
    if re.match(r"^\./build/microbench/", command):
        return with_flags(command, GOOGLE_BENCHMARK)
    if "train_cifar" in command or command.startswith("scripts/train.sh "):
        return with_flags(command, TRAIN)
    if command.startswith("scripts/plot_"):
        return command
    return None


def init_method(command):
    """The tcp:// or file:// of a rank started by hand (--init-method URL with --rank), else None."""
    match = re.search(r"--init-method[ =](tcp://\S+|file://\S+)", command)
    return match.group(1) if match and "--rank" in command.split() else None


def free_port():
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def local_init_method(url, scratch):
    """url as it can meet on this machine."""
    if url.startswith("tcp://"):
        return f"tcp://127.0.0.1:{free_port()}"
    return "file://" + os.path.join(scratch, "rendezvous-" + os.path.basename(url))


def run_by_hand(group, scratch):
    """Runs the commands of one job's ranks at once; returns the failures."""
    url = init_method(group[0][1])
    local = local_init_method(url, scratch)
    runs = [shortened(command).replace(url, local) for _, command in group]
    ranks = [subprocess.Popen(run, shell=True, cwd=scratch, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for run in runs]
    failures = []
    for (line, _), run, rank in zip(group, runs, ranks):
        print(f"README:{line}: {run}", flush=True)
        try:
            output, _ = rank.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            rank.kill()
            output, _ = rank.communicate()
        if rank.returncode != 0:
            tail = "\n    ".join(output.strip().splitlines()[-8:])
            failures.append(f"README:{line}: exit {rank.returncode}: {run}\n    {tail}")
    return failures


def built_with_mpi(build):
    """Whether --backend mpi can run: this build has the MPI group and mpirun is on PATH."""
    try:
        cache = open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8").read()
    except OSError:
        return False
    return "TANDEM_WITH_MPI:INTERNAL=ON" in cache and shutil.which("mpirun") is not None


def main():
    source, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    scratch = tempfile.mkdtemp(prefix="readme_commands_")
    os.symlink(build, os.path.join(scratch, "build"))
    os.symlink(os.path.join(source, "scripts"), os.path.join(scratch, "scripts"))
    failures, ran = [], 0
    try:
        listed = commands(os.path.join(source, "README.md"))
        index = 0
        while index < len(listed):
            line, command = listed[index]
            index += 1
            url = init_method(command)
            if url:
                group = [(line, command)]
                while index < len(listed) and init_method(listed[index][1]) == url:
                    group.append(listed[index])
                    index += 1
                failures += run_by_hand(group, scratch)
                ran += len(group)
                continue
            reason = next((why for pattern, why in SKIPPED if re.search(pattern, command)), None)
            if reason:
                print(f"README:{line}: skipped ({reason}): {command}")
                continue
            if command.startswith("torchrun") and shutil.which("torchrun") is None:
                print(f"README:{line}: skipped (no torchrun here): {command}")
                continue
            if command.startswith("mpirun") and not built_with_mpi(build):
                print(f"README:{line}: skipped (no MPI in this build, or no mpirun): {command}")
                continue
            run = shortened(command)
            if run is None:
                failures.append(f"README:{line}: no rule runs or skips it: {command}")
                continue
            program = run.split()[0]
            if program.startswith("./build/") and not os.path.exists(os.path.join(scratch, program)):
                print(f"README:{line}: skipped ({program} is not built in this build): {command}")
                continue
            print(f"README:{line}: {run}", flush=True)
            result = subprocess.run(run, shell=True, cwd=scratch, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, timeout=600, env=MPIRUN_ENV)
            ran += 1
            if result.returncode != 0:
                tail = "\n    ".join(result.stdout.strip().splitlines()[-8:])
                failures.append(f"README:{line}: exit {result.returncode}: {run}\n    {tail}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{ran} commands ran")
    for failure in failures:
        print("FAILED " + failure, file=sys.stderr)
    return 1 if failures or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
