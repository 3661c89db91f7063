#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets into tests/fuzz/corpus/<target>/: small valid
inputs (and a few near misses) from which libFuzzer mutates. Deterministic; run it again after
changing a format, and commit the result.

usage: tests/fuzz/make_seeds.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)] -> the file's bytes."""
    header, body = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + body


def floats(*values):
    return struct.pack(f"<{len(values)}f", *values)


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def main():
    weights = safetensors([("bias", "F32", [2], floats(0.5, -0.5)),
                           ("weight", "F32", [2, 2], floats(1, 2, 3, 4))],
                          {"tandem.checkpoint_id": "0123456789abcdef"})
    write("safetensors", "linear", weights)
    write("safetensors", "mixed_dtypes", safetensors([
        ("a", "F32", [1], floats(1)), ("b", "I64", [2], struct.pack("<2q", 1, -1)),
        ("c", "U8", [3], b"\x01\x02\x03"), ("d", "BF16", [1], b"\x80\x3f"),
        ("e", "F16", [1], b"\x00\x3c")]))
    write("safetensors", "empty", safetensors([]))

    sidecar = safetensors([("momentum.bias", "F32", [2], floats(0, 0)),
                           ("momentum.weight", "F32", [2, 2], floats(0.1, 0.2, 0.3, 0.4))],
                          {"tandem.checkpoint_id": "0123456789abcdef", "epoch": "3",
                           "step": "1173", "rng_state": "42", "lr": "0.1", "arch": "linear"})
    write("checkpoint", "pair", struct.pack("<I", len(weights)) + weights + sidecar)
    other = sidecar.replace(b"0123456789abcdef", b"fedcba9876543210")
    write("checkpoint", "pair_from_two_saves", struct.pack("<I", len(weights)) + weights + other)

    record = bytes([3]) + bytes(range(256)) * 12
    write("cifar10", "two_records", record[:3073] + bytes([9]) + record[1:3073])
    write("cifar10", "one_record_and_a_half", record[:3073] + record[:1000])

    def frame(payload):
        return struct.pack(">I", len(payload)) + payload

    def blob(text):
        return struct.pack(">I", len(text)) + text

    set_request = b"\x01" + blob(b"key") + blob(b"value")
    get_request = b"\x02" + blob(b"key") + struct.pack(">q", 1000)
    add_request = b"\x03" + blob(b"counter") + struct.pack(">q", 1)
    wait_request = b"\x04" + struct.pack(">q", 2) + blob(b"a") + blob(b"b") + struct.pack(">q", 50)
    check_request = b"\x05" + struct.pack(">q", 1) + blob(b"a")
    write("store_request", "session", b"".join(
        frame(r) for r in (set_request, get_request, add_request, wait_request, check_request)))
    write("store_request", "truncated_frame", frame(set_request)[:-3])
    # store_session: byte 0 picks the server (even: no job token, odd: a token), then frames.
    hello = frame(b"\x06" + blob(b"n" * 32) + b"\x00")
    requests = b"".join(frame(r) for r in (set_request, get_request, add_request, wait_request,
                                           check_request))
    write("store_session", "open_session", b"\x00" + hello + requests)
    write("store_session", "token_hello_then_forged_proof",
          b"\x01" + frame(b"\x06" + blob(b"n" * 32) + b"\x01") + frame(b"\x07" + blob(b"p" * 32))
          + requests)
    write("store_session", "request_before_hello", b"\x01" + requests)
    write("store_session", "add_overflow", b"\x00" + hello
          + frame(b"\x03" + blob(b"n") + struct.pack(">q", 2**63 - 1))
          + frame(b"\x03" + blob(b"n") + struct.pack(">q", 1)))
    write("store_session", "too_many_keys", b"\x00" + hello
          + frame(b"\x05" + struct.pack(">q", 100) + blob(b"k") * 100))

    write("launch_env", "torchrun", b"RANK=1\nWORLD_SIZE=4\nLOCAL_RANK=1\nLOCAL_WORLD_SIZE=2\n"
                                    b"MASTER_ADDR=10.0.0.1\nMASTER_PORT=29500\n")
    write("launch_env", "mpirun", b"OMPI_COMM_WORLD_RANK=0\nOMPI_COMM_WORLD_SIZE=2\n"
                                  b"OMPI_COMM_WORLD_LOCAL_RANK=0\nOMPI_COMM_WORLD_LOCAL_SIZE=2\n"
                                  b"MASTER_ADDR=127.0.0.1\nMASTER_PORT=29400\n")
    write("launch_env", "srun", b"SLURM_PROCID=3\nSLURM_NTASKS=4\nSLURM_LOCALID=1\n"
                                b"SLURM_NTASKS_PER_NODE=2\nSLURM_LAUNCH_NODE_IPADDR=10.1.1.1\n")

    # FileStore's log (Note [FileStore format]): records of a big-endian length + key and length +
    # value, the first one the store's header.
    def field(data):
        return struct.pack(">I", len(data)) + data

    def record(key, value):
        return field(key) + field(value)

    store = (record(b"tandem/file_store", b"rank 0 (pid 1) on host h at 2026-12-07 18:00:00 UTC, for 2 ranks")
             + record(b"tandem/joined/0", b"") + record(b"tandem/joined/1", b"")
             + record(b"/rank0/address", b"10.0.0.1:4242") + record(b"/counter", b"3")
             + record(b"/counter", b"4") + record(b"tandem/left", b"1"))
    write("file_store_records", "store", store)
    write("file_store_records", "partial_record", store[:-5])
    write("file_store_records", "foreign", b"my notes\n")
    write("file_store_records", "huge_value", record(b"tandem/file_store", b"")
          + field(b"/k") + struct.pack(">I", 0xFFFFFFF0))



if __name__ == "__main__":
    main()
