#!/usr/bin/env python3
"""PyTorch's side of the comparisons: one CIFAR ResNet training step (forward, cross-entropy,
backward, SGD with momentum 0.9 and weight decay 1e-4) on synthetic CIFAR-shaped batches, timed
over a number of steps after a warm-up, in one process or as one DDP rank over Gloo, its SGD
whole or, with "zero": 1, sharded by torch.distributed.optim.ZeroRedundancyOptimizer (ZeRO
stage 1). DDP ranks also count the bytes of model state they hold (state_bytes, the fullest rank's).

scripts/compare_pytorch.py runs it in fresh processes under each PyTorch it compares (Debian's
1.13, a PyTorch 2.x from scripts/install_pytorch2.sh):

    python3 scripts/pytorch_step.py --worker '{"arch": "resnet20", ...}'   # one measurement
    python3 scripts/pytorch_step.py --probe                               # what PyTorch runs on

and scripts/pytorch_gpu_step.py imports run_worker() to time the same step on a GPU. Runs under
PyTorch 1.13 and every 2.x (torch.compile needs 2.0 or later). Standard library and torch only.
"""
import json
import re
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The ways a configuration can run the step: eager, or compiled by torch.compile (TorchInductor,
# which on a CPU generates and compiles C++ with OpenMP: fused elementwise work around oneDNN's
# convolutions).
VARIANTS = ("eager", "compile")


def pytorch_models():
    """tests/interop/check_pytorch_load.py defines the PyTorch twins of nn/resnet.cpp (option-B
    1x1 conv + BN shortcuts, torchvision's names), checked there against Tandem's checkpoints."""
    sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
    sys.path.insert(0, str(ROOT / "tests" / "interop"))
    import check_pytorch_load
    return check_pytorch_load


def run_worker(spec):
    """One measurement; rank 0 writes {images_per_s, ms_per_step, ...} as JSON to spec["out"].

    spec: arch, format (nchw | channels_last), batch (global), warmup, steps, threads, rank,
    world, port (DDP), seed, out, precision (fp32 | bf16), device (default cpu), variant (eager |
    compile, default eager), zero (0 | 1, default 0; DDP only)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    torch.set_num_threads(spec["threads"])
    rank, world = spec["rank"], spec["world"]
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{spec['port']}",
                                rank=rank, world_size=world)
    torch.manual_seed(spec["seed"])  # the same weights on every rank, as DDP requires
    device = torch.device(spec.get("device", "cpu"))
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    network = pytorch_models().make(spec["arch"]).to(device)
    channels_last = spec["format"] == "channels_last"
    if channels_last:
        network = network.to(memory_format=torch.channels_last)
    ddp = torch.nn.parallel.DistributedDataParallel(network) if world > 1 else None
    model = ddp if ddp is not None else network
    if spec.get("variant", "eager") == "compile":
        # PyTorch's advice for DDP: compile the DDP module (its DDPOptimizer splits the graph at
        # bucket boundaries, so the all-reduces still overlap backward). The compilation runs in
        # the warm-up steps, outside the clock.
        model = torch.compile(model)
    optimizer = make_optimizer(network, spec.get("zero", 0), world)

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
    state_bytes = None
    if world > 1:
        Path(f"{spec['out']}.state{rank}").write_text(
            str(model_state_bytes(ddp, network, optimizer)))
        dist.barrier()  # no rank leaves while another still needs it; every count is written
        dist.destroy_process_group()
        state_bytes = largest_over_ranks(spec["out"], world)
    if rank == 0:
        result = {"images_per_s": spec["batch"] * spec["steps"] / elapsed,
                  "ms_per_step": 1e3 * elapsed / spec["steps"],
                  "parameters": sum(p.numel() for p in network.parameters()),
                  "threads_per_process": torch.get_num_threads(),
                  "final_loss": loss.item(),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "state_bytes": state_bytes}
        Path(spec["out"]).write_text(json.dumps(result))


def make_optimizer(network, zero, world):
    """SGD as Tandem's bench_cifar steps it; zero 1: PyTorch's ZeRO stage 1, each rank keeping
    the momentum of whole parameters assigned to it greedily by size. PyTorch 1.13 has no stage 2
    on CPUs: its FSDP (SHARD_GRAD_OP) asserts torch.cuda.is_available() when it starts."""
    import torch
    settings = dict(lr=0.1, momentum=0.9, weight_decay=1e-4)
    if zero == 0:
        return torch.optim.SGD(network.parameters(), **settings)
    if zero != 1 or world < 2:
        sys.exit(f"pytorch_step: zero {zero} on {world} process(es): only ZeRO stage 1 "
                 f"(ZeroRedundancyOptimizer) over DDP ranks")
    from torch.distributed.optim import ZeroRedundancyOptimizer
    return ZeroRedundancyOptimizer(network.parameters(), torch.optim.SGD, **settings)


def model_state_bytes(ddp, network, optimizer):
    """The bytes of model state this rank holds after a step, counted as Tandem counts them
    (Note [Counted memory] in parallel/zero/sharding.h): the parameters, the gradients (the .grad
    tensors and DDP's gradient buckets, which are separate copies unless
    gradient_as_bucket_view) and the optimizer's state (this rank's part under ZeRO)."""
    import torch

    def nbytes(t):
        return t.numel() * t.element_size()
    parameters = sum(nbytes(p) for p in network.parameters())
    gradients = sum(nbytes(p.grad) for p in network.parameters() if p.grad is not None)
    logging = ddp._get_ddp_logging_data()
    if not logging.get("gradient_as_bucket_view"):
        gradients += sum(int(b) for b in str(logging.get("bucket_sizes", "")).split(",") if b)
    local = getattr(optimizer, "optim", optimizer)  # ZeroRedundancyOptimizer's own SGD
    state = sum(nbytes(t) for entry in local.state.values() for t in entry.values()
                if torch.is_tensor(t))
    return parameters + gradients + state


def largest_over_ranks(out, world):
    """The largest count the ranks wrote beside `out`, as bench_cifar reports its rows'. Files,
    not a collective: a Gloo all-reduce of a Python-made tensor can deadlock PyTorch 1.13 at exit
    (its Gloo thread frees the tensor, which needs the GIL, while the main thread, holding it,
    joins that thread in ~ProcessGroupGloo; seen here once)."""
    return max(int(Path(f"{out}.state{r}").read_text()) for r in range(world))


def run_probe():
    """Prints what this PyTorch runs on; one conv large enough to take oneDNN's path, so that
    ONEDNN_VERBOSE (set by the parent) prints oneDNN's version and ISA."""
    import torch
    models = pytorch_models()
    torch.nn.functional.conv2d(torch.randn(16, 3, 32, 32), torch.randn(16, 3, 3, 3), padding=1)
    config = torch.__config__.show()
    capability = re.search(r"CPU capability usage: (\S+)", config)
    print("PROBE " + json.dumps({
        "torch": torch.__version__,
        "compile": hasattr(torch, "compile"),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "aten_capability": capability.group(1) if capability else "unknown",
        "parameters": {arch: sum(p.numel() for p in models.make(arch).parameters())
                       for arch in ("resnet20", "resnet18")},
    }), flush=True)


def main():
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        return run_worker(json.loads(sys.argv[2]))
    if sys.argv[1:] == ["--probe"]:
        return run_probe()
    sys.exit("usage: pytorch_step.py --worker SPEC_JSON | --probe "
             "(scripts/compare_pytorch.py runs it)")


if __name__ == "__main__":
    sys.exit(main())
