#!/usr/bin/env python3
"""PyTorch's twin of bench_collectives: the same collectives on the same sizes, timed the same way
(warm-up calls, a barrier, back-to-back calls each waited for, the slowest rank's mean), with the
same sizes and bus factors (nccl-tests', Note [Bus bandwidth] in
apps/bench_collectives/collective_case.cpp), through torch.distributed with Gloo. One process
per rank, started with torch.distributed's env:// variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT): scripts/compare_collectives.py starts them, or torchrun does.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=0 pytorch_collectives.py --json out.json &
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=1 pytorch_collectives.py

Flags as bench_collectives': --collectives, --sizes, --warmup, --iterations, --json. Where
PyTorch 1.13's Gloo group lacks a collective (all_gather_into_tensor, reduce_scatter) its rows
say so ("unsupported": PyTorch's own error) instead of timing a stand-in. all_to_all is
all_to_all_single, as in bench_collectives.
"""
import argparse
import json
import re
import sys
import time

# Imported once the flags are read (import_torch), so that --help and a bad flag need no PyTorch.
torch = None
dist = None

COLLECTIVES = ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
               "gather", "scatter", "reduce_scatter", "all_to_all")
SPLIT = {"all_gather", "all_gather_into_tensor", "gather", "scatter", "reduce_scatter",
         "all_to_all"}  # S is one part per rank
UNITS = {"": 1, "B": 1, "K": 1024, "KiB": 1024, "k": 1024, "M": 1024 ** 2, "MiB": 1024 ** 2,
         "m": 1024 ** 2, "G": 1024 ** 3, "GiB": 1024 ** 3}


def byte_size(text):
    match = re.fullmatch(r"(\d{1,13})(\D*)", text)
    if not match or match.group(2) not in UNITS or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"size '{text}' is not a number of bytes (4096, 4K, 16M)")
    return int(match.group(1)) * UNITS[match.group(2)]


def bus_factor(name, n):
    if name == "all_reduce":
        return 2 * (n - 1) / n
    return 1.0 if name in ("broadcast", "reduce") else (n - 1) / n


class Case:
    """One collective's buffers at one size (bench_collectives' CollectiveCase), root 0."""

    def __init__(self, name, nbytes, rank, n):
        self.name, self.rank, self.n = name, rank, n
        parts = n if name in SPLIT else 1
        self.part = nbytes // 4 // parts
        if self.part == 0:
            raise SystemExit(f"pytorch_collectives: {name} of {nbytes} bytes at {n} ranks: "
                             "less than one float32 per rank")
        self.bytes = self.part * parts * 4
        whole, part, root = self.part * parts, self.part, rank == 0
        self.input = torch.empty(part if name in ("all_gather", "all_gather_into_tensor",
                                                  "gather") else whole)
        self.output = torch.empty(whole if name in ("all_gather_into_tensor", "all_to_all")
                                  else part)
        self.outputs = [torch.empty(part) for _ in range(n)] \
            if name == "all_gather" or (name == "gather" and root) else None
        self.inputs = [torch.empty(part) for _ in range(n)] if name == "scatter" and root else None

    def launch(self):
        name = self.name
        if name == "all_reduce":
            dist.all_reduce(self.input)
        elif name == "broadcast":
            dist.broadcast(self.input, 0)
        elif name == "reduce":
            dist.reduce(self.input, 0)
        elif name == "all_gather":
            dist.all_gather(self.outputs, self.input)
        elif name == "all_gather_into_tensor":
            dist.all_gather_into_tensor(self.output, self.input)
        elif name == "gather":
            dist.gather(self.input, self.outputs, 0)
        elif name == "scatter":
            dist.scatter(self.output, self.inputs, 0)
        elif name == "reduce_scatter":
            dist.reduce_scatter_tensor(self.output, self.input)
        else:
            dist.all_to_all_single(self.output, self.input)

    def check(self):
        """Inputs that say who sent them, one call, this rank's outputs checked, buffers zeroed."""
        n, rank, part = self.n, self.rank, self.part
        self.input.fill_(rank + 1)
        if self.inputs:
            for r, t in enumerate(self.inputs):
                t.fill_(r + 1)
        if self.name == "all_to_all":
            for s in range(n):
                self.input[s * part:(s + 1) * part] = rank * n + s + 1
        self.launch()
        total = n * (n + 1) / 2
        expected = {
            "all_reduce": [(self.input, total)], "broadcast": [(self.input, 1)],
            "reduce": [(self.input, total)] if rank == 0 else [],  # others: scratch in Gloo
            "all_gather": [(t, r + 1) for r, t in enumerate(self.outputs or [])],
            "gather": [(t, r + 1) for r, t in enumerate(self.outputs or [])],
            "all_gather_into_tensor": [(self.output[r * part:(r + 1) * part], r + 1)
                                       for r in range(n)],
            "scatter": [(self.output, rank + 1)], "reduce_scatter": [(self.output, total)],
            "all_to_all": [(self.output[r * part:(r + 1) * part], r * n + rank + 1)
                           for r in range(n)],
        }[self.name]
        for tensor, value in expected:
            for got in (tensor[0].item(), tensor[-1].item()):
                if got != value:
                    raise SystemExit(f"pytorch_collectives: {self.name}: wrong result on rank "
                                     f"{rank}: {got}, expected {value}")
        for tensor in [self.input, self.output] + (self.inputs or []) + (self.outputs or []):
            tensor.zero_()


