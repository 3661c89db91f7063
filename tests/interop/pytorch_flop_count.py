#!/usr/bin/env python3
"""Counts the FLOPs of a training step of a CIFAR ResNet in PyTorch and compares them with
Tandem's count (nn/flop_count.h, printed by count_flops).

PyTorch's side: forward hooks on every Conv2d and Linear of check_pytorch_load.py's models (the
architecture of nn/resnet.cpp) give 2 FLOPs per multiply-add of the forward; backward computes
the weight's gradient of each (as many FLOPs again) and the input's gradient where the input
requires one (not for the images), as autograd decides. One 32x32 image, per-image counts.

usage: pytorch_flop_count.py ARCH COUNT_FLOPS_PROGRAM
"""
import json
import os
import subprocess
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pytorch_load import make  # noqa: E402  (the models, beside this file)


def pytorch_counts(arch):
    model = make(arch)
    counts = {"forward": 0, "backward": 0}

    def hook(module, inputs, output):
        if isinstance(module, nn.Conv2d):
            multiply_adds = output.numel() * module.in_channels // module.groups
            multiply_adds *= module.kernel_size[0] * module.kernel_size[1]
        else:
            multiply_adds = output.numel() * module.in_features
        counts["forward"] += 2 * multiply_adds
        counts["backward"] += 2 * multiply_adds * (1 + int(inputs[0].requires_grad))

    for module in model.modules():
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            module.register_forward_hook(hook)
    model(torch.zeros(1, 3, 32, 32)).sum().backward()
    return counts


def main():
    arch, program = sys.argv[1], sys.argv[2]
    tandem = json.loads(subprocess.run([program, arch], check=True, capture_output=True,
                                       text=True).stdout)
    pytorch = pytorch_counts(arch)
    print(f"{arch} FLOPs per image: PyTorch {pytorch}, Tandem {tandem}")
    if tandem != pytorch:
        sys.exit(f"{arch}: Tandem counts {tandem}, PyTorch {pytorch}")


if __name__ == "__main__":
    main()
