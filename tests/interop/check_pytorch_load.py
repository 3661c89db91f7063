#!/usr/bin/env python3
"""Loads Tandem's safetensors checkpoint into a PyTorch model of the same architecture
(strict load_state_dict) and compares its eval-mode logits with Tandem's.

The safetensors package is not in Debian, so the file is parsed here straight from the
format's spec (8-byte little-endian header length, JSON header, raw data): what
safetensors.torch.load_file does.

usage: check_pytorch_load.py ARCH DIR   (DIR holds model.safetensors and io.safetensors)
"""
import json
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "I64": torch.int64, "U8": torch.uint8}


def load_file(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_size])
    body = data[8 + header_size:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        flat = torch.frombuffer(bytearray(body[begin:end]), dtype=DTYPES[entry["dtype"]])
        tensors[name] = flat.reshape(entry["shape"])
    return tensors


class BasicBlock(nn.Module):
    """torchvision's BasicBlock: 1x1 conv + BN `downsample` where the shape changes."""

    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (self.downsample(x) if self.downsample is not None else x))


class CifarResNet(nn.Module):
    def __init__(self, blocks, widths, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        channels = widths[0]
        for stage, (count, width) in enumerate(zip(blocks, widths)):
            layers = []
            for b in range(count):
                layers.append(BasicBlock(channels, width, 2 if stage > 0 and b == 0 else 1))
                channels = width
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layers))
        self.stages = len(blocks)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for stage in range(self.stages):
            x = getattr(self, f"layer{stage + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def make(arch):
    if arch == "resnet18":
        return CifarResNet([2, 2, 2, 2], [64, 128, 256, 512])
    n = (int(arch[len("resnet"):]) - 2) // 6
    return CifarResNet([n, n, n], [16, 32, 64])


def main():
    arch, folder = sys.argv[1], sys.argv[2]
    model = make(arch)
    state = load_file(f"{folder}/model.safetensors")
    model.load_state_dict(state, strict=True)  # raises on any missing/unexpected key or shape
    model.eval()
    io = load_file(f"{folder}/io.safetensors")
    with torch.no_grad():
        logits = model(io["input"])
    difference = (logits - io["logits"]).abs().max().item()
    print(f"{arch}: {len(state)} tensors loaded strictly; max |logits difference| = {difference:.3g}")
    if not difference < 1e-4:
        sys.exit(f"logits differ by {difference}")


if __name__ == "__main__":
    main()
