#!/usr/bin/env python3
"""PyTorch's ResNet-20 training step on a GPU, beside bench_cifar's GPU rows (scripts/gpu_node.sh
runs it): the step scripts/compare_pytorch.py measures on the CPU (scripts/pytorch_step.py: forward,
cross-entropy, backward, SGD with momentum 0.9 on synthetic CIFAR-shaped batches), float32 eager
and autocast bf16, in NCHW and in channels-last, measured between device synchronisations.

    python3 scripts/pytorch_gpu_step.py                     # cuda:0, batch 128, TF32 off
    python3 scripts/pytorch_gpu_step.py --allow-tf32 --json pytorch-gpu.json

TF32 is off by default, as in Tandem (docs/engine.md, "TF32"); cuDNN picks its algorithms by
measuring them (torch.backends.cudnn.benchmark), as Tandem's default cudnnFind does.
"""
import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pytorch_step():
    """scripts/pytorch_step.py as a module: its worker is the step measured here."""
    sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
    spec = importlib.util.spec_from_file_location("pytorch_step", ROOT / "scripts" / "pytorch_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    parser = argparse.ArgumentParser(description="PyTorch's CIFAR ResNet training step on a GPU")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--arch", default="resnet20", choices=("resnet20", "resnet18"))
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps (cuDNN's search runs in them)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--allow-tf32", action="store_true", help="TF32 in cuDNN and cuBLAS")
    parser.add_argument("--precisions", default="fp32,bf16",
                        help="fp32, bf16 (autocast around forward and loss) or both")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args()
    if args.batch < 1 or args.steps < 1 or args.warmup < 0:
        parser.error("--batch and --steps must be at least 1, --warmup at least 0")
    precisions = [p for p in args.precisions.split(",") if p]
    if not precisions or any(p not in ("fp32", "bf16") for p in precisions):
        parser.error("--precisions: fp32, bf16 or fp32,bf16")

    import torch
    if not torch.cuda.is_available():
        sys.exit(f"pytorch_gpu_step: torch {torch.__version__} sees no GPU")
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = args.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = args.allow_tf32

    worker = pytorch_step().run_worker
    rows = []
    with tempfile.TemporaryDirectory(prefix="pytorch_gpu_step.") as work:
        for precision in precisions:
            for fmt in ("nchw", "channels_last"):
                out = Path(work) / f"{fmt}-{precision}.json"
                worker({"device": args.device, "threads": torch.get_num_threads(), "rank": 0,
                        "world": 1, "seed": 0, "arch": args.arch, "format": fmt,
                        "batch": args.batch, "warmup": args.warmup, "steps": args.steps,
                        "out": str(out), "precision": precision})
                rows.append({"format": fmt, "precision": precision,
                             **json.loads(out.read_text())})

    gpu = torch.cuda.get_device_name(torch.device(args.device))
    print(f"PyTorch {torch.__version__} (cuDNN {torch.backends.cudnn.version()}) on {gpu}, "
          f"{args.arch}, batch {args.batch}, TF32 {'on' if args.allow_tf32 else 'off'}, "
          f"{args.steps} steps after {args.warmup}")
    for row in rows:
        print(f"  {row['format']:<14} {row['precision']:<5} {row['images_per_s']:10.0f} images/s  {row['ms_per_step']:8.2f} ms/step"
              f"  final loss {row['final_loss']:.4f}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "gpu": gpu,
            "arch": args.arch, "batch": args.batch, "allow_tf32": args.allow_tf32,
            "warmup": args.warmup, "steps": args.steps, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
