#!/usr/bin/env python3
"""PyTorch's Gloo collectives on the inputs of GlooTorchParityMultiprocess.* (tests/parallel/comm/
gloo_torch_parity_test.cpp), for world sizes 2, 3 and 4: each rank's output of each case goes to
OUT/<case>.n<size>.r<rank>.bin as raw little-endian bytes, for the C++ ranks to compare theirs
with. The ranks of each world run as threads of this process on one HashStore (one `import
torch`, a few seconds, instead of one per rank).

Both sides make their inputs with the same integer formula (input_values below and
tandem_inputs() in the C++ test), so the float32 values are bit-identical: a double division,
rounded to float32 (and to float16) to nearest even.

PyTorch 1.13's Gloo group has no bfloat16, no ReduceOp.AVG, no reduce_scatter,
all_gather_into_tensor or list all_to_all: those cases run the nearest PyTorch equivalent (sum then
/ size, all_reduce then the rank's slice, all_gather, all_to_all_single), as the C++ test notes.

Usage: torch_collectives.py OUT_DIR. Prints "skip: <why>" and exits 0 without PyTorch.
"""
import datetime
import os
import sys
import threading

try:
    import numpy as np
    import torch
    import torch.distributed as dist
except ImportError as error:  # the C++ test skips
    print(f"skip: {error}")
    sys.exit(0)

WORLD_SIZES = (2, 3, 4)


def input_values(kind, rank, n, salt):
    """Rank `rank`'s n inputs: 'float' in [-100, 100), 'factor' in [0.5, 1.5), 'int' in
    [-1000, 1000]."""
    k = (rank * 7919 + np.arange(n, dtype=np.int64) * 104729 + salt * 15485863)
    if kind == "int":
        return torch.from_numpy(k % 2001 - 1000)
    m = k % 1000003
    # An exact integer over an exact integer: one correctly rounded division in double, on both
    # sides (no multiply-add a compiler could fuse), then to float32.
    if kind == "float":
        values = (m * 200 - 100 * 1000003).astype(np.float64) / 1000003.0
    else:
        values = (2 * m + 1000003).astype(np.float64) / 2000006.0
    return torch.from_numpy(values.astype(np.float32))


OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "int64": torch.int64}


def reduce_input(dtype, op, rank, n, salt):
    kind = "int" if dtype == "int64" else ("factor" if op == "product" else "float")
    return input_values(kind, rank, n, salt).to(DTYPES[dtype])


def allreduce(pg, t, op):
    options = dist.AllreduceOptions()
    options.reduceOp = OPS[op]
    pg.allreduce([t], options).wait()


def run_cases(pg, rank, size):
    """Yields (case, output tensor) for every case, in the order the C++ test runs them."""
    for dtype in ("float32", "float16", "int64"):
        for op in ("sum", "product", "min", "max"):
            t = reduce_input(dtype, op, rank, 1001, 1)
            allreduce(pg, t, op)
            yield f"allreduce_{op}_{dtype}", t
    for dtype, op in (("float32", "sum"), ("float16", "max"), ("int64", "product")):
        t = reduce_input(dtype, op, rank, 1001, 2)
        options = dist.ReduceOptions()
        options.rootRank = size - 1
        options.reduceOp = OPS[op]
        pg.reduce([t], options).wait()
        if rank == size - 1:
            yield f"reduce_{op}_{dtype}", t
    # Avg: PyTorch's Gloo has none; the sum, then / size.
    t = reduce_input("float32", "sum", rank, 1001, 3)
    allreduce(pg, t, "sum")
    yield "avg_float32", t / size
    # reduce_scatter: none either; the all-reduce's slice of this rank.
    t = reduce_input("float32", "sum", rank, 13 * size, 4)
    allreduce(pg, t, "sum")
    yield "reduce_scatter_sum_float32", t[rank * 13:(rank + 1) * 13].clone()
    t = input_values("float", rank, 13, 5)
    outputs = [torch.zeros(13) for _ in range(size)]
    pg.allgather([outputs], [t]).wait()
    yield "allgather_float32", torch.cat(outputs)
    options = dist.GatherOptions()
    options.rootRank = 0
    gathered = [torch.zeros(13) for _ in range(size)] if rank == 0 else []
    pg.gather([gathered] if rank == 0 else [], [t], options).wait()
    if rank == 0:
        yield "gather_float32", torch.cat(gathered)
    options = dist.ScatterOptions()
    options.rootRank = size - 1
    out = torch.zeros(13)
    parts = list(input_values("float", rank, 13 * size, 6).split(13))
    pg.scatter([out], [parts] if rank == size - 1 else [], options).wait()
    yield "scatter_float32", out
    # alltoall_single, even (3 elements per rank) and uneven ((r + s) % 3 + 1 rows of 2 from
    # rank r to rank s).
    out = torch.zeros(3 * size)
    pg.alltoall_base(out, input_values("float", rank, 3 * size, 7), [], [],
                     dist.AllToAllOptions()).wait()
    yield "alltoall_even_float32", out
    in_splits = [(rank + s) % 3 + 1 for s in range(size)]
    out_splits = [(s + rank) % 3 + 1 for s in range(size)]
    source = input_values("float", rank, 2 * sum(in_splits), 8).view(-1, 2)
    out = torch.zeros(sum(out_splits), 2)
    pg.alltoall_base(out, source, out_splits, in_splits, dist.AllToAllOptions()).wait()
    yield "alltoall_uneven_float32", out


def run_rank(store, rank, size, out_dir, errors):
    try:
        pg = dist.ProcessGroupGloo(dist.PrefixStore(f"world{size}/", store), rank, size,
                                   datetime.timedelta(seconds=60))
        for case, tensor in run_cases(pg, rank, size):
            path = os.path.join(out_dir, f"{case}.n{size}.r{rank}.bin")
            with open(path, "wb") as f:
                f.write(tensor.contiguous().numpy().tobytes())
    except Exception as error:  # reported by the main thread
        errors.append(f"rank {rank} of {size}: {error}")


def main():
    out_dir = sys.argv[1]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    store = dist.HashStore()
    errors = []
    for size in WORLD_SIZES:
        threads = [threading.Thread(target=run_rank, args=(store, r, size, out_dir, errors))
                   for r in range(size)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        print("\n".join(errors))
        sys.exit(1)
    print(f"ok: PyTorch {torch.__version__}")


if __name__ == "__main__":
    main()
