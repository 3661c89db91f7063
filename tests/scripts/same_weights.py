#!/usr/bin/env python3
"""Whether two train_cifar checkpoints hold bit-identical tensors: the weights and buffers
(PATH) and the momentum (PATH.state). The metadata (a random id per save, the run's position)
may differ. Pure Python, no numpy or safetensors package needed.

    same_weights.py A B    exit 0 when identical; else 1, naming the first tensor that differs
"""
import json
import struct
import sys


def tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_size])
    header.pop("__metadata__", None)
    body = data[8 + header_size :]
    return {
        name: (entry["dtype"], entry["shape"], body[entry["data_offsets"][0] : entry["data_offsets"][1]])
        for name, entry in header.items()
    }


def first_difference(a, b):
    ta, tb = tensors(a), tensors(b)
    if ta.keys() != tb.keys():
        return f"different tensor names: {sorted(ta.keys() ^ tb.keys())[:5]}"
    for name in sorted(ta):
        if ta[name] != tb[name]:
            return f"tensor '{name}' differs"
    return None


def main():
    a, b = sys.argv[1], sys.argv[2]
    count = 0
    for suffix in ("", ".state"):
        why = first_difference(a + suffix, b + suffix)
        if why:
            print(f"{a}{suffix} and {b}{suffix}: {why}")
            return 1
        count += len(tensors(a + suffix))
    print(f"bit-identical: {count} tensors in {a}(.state) and {b}(.state)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
