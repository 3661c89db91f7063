#!/usr/bin/env python3
"""bench_collectives and scripts/compare_collectives.py as a user runs them, on tiny sizes (no
timing is judged, only what the reports say):
  gloo     tandem-run starts 2 and then 3 ranks: every collective runs at every size and the
           JSON has one row each, with nccl-tests' size S (rounded down to whole float32 parts
           per rank), bus factor (written out again here from nccl-tests' PERFORMANCE.md), and
           busbw = algbw × factor = S / time × factor
  mpi      the same under mpirun -np 2 --backend mpi (skips without mpirun or an MPI build)
  flags    a bad size, unit or collective, and a size below one float32 per rank at 2 ranks,
           each end with one line and a non-zero exit status, without a hang
  compare  compare_collectives.py runs Tandem (Gloo, and MPI where it can) and PyTorch's Gloo
           twin interleaved at 2 ranks and prints the table with the ratios; PyTorch 1.13's
           missing reduce_scatter is "unsupported", not a number; --report prints the same
           table again from the JSON (skips without torch)
  netns    the same with rank 0 and rank 1 in two network namespaces (root only; skips otherwise)

    bench_collectives_test.py SOURCE_DIR BUILD_DIR CASE
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
COLLECTIVES = ["all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
               "gather", "scatter", "reduce_scatter", "all_to_all"]
SPLIT = {"all_gather", "all_gather_into_tensor", "gather", "scatter", "reduce_scatter",
         "all_to_all"}
SIZES = {"4K": 4096, "4100": 4100}  # 4100 B = 1025 floats: split parts round down
MPIRUN_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                  OMPI_MCA_rmaps_base_oversubscribe="1")


def unwind_slowly_under_asan():
    """In CI's AddressSanitizer stage (ASAN_OPTIONS set): what tests/support/mpirun_ranks.cpp's
    export_mpirun_environment() does, so that LeakSanitizer sees the Open MPI frames that
    scripts/lsan.supp names (Open MPI has no frame pointers). Every program this test starts,
    mpirun's ranks included, inherits it."""
    options = os.environ.get("ASAN_OPTIONS", "")
    if options and "fast_unwind_on_malloc" not in options:
        os.environ["ASAN_OPTIONS"] = options + ":fast_unwind_on_malloc=0"
        MPIRUN_ENV["ASAN_OPTIONS"] = os.environ["ASAN_OPTIONS"]


def expected_factor(name, n):
    """nccl-tests' doc/PERFORMANCE.md ("Summary") and src/{gather,scatter}.cu."""
    if name == "all_reduce":
        return 2 * (n - 1) / n
    if name in ("broadcast", "reduce"):
        return 1.0
    return (n - 1) / n


def run(command, env=None, timeout=120):
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"FAILED: {' '.join(command)} still ran after {timeout} s (a hang)")
    return done.returncode, done.stdout + done.stderr


def check_report(path, n, backend):
    report = json.load(open(path))
    assert report["world_size"] == n and report["backend"] == backend, report
    rows = {(r["collective"], r["requested_bytes"]): r for r in report["rows"]}
    assert len(rows) == len(report["rows"]) == len(COLLECTIVES) * len(SIZES), sorted(rows)
    for name in COLLECTIVES:
        for requested in SIZES.values():
            row = rows[(name, requested)]
            parts = n if name in SPLIT else 1
            assert row["bytes"] == requested // 4 // parts * parts * 4, row
            assert abs(row["bus_factor"] - expected_factor(name, n)) < 1e-12, row
            assert row["time_us"] > 0, row
            algbw = row["bytes"] / (row["time_us"] * 1e-6) / 1e9
            assert abs(row["algbw_gbps"] - algbw) <= 1e-9 * algbw, row
            assert abs(row["busbw_gbps"] - algbw * row["bus_factor"]) <= 1e-9 * algbw, row
    print(f"{backend}, {n} ranks: {len(rows)} rows, sizes and bus factors as nccl-tests'")


def bench_flags(json_path):
    return ["--sizes", ",".join(SIZES), "--warmup", "1", "--iterations", "2", "--json", json_path]


def case_gloo(build, scratch):
    for n in (2, 3):
        out = os.path.join(scratch, f"gloo{n}.json")
        code, text = run([f"{build}/apps/tandem-run", "--nproc-per-node", str(n),
                          "--master-port", "0", "--",  # a free port: tests run side by side
                          f"{build}/apps/bench_collectives"] + bench_flags(out))
        assert code == 0, text
        for name in COLLECTIVES:
            assert f"[rank 0] {name} " in text, text
        check_report(out, n, "gloo")


def case_mpi(build, scratch):
    if not shutil.which("mpirun"):
        return SKIP, "mpirun is not on PATH"
    out = os.path.join(scratch, "mpi.json")
    code, text = run(["mpirun", "-np", "2", f"{build}/apps/bench_collectives", "--backend", "mpi"]
                     + bench_flags(out), env=MPIRUN_ENV)
    if "this build has no MPI backend" in text:
        return SKIP, "this build has no MPI backend"
    assert code == 0, text
    check_report(out, 2, "mpi")
    return 0, ""