def measure(name, nbytes, args, rank, n):
    """A row as bench_collectives writes it, or one saying PyTorch lacks the collective."""
    case = Case(name, nbytes, rank, n)
    row = {"collective": name, "requested_bytes": nbytes, "bytes": case.bytes}
    try:
        case.check()
    except RuntimeError as error:  # Gloo's "does not support ..." (raised alike on every rank)
        return dict(row, unsupported=str(error).splitlines()[0])
    for _ in range(args.warmup):
        case.launch()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.iterations):
        case.launch()  # Gloo's collectives block until done, as bench_collectives' waits do
    cell = torch.tensor([(time.perf_counter() - start) / args.iterations], dtype=torch.float32)
    dist.all_reduce(cell, op=dist.ReduceOp.MAX)  # the slowest rank's mean
    seconds = cell.item()
    algbw = case.bytes / seconds / 1e9
    factor = bus_factor(name, n)
    return dict(row, time_us=seconds * 1e6, algbw_gbps=algbw, bus_factor=factor,
                busbw_gbps=algbw * factor)


def import_torch():
    global torch, dist
    import torch as torch_module
    import torch.distributed as dist_module
    torch, dist = torch_module, dist_module


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collectives", default=",".join(COLLECTIVES))
    parser.add_argument("--sizes", default="4K,64K,1M,16M,64M")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--json", help="also write the rows to this file (rank 0)")
    args = parser.parse_args()
    names = args.collectives.split(",")
    unknown = [name for name in names if name not in COLLECTIVES]
    if unknown:
        parser.error(f"unknown collective '{unknown[0]}'; known: {', '.join(COLLECTIVES)}")
    try:
        sizes = [byte_size(text) for text in args.sizes.split(",")]
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    if args.iterations < 1 or args.warmup < 0:
        parser.error("--iterations must be > 0 and --warmup >= 0")
    import_torch()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    rows = [measure(name, nbytes, args, rank, n) for name in names for nbytes in sizes]
    if rank == 0:
        print(f"PyTorch {torch.__version__} gloo collectives, {n} ranks, float32, "
              f"{args.iterations} iterations after {args.warmup} warm-up")
        for row in rows:
            result = ("unsupported" if "unsupported" in row else
                      f"{row['time_us']:11.1f} us {row['busbw_gbps']:9.3f} GB/s busbw")
            print(f"{row['collective']:<22} {row['bytes']:>10} {result}")
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"program": "pytorch_collectives", "backend": "gloo",
                           "torch": torch.__version__, "world_size": n, "dtype": "float32",
                           "warmup": args.warmup, "iterations": args.iterations, "rows": rows},
                          out, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
