#!/usr/bin/env python3
"""Evaluates a Tandem checkpoint with PyTorch alone: loads the weights file (safetensors, parsed
by check_pytorch_load.load_file) strictly into the torchvision-style CIFAR ResNet of
check_pytorch_load.make, reads CIFAR-10's test_batch.bin itself, normalises with the training
set's per-channel mean and std (data/transforms.h), and prints the test accuracy. Nothing of
Tandem runs here, so agreeing with `train_cifar --eval-only` checks the file, the layer
definitions and the evaluation independently.

usage: evaluate_cifar_checkpoint.py ARCH CHECKPOINT CIFAR_DIR [IMAGES]   (prints "accuracy 0.9168")
IMAGES: the first IMAGES test images only (as `train_cifar --subset 5*IMAGES` tests); default all.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pytorch_load import load_file, make  # noqa: E402

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def read_test_set(folder, count):
    """CIFAR-10 binary format: 10,000 records of 1 label byte and 3×32×32 pixel bytes; the first
    `count` of them."""
    raw = np.fromfile(os.path.join(folder, "test_batch.bin"), dtype=np.uint8)
    if raw.size != 10000 * 3073:
        sys.exit(f"{folder}/test_batch.bin has {raw.size} bytes, expected {10000 * 3073}")
    records = raw.reshape(10000, 3073)[:count]
    labels = torch.from_numpy(records[:, 0].astype(np.int64))
    images = torch.from_numpy(records[:, 1:].reshape(-1, 3, 32, 32).astype(np.float32)) / 255
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    return (images - mean) / std, labels


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__.strip().splitlines()[-2])
    arch, checkpoint, folder = sys.argv[1], sys.argv[2], sys.argv[3]
    count = int(sys.argv[4]) if len(sys.argv) == 5 and sys.argv[4].isdigit() else 10000
    if len(sys.argv) == 5 and not (sys.argv[4].isdigit() and 0 < count <= 10000):
        sys.exit(f"IMAGES must be 1..10000, got {sys.argv[4]!r}")
    model = make(arch)
    model.load_state_dict(load_file(checkpoint), strict=True)
    model.eval()
    images, labels = read_test_set(folder, count)
    correct = 0
    with torch.no_grad():
        for start in range(0, len(labels), 500):
            logits = model(images[start:start + 500])
            correct += (logits.argmax(1) == labels[start:start + 500]).sum().item()
    print(f"accuracy {correct / len(labels):.4f}")


if __name__ == "__main__":
    main()