def case_flags(build, scratch):
    bench = f"{build}/apps/bench_collectives"
    for flags, message in (
            (["--sizes", "4X"], "size '4X' has an unknown unit 'X'"),
            (["--sizes", "K"], "size 'K' is not a number of bytes"),
            (["--collectives", "all_reduce,allreduce"], "unknown collective 'allreduce'")):
        code, text = run([bench] + flags)
        assert code == 1 and text.startswith("bench_collectives: error: ") and message in text \
            and text.count("\n") == 1, (flags, code, text)
    code, text = run([f"{build}/apps/tandem-run", "--nproc-per-node", "2", "--master-port", "0",
                      "--", bench, "--collectives", "all_gather", "--sizes", "4"], timeout=60)
    # Each rank finds it alone, before any exchange; tandem-run stops the other once one has
    # failed, so the other may not get to print it.
    assert code != 0, text
    line = ("] bench_collectives: error: all_gather of 4 bytes at 2 ranks: less than one float32 "
            "per rank")
    assert line in text, text
    # --json is checked by rank 0 before the rendezvous, not written to after the benchmark: the
    # reason is check_output_path's, which writing the report would not give.
    for path, reason in (("/nonexistent/out.json", "the folder /nonexistent does not exist"),
                         (scratch, "is a folder")):
        code, text = run([f"{build}/apps/tandem-run", "--nproc-per-node", "2", "--master-port",
                          "0", "--", bench, "--collectives", "all_reduce", "--sizes", "4K",
                          "--json", path], timeout=60)
        line = f"[rank 0] bench_collectives: error: --json {path}: {reason}"
        assert code != 0 and line in text, (path, code, text)
    print("flags: one line and exit status 1 for each bad flag, size and --json path, without a "
          "hang")


def case_compare(source, build, scratch, netns):
    python = next((p for p in (sys.executable, "/usr/bin/python3")
                   if subprocess.run([p, "-c", "import torch"], capture_output=True).returncode
                   == 0), None)
    if python is None:
        return SKIP, "no Python with torch"
    if netns and (os.geteuid() != 0 or not shutil.which("ip")):
        return SKIP, "needs root and `ip` for network namespaces"
    sides = ["tandem-gloo", "pytorch-gloo"]
    if not netns and shutil.which("mpirun") and "TANDEM_WITH_MPI:INTERNAL=ON" in open(
            os.path.join(build, "CMakeCache.txt")).read():
        sides.insert(1, "tandem-mpi")
    out = os.path.join(scratch, "compare.json")
    command = [python, f"{source}/scripts/compare_collectives.py", "--build", build,
               "--sides", ",".join(sides), "--world-sizes", "2", "--sizes", "4K",
               "--collectives", "all_reduce,reduce_scatter,all_to_all", "--repeats", "1",
               "--warmup", "1", "--iterations", "2", "--json", out] + (["--netns"] if netns else [])
    code, text = run(command, timeout=240)
    assert code == 0, text
    report = json.load(open(out))
    got = {(s["side"], s["collective"]): s["busbw_gbps"] for s in report["samples"]}
    for side in sides:
        for name in ("all_reduce", "reduce_scatter", "all_to_all"):
            if (side, name) == ("pytorch-gloo", "reduce_scatter"):
                continue
            assert len(got[(side, name)]) == 1 and min(got[(side, name)]) > 0, (side, name, got)
    unsupported = [(u["side"], u["collective"]) for u in report["unsupported"]]
    assert unsupported == [("pytorch-gloo", "reduce_scatter")], unsupported
    table = [line for line in text.splitlines() if line.startswith("| 2 |")]
    assert len(table) == 3, text
    assert "| gloo / PyTorch |" in text and "| unsupported |" in table[1], text
    assert ("two network namespaces" in text) == netns, text
    code, again = run([python, f"{source}/scripts/compare_collectives.py", "--report", out])
    assert code == 0 and [line for line in again.splitlines() if line.startswith("| 2 |")] \
        == table, again
    print("\n".join(line for line in text.splitlines() if not line.startswith("[")))
    return 0, ""


def main():
    source, build, case = sys.argv[1:4]
    unwind_slowly_under_asan()
    with tempfile.TemporaryDirectory(prefix="bench_collectives_test.") as scratch:
        if case == "gloo":
            outcome = case_gloo(build, scratch)
        elif case == "mpi":
            outcome = case_mpi(build, scratch)
        elif case == "flags":
            outcome = case_flags(build, scratch)
        elif case in ("compare", "netns"):
            outcome = case_compare(source, build, scratch, case == "netns")
        else:
            sys.exit(f"unknown case {case}")
    code, why = outcome or (0, "")
    if code == SKIP:
        print(f"skipped: {why}")
    return code


if __name__ == "__main__":
    sys.exit(main())
