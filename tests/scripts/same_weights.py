#!/usr/bin/env python3
"""Whether two train_cifar checkpoints hold bit-identical tensors: the weights and buffers
(PATH) and the momentum (PATH.state). The metadata (a random id per save, the run's position)
may differ. Pure Python, no numpy or safetensors package needed.

    same_weights.py A B    exit 0 when identical; else 1, naming the first tensor that differs
    same_weights.py A B --from C --within W M
                           exit 0 when A and B, two runs on from checkpoint C, are close: the
                           float tensors' distance ||A - B|| is at most W times the distance
                           ||B - C|| that B's training moved them, for the weights and buffers,
                           and at most M times for the momentum; integer tensors equal
"""
import json
import math
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


def relative_distance(a, b, c):
    """||a - b|| / ||b - c|| over the float32 tensors of three files; None if integers differ."""
    ta, tb, tc = tensors(a), tensors(b), tensors(c)
    apart = moved = 0.0
    for name, (dtype, _, raw) in ta.items():
        if dtype != "F32":
            if raw != tb[name][2]:
                return None
            continue
        count = len(raw) // 4
        xs, ys, zs = (struct.unpack(f"<{count}f", t[name][2]) for t in (ta, tb, tc))
        apart += sum((x - y) ** 2 for x, y in zip(xs, ys))
        moved += sum((y - z) ** 2 for y, z in zip(ys, zs))
    return math.sqrt(apart / moved)


def within(a, b, c, bounds):
    for suffix, what, bound in (("", "weights and buffers", bounds[0]), (".state", "momentum", bounds[1])):
        ratio = relative_distance(a + suffix, b + suffix, c + suffix)
        if ratio is None:
            print(f"{a}{suffix} and {b}{suffix}: an integer tensor differs")
            return 1
        verdict = "within" if ratio <= bound else "NOT within"
        print(f"{what}: ||A - B|| = {ratio:.3g} x ||B - C||, {verdict} the bound {bound:g}")
        if ratio > bound:
            return 1
    return 0


def main():
    a, b = sys.argv[1], sys.argv[2]
    if len(sys.argv) == 8 and sys.argv[3] == "--from" and sys.argv[5] == "--within":
        return within(a, b, sys.argv[4], (float(sys.argv[6]), float(sys.argv[7])))
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
